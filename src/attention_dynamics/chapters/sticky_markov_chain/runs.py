"""Chapter 5's runs: the paper's head trained on the sticky chain with any schedule (the closed-form engine), the
grid of seeds × schedules, the paper's protocol summary and the value trajectories."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

import numpy as np
import pandas as pd
import torch
from sklearn.decomposition import PCA

from ...core.seeding import stream
from ...models.single_head import initial_head
from ...science.speedup import paper_speedup
from ...science.stats import paired_tests
from ...tasks import sticky_chain
from ...training import fit, map_parallel
from ...training.head_engine import DEFAULT_QUERY_ROWS_PER_BLOCK, SingleHeadModule, head_metrics
from ...training.schedules import Schedule, get_schedule, make_backward, make_optimizer

__all__ = [
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


@dataclass
class RunResult:
    """One training run: the losses before every update (nats), metrics at the start and end, snapshots.

    ``losses`` ``(steps,)`` float64; ``initial``/``final`` are :func:`~attention_dynamics.training.head_engine.head_metrics` dicts (loss and
    entropy in nats); ``snapshot_steps`` ``(R,)`` and ``value_prototypes`` ``(R, n_symbols, d_v)`` hold
    the value of each symbol's mean input, mu_s W_V, at the recorded steps (empty when not recorded).
    """

    seed: int
    schedule: str
    kind: str
    steps: int
    losses: np.ndarray
    initial: dict[str, float]
    final: dict[str, float]
    snapshot_steps: np.ndarray
    value_prototypes: np.ndarray
    final_specialization: float
    heldout: dict[str, float] | None = None
    initial_specialization: float = math.nan
    heldout_curve: dict[str, list] | None = None

    def to_json(self, *, loss_stride: int = 1) -> dict[str, Any]:
        """Return a JSON-ready dict; losses are kept every ``loss_stride`` steps (plus the last)."""
        idx = np.unique(np.r_[np.arange(0, self.steps, loss_stride), self.steps - 1])
        return {
            "seed": self.seed, "schedule": self.schedule, "kind": self.kind, "steps": self.steps,
            "loss_steps": idx.tolist(), "losses": np.round(self.losses[idx], 7).tolist(),
            "initial": self.initial, "final": self.final, "final_specialization": self.final_specialization,
            "heldout": self.heldout, "heldout_curve": self.heldout_curve,
        }


def value_prototypes(mu: torch.Tensor, W_V: torch.Tensor) -> np.ndarray:
    """Return each symbol's value prototype mu_s W_V ``(n_symbols, d_v)`` (the value of a noiseless input)."""
    return (mu @ W_V.detach()).double().numpy()


def between_symbol_share(values: torch.Tensor | np.ndarray, labels: torch.Tensor | np.ndarray) -> float:
    """Return the share of the values' variance explained by their symbol (η², between / total, in [0, 1]).

    ``values`` ``(T, d_v)`` are the value vectors v_j, ``labels`` ``(T,)`` the symbol each input carries.
    """
    v = np.asarray(values, dtype=np.float64)
    lab = np.asarray(labels)
    centred = v - v.mean(axis=0)
    total = float((centred**2).sum())
    between = 0.0
    for s in np.unique(lab):
        group = centred[lab == s]
        between += len(group) * float((group.mean(axis=0) ** 2).sum())
    return between / total if total > 0 else 0.0


def train_sticky_head(
    seed: int,
    schedule: str | Schedule = "sgd",
    *,
    kind: str = "reference",
    steps: int = 1000,
    length: int = sticky_chain.SEQUENCE_LENGTH,
    snapshot_every: int | None = None,
    block_size: int = DEFAULT_QUERY_ROWS_PER_BLOCK,
    rho: float | None = None,
    heldout_sequences: int = 0,
    heldout_every: int | None = None,
) -> RunResult:
    """Train the paper's head on the sticky chain of ``seed`` with ``schedule``; return a :class:`RunResult`.

    The data and the initial weights both come from ``seed`` (as in the reference script), so all
    schedules of one seed share both. ``rho`` overrides the M-step's target distance. With
    ``snapshot_every``, the value prototypes are recorded every that many steps and at the end.
    With ``heldout_sequences`` = n > 0, the trained head is also evaluated on n fresh sequences
    (:func:`heldout_metrics`), and with ``heldout_every`` its mean held-out loss and entropy are
    recorded every that many steps and at the end (``RunResult.heldout_curve``).
    """
    sched = get_schedule(schedule)
    if rho is not None:
        sched = sched.with_rho(rho)
    data = sticky_chain.make_sticky_chain_data(seed, kind=kind, length=length)
    heldout_data = heldout_datasets(seed, kind=kind, length=length, n_sequences=heldout_sequences)
    model = SingleHeadModule(initial_head(seed))
    initial = head_metrics(data.x, model.head_params(), data.y, data.previous_symbols)
    initial_specialization = between_symbol_share(data.x @ model.W_V.detach(), data.previous_symbols)
    snapshot_steps = set(range(0, steps, snapshot_every)) if snapshot_every else set()
    heldout_steps = set(range(0, steps, heldout_every)) if heldout_every and heldout_data else set()

    def measure(step: int, m: SingleHeadModule, loss: float) -> dict[str, Any] | None:
        out: dict[str, Any] = {}
        if step in snapshot_steps or (step == steps and snapshot_steps):
            out["prototypes"] = value_prototypes(data.mu, m.W_V)
        if step in heldout_steps or (step == steps and heldout_steps):
            rows = [head_metrics(d.x, m.head_params(), d.y) for d in heldout_data]
            out["heldout_loss"] = float(np.mean([r["loss"] for r in rows]))
            out["heldout_entropy"] = float(np.mean([r["entropy"] for r in rows]))
        return out or None

    history = fit(
        model,
        lambda step: (data.x, data.y),
        steps=steps,
        optimizer=make_optimizer(model, sched),
        backward=make_backward(sched, block_size=block_size),
        callback=measure if (snapshot_steps or heldout_steps) else None,
        callback_steps=sorted(snapshot_steps | heldout_steps),
    )
    final = head_metrics(data.x, model.head_params(), data.y, data.previous_symbols)
    heldout = heldout_metrics(model.head_params(), heldout_data) if heldout_data else None
    values = data.x @ model.W_V.detach()  # (T−1, d_v)
    snaps = [r for r in history.records if "prototypes" in r]
    curve = [r for r in history.records if "heldout_loss" in r]
    return RunResult(
        seed=int(seed),
        schedule=sched.name,
        kind=kind,
        steps=int(steps),
        losses=history.losses,
        initial=initial,
        final=final,
        snapshot_steps=np.array([r["step"] for r in snaps], dtype=int),
        value_prototypes=np.stack([r["prototypes"] for r in snaps]) if snaps else np.empty((0,)),
        final_specialization=between_symbol_share(values, data.previous_symbols),
        heldout=heldout,
        initial_specialization=initial_specialization,
        heldout_curve={"steps": [r["step"] for r in curve], "loss": [r["heldout_loss"] for r in curve],
                       "entropy": [r["heldout_entropy"] for r in curve]} if curve else None,
    )


def heldout_datasets(
    seed: int, *, kind: str = "reference", length: int = sticky_chain.SEQUENCE_LENGTH, n_sequences: int = 10
) -> list[sticky_chain.StickyChainData]:
    """Return ``n_sequences`` fresh sequences for a run with ``seed`` (seeds seed + 10 000, seed + 10 001, …)."""
    return [sticky_chain.make_sticky_chain_data(stream(seed, "heldout", k), kind=kind, length=length)
            for k in range(n_sequences)]


def heldout_metrics(params, datasets: Sequence[sticky_chain.StickyChainData]) -> dict[str, float]:
    """Return the head's loss and entropy (nats) and accuracy averaged over held-out ``datasets``.

    Also ``filtered_floor``: the mean cross-entropy of the exact Bayes filter on the same sequences
    (:func:`~attention_dynamics.tasks.sticky_chain.filtered_cross_entropy_nats`), and ``n_sequences``.
    """
    rows = []
    for data in datasets:
        m = head_metrics(data.x, params, data.y)
        m["filtered_floor"] = sticky_chain.filtered_cross_entropy_nats(data)
        rows.append(m)
    out = {key: float(np.mean([r[key] for r in rows])) for key in rows[0]}
    out["n_sequences"] = len(rows)
    return out


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
