"""Training: the one loop (:mod:`~attention_dynamics.training.loop`: :func:`fit`, :func:`map_parallel` and the opt-in fast path), the sticky
chain's schedules (:mod:`~attention_dynamics.training.schedules`) and its closed-form engine (:mod:`~attention_dynamics.training.head_engine`)."""

from .loop import *  # noqa: F401,F403  (the loop's public names are the package's)
from .loop import __all__  # noqa: F401
