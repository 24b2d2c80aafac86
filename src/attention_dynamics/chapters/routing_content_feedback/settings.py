"""Chapter 3's settings: one head on the recall task (the paper has no such experiment, so "paper" = "book"), the
three variants trained, and the fixed choices of the measurements."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...core.settings import ChapterSettings, check_positive_int, resolve as _resolve

__all__ = ["VARIANTS", "MILESTONES", "ETAS", "RoutingSettings", "SETTINGS", "resolve"]

VARIANTS = {"full": (), "values frozen": ("W_V",), "routing frozen": ("W_Q", "W_K")}  # name → frozen matrices
MILESTONES = (0.25, 0.5, 0.75)  # shares of the rise of the E-step quality that mark the routing transition
ETAS = np.logspace(-2, 4, 25)  # step sizes of the value-only steps (large: the loss is a mean over N queries)


@dataclass(frozen=True)
class RoutingSettings(ChapterSettings):
    """The head trained ``steps`` full-batch steps at ``lr`` on ``n_train`` sequences, measured every
    ``record_every`` steps on ``n_probe`` held-out sequences; ``n_check`` float64 sequences for the checks that take
    one parameter state at a time."""

    steps: int = 2000
    lr: float = 0.5
    n_train: int = 256
    n_probe: int = 256
    record_every: int = 20
    n_check: int = 64

    def __post_init__(self) -> None:
        super().__post_init__()
        check_positive_int("record_every", self.record_every)
        if not self.lr > 0:
            raise ValueError(f"lr must be positive, got {self.lr}")


SETTINGS = {"fast": RoutingSettings(steps=300, n_train=64, n_probe=64, n_check=16), "book": RoutingSettings(),
            "paper": RoutingSettings()}


def resolve(scale: str = "book", *, device: str = "auto", **overrides) -> RoutingSettings:
    """Return chapter 3's validated settings at ``scale`` with a notebook's ``overrides`` (``None``: as the scale says)."""
    return _resolve(SETTINGS, scale, device=device, **overrides)
