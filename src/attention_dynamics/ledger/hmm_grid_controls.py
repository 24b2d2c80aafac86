"""The stored result ``hmm_grid_controls`` (declared with chapter 9's routing controls, read by chapters 6, 7 and 9):
the routing controls that the first result (``routing_controls``) leaves
out, chapter 6's HMM transformer and chapter 7's transformer on its three tunnels, each trained with its routing
learned, removed (uniform attention) and frozen at initialisation.

Chapter 8 diagnoses the models chapter 6 trains, so the HMM transformer's controls are chapter 8's too. The runs are
the library's (:func:`~attention_dynamics.diagnostics.routing_need.tunnel_run` and
:func:`~attention_dynamics.diagnostics.routing_need.architecture_run`), with the same job names and arguments as
``routing_controls`` would give them, and the assembly writes the same blocks (``tunnels`` and ``architectures``), so
:func:`with_hmm_grid_controls` adds them to the routing controls and the chapter's table, figure and claims read them
as they read the others. ``python -m attention_dynamics compute hmm_grid_controls`` writes
``data/hmm_grid_controls.json``; :func:`load_hmm_grid_controls` reads it and :func:`glue_hmm_grid_controls` states its
numbers in a chapter's prose.
"""

from __future__ import annotations

import copy
import dataclasses
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from ..diagnostics import routing_need
from ..training.wind_tunnels import HMM_TUNNELS, HMMTraining
from .results import Job, load_data, save_results
from .routing_controls import ARCHITECTURE_TASKS, ARCHITECTURE_TRAINING, TUNNEL_ROUTINGS, json_ready

__all__ = ["FILE", "HmmGridControlSettings", "SETTINGS", "hmm_grid_jobs", "assemble_hmm_grid",
           "with_hmm_grid_controls", "load_hmm_grid_controls", "HMM_GRID_GLUE", "ANSWER_WORDS", "hmm_grid_numbers",
           "glue_hmm_grid_controls"]

#: The file the chapter loads.
FILE = "hmm_grid_controls.json"


@dataclass(frozen=True)
class HmmGridControlSettings:
    """Chapter 6's HMM transformer (``hmm``) on ``hmm_seeds``, with ``n_eval`` held-out sequences for its
    calibration; chapter 7's transformer (``architecture_training``) on its tunnels (``architecture_tasks``) on
    ``architecture_seeds``."""

    hmm: HMMTraining = HMM_TUNNELS["book"]
    hmm_seeds: tuple[int, ...] = (0, 1, 2, 3)
    architecture_tasks: tuple[Mapping[str, Any], ...] = ARCHITECTURE_TASKS
    architecture_training: Mapping[str, Any] = field(default_factory=lambda: dict(ARCHITECTURE_TRAINING))
    architecture_seeds: tuple[int, ...] = (0, 1, 2, 3, 4)
    n_eval: int = 1000

    def __post_init__(self) -> None:
        if isinstance(self.hmm, Mapping):
            object.__setattr__(self, "hmm", routing_need.tunnel_settings("hmm", self.hmm))
        object.__setattr__(self, "architecture_tasks", tuple(dict(t) for t in self.architecture_tasks))
        for name in ("hmm_seeds", "architecture_seeds"):
            seeds = tuple(int(s) for s in getattr(self, name))
            if len(seeds) < 2 or len(set(seeds)) != len(seeds) or min(seeds) < 0:
                raise ValueError(f"{name} must be at least two distinct non-negative seeds, got {seeds}")
            object.__setattr__(self, name, seeds)
        if int(self.n_eval) < 1:
            raise ValueError(f"n_eval must be a positive integer, got {self.n_eval}")

    def to_json(self) -> dict[str, Any]:
        """Return the settings as plain JSON values."""
        return json_ready(dataclasses.asdict(self))


#: The sizes per scale: ``book`` (the committed file), ``fast`` (the tests').
SETTINGS: dict[str, HmmGridControlSettings] = {
    "fast": HmmGridControlSettings(hmm=HMM_TUNNELS["fast"], hmm_seeds=(0, 1),
                                   architecture_tasks=({"name": "bijection", "V": 5, "L": 5},
                                                       {"name": "binding", "n_pairs": 3, "n_queries": 3, "n_keys": 6,
                                                        "n_values": 6}),
                                   architecture_training={"target_params": 6000, "steps": 20, "batch_size": 16,
                                                          "lr": 2e-3, "eval_sequences": 64},
                                   architecture_seeds=(0, 1), n_eval=64),
    "book": HmmGridControlSettings(),
}


def _spec(scale: str) -> HmmGridControlSettings:
    if scale not in SETTINGS:
        raise ValueError(f"hmm_grid_controls has scales {', '.join(SETTINGS)}, got {scale!r}")
    return SETTINGS[scale]


def hmm_grid_jobs(scale: str, seeds: Sequence[int] | None = None) -> list[Job]:
    """Return every job at ``scale`` (the result keeps its own seeds: ``seeds`` must be None): per seed and routing,
    one HMM transformer and one chapter-7 transformer per tunnel."""
    if seeds is not None:
        raise ValueError("hmm_grid_controls runs its own seeds per task (see its settings)")
    s = _spec(scale)
    fields = json_ready(dataclasses.asdict(s.hmm))
    jobs = [Job(f"hmm-{routing}-seed{seed}", routing_need.tunnel_run,
                {"task": "hmm", "settings": fields, "seed": seed, "routing": routing, "n_eval": s.n_eval},
                cost=4.0 * s.hmm.steps)
            for seed in s.hmm_seeds for routing in TUNNEL_ROUTINGS]
    for index, task in enumerate(s.architecture_tasks):
        for seed in s.architecture_seeds:
            for routing in TUNNEL_ROUTINGS:
                jobs.append(Job(f"architectures-{task['name']}-{routing}-seed{seed}", routing_need.architecture_run,
                                {"task": dict(task), "task_index": index, "training": dict(s.architecture_training),
                                 "seed": seed, "routing": routing}, cost=2.0 * s.architecture_training["steps"]))
    return jobs


def _costs(per: Mapping[str, Sequence[Mapping[str, Any]]]) -> dict[str, Any]:
    """Each control's cost against the trained model over paired seeds (KL from the exact posterior), and the
    verdict it gives."""
    trained = [r["kl_bits"] for r in per["learned"]]
    start = [r["untrained_kl_bits"] for r in per["learned"]]
    out = {}
    for control in ("uniform", "frozen"):
        cost = routing_need.control_cost(trained, [r["kl_bits"] for r in per[control]], start)
        out[control] = {**cost, "verdict": routing_need.routing_verdict(cost["ratio"])}
    return out


def _no_nan_accuracy(run: Mapping[str, Any]) -> dict[str, Any]:
    """A chapter-7 run with its accuracy as None where the task has none (HMM filtering predicts a distribution over
    observations: there is no one right answer to be accurate about)."""
    accuracy = run.get("accuracy")
    return {**run, "accuracy": None if accuracy is None or math.isnan(accuracy) else accuracy}


def assemble_hmm_grid(scale: str, outputs: Mapping[str, Any], folder: Path) -> None:
    """Write ``hmm_grid_controls.json``: the HMM transformer's runs and costs (the block ``tunnels["hmm"]`` of the
    routing controls) and, per chapter-7 tunnel, the transformer's (the block ``architectures``)."""
    s = _spec(scale)
    runs = list(outputs.values())
    by = {(r["routing"], r["seed"]): r for r in runs if "accuracy" not in r}
    hmm = {routing: [{k: by[(routing, seed)][k] for k in ("seed", "kl_bits", "entropy_mae_bits", "untrained_kl_bits",
                                                          "final_train_loss")} for seed in s.hmm_seeds]
           for routing in TUNNEL_ROUTINGS}
    architectures = {}
    for task in s.architecture_tasks:
        by = {(r["routing"], r["seed"]): r for r in runs if r.get("task") == task["name"] and "accuracy" in r}
        per = {routing: [_no_nan_accuracy(by[(routing, seed)]) for seed in s.architecture_seeds]
               for routing in TUNNEL_ROUTINGS}
        architectures[task["name"]] = {"seeds": list(s.architecture_seeds), "sizes": task, "runs": per,
                                       "costs": _costs(per)}
    save_results({"about": "Chapter 6's HMM transformer and chapter 7's transformer on its three tunnels, each with "
                           "its routing learned, removed (uniform attention) and frozen at initialisation; written by "
                           "`python -m attention_dynamics compute hmm_grid_controls`.",
                  "scale": scale, "settings": s.to_json(),
                  "tunnels": {"hmm": {"seeds": list(s.hmm_seeds), "runs": hmm, "costs": _costs(hmm)}},
                  "architectures": architectures}, folder / FILE)


def with_hmm_grid_controls(controls: Mapping[str, Any], more: Mapping[str, Any]) -> dict[str, Any]:
    """Return the routing controls (``controls``) with this result's (``more``) added: the HMM transformer beside
    chapter 6's other tunnels, chapter 7's grid in place of the (empty) block the routing controls leave, and the
    settings each block was trained with. A task both results hold is refused."""
    out = copy.deepcopy(dict(controls))
    clash = set(out["tunnels"]) & set(more["tunnels"]) or set(out["architectures"]) & set(more["architectures"])
    if clash:
        raise ValueError(f"both results hold the controls of {sorted(clash)}")
    out["tunnels"].update(copy.deepcopy(more["tunnels"]))
    out["architectures"].update(copy.deepcopy(more["architectures"]))
    for key in ("hmm", "hmm_seeds", "architecture_tasks", "architecture_training", "architecture_seeds"):
        out["settings"][key] = copy.deepcopy(more["settings"][key])
    return out


def load_hmm_grid_controls(path: str | Path | None = None) -> dict[str, Any]:
    """Return the committed result (``data/hmm_grid_controls.json``), or the one at ``path``."""
    return load_data(FILE, path)


#: The numbers chapters 6 and 7 state beside their own experiments (each name written out, so a search finds it).
HMM_GRID_GLUE = ("routing.hmm_n_seeds", "routing.hmm_learned_kl_bits", "routing.hmm_uniform_kl_bits",
                 "routing.hmm_frozen_kl_bits", "routing.hmm_untrained_kl_bits", "routing.hmm_uniform_kl_ratio",
                 "routing.hmm_frozen_kl_ratio", "routing.hmm_uniform_gap_lost", "routing.hmm_frozen_gap_lost",
                 "routing.hmm_uniform_answer", "routing.grid_n_seeds",
                 "routing.grid_bijection_uniform_kl_ratio", "routing.grid_bijection_frozen_kl_ratio",
                 "routing.grid_bijection_uniform_gap_lost", "routing.grid_bijection_frozen_gap_lost",
                 "routing.grid_bijection_uniform_answer",
                 "routing.grid_hmm_uniform_kl_ratio", "routing.grid_hmm_frozen_kl_ratio",
                 "routing.grid_hmm_uniform_gap_lost", "routing.grid_hmm_frozen_gap_lost",
                 "routing.grid_hmm_uniform_answer",
                 "routing.grid_binding_uniform_kl_ratio", "routing.grid_binding_frozen_kl_ratio",
                 "routing.grid_binding_uniform_gap_lost", "routing.grid_binding_frozen_gap_lost",
                 "routing.grid_binding_uniform_answer")

#: A control's verdict (:func:`~attention_dynamics.diagnostics.routing_need.routing_verdict`) as the chapters' prose
#: says it, after the task's name: "HMM filtering needs learned routing".
ANSWER_WORDS = {"needs routing": "needs learned routing", "does not need routing": "does not need learned routing",
                "undecided": "may or may not need learned routing: the seeds do not decide"}


def hmm_grid_numbers(result: Mapping[str, Any]) -> dict[str, float | str]:
    """Return the numbers of :data:`HMM_GRID_GLUE`: the HMM transformer's mean KL under each routing and its
    untrained model's, each control's KL over the trained model's (geometric mean over seeds) and the share of the
    untrained gap it gives back; the same ratios for chapter 7's transformer on each tunnel; and, per task, what
    uniform attention's cost answers (:data:`ANSWER_WORDS`)."""
    hmm = result["tunnels"]["hmm"]
    numbers: dict[str, float | str] = {
        "routing.hmm_n_seeds": len(hmm["seeds"]),
        "routing.hmm_untrained_kl_bits": float(np.mean([r["untrained_kl_bits"] for r in hmm["runs"]["learned"]])),
        "routing.hmm_uniform_answer": ANSWER_WORDS[hmm["costs"]["uniform"]["verdict"]]}
    for routing in TUNNEL_ROUTINGS:
        numbers[f"routing.hmm_{routing}_kl_bits"] = float(np.mean([r["kl_bits"] for r in hmm["runs"][routing]]))
    for control in ("uniform", "frozen"):
        numbers[f"routing.hmm_{control}_kl_ratio"] = hmm["costs"][control]["ratio"]["point"]
        numbers[f"routing.hmm_{control}_gap_lost"] = hmm["costs"][control]["gap_lost"]["point"]
    grid = result["architectures"]
    numbers["routing.grid_n_seeds"] = len(next(iter(grid.values()))["seeds"])
    for task, block in grid.items():
        numbers[f"routing.grid_{task}_uniform_answer"] = ANSWER_WORDS[block["costs"]["uniform"]["verdict"]]
        for control in ("uniform", "frozen"):
            numbers[f"routing.grid_{task}_{control}_kl_ratio"] = block["costs"][control]["ratio"]["point"]
            numbers[f"routing.grid_{task}_{control}_gap_lost"] = block["costs"][control]["gap_lost"]["point"]
    return numbers


def glue_hmm_grid_controls(result: Mapping[str, Any] | None = None) -> dict[str, float | str]:
    """Glue :data:`HMM_GRID_GLUE` for a chapter's prose (from the committed result, or ``result``); return them."""
    from . import claims

    numbers = hmm_grid_numbers(load_hmm_grid_controls() if result is None else result)
    for name in HMM_GRID_GLUE:
        claims.glue(name, numbers[name])
    return numbers
