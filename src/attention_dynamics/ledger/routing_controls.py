"""The stored result ``routing_controls``: every trained experiment of the book beside the same model with its routing
removed (uniform attention), frozen at initialisation, or, for the sticky chain, pinned to its Bayes routing.

Chapter 9 states from it, task by task, whether a task needs routing at all (the table "Which tasks need routing");
chapters 4 to 6 read the controls of their own experiments from the same file. The runs are the library's
(:mod:`~attention_dynamics.diagnostics.routing_need`): the sticky chain's head on the paper's protocol (twenty seeds:
the paper's five and fifteen more), chapter 6's bijection and HMM transformers (five and three seeds) and chapter
4's recall head (five seeds). ``python -m attention_dynamics compute routing_controls`` stores them in
``data/routing_controls.json`` (the result is declared by chapter 9, which decides from it; the jobs, the assembly and
the loader are here, below the chapters, so that every chapter can read its own experiment's controls).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from ..diagnostics import routing_need
from ..tasks.sticky_chain import PAPER_SEEDS
from ..training.wind_tunnels import BIJECTION_TUNNELS, HMM_TUNNELS, BijectionTraining, HMMTraining
from .results import Job, load_data, save_results

__all__ = ["FILE", "TUNNEL_ROUTINGS", "STICKY_ROUTINGS", "RoutingControlSettings", "SETTINGS",
           "routing_controls_jobs", "assemble_routing_controls", "load_routing_controls",
           "ROUTING_GLUE", "routing_control_numbers", "glue_routing_controls"]

#: The file the chapters load.
FILE = "routing_controls.json"
#: The controls of the transformers and the recall head (beside "learned").
TUNNEL_ROUTINGS = ("learned", "uniform", "frozen")
#: The sticky chain's: its Bayes routing (the identity) is known, so it is pinned too.
STICKY_ROUTINGS = ("learned", "frozen", "uniform", "identity")


#: Chapter 7's three tunnels at its book sizes (its settings, restated here below the chapters; a test checks they
#: agree) and its transformer's training: the transformer's controls on chapter 7's grid.
ARCHITECTURE_TASKS: tuple[dict[str, Any], ...] = (
    {"name": "bijection", "V": 8, "L": 8},
    {"name": "hmm", "n_states": 5, "n_symbols": 5, "length": 16},
    {"name": "binding", "n_pairs": 4, "n_queries": 4, "n_keys": 16, "n_values": 16},
)
ARCHITECTURE_TRAINING = {"target_params": 60000, "steps": 800, "batch_size": 64, "lr": 2e-3, "eval_sequences": 1000}


#: Controls a scale may leave out (no seeds: not run). The book's committed scale leaves out chapter 6's HMM
#: transformer and chapter 7's grid, whose controls cost more CPU-hours than the book's budget for this result.
OPTIONAL_SEEDS = ("hmm_seeds", "architecture_seeds")


@dataclass(frozen=True)
class RoutingControlSettings:
    """What is trained: the sticky chain on ``sticky_seeds`` (its first five are the paper's) for ``sticky_steps``;
    chapter 6's bijection and HMM transformers on their seeds; chapter 4's recall head (``recall``: steps, lr, sizes)
    on its seeds; ``n_eval`` held-out sequences for the tunnels' calibration."""

    sticky_seeds: tuple[int, ...] = PAPER_SEEDS + tuple(range(1, 16))
    sticky_steps: int = 1000
    bijection: BijectionTraining = BIJECTION_TUNNELS["book"]
    bijection_seeds: tuple[int, ...] = (0, 1, 2, 3, 4)
    hmm: HMMTraining = HMM_TUNNELS["book"]
    hmm_seeds: tuple[int, ...] = (0, 1, 2)
    recall: Mapping[str, Any] = field(default_factory=lambda: {"steps": 2000, "lr": 0.5, "n_train": 256,
                                                               "n_probe": 256})
    recall_seeds: tuple[int, ...] = (0, 1, 2, 3, 4)
    architecture_tasks: tuple[Mapping[str, Any], ...] = ARCHITECTURE_TASKS
    architecture_training: Mapping[str, Any] = field(default_factory=lambda: dict(ARCHITECTURE_TRAINING))
    architecture_seeds: tuple[int, ...] = (0, 1, 2)
    n_eval: int = 1000
    bootstrap_resamples: int = 10_000

    def __post_init__(self) -> None:
        if isinstance(self.bijection, Mapping):
            object.__setattr__(self, "bijection", BijectionTraining(**self.bijection))
        if isinstance(self.hmm, Mapping):
            object.__setattr__(self, "hmm", routing_need.tunnel_settings("hmm", self.hmm))
        object.__setattr__(self, "architecture_tasks", tuple(dict(t) for t in self.architecture_tasks))
        for name in ("sticky_seeds", "bijection_seeds", "hmm_seeds", "recall_seeds", "architecture_seeds"):
            seeds = tuple(int(s) for s in getattr(self, name))
            if not seeds and name in OPTIONAL_SEEDS:  # that control is not run at this scale
                object.__setattr__(self, name, seeds)
                continue
            if len(seeds) < 2 or len(set(seeds)) != len(seeds) or min(seeds) < 0:
                raise ValueError(f"{name} must be at least two distinct non-negative seeds, got {seeds}")
            object.__setattr__(self, name, seeds)

    def to_json(self) -> dict[str, Any]:
        """Return the settings as plain JSON values."""
        return json_ready(dataclasses.asdict(self))


def json_ready(value: Any) -> Any:
    """Return ``value`` with tuples as lists and mappings as dicts (plain JSON)."""
    if isinstance(value, Mapping):
        return {k: json_ready(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_ready(v) for v in value]
    return value


#: The sizes per scale: ``book`` (the committed file), ``fast`` (the tests').
SETTINGS: dict[str, RoutingControlSettings] = {
    "fast": RoutingControlSettings(sticky_seeds=(42, 2024), sticky_steps=40,
                                   bijection=BIJECTION_TUNNELS["fast"], bijection_seeds=(0, 1),
                                   hmm=HMM_TUNNELS["fast"], hmm_seeds=(0, 1),
                                   recall={"steps": 60, "lr": 0.5, "n_train": 32, "n_probe": 32}, recall_seeds=(0, 1),
                                   architecture_tasks=({"name": "bijection", "V": 5, "L": 5},
                                                       {"name": "binding", "n_pairs": 3, "n_queries": 3, "n_keys": 6,
                                                        "n_values": 6}),
                                   architecture_training={"target_params": 6000, "steps": 20, "batch_size": 16,
                                                          "lr": 2e-3, "eval_sequences": 64},
                                   architecture_seeds=(0, 1), n_eval=64, bootstrap_resamples=200),
    "book": RoutingControlSettings(sticky_seeds=PAPER_SEEDS, bijection_seeds=(0, 1, 2), hmm_seeds=(),
                                   recall_seeds=(0, 1, 2), architecture_seeds=()),
}


def _spec(scale: str) -> RoutingControlSettings:
    if scale not in SETTINGS:
        raise ValueError(f"routing_controls has scales {', '.join(SETTINGS)}, got {scale!r}")
    return SETTINGS[scale]


def routing_controls_jobs(scale: str, seeds: Sequence[int] | None = None) -> list[Job]:
    """Return every job at ``scale`` (the result keeps its own seeds: ``seeds`` must be None)."""
    if seeds is not None:
        raise ValueError("routing_controls runs its own seeds per task (see its settings)")
    s = _spec(scale)
    jobs = []
    for seed in s.sticky_seeds:
        for schedule in ("sgd", "em_like"):
            for routing in STICKY_ROUTINGS:
                cost = 0.2 if routing == "identity" else 1.0
                jobs.append(Job(f"sticky-{routing}-{schedule}-seed{seed}", routing_need.sticky_run,
                                {"seed": seed, "schedule": schedule, "routing": routing, "steps": s.sticky_steps},
                                cost=cost * s.sticky_steps))
    for task, tunnel, seeds in (("bijection", s.bijection, s.bijection_seeds), ("hmm", s.hmm, s.hmm_seeds)):
        fields = json_ready(dataclasses.asdict(tunnel))
        for seed in seeds:
            for routing in TUNNEL_ROUTINGS:
                jobs.append(Job(f"{task}-{routing}-seed{seed}", routing_need.tunnel_run,
                                {"task": task, "settings": fields, "seed": seed, "routing": routing,
                                 "n_eval": s.n_eval}, cost=(4.0 if task == "hmm" else 1.5) * tunnel.steps))
    for index, task in enumerate(s.architecture_tasks):
        for seed in s.architecture_seeds:
            for routing in TUNNEL_ROUTINGS:
                jobs.append(Job(f"architectures-{task['name']}-{routing}-seed{seed}", routing_need.architecture_run,
                                {"task": dict(task), "task_index": index, "training": dict(s.architecture_training),
                                 "seed": seed, "routing": routing}, cost=2.0 * s.architecture_training["steps"]))
    for seed in s.recall_seeds:
        for routing in TUNNEL_ROUTINGS:
            jobs.append(Job(f"recall-{routing}-seed{seed}", routing_need.recall_head_run,
                            {"seed": seed, "routing": routing, "settings": dict(s.recall)},
                            cost=0.5 * s.recall["steps"]))
    return jobs


def _mean_curve(runs: Sequence[Mapping[str, Any]], stride: int = 10) -> list[float]:
    return np.round(np.mean([r["losses"] for r in runs], axis=0)[::stride], 6).tolist()


def assemble_routing_controls(scale: str, outputs: Mapping[str, Any], folder: Path) -> None:
    """Write ``routing_controls.json``: per task, each routing's per-seed results and, for each control, its cost
    against the trained model (:func:`~attention_dynamics.diagnostics.routing_need.control_cost`) and the verdict it
    gives; for the sticky chain, the paper's speed-up under each routing on the paper's five seeds and on twenty."""
    s = _spec(scale)
    runs = list(outputs.values())
    sticky = [r for r in runs if "schedule" in r]
    five = list(s.sticky_seeds[:5])
    sticky_out = {
        "seeds": list(s.sticky_seeds), "paper_seeds": five, "steps": s.sticky_steps,
        "hmin_nats": sticky[0]["hmin_nats"],
        "speedup": {"paper_seeds": routing_need.sticky_speedups(sticky, five, n_resamples=s.bootstrap_resamples),
                    "all_seeds": routing_need.sticky_speedups(sticky, s.sticky_seeds,
                                                              n_resamples=s.bootstrap_resamples)},
        "final_loss": {f"{r['routing']}-{r['schedule']}": {} for r in sticky},
        "mean_curves": {},
    }
    for r in sticky:
        sticky_out["final_loss"][f"{r['routing']}-{r['schedule']}"][str(r["seed"])] = r["final_loss"]
    for routing in STICKY_ROUTINGS:
        for schedule in ("sgd", "em_like"):
            group = [r for r in sticky if r["routing"] == routing and r["schedule"] == schedule and r["seed"] in five]
            sticky_out["mean_curves"][f"{routing}-{schedule}"] = _mean_curve(group)
    tunnels: dict[str, Any] = {}
    for task, seeds in (("bijection", s.bijection_seeds), ("hmm", s.hmm_seeds)):
        by = {(r["routing"], r["seed"]): r for r in runs if r.get("task") == task and "accuracy" not in r}
        per = {routing: [{k: by[(routing, seed)][k] for k in ("seed", "kl_bits", "entropy_mae_bits",
                                                              "untrained_kl_bits", "final_train_loss")}
                         for seed in seeds] for routing in TUNNEL_ROUTINGS}
        if not seeds:
            continue
        tunnels[task] = {"seeds": list(seeds), "runs": per, "costs": _costs(per, "kl_bits", "untrained_kl_bits")}
    architectures: dict[str, Any] = {}
    for task in s.architecture_tasks if s.architecture_seeds else ():
        by = {(r["routing"], r["seed"]): r for r in runs if r.get("task") == task["name"] and "task_index" not in r
              and "untrained_kl_bits" in r and "accuracy" in r}
        per = {routing: [by[(routing, seed)] for seed in s.architecture_seeds] for routing in TUNNEL_ROUTINGS}
        architectures[task["name"]] = {"seeds": list(s.architecture_seeds), "sizes": task, "runs": per,
                                       "costs": _costs(per, "kl_bits", "untrained_kl_bits")}
    by = {(r["routing"], r["seed"]): r for r in runs if "routing_blind_floor" in r}
    per = {routing: [by[(routing, seed)] for seed in s.recall_seeds] for routing in TUNNEL_ROUTINGS}
    recall_out = {"seeds": list(s.recall_seeds), "runs": per, "costs": _costs(per, "final", "initial"),
                  "routing_blind_floor": per["learned"][0]["routing_blind_floor"],
                  "bayes_floor": per["learned"][0]["bayes_floor"]}
    save_results({"about": "Every trained experiment beside the same model with its routing removed (uniform), "
                           "frozen at initialisation, or pinned to the sticky chain's Bayes routing (the identity); "
                           "written by `python -m attention_dynamics compute routing_controls`.",
                  "scale": scale, "settings": s.to_json(), "sticky": sticky_out, "tunnels": tunnels,
                  "recall_head": recall_out, "architectures": architectures}, folder / FILE)


def _costs(per: Mapping[str, Sequence[Mapping[str, Any]]], error: str, untrained: str) -> dict[str, Any]:
    trained = [r[error] for r in per["learned"]]
    start = [r[untrained] for r in per["learned"]]
    out = {}
    for control in ("uniform", "frozen"):
        cost = routing_need.control_cost(trained, [r[error] for r in per[control]], start)
        out[control] = {**cost, "verdict": routing_need.routing_verdict(cost["ratio"])}
    return out


def load_routing_controls(path: str | Path | None = None) -> dict[str, Any]:
    """Return the committed controls (``data/routing_controls.json``), or those at ``path``."""
    return load_data(FILE, path)


#: The routing controls' numbers the chapters state beside their own experiments (each name written out, so a search
#: finds it); chapter 9 records them as claims, the other chapters only state them.
ROUTING_GLUE = ("routing.recall_uniform_loss_ratio", "routing.recall_frozen_loss_ratio",
                "routing.recall_uniform_gap_lost", "routing.recall_frozen_gap_lost",
                "routing.bijection_uniform_kl_ratio", "routing.bijection_frozen_kl_ratio",
                "routing.bijection_uniform_gap_lost", "routing.bijection_frozen_gap_lost",
                "routing.sticky_speedup_learned", "routing.sticky_speedup_frozen", "routing.sticky_speedup_uniform",
                "routing.sticky_speedup_identity", "routing.sticky_sgd_loss_learned",
                "routing.sticky_sgd_loss_identity", "routing.sticky_sgd_loss_frozen", "routing.sticky_sgd_loss_uniform",
                "routing.sticky_hmin_nats", "routing.sticky_n_seeds", "routing.n_seeds_tunnels")


def routing_control_numbers(controls: Mapping[str, Any]) -> dict[str, float]:
    """Return the numbers of :data:`ROUTING_GLUE` from the stored controls: each control's error over the trained
    model's (geometric mean over seeds) and the share of the untrained gap it gives back; the sticky chain's speed-up
    (the paper's metric, its five seeds) and SGD's final loss under each routing."""
    recall, bijection = controls["recall_head"]["costs"], controls["tunnels"]["bijection"]["costs"]
    speedup = controls["sticky"]["speedup"]["paper_seeds"]
    five = [str(s) for s in controls["sticky"]["paper_seeds"]]
    sgd = {r: float(np.mean([controls["sticky"]["final_loss"][f"{r}-sgd"][s] for s in five]))
           for r in ("learned", "identity", "frozen", "uniform")}
    return {
        "routing.recall_uniform_loss_ratio": recall["uniform"]["ratio"]["point"],
        "routing.recall_frozen_loss_ratio": recall["frozen"]["ratio"]["point"],
        "routing.recall_uniform_gap_lost": recall["uniform"]["gap_lost"]["point"],
        "routing.recall_frozen_gap_lost": recall["frozen"]["gap_lost"]["point"],
        "routing.bijection_uniform_kl_ratio": bijection["uniform"]["ratio"]["point"],
        "routing.bijection_frozen_kl_ratio": bijection["frozen"]["ratio"]["point"],
        "routing.bijection_uniform_gap_lost": bijection["uniform"]["gap_lost"]["point"],
        "routing.bijection_frozen_gap_lost": bijection["frozen"]["gap_lost"]["point"],
        "routing.sticky_speedup_learned": speedup["learned"]["speedup"],
        "routing.sticky_speedup_frozen": speedup["frozen"]["speedup"],
        "routing.sticky_speedup_uniform": speedup["uniform"]["speedup"],
        "routing.sticky_speedup_identity": speedup["identity"]["speedup"],
        "routing.sticky_sgd_loss_learned": sgd["learned"],
        "routing.sticky_sgd_loss_identity": sgd["identity"],
        "routing.sticky_sgd_loss_frozen": sgd["frozen"],
        "routing.sticky_sgd_loss_uniform": sgd["uniform"],
        "routing.sticky_hmin_nats": controls["sticky"]["hmin_nats"],
        "routing.sticky_n_seeds": len(five),
        "routing.n_seeds_tunnels": len(controls["tunnels"]["bijection"]["seeds"]),
    }


def glue_routing_controls(controls: Mapping[str, Any] | None = None) -> dict[str, float]:
    """Glue the routing controls' numbers (:data:`ROUTING_GLUE`) for a chapter's prose; return them."""
    from . import claims

    numbers = routing_control_numbers(load_routing_controls() if controls is None else controls)
    for name in ROUTING_GLUE:
        claims.glue(name, numbers[name])
    return numbers
