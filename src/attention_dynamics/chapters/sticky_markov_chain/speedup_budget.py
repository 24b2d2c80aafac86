"""What the sticky-chain speed-up measures (chapter 5's stored result ``sticky_chain_speedup_budget``): the paper's
metric against the budget and the loss level, the like-for-like learning-rate comparison, the M-step compared fairly,
and the value trajectories with intervals.

The paper's metric sets its threshold at SGD's mean final loss at a 1000-step budget, which lies barely below
ln 8, and credits SGD with the whole budget by construction. So the metric is a property of the budget, and this
result reads it as a curve:

- **budget**: on the paper's five seeds, runs of 8000 steps of SGD, EM-like (×10 on W_V), ×10 on every matrix
  (``sgd_matched``) and the book's linearised M-step (ρ = 1); at each budget B of :data:`BUDGETS` the threshold
  is SGD's mean loss after B steps and the speed-up B / the mean first step below it (a constant learning rate
  makes a run of B steps the first B steps of a longer one);
- **loss level**: the steps each schedule needs to cover 10, 25, 50 and 75 % of the way from ln 8 down to H_min,
  as a ratio to SGD's (a rescaling of time gives one ratio at every level);
- **equal numbers of scaled factors**: ×10 on the routing weights scales both factors of QKᵀ, ×10 on the values
  one factor of W_V W_O; the like-for-like pair is routing only (W_Q, W_K) against values and readout (W_V, W_O),
  both at 1000 steps on twenty seeds, with a paired bootstrap interval;
- **the M-step compared fairly**: the linearised M-step with its step matched to the ×10 gradient step on the
  values by the norm of the first step and by its first-order decrease of the loss
  (:func:`~attention_dynamics.training.schedules.m_step_matched_rho`), and the exact M-step over W_V
  (:func:`~attention_dynamics.training.schedules.exact_value_m_step`), each against EM-like on the same seeds;
- **trajectories**: the paper's visual claim (longer, more coherent paths of the value prototypes, sharper
  specialisation under EM-like) as three paired comparisons over the five seeds at the paper's 1000 steps.

The values-only against readout-only and routing-only comparisons are read from the stored learning-rate
surface (``data/sticky_chain_lr_surface.json``, twenty seeds), and the twenty-seed SGD baseline from the
paper-scale file: those runs exist and are not repeated. ``python -m attention_dynamics compute
sticky_chain_speedup_budget`` computes the rest job by job; the chapter loads
``data/sticky_chain_speedup_budget.json`` (:data:`SPEEDUP_BUDGET`' ``load``) and records its claims with
:func:`~attention_dynamics.chapters.sticky_markov_chain.speedup_budget_report.record_speedup_budget_claims`.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import scipy.stats
import torch

from ...ledger.results import Job, StoredResult, save_results
from ...models.single_head import initial_head
from ...science.speedup import bootstrap_speedup_ci, bootstrap_speedup_ratio_ci, paper_speedup, steps_to_threshold
from ...tasks import sticky_chain
from ...training import fit
from ...training.head_engine import SingleHeadModule, closed_form_head_pass
from ...training.schedules import get_schedule, m_step_direction, m_step_matched_rho, make_backward, make_optimizer
from .lr_surface import LR_SURFACE
from .paper_scale import PAPER_SCALE
from .runs import between_symbol_share, trajectory_coherence, trajectory_length, value_prototypes

__all__ = [
    "FILE",
    "BUDGETS",
    "LEVELS",
    "LONG_SCHEDULES",
    "PAIR",
    "SpeedupBudgetSettings",
    "SETTINGS",
    "sticky_run",
    "speedup_budget_job",
    "speedup_budget_jobs",
    "time_to_level",
    "speedup_budget_results",
    "assemble_speedup_budget",
    "SPEEDUP_BUDGET",
]

#: The file the chapter loads.
FILE = "sticky_chain_speedup_budget.json"
BUDGETS = (500, 1000, 2000, 4000, 8000)
#: Loss levels as shares of the way from ln 8 down to H_min.
LEVELS = (0.1, 0.25, 0.5, 0.75)
LONG_SCHEDULES = ("sgd", "em_like", "sgd_matched", "m_step")
#: ×10 on the routing weights, and on values and readout: two scaled factors each.
PAIR = {"routing_only": "lr_qk10_v1_o1", "values_readout": "lr_qk1_v10_o10"}
LN8 = sticky_chain.UNIFORM_LOSS_NATS


@dataclass(frozen=True)
class SpeedupBudgetSettings:
    """The runs' sizes: budgets (the longest sets the long runs' length), seeds, the paired pair's seeds, the
    protocol length, the sequence length, how often the value prototypes are recorded and the bootstrap size."""

    budgets: tuple[int, ...] = BUDGETS
    seeds: tuple[int, ...] = tuple(sticky_chain.PAPER_SEEDS)
    pair_seeds: tuple[int, ...] = tuple(sticky_chain.PAPER_SEEDS) + tuple(range(1, 16))
    protocol_steps: int = 1000
    length: int = sticky_chain.SEQUENCE_LENGTH
    snapshot_every: int = 10
    bootstrap_resamples: int = 10_000

    def __post_init__(self) -> None:
        for name in ("budgets", "seeds", "pair_seeds"):
            object.__setattr__(self, name, tuple(int(x) for x in getattr(self, name)))
        b = self.budgets
        if not b or list(b) != sorted(set(b)) or b[0] < 1:
            raise ValueError(f"budgets must be positive and increasing, got {b}")
        if self.protocol_steps not in b:
            raise ValueError(f"the protocol's {self.protocol_steps} steps must be one of the budgets {b}")
        if self.protocol_steps % self.snapshot_every:
            raise ValueError("protocol_steps must be a multiple of snapshot_every")
        if len(self.seeds) < 2 or len(self.pair_seeds) < 2:
            raise ValueError("paired intervals need at least two seeds")
        if self.length < 10 or self.bootstrap_resamples < 100:
            raise ValueError("length must be at least 10 and bootstrap_resamples at least 100")


#: The sizes per scale: ``book`` (the committed file), ``fast`` (the tests').
SETTINGS: dict[str, SpeedupBudgetSettings] = {
    "fast": SpeedupBudgetSettings(budgets=(20, 40, 80), seeds=(42, 2024), pair_seeds=(42, 2024, 1), protocol_steps=40,
                                  length=400, snapshot_every=4, bootstrap_resamples=200),
    "book": SpeedupBudgetSettings(),
}



# ---------------------------------------------------------------------------------------------
# The jobs
# ---------------------------------------------------------------------------------------------


def speedup_budget_jobs(scale: str, seeds: Sequence[int] | None = None) -> list[Job]:
    """Return the jobs, cheapest and most decisive first: the matched M-steps, the exact M-step, the long runs, the
    like-for-like pair (``seeds`` replaces both the paper's seeds and the pair's)."""
    s = SPEEDUP_BUDGET.spec(scale)
    settings = dataclasses.asdict(s)
    paper = [int(x) for x in (s.seeds if seeds is None else seeds)]
    pair = [int(x) for x in (s.pair_seeds if seeds is None else seeds)]
    protocol, long = float(s.protocol_steps), float(s.budgets[-1])

    def job(key: str, cost: float, **kw: Any) -> Job:
        return Job(key, speedup_budget_job, {**kw, "settings": settings}, cost=cost)

    out = [job(f"m_step_{match}-seed{x}", protocol, kind="matched_m_step", schedule="m_step", seed=x, match=match)
           for match in ("decrease", "norm") for x in paper]
    out += [job(f"exact_m_step-seed{x}", 5 * protocol, kind="protocol", schedule="exact_m_step", seed=x)
            for x in paper]
    out += [job(f"long-{name}-seed{x}", long, kind="long", schedule=name, seed=x) for name in LONG_SCHEDULES
            for x in paper]
    out += [job(f"pair-{cond}-seed{x}", protocol, kind="protocol", schedule=name, seed=x) for cond, name in PAIR.items()
            for x in pair]
    return out


def speedup_budget_job(kind: str, schedule: str, seed: int, settings: Mapping[str, Any],
                       match: str | None = None) -> dict[str, Any]:
    """Return the JSON-ready output of one job (:func:`sticky_run`), seeded by ``seed``.

    ``long``: the longest budget plus one step, prototypes through the protocol; ``protocol``: the protocol's
    steps plus one; ``matched_m_step``: the same with the M-step's ρ matched to EM-like's value step (``match``).
    """
    s = SpeedupBudgetSettings(**settings)
    if kind == "long":
        return sticky_run(seed, schedule, s.budgets[-1] + 1, s, snapshots=schedule in ("sgd", "em_like"))
    if kind == "protocol":
        return sticky_run(seed, schedule, s.protocol_steps + 1, s)
    if kind == "matched_m_step":
        data = sticky_chain.make_sticky_chain_data(seed, length=s.length)
        x = data.x.double()
        first = closed_form_head_pass(x, initial_head(seed, dtype=torch.float64), data.y)
        grad, counts = first.grads["W_V"], first.soft_counts
        rho = m_step_matched_rho(x, grad, counts, get_schedule("em_like").value_lr, match=match)
        direction = m_step_direction(x, grad, counts)
        cosine = float((grad * direction).sum() / (torch.linalg.norm(grad) * torch.linalg.norm(direction)))
        return {**sticky_run(seed, schedule, s.protocol_steps + 1, s, rho=rho), "match": match, "cosine": cosine}
    raise ValueError(f"kind must be 'long', 'protocol' or 'matched_m_step', got {kind!r}")


def sticky_run(seed: int, schedule: str, steps: int, s: SpeedupBudgetSettings, *, rho: float | None = None,
               snapshots: bool = False) -> dict[str, Any]:
    """Return one run of the paper's head on the seed's sticky chain: the loss before every update (nats), and with
    ``snapshots`` the value prototypes every ``snapshot_every`` steps through the protocol and the values'
    between-symbol share of variance at its start and end (chapter 5's trajectory measures)."""
    sched = get_schedule(schedule)
    if rho is not None:
        sched = sched.with_rho(rho)
    data = sticky_chain.make_sticky_chain_data(seed, length=s.length)
    model = SingleHeadModule(initial_head(seed))
    at = set(range(0, s.protocol_steps + 1, s.snapshot_every)) if snapshots else set()

    def measure(step: int, m: SingleHeadModule, _loss: float) -> dict[str, Any] | None:
        if step not in at:
            return None
        out: dict[str, Any] = {"prototypes": value_prototypes(data.mu, m.W_V).tolist()}
        if step in (0, s.protocol_steps):
            out["specialization"] = between_symbol_share(data.x @ m.W_V.detach(), data.previous_symbols)
        return out

    history = fit(model, lambda step: (data.x, data.y), steps=steps, optimizer=make_optimizer(model, sched),
                  backward=make_backward(sched), callback=measure if at else None, callback_steps=at)
    recs = history.records
    out: dict[str, Any] = {"seed": int(seed), "schedule": sched.name, "steps": int(steps), "value_lr": sched.value_lr,
                           "losses": [round(float(v), 7) for v in history.losses]}
    if snapshots:
        out["snapshot_steps"] = [r["step"] for r in recs]
        out["prototypes"] = [r["prototypes"] for r in recs]
        spec = {r["step"]: r["specialization"] for r in recs if "specialization" in r}
        out["initial_specialization"], out["protocol_specialization"] = spec[0], spec[s.protocol_steps]
    return out


# ---------------------------------------------------------------------------------------------
# Assembling the stored result
# ---------------------------------------------------------------------------------------------


def time_to_level(losses: Sequence[float], level: float) -> int | None:
    """Return the first step whose loss is below ``level`` (None if the run never goes below it)."""
    t = steps_to_threshold(losses, level)
    return None if t == len(losses) else t


def _paired_t(values: Sequence[float], *, confidence: float = 0.95) -> dict[str, float]:
    v = np.asarray(values, dtype=float)
    mean = float(v.mean())
    half = float(scipy.stats.t.ppf(0.5 + confidence / 2, v.size - 1) * v.std(ddof=1) / math.sqrt(v.size))
    return {"point": mean, "low": mean - half, "high": mean + half}


def _ratio_of_means(num: np.ndarray, den: np.ndarray, *, n_boot: int, seed: int = 0,
                    confidence: float = 0.95) -> dict[str, float]:
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(num), size=(n_boot, len(num)))
    boot = num[idx].mean(1) / den[idx].mean(1)
    a = (1 - confidence) / 2
    return {"point": float(num.mean() / den.mean()), "low": float(np.quantile(boot, a)),
            "high": float(np.quantile(boot, 1 - a))}


def _trajectories(runs: Mapping[str, Sequence[Mapping[str, Any]]], s: SpeedupBudgetSettings) -> dict[str, Any]:
    """Per seed and schedule: path length, coherence, specialisation at the protocol's end; and the paired
    comparisons EM-like against SGD (length ratio as a geometric mean with a t interval on the logs)."""
    per = {}
    for name in ("sgd", "em_like"):
        rows = []
        for r in runs[name]:
            traj = np.asarray(r["prototypes"])  # (R, n_symbols, d_v), through the protocol
            rows.append({"seed": r["seed"], "length": trajectory_length(traj), "coherence": trajectory_coherence(traj),
                         "specialization": r["protocol_specialization"],
                         "initial_specialization": r["initial_specialization"]})
        per[name] = rows
    sgd, em = per["sgd"], per["em_like"]
    log_ratio = _paired_t([math.log(e["length"] / g["length"]) for e, g in zip(em, sgd)])
    ratio = {k: math.exp(v) for k, v in log_ratio.items()}
    lr_ratio = get_schedule("em_like").value_lr / get_schedule("sgd").value_lr
    return {
        "per_seed": per,
        "length_ratio": ratio,
        "length_per_lr_ratio": {k: v / lr_ratio for k, v in ratio.items()},
        "coherence_difference": _paired_t([e["coherence"] - g["coherence"] for e, g in zip(em, sgd)]),
        "specialization_difference": _paired_t([e["specialization"] - g["specialization"] for e, g in zip(em, sgd)]),
    }


def speedup_budget_results(scale: str, outputs: Mapping[str, Any]) -> dict[str, Any]:
    """Return the stored payload: the metric at every budget, the time-to-level ratios, the routing-only against
    values-and-readout comparison, the M-step comparisons, the trajectories, and the settings and sources."""
    s = SPEEDUP_BUDGET.spec(scale)
    by_kind: dict[str, dict[str, list]] = {}
    for job in speedup_budget_jobs(scale):
        if job.key in outputs:
            kw = job.kwargs
            tag = kw["kind"] + (f"_{kw['match']}" if kw.get("match") else "")
            by_kind.setdefault(tag, {}).setdefault(kw["schedule"], []).append(outputs[job.key])
    long = by_kind["long"]
    seeds = [r["seed"] for r in long["sgd"]]
    for name, runs in long.items():
        if [r["seed"] for r in runs] != seeds:
            raise ValueError(f"long runs of {name} do not cover the seeds {seeds}")
    curves = {name: np.array([r["losses"] for r in runs]) for name, runs in long.items()}  # (seeds, steps + 1)
    hmin = sticky_chain.bayes_floor_nats(sticky_chain.transition_matrix("reference"))
    n_boot = s.bootstrap_resamples
    budgets: dict[str, Any] = {}
    for B in s.budgets:
        finals = curves["sgd"][:, B]  # SGD's loss after B updates
        row = {"threshold": float(finals.mean()), "sgd_self": paper_speedup(finals, curves["sgd"][:, :B])["speedup"]}
        for name in LONG_SCHEDULES[1:]:
            speed = paper_speedup(finals, curves[name][:, :B])
            ci = bootstrap_speedup_ci(finals, curves[name][:, :B], n_resamples=n_boot)
            row[name] = {"speedup": speed["speedup"], "first_steps": speed["first_steps"], "low": ci["low"],
                         "high": ci["high"], "censored": int(sum(t == B for t in speed["first_steps"]))}
        budgets[str(B)] = row
    levels: dict[str, Any] = {}
    exact = by_kind.get("protocol", {}).get("exact_m_step", [])
    exact_curves = {"exact_m_step": np.array([r["losses"] for r in exact])} if [r["seed"] for r in exact] == seeds else {}
    for f in LEVELS:
        level = LN8 - f * (LN8 - hmin)
        times = {name: [time_to_level(c, level) for c in c_all] for name, c_all in {**curves, **exact_curves}.items()}
        row = {"loss": level, "times": times}
        t_sgd = times["sgd"]
        for name in (*LONG_SCHEDULES[1:], *exact_curves):
            ok = all(t is not None for t in t_sgd + times[name])
            row[name] = _ratio_of_means(np.array(t_sgd, float), np.maximum(np.array(times[name], float), 1.0),
                                        n_boot=n_boot) if ok else None
        levels[f"{round(100 * f)}pct"] = row
    protocol = s.protocol_steps
    finals_p = curves["sgd"][:, protocol]
    m_steps: dict[str, Any] = {"seeds": seeds, "baseline": "SGD's loss after the protocol, long runs"}
    em_p = curves["em_like"][:, :protocol]
    for tag, name in (("matched_m_step_decrease", "equal_decrease"), ("matched_m_step_norm", "equal_norm"),
                      ("protocol", "exact")):
        runs = by_kind.get(tag, {}).get("exact_m_step" if name == "exact" else "m_step", [])
        if [r["seed"] for r in runs] != seeds:
            continue
        c = np.array([r["losses"] for r in runs])
        speed = paper_speedup(finals_p, c[:, :protocol])
        entry = {"speedup": speed["speedup"], "first_steps": speed["first_steps"],
                 "speedup_ci": bootstrap_speedup_ci(finals_p, c[:, :protocol], n_resamples=n_boot),
                 "over_em_like": bootstrap_speedup_ratio_ci(finals_p, c[:, :protocol], em_p, n_resamples=n_boot),
                 "final_loss": [float(v) for v in c[:, protocol]], "final_loss_ci": _paired_t(c[:, protocol])}
        if name != "exact":
            entry["rho"] = [r.get("value_lr") for r in runs]
            entry["cosine"] = [r["cosine"] for r in runs]
        m_steps[name] = entry
    m_steps["em_like_speedup"] = paper_speedup(finals_p, em_p)["speedup"]
    m_steps["em_like_final_loss"] = [float(v) for v in curves["em_like"][:, protocol]]
    pair = _pair_comparison(by_kind.get("protocol", {}), s, scale)
    every = 20
    return {
        "about": "What the sticky-chain speed-up measures (chapter 5); written by "
                 "`python -m attention_dynamics compute sticky_chain_speedup_budget`.",
        "scale": scale, "settings": dataclasses.asdict(s), "hmin_nats": hmin, "ln8": LN8, "seeds": seeds,
        "budgets": budgets, "levels": levels, "m_step": m_steps, "pair": pair,
        "trajectories": _trajectories(long, s),
        "mean_curves": {"steps": list(range(0, s.budgets[-1] + 1, every)),
                        **{name: c[:, ::every].mean(0).round(6).tolist() for name, c in curves.items()}},
        "surface_comparisons": _surface_comparisons() if scale == "book" else None,
    }


def _pair_comparison(protocol_runs: Mapping[str, Sequence[Mapping[str, Any]]], s: SpeedupBudgetSettings,
                     scale: str) -> dict[str, Any] | None:
    """Routing only against values and readout at the protocol's budget, paired over the pair seeds.

    The threshold is SGD's mean final loss after the protocol on the same seeds: at the book scale from the
    paper-scale file (the same computation, already run on these twenty seeds); at a reduced scale, where that
    file does not apply, the values-and-readout runs' own final losses stand in for it.
    """
    a, b = protocol_runs.get(PAIR["routing_only"], []), protocol_runs.get(PAIR["values_readout"], [])
    if not a or [r["seed"] for r in a] != [r["seed"] for r in b]:
        return None
    seeds = [r["seed"] for r in a]
    if scale == "book":
        heavy = PAPER_SCALE.load()["ci"]["reference"]
        finals = {int(sd): float(f["loss"]) for sd, f in zip(heavy["seeds"]["sgd"], heavy["final"]["sgd"])}
        source = "paper-scale file's SGD final losses"
    else:
        finals = {r["seed"]: float(r["losses"][-1]) for r in b}
        source = "reduced-size stand-in: the values-and-readout runs' final losses"
    base = [finals[x] for x in seeds]
    n = s.protocol_steps
    ca, cb = [r["losses"][:n] for r in a], [r["losses"][:n] for r in b]
    out: dict[str, Any] = {"seeds": seeds, "baseline": source}
    for name, c in (("routing_only", ca), ("values_readout", cb)):
        speed = paper_speedup(base, c)
        out[name] = {"speedup": speed["speedup"], "first_steps": speed["first_steps"],
                     "ci": bootstrap_speedup_ci(base, c, n_resamples=s.bootstrap_resamples)}
    out["routing_over_values_readout"] = bootstrap_speedup_ratio_ci(base, ca, cb, n_resamples=s.bootstrap_resamples)
    return out


def _surface_comparisons() -> dict[str, Any]:
    """The stored learning-rate surface's paired comparisons of values only against the other single groups."""
    surface = LR_SURFACE.load()
    twenty = surface["twenty_seeds"]
    return {"seeds": twenty["seeds"], "source": "sticky_chain_lr_surface.json (twenty seeds)",
            **{k: twenty["comparisons"][k] for k in ("values_only_over_readout_only", "values_only_over_routing_only")}}


def assemble_speedup_budget(scale: str, outputs: Mapping[str, Any], folder: Path) -> None:
    """Write ``sticky_chain_speedup_budget.json`` (:func:`speedup_budget_results`)."""
    save_results(speedup_budget_results(scale, outputs), folder / FILE)


SPEEDUP_BUDGET = StoredResult(
    name="sticky_chain_speedup_budget", chapter="sticky_markov_chain",
    about="what the sticky-chain speed-up measures: the paper's metric against budget and loss level (8000-step runs), "
          "the like-for-like pair on twenty seeds, the M-step matched and exact, the trajectories",
    files=(FILE,), specs=SETTINGS, committed_scale="book",
    expected={"fast": "20 jobs, under a minute", "book": "75 jobs: 20 runs of 8001 steps (~2.5 CPU-min each), 15 M-step "
                                                        "runs and 40 pair runs of 1001 steps, ~70 CPU-min"},
    jobs=speedup_budget_jobs, assemble=assemble_speedup_budget)

