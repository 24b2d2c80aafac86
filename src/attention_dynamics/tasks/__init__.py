"""Tasks of the book, each with its exact posterior or Bayes floor (one module per task).

Import the task modules directly, e.g. ``from attention_dynamics.tasks import sticky_chain``.
"""
