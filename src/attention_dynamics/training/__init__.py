"""Training: the one loop (:mod:`.loop`: :func:`fit`, :func:`map_parallel`), the sticky chain's schedules
(:mod:`.schedules`) and its closed-form engine (:mod:`.head_engine`)."""

from .loop import TrainHistory, autograd_backward, fit, map_parallel

__all__ = ["TrainHistory", "autograd_backward", "fit", "map_parallel"]
