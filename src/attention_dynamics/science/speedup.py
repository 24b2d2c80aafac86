"""The paper's speed-up metric (its sticky-chain experiment; chapter 5), and the intervals the book puts around it.

The reference script's rule: the threshold is the baseline's mean final loss at the budget; for each seed,
the first step at which the faster schedule's loss is below it; speed-up = budget / mean first step. The
threshold sits where the baseline ends, so the number is a property of that budget (chapter 5 shows it as a
curve). Losses in nats; steps count updates from 0.
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

import numpy as np
import scipy.stats

__all__ = [
    "steps_to_threshold",
    "paper_speedup",
    "em_like_speedup_over",
    "bootstrap_speedup_ci",
    "bootstrap_speedup_ratio_ci",
    "bootstrap_paired_speedups_ratio_ci",
    "intervals_separate",
]


def steps_to_threshold(losses: Sequence[float] | np.ndarray, threshold: float) -> int:
    """Return the first step whose loss is below ``threshold``, or ``len(losses)`` if none is (the script's rule)."""
    below = np.flatnonzero(np.asarray(losses) < threshold)
    return int(below[0]) if below.size else len(losses)


def paper_speedup(baseline_final_losses: Sequence[float], fast_curves: Sequence[Sequence[float]]) -> dict[str, Any]:
    """Return the paper's speed-up of a schedule over a baseline and its ingredients.

    Threshold = mean of the baseline's final losses; per seed, the first step at which the fast
    schedule's loss is below it; speed-up = number of steps / mean first step. Keys: ``threshold``
    (nats), ``first_steps`` (list), ``mean_first_step``, ``speedup`` (× , ``inf`` if reached at step 0).
    """
    curves = np.asarray(fast_curves, dtype=np.float64)
    threshold = float(np.mean(baseline_final_losses))
    first = [steps_to_threshold(c, threshold) for c in curves]
    mean_first = float(np.mean(first))
    return {
        "threshold": threshold,
        "first_steps": first,
        "mean_first_step": mean_first,
        "speedup": curves.shape[1] / mean_first if mean_first > 0 else math.inf,
    }


def em_like_speedup_over(
    baseline_final_losses: Sequence[float], em_like_curves: Sequence[Sequence[float]], control_curves: Sequence[Sequence[float]]
) -> dict[str, Any]:
    """Return how much sooner EM-like reaches the paper's threshold than a control, on the same seeds.

    Both use the paper's threshold (the baseline's mean final loss); ``ratio`` = control's mean first
    step / EM-like's mean first step (above 1: EM-like is faster; below 1: the control is faster).
    """
    em = paper_speedup(baseline_final_losses, em_like_curves)
    control = paper_speedup(baseline_final_losses, control_curves)
    return {"threshold": em["threshold"], "em_like_first_steps": em["first_steps"],
            "control_first_steps": control["first_steps"],
            "ratio": control["mean_first_step"] / em["mean_first_step"] if em["mean_first_step"] > 0 else math.inf}


def _first_crossings(running_min: np.ndarray, thresholds: np.ndarray) -> np.ndarray:
    # running_min (n_seeds, steps) is non-increasing along steps, so the first step below t is the
    # count of entries >= t. Returns (n_thresholds, n_seeds).
    neg = -running_min  # non-decreasing
    return np.stack([np.array([np.searchsorted(row, -t, side="right") for row in neg]) for t in thresholds])


def bootstrap_speedup_ci(
    baseline_final_losses: Sequence[float],
    fast_curves: Sequence[Sequence[float]],
    *,
    confidence: float = 0.95,
    n_resamples: int = 10_000,
    seed: int = 0,
) -> dict[str, float]:
    """Return a percentile bootstrap confidence interval of the paper's speed-up, resampling seeds in pairs.

    Each resample draws seeds with replacement (the baseline's final loss and the fast schedule's
    curve of a seed stay together) and recomputes threshold, first steps and speed-up
    (``scipy.stats.bootstrap``). Keys: ``low``, ``high``, ``point``, ``confidence``.
    """
    finals = np.asarray(baseline_final_losses, dtype=np.float64)
    curves = np.asarray(fast_curves, dtype=np.float64)
    running_min = np.minimum.accumulate(curves, axis=1)
    n_steps = curves.shape[1]

    def statistic(index: np.ndarray, axis: int = -1) -> np.ndarray:
        idx = np.atleast_2d(index).astype(int)  # (batch, n)
        thresholds = finals[idx].mean(axis=1)  # (batch,)
        first = _first_crossings(running_min, thresholds)  # (batch, n_seeds)
        mean_first = np.take_along_axis(first, idx, axis=1).mean(axis=1)
        return n_steps / np.maximum(mean_first, 1e-12)

    res = scipy.stats.bootstrap(
        (np.arange(len(finals)),), statistic, vectorized=True, n_resamples=n_resamples,
        confidence_level=confidence, method="percentile", rng=np.random.default_rng(seed),
    )
    point = paper_speedup(finals, curves)["speedup"]
    return {"low": float(res.confidence_interval.low), "high": float(res.confidence_interval.high),
            "point": float(point), "confidence": confidence}


def bootstrap_speedup_ratio_ci(
    baseline_final_losses: Sequence[float],
    curves_a: Sequence[Sequence[float]],
    curves_b: Sequence[Sequence[float]],
    *,
    confidence: float = 0.95,
    n_resamples: int = 10_000,
    seed: int = 0,
) -> dict[str, float]:
    """Return a paired percentile bootstrap interval of speed-up(a) / speed-up(b) on the same seeds.

    Row k of ``curves_a``, ``curves_b`` and ``baseline_final_losses`` belong to one seed; each resample
    draws seeds with replacement, recomputes the threshold (the baseline's mean final loss), and both
    mean first steps; the ratio is b's mean first step / a's (above 1: a is faster). Keys: ``low``,
    ``high``, ``point``, ``confidence``.
    """
    finals = np.asarray(baseline_final_losses, dtype=np.float64)
    mins = [np.minimum.accumulate(np.asarray(c, dtype=np.float64), axis=1) for c in (curves_a, curves_b)]

    def statistic(index: np.ndarray, axis: int = -1) -> np.ndarray:
        idx = np.atleast_2d(index).astype(int)  # (batch, n)
        thresholds = finals[idx].mean(axis=1)
        first_a, first_b = (np.take_along_axis(_first_crossings(m, thresholds), idx, axis=1).mean(axis=1)
                            for m in mins)
        return first_b / np.maximum(first_a, 1e-12)

    res = scipy.stats.bootstrap(
        (np.arange(len(finals)),), statistic, vectorized=True, n_resamples=n_resamples,
        confidence_level=confidence, method="percentile", rng=np.random.default_rng(seed),
    )
    a, b = paper_speedup(finals, curves_a), paper_speedup(finals, curves_b)
    return {"low": float(res.confidence_interval.low), "high": float(res.confidence_interval.high),
            "point": b["mean_first_step"] / a["mean_first_step"], "confidence": confidence}


def bootstrap_paired_speedups_ratio_ci(
    finals_a: Sequence[float],
    curves_a: Sequence[Sequence[float]],
    finals_b: Sequence[float],
    curves_b: Sequence[Sequence[float]],
    *,
    confidence: float = 0.95,
    n_resamples: int = 10_000,
    seed: int = 0,
) -> dict[str, float]:
    """Return a paired percentile bootstrap interval of speed-up(a) / speed-up(b), each against its own baseline.

    Two experiments on the same seeds (row k of every argument is seed k), each with its own baseline
    (``finals_a``, ``finals_b``: the baseline's final losses) and its own fast schedule (``curves_a``, ``curves_b``):
    each resample draws seeds with replacement and recomputes both thresholds, both speed-ups and their ratio (above
    1: the paper's metric gives a the larger speed-up). Keys: ``low``, ``high``, ``point``, ``confidence``.
    """
    fa, fb = (np.asarray(f, dtype=np.float64) for f in (finals_a, finals_b))
    mins = [np.minimum.accumulate(np.asarray(c, dtype=np.float64), axis=1) for c in (curves_a, curves_b)]
    n_steps = mins[0].shape[1]

    def statistic(index: np.ndarray, axis: int = -1) -> np.ndarray:
        idx = np.atleast_2d(index).astype(int)  # (batch, n)
        speedups = []
        for finals, m in ((fa, mins[0]), (fb, mins[1])):
            first = np.take_along_axis(_first_crossings(m, finals[idx].mean(axis=1)), idx, axis=1).mean(axis=1)
            speedups.append(n_steps / np.maximum(first, 1e-12))
        return speedups[0] / speedups[1]

    res = scipy.stats.bootstrap(
        (np.arange(len(fa)),), statistic, vectorized=True, n_resamples=n_resamples,
        confidence_level=confidence, method="percentile", rng=np.random.default_rng(seed),
    )
    point = paper_speedup(fa, curves_a)["speedup"] / paper_speedup(fb, curves_b)["speedup"]
    return {"low": float(res.confidence_interval.low), "high": float(res.confidence_interval.high),
            "point": float(point), "confidence": confidence}


def intervals_separate(a: Mapping[str, float], b: Mapping[str, float]) -> bool:
    """Return whether two intervals (``low``, ``high``) do not overlap."""
    return a["low"] > b["high"] or b["low"] > a["high"]
