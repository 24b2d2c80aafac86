"""Which settles first, the frame or the precision: the order over seeds, and the freeze intervention.

The frame is where a model attends (``W_Q``, ``W_K``: the attention pattern), the precision what it retrieves (the
values, the calibration). Chapter 4 (the recall head) and chapter 6 (the bijection transformer) read the order of
the two under several definitions; each definition gives, per run, a frame step ``t_F`` and a precision step
``t_P``, and the frame "settles first" on a run when ``t_F < t_P``. This module holds what both chapters read:

- :func:`order_share`: the share of runs whose frame settles first, with its Clopper–Pearson interval, which
  decides the order (an interval straddling 1/2 leaves it undecided); :func:`paired_gap`: the mean ``t_P − t_F``
  with a paired t interval; :func:`ratio_of_means_ci`: how a gap changes between two run lengths;
- the freeze intervention read from freeze runs (``W_Q``, ``W_K`` stopped at step t, the rest trained to the end):
  :func:`freeze_frame_step` and :func:`freeze_frame_summary`.

Chapter 4's stored freeze runs and definitions, and the verdict of its frame row read from them, are in
:mod:`attention_dynamics.ledger.frame_results` (they read stored results and decide claims: the ledger's layer).
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

import numpy as np
import scipy.stats
import torch

__all__ = [
    "BITS",
    "ORDER_VERDICTS",
    "order_share",
    "paired_gap",
    "ratio_of_means_ci",
    "attention_entropy_nats",
    "order_phrase",
    "order_explanation",
    "total_steps",
    "freeze_table",
    "freeze_frame_step",
    "freeze_frame_summary",
]

#: Bits per nat.
BITS = 1.0 / math.log(2.0)
#: The order an interval of the frame-first share decides: above 1/2, below 1/2, straddling it.
ORDER_VERDICTS = ("frame first", "precision first", "undecided")


def order_share(frame: Sequence[float], precision: Sequence[float], *, confidence: float = 0.95) -> dict[str, Any]:
    """Return the share of runs whose frame settles strictly first (``frame < precision``) with its Clopper–Pearson
    interval, and the verdict: ``"frame first"`` / ``"precision first"`` where the interval excludes 1/2,
    ``"undecided"`` where it straddles it (five agreeing runs cannot decide an order; six can)."""
    f, p = np.asarray(frame, dtype=float), np.asarray(precision, dtype=float)
    if f.shape != p.shape or f.ndim != 1 or f.size == 0:
        raise ValueError("need two equal-length, non-empty 1-d sequences of settling steps")
    k, n = int(np.sum(f < p)), int(f.size)
    ci = scipy.stats.binomtest(k, n).proportion_ci(confidence_level=confidence, method="exact")
    low, high = float(ci.low), float(ci.high)
    verdict = "frame first" if low > 0.5 else "precision first" if high < 0.5 else "undecided"
    return {"share": k / n, "k": k, "n": n, "low": low, "high": high, "verdict": verdict}


def paired_gap(frame: Sequence[float], precision: Sequence[float], *, confidence: float = 0.95) -> dict[str, float]:
    """Return the mean over runs of ``t_P − t_F`` (steps; > 0: frame first) with a paired t interval."""
    d = np.asarray(precision, dtype=float) - np.asarray(frame, dtype=float)
    mean = float(d.mean())
    if d.size < 2 or d.std(ddof=1) == 0:
        return {"mean": mean, "low": mean, "high": mean}
    half = float(scipy.stats.t.ppf(0.5 + confidence / 2, d.size - 1) * d.std(ddof=1) / math.sqrt(d.size))
    return {"mean": mean, "low": mean - half, "high": mean + half}


def ratio_of_means_ci(num: np.ndarray, den: np.ndarray, *, n_boot: int = 10_000, seed: int = 0,
                      confidence: float = 0.95) -> dict[str, float | None]:
    """Return the mean of ``num`` over the mean of ``den`` with a percentile bootstrap over paired runs (all None
    where the mean of ``den`` is 0 and the ratio is undefined)."""
    num, den = np.asarray(num, dtype=float), np.asarray(den, dtype=float)
    if den.mean() == 0:
        return {"point": None, "low": None, "high": None}
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(num), size=(n_boot, len(num)))
    d = den[idx].mean(1)
    keep = d != 0
    boot = num[idx].mean(1)[keep] / d[keep]
    a = (1 - confidence) / 2
    return {"point": float(num.mean() / den.mean()), "low": float(np.quantile(boot, a)),
            "high": float(np.quantile(boot, 1 - a))}


def attention_entropy_nats(alpha: torch.Tensor) -> float:
    """Return the mean entropy (nats) of attention rows ``(..., T)`` (0 log 0 = 0)."""
    return float(-torch.special.xlogy(alpha, alpha).sum(-1).mean())


def order_phrase(status: str) -> str:
    """Return the order a frame-first claim's status states, in words (pass: the frame first)."""
    phrases = {"pass": "the frame settles first", "fail": "the values settle first",
               "undecided": "the order is not decided"}
    if status not in phrases:
        raise ValueError(f"a decided or undecided status is needed, got {status!r}")
    return phrases[status]


def order_explanation(row: Mapping[str, Any]) -> str:
    """Return why a frame-first share (a row of :func:`order_share`) does not pass: the precision first, or undecided."""
    if row["verdict"] == "precision first":
        return "under this definition the values (precision) settle first on most seeds: the interval lies below 1/2"
    return "the share's interval straddles 1/2: this definition does not decide the order at this number of seeds"


# ---------------------------------------------------------------------------------------------
# The freeze intervention
# ---------------------------------------------------------------------------------------------


def total_steps(kind_result: Mapping[str, Any]) -> int:
    """Return the training steps of one kind's freeze runs (``settings["steps"]``, or the tunnel's)."""
    settings = kind_result["settings"]
    return int(settings["tunnel"]["steps"] if "tunnel" in settings else settings["steps"])


def freeze_table(result: Mapping[str, Any]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Return ``(freeze_steps, frozen (seeds, steps), unfrozen (seeds,), initial (seeds,))`` of a freeze result."""
    seeds, steps = result["seeds"], result["freeze_steps"]
    by = {(r["seed"], r["freeze_at"]): r for r in result["runs"]}
    frozen = np.array([[by[(s, t)]["final"] for t in steps] for s in seeds])
    unfrozen = np.array([by[(s, None)]["final"] for s in seeds])
    initial = np.array([by[(s, None)]["initial"] for s in seeds])
    return np.array(steps), frozen, unfrozen, initial


def freeze_frame_step(result: Mapping[str, Any], margin_fraction: float = 0.01) -> int | None:
    """Return the earliest freeze step from which on every seed's frozen run ends within the margin.

    The margin, per seed, is ``margin_fraction`` of that seed's untrained gap (initial − final of the
    unfrozen run): a frozen run is "within" when its final value exceeds the unfrozen one's by at most
    that. The step must hold for every later freeze step too. None if no freeze step qualifies.
    """
    steps, frozen, unfrozen, initial = freeze_table(result)
    margin = margin_fraction * (initial - unfrozen)  # (seeds,)
    ok = ((frozen - unfrozen[:, None]) <= margin[:, None]).all(axis=0)  # (steps,)
    for k in range(len(steps)):
        if ok[k:].all():
            return int(steps[k])
    return None


def freeze_frame_summary(result: Mapping[str, Any], margin_fraction: float = 0.01) -> dict[str, Any]:
    """Return the freeze curve's numbers: the cost of freezing at each step (mean, min, max over seeds).

    ``cost`` is the frozen run's final value minus the unfrozen one's (per seed), in bits;
    ``margin_bits`` the mean margin of :func:`freeze_frame_step`; ``unfrozen_sd_bits`` the seed-to-seed
    standard deviation of the unfrozen runs' final values; ``gap_bits`` the mean untrained gap.
    """
    steps, frozen, unfrozen, initial = freeze_table(result)
    to_bits = BITS if result["kind"] == "head" else 1.0
    cost = (frozen - unfrozen[:, None]) * to_bits
    return {
        "steps": steps.tolist(),
        "cost_mean_bits": cost.mean(0).tolist(),
        "cost_min_bits": cost.min(0).tolist(),
        "cost_max_bits": cost.max(0).tolist(),
        "freeze_frame_step": freeze_frame_step(result, margin_fraction),
        "margin_fraction": margin_fraction,
        "margin_bits": float(margin_fraction * (initial - unfrozen).mean() * to_bits),
        "gap_bits": float((initial - unfrozen).mean() * to_bits),
        "unfrozen_final_bits": float(unfrozen.mean() * to_bits),
        "unfrozen_sd_bits": float(unfrozen.std(ddof=1) * to_bits) if len(unfrozen) > 1 else float("nan"),
        "n_seeds": len(unfrozen),
        "total_steps": total_steps(result),
    }
