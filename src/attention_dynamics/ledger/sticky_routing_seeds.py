"""The stored result ``sticky_routing_seeds`` (declared with chapter 9's routing controls, read by chapters 5 and 9):
the paper's speed-up with the routing learned, frozen at initialisation and pinned to the chain's Bayes routing (the
identity), on twenty seeds.

The routing controls (``data/routing_controls.json``) read the paper's five seeds; five seeds leave wide intervals, so
this result repeats the same runs on the book's twenty (the paper's five and 1–15, as chapter 5's other twenty-seed
results) at the paper's 1000 steps: per seed, SGD and EM-like under each routing
(:func:`~attention_dynamics.diagnostics.routing_need.sticky_run`), and per routing the paper's metric with its
bootstrap interval and each routing's speed-up over the learned one, paired over seeds
(:func:`~attention_dynamics.diagnostics.routing_need.sticky_speedups`).
``python -m attention_dynamics compute sticky_routing_seeds`` writes ``data/sticky_routing_seeds.json``;
:func:`load_routing_seeds` reads it and :func:`glue_routing_seeds` states its numbers in a chapter's prose.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

from ..diagnostics import routing_need
from ..tasks.sticky_chain import PAPER_SEEDS
from .results import Job, load_data, save_results

__all__ = ["FILE", "ROUTINGS", "StickyRoutingSeedsSettings", "SETTINGS", "routing_seeds_jobs",
           "assemble_routing_seeds", "load_routing_seeds", "ROUTING_SEEDS_GLUE", "glue_routing_seeds"]

#: The file the chapter loads.
FILE = "sticky_routing_seeds.json"
#: The routings compared: learned (the paper's head), frozen at initialisation, pinned to the identity.
ROUTINGS = ("learned", "frozen", "identity")


@dataclass(frozen=True)
class StickyRoutingSeedsSettings:
    """The ``seeds`` (the paper's five first), the ``steps`` of every run and the bootstrap's resamples."""

    seeds: tuple[int, ...] = PAPER_SEEDS + tuple(range(1, 16))
    steps: int = 1000
    bootstrap_resamples: int = 10_000

    def __post_init__(self) -> None:
        seeds = tuple(int(s) for s in self.seeds)
        if len(seeds) < 2 or len(set(seeds)) != len(seeds) or min(seeds) < 0:
            raise ValueError(f"seeds must be at least two distinct non-negative integers, got {seeds}")
        if int(self.steps) < 1:
            raise ValueError(f"steps must be a positive integer, got {self.steps}")
        object.__setattr__(self, "seeds", seeds)

    def to_json(self) -> dict[str, Any]:
        """Return the settings as plain JSON values."""
        return {k: list(v) if isinstance(v, tuple) else v for k, v in dataclasses.asdict(self).items()}


#: The sizes per scale: ``book`` (the committed file), ``fast`` (the tests').
SETTINGS: dict[str, StickyRoutingSeedsSettings] = {
    "fast": StickyRoutingSeedsSettings(seeds=(42, 2024, 1), steps=40, bootstrap_resamples=200),
    "book": StickyRoutingSeedsSettings(),
}


def routing_seeds_jobs(scale: str, seeds: Sequence[int] | None = None) -> list[Job]:
    """Return every job at ``scale`` (``seeds`` instead of the scale's own): one per seed, schedule and routing."""
    s = _spec(scale)
    if seeds is not None:
        s = dataclasses.replace(s, seeds=tuple(seeds))
    return [Job(f"{routing}-{schedule}-seed{seed}", routing_need.sticky_run,
                {"seed": seed, "schedule": schedule, "routing": routing, "steps": s.steps},
                cost=(0.2 if routing == "identity" else 1.0) * s.steps)
            for seed in s.seeds for schedule in ("sgd", "em_like") for routing in ROUTINGS]


def assemble_routing_seeds(scale: str, outputs: Mapping[str, Any], folder: Path) -> None:
    """Write ``sticky_routing_seeds.json``: per routing the paper's speed-up on every seed (with its interval and
    its ratio to the learned routing's), and every run's final loss."""
    runs = list(outputs.values())
    seeds = sorted({int(r["seed"]) for r in runs}, key=lambda s: (s not in PAPER_SEEDS, s))
    s = _spec(scale)
    final_loss: dict[str, dict[str, float]] = {}
    for r in sorted(runs, key=lambda r: (r["routing"], r["schedule"], seeds.index(int(r["seed"])))):
        final_loss.setdefault(f"{r['routing']}-{r['schedule']}", {})[str(r["seed"])] = r["final_loss"]
    save_results({"about": "The sticky chain's speed-up (EM-like over SGD, the paper's metric) with the routing "
                           "learned, frozen at initialisation and pinned to the identity, on twenty seeds; written "
                           "by `python -m attention_dynamics compute sticky_routing_seeds`.",
                  "scale": scale, "settings": s.to_json(), "seeds": seeds, "hmin_nats": runs[0]["hmin_nats"],
                  "speedup": routing_need.sticky_speedups(runs, seeds, n_resamples=s.bootstrap_resamples),
                  "final_loss": final_loss}, folder / FILE)


def _spec(scale: str) -> StickyRoutingSeedsSettings:
    if scale not in SETTINGS:
        raise ValueError(f"sticky_routing_seeds has scales {', '.join(SETTINGS)}, got {scale!r}")
    return SETTINGS[scale]


def load_routing_seeds(path: str | Path | None = None) -> dict[str, Any]:
    """Return the committed result (``data/sticky_routing_seeds.json``), or the one at ``path``."""
    return load_data(FILE, path)


#: The numbers the chapters state (each name written out, so a search finds it).
ROUTING_SEEDS_GLUE = ("routing.twenty_n_seeds", "routing.twenty_speedup_learned", "routing.twenty_speedup_frozen",
                      "routing.twenty_speedup_identity", "routing.twenty_sgd_loss_learned",
                      "routing.twenty_sgd_loss_frozen", "routing.twenty_sgd_loss_identity")


def glue_routing_seeds(result: Mapping[str, Any] | None = None) -> dict[str, float]:
    """Glue :data:`ROUTING_SEEDS_GLUE` for a chapter's prose: the number of seeds, and per routing the paper's
    speed-up and SGD's mean loss after the budget; return them."""
    from . import claims

    r = load_routing_seeds() if result is None else result
    numbers: dict[str, float] = {"routing.twenty_n_seeds": len(r["seeds"])}
    for routing in ROUTINGS:
        numbers[f"routing.twenty_speedup_{routing}"] = float(r["speedup"][routing]["speedup"])
        numbers[f"routing.twenty_sgd_loss_{routing}"] = float(r["speedup"][routing]["sgd_final_loss"])
    for name in ROUTING_SEEDS_GLUE:
        claims.glue(name, numbers[name])
    return numbers
