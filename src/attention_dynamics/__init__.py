"""attention_dynamics — the package behind the companion book to *Gradient Dynamics of Attention*.

Modules, one per idea: :mod:`~attention_dynamics.attention` (the single head and its
intermediates), :mod:`~attention_dynamics.gradients` (the paper's gradient laws in closed form),
:mod:`~attention_dynamics.models`, :mod:`~attention_dynamics.training` (the one training loop),
:mod:`~attention_dynamics.claims` (the claims ledger), :mod:`~attention_dynamics.settings`,
:mod:`~attention_dynamics.seeding`, :mod:`~attention_dynamics.plotting`,
:mod:`~attention_dynamics.reproduce` (the runner and command line),
:mod:`~attention_dynamics.experiments.seed_spread` (verdicts a single seed cannot decide, as means over seeds),
:mod:`~attention_dynamics.verdicts` (the paper's claims and the ledger's verdict on each),
:mod:`~attention_dynamics.pdf` (the book as one PDF).
"""

__version__ = "0.1.0"
