"""attention_dynamics — the package behind the companion book to *Gradient Dynamics of Attention*.

The package is in layers, one folder each. A module imports only from its own layer or the layers drawn below it,
and no chapter imports another chapter (``tests/test_layers.py`` checks both, and that no module sits at the package
root but this one and ``__main__``)::

    attention_dynamics/
      __init__.py __main__.py   python -m attention_dynamics: the command line of book/
      book/          the book's machinery: the command line, the runner, the ledger and compute commands, the
                     PDF, the launch notebooks, the nbval plugin, notebook comparison, the chapters' fingerprints
      chapters/      one folder per chapter, each of the same shape (settings, runs, report, figures)
      ledger/        the claims ledger, the verdict rules, the stored results' declarations
      diagnostics/   tools for any model, and the measures of a trained wind-tunnel transformer
      training/      the one loop, the schedules, the head engine, the trainers several chapters share
      models/        every nn.Module
      tasks/         the wind tunnels, each with its exact posterior
      science/       the head and the paper's laws: attention, gradients, EM, calibration, geometry, dynamics
      core/          the foundations: seeding, typed settings, paths, provenance, shapes, the figure style
      data/          the stored results' files (no code)

From the bottom:

- :mod:`~attention_dynamics.core`: :mod:`~attention_dynamics.core.seeding` (one seeding function, named random
  streams), :mod:`~attention_dynamics.core.settings` (typed chapter settings), :mod:`~attention_dynamics.core.paths`,
  :mod:`~attention_dynamics.core.provenance` (the package's last commit), :mod:`~attention_dynamics.core.shapes`
  (the shape annotations, checked in the tests), :mod:`~attention_dynamics.core.plotting`;
- :mod:`~attention_dynamics.science`: :mod:`~attention_dynamics.science.attention` (the head and its intermediates),
  :mod:`~attention_dynamics.science.gradients` (the paper's laws), :mod:`~attention_dynamics.science.weight_space`
  (the laws in weight space), :mod:`~attention_dynamics.science.em`, :mod:`~attention_dynamics.science.calibration`,
  :mod:`~attention_dynamics.science.geometry`, :mod:`~attention_dynamics.science.recall_head` (the head's loss on a
  recall batch), :mod:`~attention_dynamics.science.dynamics` (the measures of the head's routing–content loop),
  :mod:`~attention_dynamics.science.speedup` (the paper's speed-up metric), :mod:`~attention_dynamics.science.settling`,
  :mod:`~attention_dynamics.science.stats`;
- :mod:`~attention_dynamics.tasks`, :mod:`~attention_dynamics.models`, :mod:`~attention_dynamics.training`,
  :mod:`~attention_dynamics.diagnostics`;
- :mod:`~attention_dynamics.ledger`: :mod:`~attention_dynamics.ledger.claims` (the ledger),
  :mod:`~attention_dynamics.ledger.verdicts` (the paper's claims decided from the ledger),
  :mod:`~attention_dynamics.ledger.results` (stored results and their jobs), and the claims several chapters state
  from shared results (:mod:`~attention_dynamics.ledger.frame_results`, :mod:`~attention_dynamics.ledger.memory_claims`);
- :mod:`~attention_dynamics.chapters`;
- :mod:`~attention_dynamics.book`: :mod:`~attention_dynamics.book.cli` (the command line),
  :mod:`~attention_dynamics.book.reproduce` (the runner), :mod:`~attention_dynamics.book.ledger_commands`, :mod:`~attention_dynamics.book.compute` (the stored results),
  :mod:`~attention_dynamics.book.notebooks`, :mod:`~attention_dynamics.book.nbcompare`,
  :mod:`~attention_dynamics.book.fingerprint`, :mod:`~attention_dynamics.book.pdf` (the book as one PDF),
  :mod:`~attention_dynamics.book.launch_notebooks` (the notebooks Binder and Colab open),
  :mod:`~attention_dynamics.book.nbval_plugin`.
"""

__version__ = "0.1.0"
