"""Chapter 4's computations: the Gaussian-mixture bridge, the recall heads trained at equal and at scaled value
learning rates, and the settling steps of their frame and values by the rate and the unit-free path criteria."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.stats
import torch

from ...science import em
from ...science.settling import path_settling_step
from ...training import map_parallel
from ...training.recall_head import SpecializationRun, train_specialization_head
from .settings import DISTANCE_TOLERANCE, GMM_D, GMM_K, GMM_SIGMA, SENSITIVITY_THRESHOLDS, TwoTimescaleSettings

__all__ = [
    "GmmBridge",
    "gmm_bridge",
    "run_settings",
    "train_heads",
    "sensitivity_rows",
    "settling_comparison",
    "order_statistics",
    "rate_settling_summary",
]


@dataclass
class GmmBridge:
    """The EM run of the bridge: data, its components, the start, the means' path and the per-iterate errors."""

    mixture: em.GaussianMixture  # the true mixture
    points: torch.Tensor  # (n, d)
    components: torch.Tensor  # (n,) the component that drew each point
    start: em.GaussianMixture  # means at K data points
    em_path: torch.Tensor  # (iterations + 1, K, d)
    bridge_errors: list[float]  # Xu–Jordan identity error at each iterate
    attention_errors: list[float]  # |E-step as attention − E-step| at each iterate


def gmm_bridge(n_points: int, iterations: int, generator: torch.Generator) -> GmmBridge:
    """Return the :class:`GmmBridge` of ``iterations`` EM steps on ``n_points`` points of a random mixture.

    The means are drawn from N(0, 2²), the data from the mixture, and EM starts from K data points
    chosen at random, all from ``generator`` in that order. At every iterate the EM mean step is compared
    with the preconditioned gradient step (:func:`em.xu_jordan_max_abs_error`) and the E-step with its
    attention form (:func:`em.responsibilities_as_attention`).
    """
    true_mixture = em.GaussianMixture(
        means=2.0 * torch.randn(GMM_K, GMM_D, generator=generator, dtype=torch.float64),
        sigma=GMM_SIGMA,
        weights=torch.full((GMM_K,), 1.0 / GMM_K, dtype=torch.float64),
    )
    points, components = em.sample_gaussian_mixture(n_points, true_mixture, generator=generator)
    start = true_mixture.with_means(points[torch.randperm(n_points, generator=generator)[:GMM_K]])
    path, mixture, bridge_errors, attention_errors = [start.means], start, [], []
    for _ in range(iterations):
        bridge_errors.append(em.xu_jordan_max_abs_error(points, mixture))
        attention = em.responsibilities_as_attention(points, mixture)
        attention_errors.append(float((attention - em.responsibilities(points, mixture)).abs().max()))
        mixture = mixture.with_means(em.em_mean_step(points, mixture))
        path.append(mixture.means)
    return GmmBridge(true_mixture, points, components, start, torch.stack(path), bridge_errors, attention_errors)


def run_settings(cfg: TwoTimescaleSettings) -> dict[str, Any]:
    """Return the keyword arguments every head of the chapter shares (``train_specialization_head``'s)."""
    return {k: getattr(cfg, k) for k in ("steps", "lr", "n_train", "n_probe", "record_every", "settle_window", "path_every")}


def train_heads(cfg: TwoTimescaleSettings) -> tuple[list[Any], dict[float, list[Any]]]:
    """Return ``(equal_runs, sweep_runs)``: one head per seed at equal rates, and ratio → heads (one per sweep seed)
    with the values' learning rate scaled by that ratio; all trained in parallel processes."""
    common = run_settings(cfg)
    jobs = [dict(common, seed=s, value_lr_ratio=1.0) for s in cfg.seeds]
    jobs += [dict(common, seed=s, value_lr_ratio=r) for r in cfg.ratios for s in cfg.sweep_seeds]
    runs = map_parallel(train_specialization_head, jobs)
    n, m = len(cfg.seeds), len(cfg.sweep_seeds)
    return runs[:n], {r: runs[n + k * m: n + (k + 1) * m] for k, r in enumerate(cfg.ratios)}


def sensitivity_rows(runs: Sequence[Any], settle_window: int) -> list[tuple[str, float, float, int]]:
    """Return ``(criterion, frame-first fraction, median t_P/t_F, unsettled)`` for the rate criterion at each of
    :data:`SENSITIVITY_THRESHOLDS` and for the distance-to-final criterion (:data:`DISTANCE_TOLERANCE`)."""
    rows = []
    for threshold in SENSITIVITY_THRESHOLDS:
        s = rate_settling_summary(runs, threshold=threshold)
        rows.append((f"rate, tau = {threshold:.1%} per {settle_window} steps", s["frame_first_fraction"],
                     s["median_time_ratio"], s["unsettled"]))
    by_distance = np.array([r.settling_steps_by_distance(DISTANCE_TOLERANCE) for r in runs], dtype=float)
    rows.append((f"distance to final state <= {DISTANCE_TOLERANCE:.0%} of initial",
                 float(np.mean(by_distance[:, 0] < by_distance[:, 1])),
                 float(np.median(by_distance[:, 1] / by_distance[:, 0])), 0))
    return rows


def settling_comparison(runs: Sequence[Any], fractions: Sequence[float], *, confidence: float = 0.95) -> dict[str, Any]:
    """Return the paired frame-versus-values comparison of :func:`path_settling_step` over runs (seeds).

    ``runs`` are :class:`~attention_dynamics.training.recall_head.SpecializationRun` recorded with ``path_every``.
    For each fraction f: per-run settling steps ``frame`` and ``values``, the paired differences
    ``values − frame`` with their mean and a t interval at ``confidence``, and ``verdict``:
    ``"frame first"`` / ``"values first"`` where the interval excludes zero, ``"undecided"`` otherwise.
    ``resolution``: the recording interval (steps).
    """
    if len(runs) < 2:
        raise ValueError("need at least two runs for a paired interval")
    rows = []
    for f in fractions:
        frame = np.array([path_settling_step(r.path_steps, r.frame_path, f) for r in runs], dtype=float)
        values = np.array([path_settling_step(r.path_steps, r.value_path, f) for r in runs], dtype=float)
        d = values - frame
        n = len(d)
        half = float(scipy.stats.t.ppf(0.5 + confidence / 2, n - 1) * d.std(ddof=1) / math.sqrt(n))
        lo, hi = float(d.mean()) - half, float(d.mean()) + half
        verdict = "frame first" if lo > 0 else "values first" if hi < 0 else "undecided"
        rows.append({"fraction": float(f), "frame": frame.tolist(), "values": values.tolist(),
                     "mean_difference": float(d.mean()), "low": lo, "high": hi, "verdict": verdict,
                     "frame_first_share": float(np.mean(d > 0))})
    steps = np.asarray(runs[0].path_steps)
    return {"rows": rows, "resolution": int(steps[1] - steps[0]), "confidence": confidence, "n_runs": len(runs)}


def order_statistics(row: Mapping[str, Any], *, confidence: float = 0.95, n_boot: int = 2000,
                     seed: int = 0) -> dict[str, Any]:
    """Return, for one row of :func:`settling_comparison`, the share of seeds whose frame settles first and
    the median ratio t_P / t_F, each with an interval: Clopper–Pearson for the share, a percentile
    bootstrap over seeds (``n_boot`` resamples, generator seeded by ``seed``) for the median ratio.
    """
    frame, values = np.asarray(row["frame"], dtype=float), np.asarray(row["values"], dtype=float)
    n, k = len(frame), int(np.sum(frame < values))
    alpha = 1 - confidence
    lo = float(scipy.stats.beta.ppf(alpha / 2, k, n - k + 1)) if k > 0 else 0.0
    hi = float(scipy.stats.beta.ppf(1 - alpha / 2, k + 1, n - k)) if k < n else 1.0
    ratios = values / np.maximum(frame, 1.0)
    rng = np.random.default_rng(seed)
    boot = np.median(ratios[rng.integers(0, n, size=(n_boot, n))], axis=1)
    return {"frame_first_fraction": k / n, "fraction_interval": (lo, hi),
            "median_ratio": float(np.median(ratios)),
            "ratio_interval": (float(np.quantile(boot, alpha / 2)), float(np.quantile(boot, 1 - alpha / 2)))}


def rate_settling_summary(runs: Sequence[SpecializationRun], threshold: float = 0.01) -> dict[str, Any]:
    """Return per-run settling steps (rate criterion) and their summary over runs (seeds).

    Keys: ``frame_steps``, ``value_steps`` (arrays; a run that has not settled counts as the
    end of its run, a lower bound), ``unsettled`` (number of such censored times),
    ``frame_first_fraction`` (fraction of runs whose frame settles strictly before their
    values), ``time_ratios`` (value step / frame step per run) and ``median_time_ratio``.
    """
    if not runs:
        raise ValueError("need at least one run")
    pairs = [r.settling_steps(threshold) for r in runs]
    frame = np.array([f for (f, _), _ in pairs], dtype=float)
    value = np.array([v for _, (v, _) in pairs], dtype=float)
    unsettled = sum((not fs) + (not vs) for (_, fs), (_, vs) in pairs)
    ratios = value / np.maximum(frame, 1.0)
    return {
        "frame_steps": frame,
        "value_steps": value,
        "unsettled": int(unsettled),
        "frame_first_fraction": float(np.mean(frame < value)),
        "time_ratios": ratios,
        "median_time_ratio": float(np.median(ratios)),
    }
