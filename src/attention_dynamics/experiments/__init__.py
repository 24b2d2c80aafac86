"""The book's experiments: one module per chapter's runs, on top of the science, tasks, models and training."""
