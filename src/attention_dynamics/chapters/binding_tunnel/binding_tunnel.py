"""Chapter 9's stored result ``binding_tunnel``: the binding tunnel on five seeds, learned and with its routing
removed, at the chapter's budget and four times as long, frozen from a sweep of steps, with the EM-like step, and the
authors' two-hop task, learned and with uniform attention.

Training these models does not fit the chapter's time budget (62 jobs, about 3.2 CPU-hours), so
``python -m attention_dynamics compute binding_tunnel`` stores their measures in ``data/binding_tunnel.json``; the
chapter loads them (:data:`BINDING_TUNNEL`) and decides its claims from the whole interval over seeds.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

from ...ledger.results import Job, StoredResult, save_results
from . import runs
from .settings import LONGER_FACTOR, SETTINGS

__all__ = ["FILE", "binding_tunnel_jobs", "assemble_binding_tunnel", "BINDING_TUNNEL"]

#: The file the chapter loads.
FILE = "binding_tunnel.json"


#: The routings trained four times as long: the trained model and both controls (a control's failure is a finding
#: only on a run four times as long).
LONGER_ROUTINGS = ("learned", "uniform", "frozen")
#: The routings of the authors' two-hop task: learned, and with uniform attention (does the task need routing?).
TWO_HOP_ROUTINGS = ("learned", "uniform")


def binding_tunnel_jobs(scale: str, seeds: Sequence[int] | None = None) -> list[Job]:
    """Return every job of the result at ``scale`` (``seeds`` instead of the scale's own)."""
    s = BINDING_TUNNEL.spec(scale)
    seeds = list(s.seeds if seeds is None else seeds)
    if len(seeds) < 2 or len(set(seeds)) != len(seeds) or min(seeds) < 0:
        raise ValueError(f"seeds must be at least two distinct non-negative integers, got {seeds}")
    settings = s.to_json()
    steps = float(s.tunnel.steps)
    jobs = []
    for seed in seeds:
        jobs.append(Job(f"learned-seed{seed}", runs.learned_run, {"seed": seed, "settings": settings}, cost=2.5 * steps))
        for factor in (1, LONGER_FACTOR):
            for routing in (("uniform", "frozen") if factor == 1 else LONGER_ROUTINGS):
                jobs.append(Job(f"{routing}-x{factor}-seed{seed}", runs.control_run,
                                {"seed": seed, "settings": settings, "routing": routing, "factor": factor},
                                cost=factor * steps))
        for t in s.freeze_points:
            jobs.append(Job(f"freeze{t}-seed{seed}", runs.freeze_run, {"seed": seed, "settings": settings,
                                                                      "freeze_at": t}, cost=steps))
        for routing in ("learned", "frozen"):
            jobs.append(Job(f"em_like-{routing}-seed{seed}", runs.schedule_run,
                            {"seed": seed, "settings": settings, "routing": routing}, cost=steps))
    for seed in s.two_hop_seeds:
        for routing in TWO_HOP_ROUTINGS:
            jobs.append(Job(f"two_hop-{routing}-seed{seed}", runs.two_hop_run,
                            {"seed": seed, "settings": settings, "routing": routing}, cost=float(s.two_hop.steps)))
    return jobs


def assemble_binding_tunnel(scale: str, outputs: Mapping[str, Any], folder: Path) -> None:
    """Write ``binding_tunnel.json``: the settings and every run's measures, grouped by what they test."""
    by_seed = sorted(outputs.items())
    out: dict[str, Any] = {"learned": [], "controls": {}, "freeze": {}, "em_like": {}, "two_hop": {}}
    for key, result in by_seed:
        if key.startswith("learned-seed"):
            out["learned"].append(result)
        elif key.startswith("freeze"):
            out["freeze"].setdefault(str(result["freeze_at"]), []).append(result)
        elif key.startswith("em_like-"):
            out["em_like"].setdefault(result["routing"], []).append(result)
        elif key.startswith("two_hop-"):
            out["two_hop"].setdefault(result["routing"], []).append(result)
        else:
            out["controls"].setdefault(f"{result['routing']}-x{result['factor']}", []).append(result)
    for group in (out["controls"], out["freeze"], out["em_like"], out["two_hop"]):
        for runs_ in group.values():
            runs_.sort(key=lambda r: r["seed"])
    out["learned"].sort(key=lambda r: r["seed"])
    save_results({"about": "The binding tunnel (keys with replacement: a repeated key's value must be found by "
                           "content), learned and with its routing removed, frozen from a sweep of steps, with the "
                           "EM-like step, and the authors' two-hop task; written by `python -m attention_dynamics "
                           "compute binding_tunnel`.",
                  "scale": scale, "settings": BINDING_TUNNEL.spec(scale).to_json(),
                  "seeds": [r["seed"] for r in out["learned"]], **out}, folder / FILE)


BINDING_TUNNEL = StoredResult(
    name="binding_tunnel", chapter="binding_tunnel",
    about="the binding tunnel on five seeds: learned (with checkpoints, readings, geometry and the advantage law's "
          "predictions), uniform and frozen routing at the budget and four times as long, the freeze sweep, the "
          "EM-like step, and the authors' two-hop task learned and with uniform attention",
    files=(FILE,), specs=SETTINGS, committed_scale="book",
    expected={"fast": "22 jobs, a few minutes",
              "book": "62 jobs: 5 seeds × (a checkpointed run ~4 CPU-min, 2 controls ~1.5, 3 runs 4x as long ~6.5, "
                      "4 freezes and 2 EM-like ~1.5 each), two two-hop runs ~6.5; ~3.2 CPU-hours",
              "paper": "72 jobs at Paper I's sizes: a GPU's job"},
    jobs=binding_tunnel_jobs, assemble=assemble_binding_tunnel)
