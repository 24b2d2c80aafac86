"""Small statistics every layer shares: the one entropy function of the book (nats or bits)."""

from __future__ import annotations

import math

import numpy as np
import torch

__all__ = ["UNITS", "entropy"]

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
