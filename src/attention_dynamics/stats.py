"""Small statistics every layer shares: the one entropy function of the book (nats or bits), and the one moving average."""

from __future__ import annotations

import math

import numpy as np
import torch

__all__ = ["UNITS", "entropy", "moving_average"]

#: The units an entropy can be returned in, with the logarithm base of each.
UNITS = {"nats": math.e, "bits": 2.0}


def entropy(p: torch.Tensor | np.ndarray, *, unit: str = "nats") -> torch.Tensor:
    """Return the Shannon entropy −Σ p log p of each distribution along the last axis, float64, in ``unit``.

    ``p`` ``(..., K)`` → ``(...,)``; 0 log 0 = 0, so masked entries (weight exactly 0) contribute
    nothing: an attention row over n visible keys has entropy between 0 (one-hot) and log n (uniform).
    ``unit`` is ``"nats"`` (natural log) or ``"bits"`` (log base 2).
    """
    if unit not in UNITS:
        raise ValueError(f"unknown entropy unit {unit!r}; choose one of {', '.join(UNITS)}")
    p = torch.as_tensor(p).to(torch.float64)
    h = torch.special.entr(p).sum(-1)
    return h if unit == "nats" else h / math.log(UNITS[unit])


def moving_average(values, window: int) -> tuple[np.ndarray, np.ndarray]:
    """Return ``(steps, means)``: the mean of every run of ``window`` consecutive values, at its last step.

    ``values`` ``(n,)``; ``steps`` are the 0-based indices ``window − 1 … n − 1`` at which each run ends.
    """
    values = np.asarray(values, dtype=np.float64)
    if not 1 <= window <= len(values):
        raise ValueError(f"window must be between 1 and the number of values ({len(values)}), got {window}")
    return np.arange(window - 1, len(values)), np.convolve(values, np.ones(window) / window, mode="valid")
