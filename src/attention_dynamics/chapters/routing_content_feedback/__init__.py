"""Chapter 3, routing–content feedback (the paper's positive-feedback result): one head learning content-addressed recall, its
routing transition, and the paper's first-order predictions checked along the way."""
