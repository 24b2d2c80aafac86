"""attention_dynamics — the package behind the companion book to *Gradient Dynamics of Attention*.

The package is in layers; each imports only from the layers below it (``tests/test_layers.py``):

- **the book's machinery** used everywhere: :mod:`~attention_dynamics.claims` (the ledger),
  :mod:`~attention_dynamics.settings`, :mod:`~attention_dynamics.seeding` (one seeding function, named
  random streams), :mod:`~attention_dynamics.plotting`, :mod:`~attention_dynamics.paths`,
  :mod:`~attention_dynamics.notebooks`, :mod:`~attention_dynamics.stats` (the one entropy function);
- **the science**: :mod:`~attention_dynamics.attention` (the head and its intermediates),
  :mod:`~attention_dynamics.gradients` (the paper's laws), :mod:`~attention_dynamics.dynamics`,
  :mod:`~attention_dynamics.em`, :mod:`~attention_dynamics.calibration`, :mod:`~attention_dynamics.geometry`;
- :mod:`~attention_dynamics.tasks` (exact posteriors), :mod:`~attention_dynamics.models` (every
  ``nn.Module``), :mod:`~attention_dynamics.training` (the one loop, schedules, the head engine),
  :mod:`~attention_dynamics.diagnostics` (tools for any model);
- :mod:`~attention_dynamics.experiments`: one module per chapter's runs;
- on top: :mod:`~attention_dynamics.reproduce` (the runner and command line),
  :mod:`~attention_dynamics.verdicts`, :mod:`~attention_dynamics.pdf` (the book as one PDF).
"""

__version__ = "0.1.0"
