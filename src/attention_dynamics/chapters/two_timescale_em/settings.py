"""Chapter 4's settings: the recall heads of chapter 3 trained over many seeds (the paper has no such experiment, so
"paper" = "book"), the Gaussian mixture of the bridge, and the thresholds fixed before looking at the results."""

from __future__ import annotations

from dataclasses import dataclass

from ...core.settings import ChapterSettings, check_positive_int, resolve as _resolve
# a frozen run costs nothing when it ends within this factor of the trained model's final loss (or KL)
from ...diagnostics.frame_order import FREE_FREEZE_RATIO

__all__ = ["GMM_K", "GMM_D", "GMM_SIGMA", "PLAIN_FACTORS", "TAU", "SENSITIVITY_THRESHOLDS", "DISTANCE_TOLERANCE",
           "PATH_FRACTIONS", "CLAIM_FRACTION", "FREE_FREEZE_RATIO", "TwoTimescaleSettings", "SETTINGS", "resolve"]

GMM_K = 3  # the mixture of the bridge: components
GMM_D = 2  # its dimensions
GMM_SIGMA = 1.0  # its known sd
PLAIN_FACTORS = (1.0, 3.0, 10.0)  # plain gradient ascent's steps, in units of sigma² / N
TAU = 0.01  # the rate criterion's threshold, fixed before looking at the results
SENSITIVITY_THRESHOLDS = (0.03, 0.01, 0.003)
DISTANCE_TOLERANCE = 0.1  # the distance-to-final criterion's fraction
PATH_FRACTIONS = (0.3, 0.2, 0.1, 0.05, 0.02, 0.01)  # the unit-free criterion's thresholds shown
CLAIM_FRACTION = 0.1  # the unit-free criterion's threshold the claims use, chosen before the runs


@dataclass(frozen=True)
class TwoTimescaleSettings(ChapterSettings):
    """The recall head trained ``steps`` steps at ``lr`` (``n_train`` training, ``n_probe`` probe sequences) for each of
    ``seeds`` at equal learning rates and each of ``sweep_seeds`` at each value/routing rate ratio in ``ratios``;
    measured every ``record_every`` steps (the rate criterion over ``settle_window`` steps) and its attention and
    values recorded every ``path_every`` steps (the path criterion); the mixture of the bridge has ``n_points``
    points and EM runs ``n_em_iterations`` iterations."""

    steps: int = 2000
    lr: float = 0.5
    seeds: tuple[int, ...] = tuple(range(10))
    sweep_seeds: tuple[int, ...] = tuple(range(5))
    ratios: tuple[float, ...] = (0.25, 0.5, 2.0, 4.0)
    n_train: int = 256
    n_probe: int = 256
    record_every: int = 20
    settle_window: int = 100
    path_every: int = 2
    n_points: int = 300
    n_em_iterations: int = 30

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "sweep_seeds", tuple(check_positive_int("seed", s, allow_zero=True)
                                                      for s in self.sweep_seeds))
        object.__setattr__(self, "ratios", tuple(float(r) for r in self.ratios))
        if not self.ratios or min(self.ratios) <= 0:
            raise ValueError(f"ratios must be positive, got {self.ratios}")
        for name in ("record_every", "settle_window", "path_every"):
            check_positive_int(name, getattr(self, name))


SETTINGS = {
    "fast": TwoTimescaleSettings(steps=300, seeds=(0, 1), sweep_seeds=(0, 1), ratios=(0.5, 2.0), n_train=64,
                                 n_probe=64, n_points=120, n_em_iterations=10),
    "book": TwoTimescaleSettings(),
    "paper": TwoTimescaleSettings(),
}


def resolve(scale: str = "book", *, device: str = "auto", **overrides) -> TwoTimescaleSettings:
    """Return chapter 4's validated settings at ``scale`` with a notebook's ``overrides`` (``None``: as the scale says)."""
    return _resolve(SETTINGS, scale, device=device, **overrides)
