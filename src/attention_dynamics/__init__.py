"""attention_dynamics — the package behind the companion book to *Gradient Dynamics of Attention*.

The package is in layers; each imports only from its own layer or the layers below it, and no chapter imports
another chapter (``tests/test_layers.py`` checks both). From the bottom:

- **the book's machinery**, used everywhere: :mod:`~attention_dynamics.claims` (the ledger),
  :mod:`~attention_dynamics.verdicts` (the paper's claims decided from the ledger), :mod:`~attention_dynamics.settings`
  (typed chapter settings), :mod:`~attention_dynamics.seeding` (one seeding function, named random streams),
  :mod:`~attention_dynamics.plotting`, :mod:`~attention_dynamics.paths`, :mod:`~attention_dynamics.notebooks`,
  :mod:`~attention_dynamics.nbcompare`, :mod:`~attention_dynamics.results` (stored results and their jobs), and small
  shared helpers: :mod:`~attention_dynamics.stats`, :mod:`~attention_dynamics.settling`,
  :mod:`~attention_dynamics.speedup` (the paper's speed-up metric), :mod:`~attention_dynamics.shapes` (the shape annotations,
  checked in the tests);
- **the science**: :mod:`~attention_dynamics.attention` (the head and its intermediates),
  :mod:`~attention_dynamics.gradients` (the paper's laws), :mod:`~attention_dynamics.weight_space` (the laws
  in weight space), :mod:`~attention_dynamics.em`,
  :mod:`~attention_dynamics.calibration`, :mod:`~attention_dynamics.geometry`;
- :mod:`~attention_dynamics.tasks` (the wind tunnels with their exact posteriors), :mod:`~attention_dynamics.models`
  (every ``nn.Module``), :mod:`~attention_dynamics.dynamics` (the measures of the head's routing–content loop),
  :mod:`~attention_dynamics.training` (the one loop, the schedules, the head engine, the wind-tunnel and recall-head
  trainers, any family on any tunnel), :mod:`~attention_dynamics.diagnostics` (tools for any model, and the measures
  of a trained wind-tunnel transformer);
- :mod:`~attention_dynamics.chapters`: one folder per chapter, each of the same shape (settings, runs, report,
  figures);
- on top, the runner: :mod:`~attention_dynamics.reproduce` (``python -m attention_dynamics``) and its
  :mod:`~attention_dynamics.ledger_commands`,
  :mod:`~attention_dynamics.compute` (the stored results), :mod:`~attention_dynamics.pdf` (the book as one PDF),
  :mod:`~attention_dynamics.launch_notebooks` (the notebooks Binder and Colab open),
  :mod:`~attention_dynamics.nbval_plugin`.
"""

__version__ = "0.1.0"
