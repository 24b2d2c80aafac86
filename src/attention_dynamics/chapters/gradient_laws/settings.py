"""Chapter 2's settings: how many random heads the laws are checked on, how long their sequences are, and the
sweeps; and the fixed choices of the checks (the paper's head sizes, float64, the tolerance)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ...core.settings import ChapterSettings, check_positive_ints, resolve as _resolve
from ...models.single_head import HEAD_SHAPE

__all__ = ["HEAD", "INIT_STDS", "DTYPE", "RELATIVE_TOL", "ETA", "STICKY_SEED", "GradientLawsSettings", "SETTINGS",
           "resolve"]

HEAD = dict(HEAD_SHAPE)  # the paper's sticky-chain head (its sticky-chain experiment): d_in 20, d_k 10, d_v 15, 8 classes
INIT_STDS = (0.1, 0.3, 1.0)  # 0.1 is the paper's initialisation, 1.0 gives nearly one-hot attention
DTYPE = torch.float64  # the checks are about exactness: float64 on the CPU, whatever the device
RELATIVE_TOL = 1e-12  # a law's error may be at most this fraction of the gradient's largest entry
ETA = 0.01  # the step of the weight-space checks
STICKY_SEED = 42  # chapter 5's seed-42 sequence and initialisation


@dataclass(frozen=True)
class GradientLawsSettings(ChapterSettings):
    """``n_draws`` random heads of ``batch`` sequences of ``T`` positions checked against autograd and the fused
    kernel; one head of ``fd_T`` positions against finite differences; the inverse-temperature sweep on ``sweep_T``
    positions over ``n_temperatures`` values of β up to 10^``log10_beta_max``; the sticky head trained
    ``ws_steps`` steps with the weight-space check every ``ws_every``."""

    #: The reader's label of each setting (the settings table on the page).
    LABELS = {"n_draws": "random heads checked", "batch": "sequences per head", "T": "positions per sequence",
              "fd_T": "positions, finite-difference head", "sweep_T": "positions, temperature sweep",
              "n_temperatures": "inverse temperatures in the sweep", "log10_beta_max": "largest β (log10)",
              "ws_steps": "training steps, weight-step runs", "ws_every": "steps between weight-step checks"}

    n_draws: int = 24
    batch: int = 4
    T: int = 64
    fd_T: int = 8
    sweep_T: int = 64
    n_temperatures: int = 41
    log10_beta_max: float = 3
    ws_steps: int = 1000
    ws_every: int = 200

    def __post_init__(self) -> None:
        super().__post_init__()
        check_positive_ints(batch=self.batch, T=self.T, fd_T=self.fd_T, sweep_T=self.sweep_T, ws_every=self.ws_every)


#: Exact checks: the scale changes how many heads and how long their sequences are.
SETTINGS = {
    "fast": GradientLawsSettings(n_draws=3, batch=2, T=16, fd_T=4, sweep_T=16, n_temperatures=11, ws_steps=100,
                                 ws_every=50),
    "book": GradientLawsSettings(),
    # 2000 queries include near-ties between their top two keys: one-hot needs a larger β
    "paper": GradientLawsSettings(n_draws=6, batch=1, T=2000, sweep_T=2000, log10_beta_max=5, ws_every=100),
}


def resolve(scale: str = "book", *, device: str = "auto", **overrides) -> GradientLawsSettings:
    """Return chapter 2's validated settings at ``scale`` with a notebook's ``overrides`` (``None``: as the scale says)."""
    return _resolve(SETTINGS, scale, device=device, **overrides)
