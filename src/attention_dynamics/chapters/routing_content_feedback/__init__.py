"""Chapter 3, routing–content feedback (PAPER.md §3, result 4): one head learning content-addressed recall, its
routing transition, and the paper's first-order predictions checked along the way."""
