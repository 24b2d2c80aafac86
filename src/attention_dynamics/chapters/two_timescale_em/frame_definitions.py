"""Frame versus precision under four definitions on chapter 4's recall head (chapter 4's stored result
``frame_definitions``): which settles first, and when, under plain SGD and Adam at three run lengths.

Chapter 4 decides the order of the routing frame (``W_Q``, ``W_K``: the attention pattern) and the values'
precision with one operationalisation. This result decides it under four, fixed before the runs, on ten seeds of
the chapter's recall head (the same data, initialisation and loss), under plain SGD and Adam, at run lengths of
1000, 2000 and 4000 steps. Each definition gives, per run, a frame step ``t_F`` and a precision step ``t_P``; the
frame "settles first" on a run when ``t_F < t_P``.

- ``path`` (chapter 4's): the first step from which the path each quantity still travels is at most 10 % of
  its whole path over the run (:func:`~attention_dynamics.science.settling.path_settling_step`); the frame is the query
  rows' attention pattern, the precision the sources' value vectors, both on a fixed probe set.
- ``function`` (Paper I's reading, and chapter 6's): function-level measures. The frame is the attention mass
  on the source holding the answer (the E-step's quality), on a linear scale; the precision is the probe loss
  on a log scale, because it falls by orders of magnitude. Each has settled at the first step from which it
  stays within 10 % of its total change from its final value (:func:`~attention_dynamics.science.settling.settle_step`).
- ``function_log``: the same rule with both errors on a log scale: the attention mass *off* the answer's
  source, 1 − mass, against the probe loss. Symmetric in form: two errors, each falling toward 0.
- ``intervention``: the frame is in place at the earliest step t from which freezing ``W_Q``, ``W_K`` (and
  training the rest to the end) costs at most 1 % of the untrained gap in final probe loss, at t and at every
  later freeze step tried; the precision has plateaued at the first step from which the probe loss stays
  within the same 1 % of the untrained gap of its final value. Both are in the same currency (final probe loss).

With a constant learning rate, a run of H steps is the first H steps of a longer one, so each seed and
optimiser is trained once to the longest horizon and every horizon is read from it; a frozen continuation
records its loss at every horizon too. Freeze steps are searched from the latest down (an early freeze costs
the most and runs the longest, and is needed only until one fails), then the cell around the boundary is
bisected to the recording resolution wherever the precision step falls inside it, so the order is decided at
a resolution finer than the difference it reads.

Per definition, optimiser and horizon, the file holds the share of seeds whose frame settles first with a
Clopper–Pearson 95 % interval (:func:`~attention_dynamics.diagnostics.frame_order.order_share`; an interval that
straddles 1/2 leaves the order undecided) and the mean of ``t_P − t_F`` with a t interval over seeds
(:func:`~attention_dynamics.diagnostics.frame_order.paired_gap`). One job per optimiser and seed
(``python -m attention_dynamics compute frame_definitions``); the chapter loads ``data/frame_definitions.json``
(:data:`FRAME_DEFINITIONS`' ``load``; chapters 2 and 8 read it through
:func:`~attention_dynamics.ledger.frame_results.load_frame_definitions`) and records its claims with
:func:`~attention_dynamics.chapters.two_timescale_em.frame_definitions_report.record_frame_definition_claims`.
"""

from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import torch

from ...core.seeding import stream, torch_generator
from ...diagnostics.frame_order import (
    FREE_FREEZE_RATIO,
    attention_entropy_nats,
    order_share,
    paired_gap,
    ratio_of_means_ci,
)
from ...ledger.frame_results import FRAME_DEFINITIONS_FILE
from ...ledger.results import Job, StoredResult, save_results
from ...models.single_head import SingleHeadModule
from ...science.attention import init_single_head
from ...science.dynamics import attention_distance, attention_on_correct_source, value_distance
from ...science.recall_head import query_forward, query_loss
from ...science.settling import first_true_for_good, path_settling_step, settle_step
from ...tasks import specialization as task
from ...training import fit
from ...training.recall_head import RECALL_TASK_SIZES

__all__ = [
    "FILE",
    "DEFINITIONS",
    "OPTIMISERS",
    "HEAD",
    "RecallHeadFrameSettings",
    "SETTINGS",
    "head_run",
    "frame_definitions_job",
    "frame_definitions_jobs",
    "assemble_frame_definitions",
    "FRAME_DEFINITIONS",
]

#: The file the chapter loads (also read by chapters 2 and 8 for the row's verdict, through the library).
FILE = FRAME_DEFINITIONS_FILE
DEFINITIONS = ("path", "function", "function_log", "intervention")
OPTIMISERS = ("sgd", "adam")
#: Chapter 4's head (the defaults of :func:`~attention_dynamics.training.recall_head.train_specialization_head`).
HEAD = {"d_k": 8, "d_v": 8, "init_std": 0.1}


@dataclass(frozen=True)
class RecallHeadFrameSettings:
    """Chapter 4's recall head under four definitions: run lengths, learning rates, sizes, recording, freeze grid and
    the thresholds.

    ``horizons``: the run lengths read (each a multiple of ``record_every`` and ``path_every``);
    ``sgd_lr``: chapter 4's; ``adam_lr``: chosen on a seed outside ``seeds`` for a final probe loss at the middle
    horizon of the same order as SGD's; ``freeze_grid``: the coarse freeze steps (multiples of ``record_every``);
    ``margin_fraction``: the margin the job's freeze search brackets its boundary with (1 % of the untrained gap, a
    search aid: the intervention definition is read at assembly against 1.25 times the trained run's own loss,
    :func:`intervention_steps`); ``fraction``: the
    settling rules' 10 %.
    """

    horizons: tuple[int, ...] = (1000, 2000, 4000)
    sgd_lr: float = 0.5
    adam_lr: float = 0.003
    n_train: int = 256
    n_probe: int = 256
    path_every: int = 2
    record_every: int = 10
    seeds: tuple[int, ...] = tuple(range(10))
    freeze_grid: tuple[int, ...] = (0, 100, 200, 300, 400, 600, 800, 1000, 1500, 2000, 3000)
    margin_fraction: float = 0.01
    fraction: float = 0.1

    def __post_init__(self) -> None:
        h = self.horizons
        if not h or any(x <= 0 for x in h) or list(h) != sorted(set(h)):
            raise ValueError(f"horizons must be positive and increasing, got {h}")
        for name in ("path_every", "record_every", "n_train", "n_probe"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be a positive integer, got {getattr(self, name)}")
        if any(x % self.record_every or x % self.path_every for x in h):
            raise ValueError(f"every horizon must be a multiple of record_every and path_every, got {h}")
        g = self.freeze_grid
        if not g or list(g) != sorted(set(g)) or g[0] < 0 or g[-1] >= h[-1] or any(t % self.record_every for t in g):
            raise ValueError(f"freeze_grid must increase from >= 0, below the last horizon, in multiples of "
                             f"record_every, got {g}")
        if not (self.sgd_lr > 0 and self.adam_lr > 0):
            raise ValueError("learning rates must be positive")
        if not (0 < self.fraction < 1 and 0 < self.margin_fraction < 1):
            raise ValueError("fraction and margin_fraction must lie in (0, 1)")
        if not self.seeds:
            raise ValueError("need at least one seed")

    def lr(self, optimiser: str) -> float:
        """Return the learning rate of ``optimiser`` (``"sgd"`` or ``"adam"``)."""
        if optimiser not in OPTIMISERS:
            raise ValueError(f"optimiser must be one of {OPTIMISERS}, got {optimiser!r}")
        return self.sgd_lr if optimiser == "sgd" else self.adam_lr


#: The sizes per scale: ``book`` (the committed file), ``fast`` (the tests').
SETTINGS: dict[str, RecallHeadFrameSettings] = {
    "fast": RecallHeadFrameSettings(horizons=(100, 200, 400), n_train=32, n_probe=32, seeds=(0, 1, 2),
                                    freeze_grid=(0, 50, 100, 200, 300)),
    "book": RecallHeadFrameSettings(),
}



def _from_json(settings: Mapping[str, Any]) -> RecallHeadFrameSettings:
    return RecallHeadFrameSettings(**{k: tuple(v) if isinstance(v, list) else v for k, v in settings.items()})


# ---------------------------------------------------------------------------------------------
# The jobs: one recall head per optimiser and seed
# ---------------------------------------------------------------------------------------------


def frame_definitions_job(optimiser: str, seed: int, settings: Mapping[str, Any]) -> dict[str, Any]:
    """Return one job's output: :func:`head_run` of ``seed`` under ``optimiser`` with ``settings`` (a
    :class:`RecallHeadFrameSettings` as a dict)."""
    return head_run(int(seed), optimiser, _from_json(settings))


def frame_definitions_jobs(scale: str, seeds: Sequence[int] | None = None) -> list[Job]:
    """Return one job per optimiser and seed (``seeds`` instead of the scale's own)."""
    s = FRAME_DEFINITIONS.spec(scale)
    settings = dataclasses.asdict(s)
    return [Job(f"{opt}-seed{seed}", frame_definitions_job, {"optimiser": opt, "seed": int(seed), "settings": settings},
                cost=float(s.horizons[-1])) for opt in OPTIMISERS for seed in (s.seeds if seeds is None else seeds)]


# ---------------------------------------------------------------------------------------------
# One recall head, read under every definition
# ---------------------------------------------------------------------------------------------


def _optimizer(model: SingleHeadModule, optimiser: str, lr: float) -> torch.optim.Optimizer:
    groups = model.param_groups(lr)
    return torch.optim.SGD(groups, lr=lr) if optimiser == "sgd" else torch.optim.Adam(groups, lr=lr)


def head_run(seed: int, optimiser: str, s: RecallHeadFrameSettings, *, value_scale: float = 1.0,
             intervention: bool = True) -> dict[str, Any]:
    """Return one recall head's measurements for every definition and horizon (JSON-ready).

    ``value_scale`` = c reparametrises the head before training: W_V ← c·W_V and W_O ← W_O / c, the same function
    (the logits are g W_O with g linear in W_V) on different coordinates. ``intervention=False`` skips the freeze
    search (the intervention definition is then absent from ``settle``).

    The data, probe set and initialisation are chapter 4's for ``seed`` (so the SGD run is chapter 4's run).
    Keys: ``steps`` and the curves ``probe_loss`` (nats), ``correct_mass``, ``attention_entropy`` (nats) every
    ``record_every`` steps; ``frame_path``/``value_path`` increments every ``path_every`` steps; ``freeze``:
    horizon → evaluated freeze step → final probe loss of the frozen run; and ``settle``: horizon → definition →
    ``{"frame", "precision"}`` steps (None where a quantity never settles within the run).
    """
    lr, H = s.lr(optimiser), s.horizons[-1]
    data_gen = torch_generator(stream(seed, "data"))
    train = task.sample_specialization_batch(s.n_train, generator=data_gen, **RECALL_TASK_SIZES)
    probe = task.sample_specialization_batch(s.n_probe, generator=data_gen, **RECALL_TASK_SIZES)
    d_in = task.input_dim(RECALL_TASK_SIZES["n_tags"], RECALL_TASK_SIZES["n_labels"])
    init = init_single_head(d_in, HEAD["d_k"], HEAD["d_v"], RECALL_TASK_SIZES["n_labels"], std=HEAD["init_std"],
                            generator=torch_generator(stream(seed, "init")))
    if not value_scale > 0:
        raise ValueError(f"value_scale must be positive, got {value_scale!r}")
    if value_scale != 1.0:
        init = dataclasses.replace(init, W_V=init.W_V * value_scale, W_O=init.W_O / value_scale)
    model = SingleHeadModule(init)
    optimizer = _optimizer(model, optimiser, lr)
    K = RECALL_TASK_SIZES["n_sources"]

    def loss_fn(module: SingleHeadModule, batch) -> torch.Tensor:
        return query_loss(module.head_params(live=True), batch)

    path_at = set(range(0, H, s.path_every)) | {H}
    record_at = set(range(0, H, s.record_every)) | {H}
    prev: list[torch.Tensor] = []
    curves: dict[str, list[float]] = {"frame_path": [], "value_path": [], "probe_loss": [], "correct_mass": [],
                                      "attention_entropy": []}
    checkpoints: dict[int, dict[str, Any]] = {}

    def measure(step: int, module: SingleHeadModule, _loss: float) -> None:
        with torch.no_grad():
            fwd = query_forward(module.head_params(live=True), probe)
            if step in path_at:
                alpha, v = fwd.alpha[:, K:].clone(), fwd.v[:, :K].clone()  # (B, Q, T), (B, K, d_v)
                if prev:
                    curves["frame_path"].append(attention_distance(prev[0], alpha))
                    curves["value_path"].append(value_distance(prev[1], v))
                prev[:] = [alpha, v]
            if step in record_at:
                curves["probe_loss"].append(float(fwd.loss))
                curves["correct_mass"].append(attention_on_correct_source(fwd.alpha, probe))
                curves["attention_entropy"].append(attention_entropy_nats(fwd.alpha[:, K:]))
                # every recorded step is a possible freeze step (the head is tiny: a few kB per copy)
                checkpoints[step] = {"model": copy.deepcopy(module.state_dict()),
                                     "optim": copy.deepcopy(optimizer.state_dict())}

    fit(model, lambda step: train, steps=H, optimizer=optimizer, loss_fn=loss_fn, callback=measure,
        callback_steps=path_at | record_at)
    steps = np.array(sorted(record_at))
    loss = np.array(curves["probe_loss"])

    def frozen_run(t: int) -> dict[int, float]:
        """Final probe loss at every horizon above ``t`` of the run whose W_Q, W_K stop at step t."""
        m = SingleHeadModule(init)
        m.load_state_dict(checkpoints[t]["model"])
        opt = _optimizer(m, optimiser, lr)
        opt.load_state_dict(checkpoints[t]["optim"])
        m.W_Q.requires_grad_(False)
        m.W_K.requires_grad_(False)
        ends = {h - t: h for h in s.horizons if h > t}
        out: dict[int, float] = {}

        def at_end(step: int, module: SingleHeadModule, _loss: float) -> None:
            with torch.no_grad():
                out[ends[step]] = float(query_loss(module.head_params(), probe))

        fit(m, lambda step: train, steps=H - t, optimizer=opt, loss_fn=loss_fn, callback=at_end,
            callback_steps=set(ends))
        return out

    freeze: dict[int, dict[int, float]] = {h: {} for h in s.horizons}

    def evaluate(t: int) -> None:
        if all(t in freeze[h] for h in s.horizons if h > t):
            return
        for h, value in frozen_run(t).items():
            freeze[h][t] = value

    def passes(h: int, t: int) -> bool:
        i_h = int(np.searchsorted(steps, h))
        margin = s.margin_fraction * (loss[0] - loss[i_h])
        return freeze[h][t] - loss[i_h] <= margin

    # Coarse search from the latest freeze step down, until every horizon has met a failing step.
    failed: dict[int, int | None] = {h: None for h in s.horizons}
    for t in sorted(s.freeze_grid, reverse=True) if intervention else ():
        open_h = [h for h in s.horizons if h > t and failed[h] is None]
        if not open_h:
            continue
        evaluate(t)
        for h in open_h:
            if not passes(h, t):
                failed[h] = t
    settle: dict[str, dict[str, dict[str, int | None]]] = {}
    for h in s.horizons:
        i_h = int(np.searchsorted(steps, h))
        settle[str(h)] = _settle_steps(steps[: i_h + 1], curves, h, s)
        if intervention:
            precision_int = _plateau_step(steps[: i_h + 1], loss[: i_h + 1], s.margin_fraction)
            frame_int = _bisect_frame_step(h, failed[h], s, freeze, evaluate, passes, precision_int)
            settle[str(h)]["intervention"] = {"frame": frame_int, "precision": precision_int}
    return {
        "seed": int(seed), "optimiser": optimiser, "lr": lr, "value_scale": float(value_scale),
        "settings": dataclasses.asdict(s),
        "steps": steps.tolist(), **{k: [float(x) for x in v] for k, v in curves.items()},
        "freeze": {str(h): {str(t): v for t, v in sorted(f.items())} for h, f in freeze.items()},
        "settle": settle,
    }


def _plateau_step(steps: np.ndarray, loss: np.ndarray, margin_fraction: float) -> int:
    """Return the first recorded step from which the loss stays within ``margin_fraction`` of its untrained gap
    of its last value (a run whose loss ends above its start has no gap: the margin is then 0)."""
    margin = margin_fraction * max(loss[0] - loss[-1], 0.0)
    return int(steps[first_true_for_good(loss - loss[-1] <= margin)])


def _bisect_frame_step(h, failed_at, s, freeze, evaluate, passes, precision_step) -> int:
    """Return the intervention's frame step at horizon ``h``: the first evaluated freeze step after the last failing
    one (``h`` itself if the latest step tried fails), with the boundary cell bisected down to ``record_every``
    steps while the precision step lies inside it."""
    tried = sorted(t for t in freeze[h])
    if failed_at is None:  # every freeze step tried passes, the earliest included
        return int(tried[0])
    later = [t for t in tried if t > failed_at]
    lo, hi = failed_at, (later[0] if later else h)
    while hi - lo > s.record_every and lo < precision_step < hi:
        mid = lo + ((hi - lo) // 2 // s.record_every) * s.record_every
        mid = max(mid, lo + s.record_every)
        evaluate(mid)
        if passes(h, mid):
            hi = mid
        else:
            lo = mid
    return int(hi)


def _settle_steps(steps: np.ndarray, curves: Mapping[str, list[float]], h: int, s: RecallHeadFrameSettings
                  ) -> dict[str, dict[str, int | None]]:
    """Return definition → frame and precision steps of the first ``h`` steps (path and the function definitions)."""
    n_path = h // s.path_every
    path_steps = np.arange(0, h + 1, s.path_every)
    frame_inc, value_inc = np.array(curves["frame_path"][:n_path]), np.array(curves["value_path"][:n_path])
    mass = np.array(curves["correct_mass"][: len(steps)])
    loss = np.array(curves["probe_loss"][: len(steps)])
    return {
        "path": {"frame": path_settling_step(path_steps, frame_inc, s.fraction),
                 "precision": path_settling_step(path_steps, value_inc, s.fraction)},
        "function": {"frame": settle_step(steps, mass, fraction=s.fraction),
                     "precision": settle_step(steps, loss, fraction=s.fraction, log=True)},
        "function_log": {"frame": settle_step(steps, np.clip(1.0 - mass, 1e-300, None), fraction=s.fraction, log=True),
                         "precision": settle_step(steps, loss, fraction=s.fraction, log=True)},
    }


def _mean_curve(runs: Sequence[Mapping[str, Any]], key: str, every: int) -> list[float]:
    return np.mean([np.asarray(r[key])[::every] for r in runs], axis=0).round(7).tolist()



def intervention_steps(run: Mapping[str, Any], horizon: int, ratio: float = FREE_FREEZE_RATIO) -> dict[str, int]:
    """Return the intervention's frame and precision steps of one run at ``horizon``, against the trained run's own
    loss: the frame is in place from the earliest freeze step from which every frozen run (at that step and each
    later one tried) ends within ``ratio`` times the unfrozen run's final probe loss; the precision has settled
    from the first recorded step from which the probe loss stays within the same factor of its final value."""
    steps, loss = np.asarray(run["steps"]), np.asarray(run["probe_loss"], dtype=float)
    i_h = int(np.searchsorted(steps, horizon))
    final = float(loss[i_h])
    frozen = sorted((int(t), float(v)) for t, v in run["freeze"][str(horizon)].items())
    ok = [v <= ratio * final for _, v in frozen]
    frame = next((t for k, (t, _) in enumerate(frozen) if all(ok[k:])), int(horizon))
    precision = int(steps[first_true_for_good(loss[: i_h + 1] <= ratio * final)])
    return {"frame": int(frame), "precision": precision}


def assemble_frame_definitions(scale: str, outputs: Mapping[str, Any], folder: Path) -> None:
    """Write ``frame_definitions.json``: settings, and per optimiser, horizon and definition the per-seed steps, the
    share of seeds whose frame settles first (:func:`~attention_dynamics.diagnostics.frame_order.order_share`) and
    the paired gap; the gaps' growth from the shortest to the longest horizon; mean curves and the freeze costs.

    The intervention definition is read here from each run's freeze results (:func:`intervention_steps`), against the
    trained run's own loss (:data:`~attention_dynamics.diagnostics.frame_order.FREE_FREEZE_RATIO`)."""
    s = FRAME_DEFINITIONS.spec(scale)
    toy: dict[str, Any] = {}
    for opt in OPTIMISERS:
        runs = sorted((o for k, o in outputs.items() if k.startswith(f"{opt}-")), key=lambda r: r["seed"])
        for r in runs:
            for h in s.horizons:
                r["settle"][str(h)]["intervention"] = intervention_steps(r, h)
        if not runs:
            continue
        block: dict[str, Any] = {"seeds": [r["seed"] for r in runs], "lr": runs[0]["lr"], "horizons": {}}
        for h in s.horizons:
            by_def = {}
            for d in DEFINITIONS:
                frame = [r["settle"][str(h)][d]["frame"] for r in runs]
                precision = [r["settle"][str(h)][d]["precision"] for r in runs]
                by_def[d] = {"frame": frame, "precision": precision, **order_share(frame, precision),
                             "gap": paired_gap(frame, precision)}
            block["horizons"][str(h)] = by_def
        short, long = str(s.horizons[0]), str(s.horizons[-1])
        block["gap_horizon_ratio"] = {}
        for d in DEFINITIONS:
            gap = {hz: np.subtract(block["horizons"][hz][d]["precision"], block["horizons"][hz][d]["frame"])
                   for hz in (short, long)}
            block["gap_horizon_ratio"][d] = ratio_of_means_ci(gap[long].astype(float), gap[short].astype(float))
        every = max(1, len(runs[0]["steps"]) // 200)
        block["curves"] = {"steps": runs[0]["steps"][::every],
                           **{k: _mean_curve(runs, k, every) for k in ("probe_loss", "correct_mass")}}
        block["freeze"] = {str(r["seed"]): r["freeze"] for r in runs}
        toy[opt] = block
    save_results({"about": "Frame versus precision under four definitions on chapter 4's recall head; written by "
                           "`python -m attention_dynamics compute frame_definitions`.",
                  "scale": scale, "settings": dataclasses.asdict(s), "free_ratio": FREE_FREEZE_RATIO,
                  "definitions": list(DEFINITIONS),
                  "main_horizon": s.horizons[len(s.horizons) // 2], "toy": toy}, folder / FILE)


FRAME_DEFINITIONS = StoredResult(
    name="frame_definitions", chapter="two_timescale_em",
    about="frame versus precision under four definitions on chapter 4's recall head: SGD and Adam, three run "
          "lengths, ten seeds",
    files=(FILE,), specs=SETTINGS, committed_scale="book",
    expected={"fast": "6 jobs, about a minute", "book": "20 jobs (10 seeds × SGD and Adam, 4000 steps each with "
                                                       "their freeze continuations, ~2.5 CPU-min each), ~50 CPU-min"},
    jobs=frame_definitions_jobs, assemble=assemble_frame_definitions)
