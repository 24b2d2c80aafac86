"""The sticky-chain experiment (PAPER.md §4.1): training runs, the paper's metric, controls, trajectories.

One run (:func:`train_sticky_head`) trains the paper's single head (20 → 10/10/15 → 8, init
N(0, 0.1²)) full-batch on one sequence with one schedule of :mod:`attention_dynamics.training.schedules`,
through :func:`attention_dynamics.training.fit` and the closed-form engine. The initial weights
depend on the seed only (the reference script re-seeds before initialising), so every schedule
of a seed starts from the same point. Runs are independent and importable, so
:func:`run_grid` spreads seeds × schedules over both cores with
:func:`attention_dynamics.training.map_parallel`.

The paper's metric (:func:`paper_speedup`): the threshold is SGD's mean final loss over the
seeds; for each seed, the first step at which the EM-like loss (recorded before each update) is
below it (the number of steps if never); speed-up = steps / mean of those first steps.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import numpy as np
import scipy.stats
import torch
from sklearn.decomposition import PCA

from ..attention import init_single_head
from ..seeding import stream, torch_generator
from ..tasks import sticky_chain
from ..training import fit, map_parallel
from ..training.head_engine import DEFAULT_BLOCK_SIZE, SingleHeadModule, head_metrics
from ..training.schedules import SCHEDULES, Schedule, get_schedule, make_backward, make_optimizer
from ..results import save_results

__all__ = [
    "HEAD_SHAPE",
    "INIT_STD",
    "RunResult",
    "initial_head",
    "train_sticky_head",
    "heldout_datasets",
    "heldout_metrics",
    "run_grid",
    "steps_to_threshold",
    "paper_speedup",
    "em_like_speedup_over",
    "bootstrap_speedup_ci",
    "paired_tests",
    "summarise_runs",
    "value_prototypes",
    "paper_protocol_summary",
    "controls_table",
    "rho_sweep_table",
    "long_run_table",
    "trajectory_statistics",
    "trajectory_pca",
    "trajectory_length",
    "trajectory_coherence",
    "between_symbol_share",
    "train_deep_transformer",
    "PAPER_SCALE_CONFIG",
    "PAPER_SCALE_FILE",
    "run_heavy_job",
    "heavy_job_cache_path",
    "compute_paper_scale_results",
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
    block_size: int = DEFAULT_BLOCK_SIZE,
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
    import pandas as pd

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


def controls_table(heavy: Mapping[str, Any], kind: str = "reference", digits: int = 4):
    """Return a pandas DataFrame comparing every schedule of the paper-scale file on one chain.

    One row per schedule: number of seeds, mean ± sd final loss (nats), the paper's speed-up over SGD
    on the same seeds with its 95% bootstrap interval, and EM-like's speed-up over the schedule
    (:func:`em_like_speedup_over`; 1 for EM-like itself).
    """
    import pandas as pd

    block = heavy["ci"][kind]
    rows = []
    for name, finals in block["final"].items():
        losses = np.array([f["loss"] for f in finals])
        ci = block["speedup_ci"].get(name)
        rows.append({
            "schedule": SCHEDULES[name].label if name in SCHEDULES else name,
            "seeds": len(losses),
            "final loss mean": losses.mean(),
            "final loss sd": losses.std(ddof=1) if len(losses) > 1 else 0.0,
            "speed-up over SGD": block["speedup"][name]["speedup"] if name in block["speedup"] else np.nan,
            "95% CI low": ci["low"] if ci else np.nan,
            "95% CI high": ci["high"] if ci else np.nan,
            "EM-like speed-up over it": (1.0 if name == "em_like"
                                         else block["em_like_speedup_over"].get(name, {}).get("ratio", np.nan)),
        })
    return pd.DataFrame(rows).set_index("schedule").round(digits)


def rho_sweep_table(heavy: Mapping[str, Any], digits: int = 4):
    """Return a pandas DataFrame of the M-step's rho sweep: mean final loss and the paper's speed-up per rho."""
    import pandas as pd

    rows = [{"rho": v["rho"], "seeds": len(v["seeds"]), "final loss mean": float(np.mean(v["final_loss"])),
             "speed-up over SGD": v["speedup"]["speedup"], "mean first step": v["speedup"]["mean_first_step"]}
            for v in heavy["rho_sweep"].values()]
    return pd.DataFrame(rows).set_index("rho").sort_index().round(digits)


def long_run_table(heavy: Mapping[str, Any], digits: int = 4):
    """Return a pandas DataFrame of the long runs (nats): training and held-out losses, and their gaps to the floors.

    Per schedule (mean over the long-run seeds): final training loss; final held-out loss; the lowest
    held-out loss along the run and the step where it occurred; ``closest gap to H_min`` (lowest held-out
    loss minus H_min); ``final gap to filter`` (final held-out loss minus the exact Bayes filter's
    cross-entropy on the same held-out sequences, the floor for these noisy inputs).
    """
    import pandas as pd

    long = heavy["long_run"]
    rows = []
    for name, rs in long["runs"].items():
        best = [int(np.argmin(r["heldout_curve"]["loss"])) for r in rs]
        best_loss = [r["heldout_curve"]["loss"][i] for r, i in zip(rs, best)]
        rows.append({
            "schedule": SCHEDULES[name].label if name in SCHEDULES else name,
            "final training loss": float(np.mean([r["final"]["loss"] for r in rs])),
            "final held-out loss": float(np.mean([r["heldout"]["loss"] for r in rs])),
            "lowest held-out loss": float(np.mean(best_loss)),
            "at step": float(np.mean([r["heldout_curve"]["steps"][i] for r, i in zip(rs, best)])),
            "closest gap to H_min": float(np.mean(best_loss)) - long["hmin_nats"],
            "final gap to filter": float(np.mean([r["heldout"]["loss"] - r["heldout"]["filtered_floor"] for r in rs])),
        })
    return pd.DataFrame(rows).set_index("schedule").round(digits)


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


def train_deep_transformer(
    seed: int,
    *,
    steps: int = 2000,
    n_layers: int = 4,
    n_heads: int = 4,
    d_model: int = 64,
    lr: float = 3e-4,
    weight_decay: float = 0.01,
    grad_clip: float = 1.0,
    dropout: float = 0.1,
    test_every: int | None = 100,
    kind: str = "reference",
    length: int = sticky_chain.SEQUENCE_LENGTH,
    test_seed_offset: int = 10_000,
) -> dict[str, Any]:
    """Return the deep variant's metrics: a causal transformer trained full-batch on one sequence.

    The reference script's deep variant: ``n_layers`` × ``n_heads``, width ``d_model``, AdamW (lr,
    weight decay 0.01), cosine schedule over ``steps``, gradient clipping at 1, a test sequence drawn
    with seed ``seed + test_seed_offset``, no positional encoding. The model is
    :class:`attention_dynamics.models.CausalTransformer`, which has no dropout; ``dropout`` is added by
    forward hooks where the script has it in the feed-forward layers (after the GELU and after the
    second linear map) and, instead of on the attention weights, on each attention layer's output.
    Keys: ``train`` and ``test`` (loss and entropy in nats, accuracy, with dropout off), ``test_curve``
    (test loss and entropy every ``test_every`` steps and at the end), ``losses`` (training loss every 10
    steps, with dropout on), ``n_parameters``.
    """
    from ..models import CausalTransformer, count_parameters

    train = sticky_chain.make_sticky_chain_data(seed, kind=kind, length=length)
    test = sticky_chain.make_sticky_chain_data(seed + test_seed_offset, kind=kind, length=length)
    torch.manual_seed(int(seed))
    model = CausalTransformer(n_out=sticky_chain.N_SYMBOLS, input_dim=train.x.shape[-1], d_model=d_model,
                              n_layers=n_layers, n_heads=n_heads, positional="none")
    for block in model.blocks:
        block.attn.fused = True  # PyTorch's fused kernel: the same function, several times faster on CPU
        if dropout:
            for module in (block.attn, block.mlp[1], block.mlp[2]):
                module.register_forward_hook(
                    lambda mod, inputs, out: torch.nn.functional.dropout(out, dropout, training=mod.training))
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, steps)

    def loss_fn(m: torch.nn.Module, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        x, y = batch
        return torch.nn.functional.cross_entropy(m(x[None])[0], y)

    def evaluate(step: int, m: torch.nn.Module, loss: float) -> dict[str, Any]:
        m.eval()
        out = _classifier_metrics(m, test)
        m.train()
        return {"test_loss": out["loss"], "test_entropy": out["entropy"]}

    history = fit(model, lambda step: (train.x, train.y), steps=steps, optimizer=optimizer, loss_fn=loss_fn,
                  scheduler=scheduler, grad_clip=grad_clip, callback=evaluate if test_every else None,
                  callback_steps=range(0, steps, test_every) if test_every else None)
    model.eval()
    records = history.records
    return {
        "seed": int(seed),
        "train": _classifier_metrics(model, train),
        "test": _classifier_metrics(model, test),
        "test_curve": {"steps": [r["step"] for r in records], "loss": [r["test_loss"] for r in records],
                       "entropy": [r["test_entropy"] for r in records]},
        "losses": np.round(history.losses[::10], 7).tolist(),
        "n_parameters": count_parameters(model),
    }


def _classifier_metrics(model: torch.nn.Module, data: sticky_chain.StickyChainData) -> dict[str, float]:
    with torch.no_grad():
        logits = model(data.x[None])[0]
        log_p = torch.log_softmax(logits, dim=-1)
        return {
            "loss": float(torch.nn.functional.cross_entropy(logits, data.y)),
            "entropy": float(-(log_p.exp() * log_p).sum(-1).mean()),
            "accuracy": float((logits.argmax(-1) == data.y).double().mean()),
        }


def describe_machine(machine: dict[str, Any]) -> str:
    """Return a one-line description of the machine a benchmark ran on (its ``"machine"`` record)."""
    processor = machine.get("cpu_model") or machine.get("processor") or ""
    cores = machine.get("cpu_count")
    parts = [f"{cores} cores" if cores else "", processor, machine.get("platform", "")]
    return ", ".join(part for part in parts if part) or "an unrecorded machine"


#: The committed file with the results too heavy for the book's budget (``--scale paper``).
PAPER_SCALE_FILE = "sticky_chain_paper_scale.json"

#: What ``--scale paper`` computes: 20 seeds of the paper's two schedules (bootstrap CIs), the controls
#: on the paper's seeds on both chains, an M-step rho sweep, long runs with held-out evaluation and the
#: deep variant. ``ci_runs`` maps chain → schedule → seeds.
_PAPER = list(sticky_chain.PAPER_SEEDS)
_TWENTY = _PAPER + list(range(1, 16))
PAPER_SCALE_CONFIG: dict[str, Any] = {
    "steps": 1000,
    "length": sticky_chain.SEQUENCE_LENGTH,
    "ci_runs": {
        "reference": {"sgd": _TWENTY, "em_like": _TWENTY, "sgd_matched": _PAPER, "m_step": _PAPER},
        "nominal": {"sgd": _PAPER, "em_like": _PAPER, "sgd_matched": _PAPER},
    },
    "bootstrap_resamples": 10_000,
    "rho_values": [0.1, 0.3, 1.0, 3.0],
    "long_steps": 20_000,
    "long_seeds": [42],
    "long_schedules": ["sgd", "em_like", "sgd_matched", "m_step"],
    "long_loss_stride": 20,
    "long_heldout_every": 250,
    "heldout_sequences": 10,
    "deep_seeds": [42],
    "deep_steps": 2000,
    "deep": {"n_layers": 4, "n_heads": 4, "d_model": 64, "lr": 3e-4, "weight_decay": 0.01, "grad_clip": 1.0,
             "dropout": 0.1, "test_every": 100},
}


def heavy_job_cache_path(cache_dir: str | Path, task: str, group: str = "", **options: Any) -> Path:
    """Return the file in ``cache_dir`` where :func:`run_heavy_job` stores the job's result."""
    key = f"{group}-{task}-" + "-".join(f"{k}={options[k]}" for k in sorted(options))
    return Path(cache_dir) / (key.replace("/", "_") + ".json")


def run_heavy_job(task: str, group: str = "", cache_dir: str | None = None, **options: Any) -> dict[str, Any]:
    """Return the JSON-ready result of one paper-scale job (``task`` = ``"head"`` or ``"deep"``).

    ``"head"`` runs :func:`train_sticky_head` (``loss_stride`` sets how many losses are kept); ``"deep"``
    runs :func:`train_deep_transformer`. ``group`` only labels the job. With ``cache_dir``, a finished
    job's result is stored there and read back on a second call, so an interrupted paper-scale run
    resumes where it stopped.
    """
    cache = heavy_job_cache_path(cache_dir, task, group, **options) if cache_dir else None
    if cache is not None and cache.exists():
        return json.loads(cache.read_text(encoding="utf-8"))
    opts = dict(options)
    if task == "head":
        stride = opts.pop("loss_stride", 1)
        result = train_sticky_head(**opts).to_json(loss_stride=stride)
    elif task == "deep":
        result = train_deep_transformer(**opts)
    else:
        raise ValueError(f"unknown job task {task!r}; choose 'head' or 'deep'")
    if cache is not None:
        from ..claims import atomic_write_text

        cache.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(cache, json.dumps(result))
    return result


def compute_paper_scale_results(
    config: Mapping[str, Any] = PAPER_SCALE_CONFIG, *, processes: int | None = None, cache_dir: str | None = None
) -> dict[str, Any]:
    """Return the paper-scale results (CIs over many seeds, controls, rho sweep, long runs, deep variant).

    All jobs go through :func:`run_heavy_job` in one :func:`~attention_dynamics.training.map_parallel` call, longest
    first (a JSON-ready dict comes back). The M-step rho sweep runs on the seeds of the reference chain's ``m_step`` entry; its
    default rho reuses those runs.
    """
    cfg = dict(config)
    steps, length = cfg["steps"], cfg["length"]
    default_rho = SCHEDULES["m_step"].value_lr
    rho_seeds = cfg["ci_runs"]["reference"]["m_step"]
    jobs: list[dict[str, Any]] = []
    for kind, schedules in cfg["ci_runs"].items():
        for name, seeds in schedules.items():
            for seed in seeds:
                jobs.append(dict(task="head", group=f"ci-{kind}", seed=seed, schedule=name, kind=kind, steps=steps,
                                 length=length))
    for rho in cfg["rho_values"]:
        if rho != default_rho:  # the default M-step runs are part of the CI runs
            for seed in rho_seeds:
                jobs.append(dict(task="head", group=f"rho-{rho}", seed=seed, schedule="m_step", rho=rho, steps=steps,
                                 length=length))
    for name in cfg["long_schedules"]:
        for seed in cfg["long_seeds"]:
            jobs.append(dict(task="head", group="long", seed=seed, schedule=name, steps=cfg["long_steps"], length=length,
                             heldout_sequences=cfg["heldout_sequences"], heldout_every=cfg["long_heldout_every"],
                             loss_stride=cfg["long_loss_stride"]))
    for seed in cfg["deep_seeds"]:
        jobs.append(dict(task="deep", group="deep", seed=seed, steps=cfg["deep_steps"], length=length, **cfg["deep"]))
    # Longest first (a deep step costs about twenty head steps), so the two cores finish together.
    jobs.sort(key=lambda job: -job["steps"] * (20 if job["task"] == "deep" else 1))
    if cache_dir is not None:
        for job in jobs:
            job["cache_dir"] = str(cache_dir)
    outputs = map_parallel(run_heavy_job, jobs, processes=processes)
    by_job = list(zip(jobs, outputs))

    def select(group: str, **match: Any) -> list[dict[str, Any]]:
        return [out for job, out in by_job if job["group"] == group and all(job.get(k) == v for k, v in match.items())]

    results: dict[str, Any] = {"config": cfg, "ci": {}, "rho_sweep": {}, "long_run": {}, "deep": {}}
    for kind, schedules in cfg["ci_runs"].items():
        runs = {name: select(f"ci-{kind}", schedule=name) for name in schedules}
        sgd_final = {r["seed"]: r["final"]["loss"] for r in runs["sgd"]}
        block: dict[str, Any] = {
            "hmin_nats": sticky_chain.bayes_floor_nats(sticky_chain.transition_matrix(kind)),
            "seeds": {name: list(seeds) for name, seeds in schedules.items()},
            "final": {}, "curves": {}, "speedup": {}, "speedup_ci": {}, "paired_test_vs_sgd": {},
            "em_like_speedup_over": {},
        }
        em_curves = {r["seed"]: r["losses"] for r in runs.get("em_like", [])}
        for name in schedules:
            curves = [r["losses"] for r in runs[name]]
            block["final"][name] = [r["final"] for r in runs[name]]
            block["curves"][name] = {"steps": runs[name][0]["loss_steps"][::10], "losses": [c[::10] for c in curves]}
            if name != "sgd":
                baseline = [sgd_final[r["seed"]] for r in runs[name]]  # SGD on the same seeds
                block["speedup"][name] = paper_speedup(baseline, curves)
                block["speedup_ci"][name] = bootstrap_speedup_ci(baseline, curves, n_resamples=cfg["bootstrap_resamples"])
                block["paired_test_vs_sgd"][name] = paired_tests([r["final"]["loss"] for r in runs[name]], baseline)
            if name not in ("sgd", "em_like") and all(r["seed"] in em_curves for r in runs[name]):
                block["em_like_speedup_over"][name] = em_like_speedup_over(
                    [sgd_final[r["seed"]] for r in runs[name]], [em_curves[r["seed"]] for r in runs[name]], curves)
        results["ci"][kind] = block
    ref_sgd = {r["seed"]: r["final"]["loss"] for r in select("ci-reference", schedule="sgd")}
    for rho in cfg["rho_values"]:
        runs = select("ci-reference", schedule="m_step") if rho == default_rho else select(f"rho-{rho}")
        results["rho_sweep"][str(rho)] = {
            "rho": rho, "seeds": [r["seed"] for r in runs], "final_loss": [r["final"]["loss"] for r in runs],
            "speedup": paper_speedup([ref_sgd[r["seed"]] for r in runs], [r["losses"] for r in runs]),
        }
    hmin = sticky_chain.bayes_floor_nats(sticky_chain.transition_matrix("reference"))
    results["long_run"] = {
        "hmin_nats": hmin, "steps": cfg["long_steps"], "seeds": cfg["long_seeds"],
        "runs": {name: select("long", schedule=name) for name in cfg["long_schedules"]},
    }
    results["deep"] = {"hmin_nats": hmin, "steps": cfg["deep_steps"], "settings": cfg["deep"], "runs": select("deep")}
    return results


def main(argv: Sequence[str] | None = None) -> int:
    """Compute the paper-scale results and write them (``python -m attention_dynamics.experiments.em_vs_sgd``)."""
    import argparse

    from ..paths import data_path

    parser = argparse.ArgumentParser(description="Compute the sticky-chain results too heavy for the book's budget.")
    parser.add_argument("--output", type=Path, default=data_path(PAPER_SCALE_FILE), help="JSON file to write")
    parser.add_argument("--cache-dir", default=None, help="folder for finished jobs (resumes an interrupted run)")
    parser.add_argument("--processes", type=int, default=None, help="worker processes (default: all cores)")
    args = parser.parse_args(argv)
    results = compute_paper_scale_results(PAPER_SCALE_CONFIG, processes=args.processes, cache_dir=args.cache_dir)
    print(f"wrote {save_results(results, args.output)}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
