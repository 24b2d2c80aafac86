"""Small statistics every layer shares: the one entropy function of the book (nats or bits), the one moving
average, the Student-t interval of a mean over seeds and the paired tests of two conditions over seeds."""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np
import scipy.stats
import torch

__all__ = [
    "UNITS",
    "entropy",
    "moving_average",
    "t_interval",
    "paired_tests",
]

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


def t_interval(values: Sequence[float], confidence: float = 0.95) -> dict[str, float]:
    """Return the mean of ``values`` with its Student-t ``confidence`` interval (and sd, n).

    ``low``/``high`` = mean ∓ t_{(1+confidence)/2, n−1} · sd / √n, with the sample sd (ddof = 1).
    Needs at least two values.
    """
    x = np.asarray(values, dtype=float)
    if x.ndim != 1 or x.size < 2:
        raise ValueError(f"an interval needs at least two values, got {x.size}")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence}")
    mean, sd = float(x.mean()), float(x.std(ddof=1))
    half = float(scipy.stats.t.ppf(0.5 + confidence / 2, df=x.size - 1)) * sd / math.sqrt(x.size)
    return {"mean": mean, "sd": sd, "low": mean - half, "high": mean + half, "n": int(x.size), "confidence": confidence}


def paired_tests(a: Sequence[float], b: Sequence[float]) -> dict[str, float]:
    """Return a paired t-test and a Wilcoxon signed-rank test of a vs b across seeds (two-sided p-values).

    Keys: ``mean_difference`` (a − b), ``t``, ``t_pvalue``, ``wilcoxon_pvalue``, ``n``.
    """
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    t = scipy.stats.ttest_rel(a, b)
    w = scipy.stats.wilcoxon(a, b)
    return {"mean_difference": float(np.mean(a - b)), "t": float(t.statistic), "t_pvalue": float(t.pvalue),
            "wilcoxon_pvalue": float(w.pvalue), "n": int(len(a))}
