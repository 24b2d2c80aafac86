"""Which settles first, the frame or the precision: the order over seeds, and the freeze intervention.

The frame is where a model attends (``W_Q``, ``W_K``: the attention pattern), the precision what it retrieves (the
values, the calibration). Chapter 4 (the recall head) and chapter 6 (the bijection transformer) read the order of
the two under several definitions; each definition gives, per run, a frame step ``t_F`` and a precision step
``t_P``, and the frame "settles first" on a run when ``t_F < t_P``. This module holds what both chapters read:

- :func:`order_share`: the share of runs whose frame settles first, with its Clopper–Pearson interval, which
  decides the order (an interval straddling 1/2 leaves it undecided); :func:`paired_gap`: the mean ``t_P − t_F``
  with a paired t interval; :func:`ratio_of_means_ci`: how a gap changes between two run lengths;
- the freeze intervention read from freeze runs (``W_Q``, ``W_K`` stopped at step t, the rest trained to the end):
  :func:`freeze_frame_step` and :func:`freeze_frame_summary`, against :data:`FREE_FREEZE_RATIO` times the trained
  model's own error.

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
    "FREE_FREEZE_RATIO",
    "ORDER_VERDICTS",
    "freeze_ratios",
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
#: Freezing the frame "costs nothing" when the frozen model ends within this factor of the trained model's error (the
#: whole interval over seeds): a bound relative to the trained model, not a share of the untrained model's gap.
FREE_FREEZE_RATIO = 1.25
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


def freeze_ratios(result: Mapping[str, Any], *, confidence: float = 0.95) -> dict[str, np.ndarray]:
    """Return, per freeze step, the frozen run's final value over the unfrozen run's: per seed (``ratios`` (seeds,
    steps)) and their geometric mean with its Student-t interval on the log scale (``point``, ``low``, ``high``;
    with one seed the interval is the value itself)."""
    steps, frozen, unfrozen, _ = freeze_table(result)
    ratios = frozen / unfrozen[:, None]
    logs = np.log(ratios)
    mean = logs.mean(0)
    if len(unfrozen) > 1:
        half = scipy.stats.t.ppf(0.5 + confidence / 2, len(unfrozen) - 1) * logs.std(0, ddof=1) / math.sqrt(len(unfrozen))
    else:
        half = np.zeros_like(mean)
    return {"steps": steps, "ratios": ratios, "point": np.exp(mean), "low": np.exp(mean - half),
            "high": np.exp(mean + half)}


def freeze_frame_step(result: Mapping[str, Any], ratio: float = FREE_FREEZE_RATIO) -> int | None:
    """Return the earliest freeze step from which on freezing costs nothing: the frozen runs end within ``ratio``
    times the unfrozen runs' final value (the upper end of the geometric mean's interval over seeds), at that step and
    every later one. None if no freeze step qualifies.

    The bound is relative to the trained model's own error (a freeze that multiplies the error is not free, however
    small the error is against the untrained model's).
    """
    r = freeze_ratios(result)
    ok = r["high"] <= ratio
    for k in range(len(r["steps"])):
        if ok[k:].all():
            return int(r["steps"][k])
    return None


def freeze_frame_summary(result: Mapping[str, Any], ratio: float = FREE_FREEZE_RATIO) -> dict[str, Any]:
    """Return the freeze curve's numbers: the cost of freezing at each step.

    ``ratio_point`` / ``ratio_low`` / ``ratio_high``: the frozen over the unfrozen final value (geometric mean over
    seeds and its interval, :func:`freeze_ratios`), which decides :func:`freeze_frame_step` against ``ratio``;
    ``cost`` (mean, min, max over seeds) is the frozen run's final value minus the unfrozen one's, in bits, and
    ``gap_share`` the same as a share of the untrained gap (stated beside the ratio); ``unfrozen_sd_bits`` the
    seed-to-seed standard deviation of the unfrozen runs' final values; ``gap_bits`` the mean untrained gap.
    """
    steps, frozen, unfrozen, initial = freeze_table(result)
    to_bits = BITS if result["kind"] == "head" else 1.0
    cost = (frozen - unfrozen[:, None]) * to_bits
    r = freeze_ratios(result)
    return {
        "steps": steps.tolist(),
        "ratio_point": r["point"].tolist(),
        "ratio_low": r["low"].tolist(),
        "ratio_high": r["high"].tolist(),
        "cost_mean_bits": cost.mean(0).tolist(),
        "cost_min_bits": cost.min(0).tolist(),
        "cost_max_bits": cost.max(0).tolist(),
        "gap_share": ((frozen - unfrozen[:, None]) / (initial - unfrozen)[:, None]).mean(0).tolist(),
        "freeze_frame_step": freeze_frame_step(result, ratio),
        "free_ratio": ratio,
        "gap_bits": float((initial - unfrozen).mean() * to_bits),
        "unfrozen_final_bits": float(unfrozen.mean() * to_bits),
        "unfrozen_sd_bits": float(unfrozen.std(ddof=1) * to_bits) if len(unfrozen) > 1 else float("nan"),
        "n_seeds": len(unfrozen),
        "total_steps": total_steps(result),
    }
