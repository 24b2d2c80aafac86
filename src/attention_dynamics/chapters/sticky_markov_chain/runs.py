"""Chapter 5's runs: the paper's head trained on the sticky chain with any schedule (the closed-form engine), the
grid of seeds × schedules, the paper's protocol summary and the value trajectories."""

from __future__ import annotations

from typing import Any, Iterable, Mapping

import numpy as np
import pandas as pd
from sklearn.decomposition import PCA

from ...science.speedup import paper_speedup
from ...science.stats import paired_tests
from ...training import map_parallel
# The trainer itself is the library's (training.sticky_head); the chapter's names for it:
from ...training.sticky_head import (  # noqa: F401
    STICKY_ROUTING,
    RunResult,
    between_symbol_share,
    heldout_datasets,
    heldout_metrics,
    train_sticky_head,
    value_prototypes,
)

__all__ = [
    "STICKY_ROUTING",
    "RunResult",
    "value_prototypes",
    "between_symbol_share",
    "train_sticky_head",
    "heldout_datasets",
    "heldout_metrics",
    "run_grid",
    "summarise_runs",
    "paper_protocol_summary",
    "trajectory_statistics",
    "trajectory_pca",
    "trajectory_length",
    "trajectory_coherence",
]


def run_grid(
    seeds: Iterable[int],
    schedules: Iterable[str],
    *,
    processes: int | None = None,
    **options: Any,
) -> dict[tuple[str, int], RunResult]:
    """Return ``{(schedule, seed): RunResult}`` for every seed × schedule, run in parallel on all cores.

    ``options`` (kind, steps, length, snapshot_every, rho, …) go to :func:`train_sticky_head`.
    """
    jobs = [dict(seed=int(s), schedule=name, **options) for name in schedules for s in seeds]
    results = map_parallel(train_sticky_head, jobs, processes=processes)
    return {(job["schedule"], job["seed"]): res for job, res in zip(jobs, results)}


def summarise_runs(runs: Mapping[tuple[str, int], RunResult], schedule: str, metric: str) -> dict[str, float]:
    """Return mean and sample standard deviation (ddof = 1) of a final metric over a schedule's seeds."""
    vals = np.array([r.final[metric] for (name, _), r in runs.items() if name == schedule])
    return {"mean": float(vals.mean()), "sd": float(vals.std(ddof=1)) if len(vals) > 1 else 0.0, "n": int(len(vals))}


def paper_protocol_summary(
    runs: Mapping[tuple[str, int], RunResult], *, baseline: str = "sgd", method: str = "em_like", digits: int = 4
) -> dict[str, Any]:
    """Return the paper's analysis of ``method`` vs ``baseline``: speed-up, per-seed table, mean ± sd, paired tests.

    Keys: ``seeds``; ``speedup`` (:func:`paper_speedup`); ``per_seed`` (a pandas DataFrame, one row per
    seed: final loss, entropy (nats) and accuracy of both schedules, and the first step at which
    ``method`` is below the threshold); ``summary`` (DataFrame of mean and sd, ddof = 1, per metric and
    schedule); ``paired_test`` (:func:`paired_tests` of the final losses, method − baseline).
    """
    seeds = [seed for (name, seed) in runs if name == baseline and (method, seed) in runs]
    base = [runs[(baseline, s)] for s in seeds]
    other = [runs[(method, s)] for s in seeds]
    speed = paper_speedup([r.final["loss"] for r in base], [r.losses for r in other])
    metrics = ("loss", "entropy", "accuracy")
    per_seed = pd.DataFrame({"seed": seeds, **{f"{baseline} {m}": [r.final[m] for r in base] for m in metrics},
                             **{f"{method} {m}": [r.final[m] for r in other] for m in metrics},
                             f"{method} first step below threshold": speed["first_steps"]}).set_index("seed")
    rows = []
    for name, rs in ((baseline, base), (method, other)):
        for m in metrics:
            vals = np.array([r.final[m] for r in rs])
            rows.append({"schedule": name, "metric": m, "mean": vals.mean(), "sd": vals.std(ddof=1) if len(vals) > 1 else 0.0})
    summary = pd.DataFrame(rows).set_index(["schedule", "metric"])
    return {"seeds": seeds, "speedup": speed, "per_seed": per_seed.round(digits), "summary": summary.round(digits),
            "paired_test": paired_tests([r.final["loss"] for r in other], [r.final["loss"] for r in base])}


def trajectory_statistics(runs: Mapping[tuple[str, int], RunResult], schedule: str) -> dict[str, dict[str, float]]:
    """Return mean and sd over a schedule's seeds of value-trajectory length, coherence and final specialization.

    Length is in units of the value space (mean over the eight symbol prototypes), coherence is net
    displacement / path length, specialization the between-symbol share of the values' variance.
    """
    rs = [r for (name, _), r in runs.items() if name == schedule and len(r.snapshot_steps)]
    stats = {
        "length": [trajectory_length(r.value_prototypes) for r in rs],
        "coherence": [trajectory_coherence(r.value_prototypes) for r in rs],
        "specialization": [r.final_specialization for r in rs],
        "initial_specialization": [r.initial_specialization for r in rs],
    }
    return {k: {"mean": float(np.mean(v)), "sd": float(np.std(v, ddof=1)) if len(v) > 1 else 0.0} for k, v in stats.items()}


def trajectory_pca(
    trajectories: Mapping[str, np.ndarray], n_components: int = 2, *, relative_to_start: bool = True
) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Return each trajectory projected on the top principal components of all of them, and the variance ratios.

    ``trajectories`` maps a name to ``(R, n_symbols, d_v)`` snapshots. With ``relative_to_start``, every
    prototype's trajectory is first shifted to start at the origin (the picture then shows how far and
    in which direction each one moved, not where it started). One PCA (scikit-learn) is fitted on every
    snapshot of every trajectory, so the projections ``(R, n_symbols, n_components)`` share axes.
    """
    prepared = {k: (t - t[:1]) if relative_to_start else t for k, t in trajectories.items()}
    stacked = np.concatenate([t.reshape(-1, t.shape[-1]) for t in prepared.values()])
    pca = PCA(n_components=n_components, svd_solver="full").fit(stacked)
    return {k: pca.transform(t.reshape(-1, t.shape[-1])).reshape(*t.shape[:2], n_components)
            for k, t in prepared.items()}, pca.explained_variance_ratio_


def trajectory_length(trajectory: np.ndarray) -> float:
    """Return the mean path length over symbols of a ``(R, n_symbols, d)`` trajectory (units of the value space)."""
    steps = np.linalg.norm(np.diff(trajectory, axis=0), axis=-1)  # (R−1, n_symbols)
    return float(steps.sum(axis=0).mean())


def trajectory_coherence(trajectory: np.ndarray) -> float:
    """Return the mean over symbols of net displacement / path length (1 = a straight line, 0 = back to start)."""
    path = np.linalg.norm(np.diff(trajectory, axis=0), axis=-1).sum(axis=0)  # (n_symbols,)
    net = np.linalg.norm(trajectory[-1] - trajectory[0], axis=-1)
    return float(np.mean(net / np.maximum(path, 1e-300)))
