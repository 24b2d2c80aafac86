"""Does a reading of frame versus precision survive a change of coordinates? (chapter 4's stored result
``frame_reparametrisation``).

Scaling the head's values by c and its read-out by 1/c (W_V ← c·W_V, W_O ← W_O / c) leaves the function it computes
unchanged at every step of the forward pass, but not the coordinates gradient descent moves in. A reading of "which
settles first" that measures the function (the attention on the answer's source against the probe loss) should not
care; one that measures the parameters' path (how far the attention pattern and the value vectors still travel) may.
If the parameter path's order moves with c while the function's does not, the path reading measures the
parametrisation, not the dynamics, and it leaves the set of readings that decide the claim (chapter 4 says so).

This result trains chapter 4's recall head on its ten seeds under plain SGD and Adam at c = 0.5 and c = 2 (c = 1 is
the stored result ``frame_definitions``), reads the path and function definitions at every horizon (the freeze
intervention is not rerun: it reads the function, the final probe loss), and stores the share of seeds whose frame
settles first with its interval. ``python -m attention_dynamics compute frame_reparametrisation``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

from ...diagnostics.frame_order import order_share, paired_gap
from ...ledger.results import Job, StoredResult, save_results
from .frame_definitions import OPTIMISERS, SETTINGS as FRAME_SETTINGS, RecallHeadFrameSettings, _from_json, head_run

__all__ = ["FILE", "READINGS", "ReparametrisationSettings", "SETTINGS", "reparametrised_run",
           "frame_reparametrisation_jobs", "assemble_frame_reparametrisation", "FRAME_REPARAMETRISATION"]

#: The file the chapter loads.
FILE = "frame_reparametrisation.json"
#: The readings reread under the new coordinates.
READINGS = ("path", "function", "function_log")


@dataclass(frozen=True)
class ReparametrisationSettings:
    """Chapter 4's recall-head settings (``head``) and the value scales ``scales`` (c) to train at."""

    head: RecallHeadFrameSettings = FRAME_SETTINGS["book"]
    scales: tuple[float, ...] = (0.5, 2.0)

    def __post_init__(self) -> None:
        if isinstance(self.head, Mapping):
            object.__setattr__(self, "head", _from_json(self.head))
        object.__setattr__(self, "scales", tuple(float(c) for c in self.scales))
        if not self.scales or any(not c > 0 or c == 1.0 for c in self.scales):
            raise ValueError(f"scales must be positive and different from 1 (c = 1 is frame_definitions), got "
                             f"{self.scales}")


SETTINGS: dict[str, ReparametrisationSettings] = {
    "fast": ReparametrisationSettings(head=FRAME_SETTINGS["fast"]),
    "book": ReparametrisationSettings(),
}


def reparametrised_run(optimiser: str, seed: int, value_scale: float, settings: Mapping[str, Any]) -> dict[str, Any]:
    """Return the settling steps of chapter 4's recall head trained at value scale ``value_scale`` (no freezes)."""
    run = head_run(int(seed), optimiser, _from_json(settings), value_scale=float(value_scale), intervention=False)
    return {"seed": run["seed"], "optimiser": optimiser, "value_scale": float(value_scale), "settle": run["settle"],
            "final_probe_loss": run["probe_loss"][-1]}


def frame_reparametrisation_jobs(scale: str, seeds: Sequence[int] | None = None) -> list[Job]:
    """Return one job per optimiser, value scale and seed (``seeds`` instead of chapter 4's)."""
    s = FRAME_REPARAMETRISATION.spec(scale)
    settings = dataclasses.asdict(s.head)
    return [Job(f"{opt}-c{c:g}-seed{seed}", reparametrised_run,
                {"optimiser": opt, "seed": int(seed), "value_scale": c, "settings": settings},
                cost=float(s.head.horizons[-1]))
            for opt in OPTIMISERS for c in s.scales for seed in (s.head.seeds if seeds is None else seeds)]


def assemble_frame_reparametrisation(scale: str, outputs: Mapping[str, Any], folder: Path) -> None:
    """Write ``frame_reparametrisation.json``: per optimiser, value scale, horizon and reading, the per-seed steps,
    the share of seeds whose frame settles first and the paired gap."""
    s = FRAME_REPARAMETRISATION.spec(scale)
    out: dict[str, Any] = {}
    for opt in OPTIMISERS:
        for c in s.scales:
            runs = sorted((o for o in outputs.values() if o["optimiser"] == opt and o["value_scale"] == c),
                          key=lambda r: r["seed"])
            if not runs:
                continue
            block = {}
            for h in s.head.horizons:
                block[str(h)] = {}
                for d in READINGS:
                    frame = [r["settle"][str(h)][d]["frame"] for r in runs]
                    precision = [r["settle"][str(h)][d]["precision"] for r in runs]
                    block[str(h)][d] = {"frame": frame, "precision": precision, **order_share(frame, precision),
                                        "gap": paired_gap(frame, precision)}
            out.setdefault(opt, {})[f"{c:g}"] = {"seeds": [r["seed"] for r in runs], "horizons": block,
                                                 "final_probe_loss": [r["final_probe_loss"] for r in runs]}
    save_results({"about": "Chapter 4's recall head reparametrised (W_V × c, W_O / c): the path and function readings "
                           "of frame versus precision; written by `python -m attention_dynamics compute "
                           "frame_reparametrisation`.",
                  "scale": scale, "settings": {"head": dataclasses.asdict(s.head), "scales": list(s.scales)},
                  "readings": list(READINGS), "runs": out}, folder / FILE)


FRAME_REPARAMETRISATION = StoredResult(
    name="frame_reparametrisation", chapter="two_timescale_em",
    about="chapter 4's recall head with its values scaled by c and its read-out by 1/c (c = 0.5, 2): the path and "
          "function readings of frame versus precision, ten seeds, SGD and Adam",
    files=(FILE,), specs=SETTINGS, committed_scale="book",
    expected={"fast": "12 jobs, a minute", "book": "40 jobs (10 seeds × 2 scales × SGD and Adam, 4000 steps, no "
                                                   "freezes, ~1 CPU-min each), ~40 CPU-min"},
    jobs=frame_reparametrisation_jobs, assemble=assemble_frame_reparametrisation)
