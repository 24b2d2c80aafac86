"""Freezing the frame (chapter 4's stored result ``frame_freeze``): stop ``W_Q`` and ``W_K`` at step t, train
everything else to the end, and compare the final loss with the unfrozen run's.

If the frame is in place at t, the frozen run ends where the unfrozen one does;
:func:`~attention_dynamics.diagnostics.frame_order.freeze_frame_step` (in the library: chapter 6 reads the tunnel's
runs too) is the first t from which it does for every seed, within a margin stated against the untrained model's gap.
Run on chapter 4's recall head and on chapter 6's bijection wind tunnel (all query/key weights,
:func:`~attention_dynamics.training.wind_tunnels.freeze_query_key`). The runs are computed once by
``python -m attention_dynamics compute frame_freeze`` and loaded by the chapter from ``data/frame_freeze.json``
(:data:`FRAME_FREEZE`' ``load``; chapter 6 reads it through :func:`~attention_dynamics.ledger.frame_results.load_frame_freeze`)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import torch

from ...diagnostics.frame_order import (
    BITS,
    FREE_FREEZE_RATIO,
    freeze_frame_step,
    freeze_frame_summary,
    freeze_ratios,
    freeze_table,
    total_steps,
)
from ...ledger.frame_results import FRAME_FREEZE_FILE, FRAME_FREEZE_FULL_FILE
from ...ledger.results import Job, StoredResult, save_results
from ...science import calibration
from ...training import wind_tunnels
from ...training.recall_head import train_specialization_head

# BITS, freeze_table, freeze_frame_step, freeze_frame_summary and total_steps are the library's
# (:mod:`attention_dynamics.diagnostics.frame_order`), imported here for the chapter's report and figures.
__all__ = [
    "head_freeze_run",
    "tunnel_freeze_run",
    "KINDS",
    "freeze_run",
    "SPECS",
    "FILE",
    "freeze_jobs",
    "assemble_freeze",
    "FRAME_FREEZE",
    "FULL_SPECS",
    "FULL_FILE",
    "full_budget_jobs",
    "assemble_full_budget",
    "FRAME_FREEZE_FULL",
]


def head_freeze_run(seed: int, freeze_at: int | None, settings: Mapping[str, Any]) -> dict[str, float]:
    """Return the initial and final probe loss (nats) of chapter 4's head with W_Q, W_K frozen from ``freeze_at``.

    ``settings``: ``steps``, ``lr``, ``n_train``, ``n_probe`` of
    :func:`~attention_dynamics.training.recall_head.train_specialization_head`; ``freeze_at=None`` trains
    everything (the reference run).
    """
    steps = int(settings["steps"])
    run = train_specialization_head(seed, steps=steps, lr=settings["lr"], n_train=settings["n_train"],
                                    n_probe=settings["n_probe"], record_every=steps // 2, settle_window=steps // 2,
                                    freeze_routing_at=freeze_at)
    return {"initial": float(run.probe_loss[0]), "final": float(run.probe_loss[-1])}


def tunnel_freeze_run(seed: int, freeze_at: int | None, settings: Mapping[str, Any]) -> dict[str, float]:
    """Return the calibration (KL to the exact posterior, bits) of a bijection wind tunnel frozen from ``freeze_at``.

    ``settings``: ``tunnel`` (the fields of a :class:`~attention_dynamics.training.wind_tunnels.BijectionTraining`)
    and ``n_eval``. ``initial`` is the untrained model's KL on the same evaluation batch.
    """
    tunnel = wind_tunnels.BijectionTraining(**settings["tunnel"])
    run = wind_tunnels.train_bijection(tunnel, seed=seed, freeze_routing_at=freeze_at)
    batch = wind_tunnels.bijection_batch_for_eval(tunnel, seed=seed, n=settings["n_eval"])

    def kl(model) -> float:
        with torch.no_grad():
            return float(calibration.calibration_report(batch.posterior,
                                                        wind_tunnels.bijection_log_probs(model, batch)).kl_bits)

    untrained = wind_tunnels.untrained_model(tunnel, seed).eval()
    return {"initial": kl(untrained), "final": kl(run.model()), "final_train_loss": float(np.mean(run.losses[-20:]))}


#: Each kind's run, and the unit of its score.
KINDS = {"head": (head_freeze_run, "nats (probe cross-entropy)"), "tunnel": (tunnel_freeze_run, "bits (KL to the exact posterior)")}


def freeze_run(kind: str, seed: int, freeze_at: int | None, settings: Mapping[str, Any]) -> dict[str, Any]:
    """Return one freeze run of ``kind`` (``"head"`` or ``"tunnel"``): ``{"seed", "freeze_at", "initial", "final", …}``."""
    if kind not in KINDS:
        raise ValueError(f"unknown kind {kind!r}; choose from {', '.join(KINDS)}")
    return {"seed": int(seed), "freeze_at": freeze_at, **KINDS[kind][0](seed, freeze_at, settings)}


#: What ``data/frame_freeze.json`` holds (``book``). The head: chapter 4's book settings. The tunnel: chapter 6's
#: book-scale bijection transformer (its model, batch and learning rate) for a quarter of its steps with a
#: proportionally shorter warm-up (2 shared cores: a reduced but stated budget). ``fast``: the tests' smoke run.
SPECS: dict[str, dict[str, dict[str, Any]]] = {
    "book": {
        "head": {"settings": {"steps": 2000, "lr": 0.5, "n_train": 256, "n_probe": 256}, "seeds": [0, 1, 2],
                 "freeze_steps": [0, 25, 50, 100, 150, 200, 300, 400, 600, 1000]},
        "tunnel": {"settings": {"tunnel": {**dataclasses.asdict(wind_tunnels.BIJECTION_TUNNELS["book"]),
                                           "steps": 500, "warmup_steps": 50}, "n_eval": 1000},
                   "seeds": [0, 1], "freeze_steps": [0, 50, 200]},
    },
    "fast": {
        "head": {"settings": {"steps": 60, "lr": 0.5, "n_train": 32, "n_probe": 32}, "seeds": [0, 1],
                 "freeze_steps": [0, 30]},
        "tunnel": {"settings": {"tunnel": {**dataclasses.asdict(wind_tunnels.BIJECTION_TUNNELS["fast"]),
                                           "steps": 20, "warmup_steps": 5}, "n_eval": 32},
                   "seeds": [0], "freeze_steps": [0, 10]},
    },
}
#: The file the chapter loads (chapter 6 re-reads the tunnel's runs through the library's name for it).
FILE = FRAME_FREEZE_FILE


def freeze_jobs(scale: str, seeds: Sequence[int] | None = None, *,
                specs: Mapping[str, Mapping[str, Mapping[str, Any]]] = SPECS) -> list[Job]:
    """Return every (kind, seed, freeze step) run at ``scale``, the unfrozen reference of each seed included."""
    jobs = []
    for kind, spec in specs[scale].items():
        steps = total_steps(spec)
        for seed in seeds if seeds is not None else spec["seeds"]:
            for t in [None, *spec["freeze_steps"]]:
                jobs.append(Job(f"{kind}-seed{seed}-freeze{'none' if t is None else t}", freeze_run,
                                {"kind": kind, "seed": int(seed), "freeze_at": t, "settings": spec["settings"]},
                                cost=steps * (20.0 if kind == "tunnel" else 1.0)))
    return jobs


def assemble_freeze(scale: str, outputs: Mapping[str, Any], folder: Path, *,
                    specs: Mapping[str, Mapping[str, Mapping[str, Any]]] = SPECS, file: str = FILE,
                    name: str = "frame_freeze") -> None:
    """Write ``frame_freeze.json``: per kind, its settings, seeds, freeze steps, unit and every run."""
    seeds = sorted({o["seed"] for o in outputs.values()})
    result: dict[str, Any] = {"about": "Freezing the frame (chapter 4): written by "
                                       f"`python -m attention_dynamics compute {name}`.", "scale": scale}
    for kind, spec in specs[scale].items():
        runs = [outputs[k] for k in sorted(outputs) if k.startswith(f"{kind}-")]
        kind_seeds = sorted({r["seed"] for r in runs})
        result[kind] = {"kind": kind, "settings": spec["settings"], "seeds": kind_seeds or seeds,
                        "freeze_steps": list(spec["freeze_steps"]), "unit": KINDS[kind][1],
                        "runs": sorted(runs, key=lambda r: (r["seed"], -1 if r["freeze_at"] is None else r["freeze_at"]))}
    save_results(result, folder / file)


FRAME_FREEZE = StoredResult(
    name="frame_freeze", chapter="two_timescale_em",
    about="freezing W_Q, W_K at step t: chapter 4's recall head and chapter 6's bijection tunnel",
    files=(FILE,), specs=SPECS, committed_scale="book",
    expected={"fast": "9 jobs, under a minute", "book": "41 jobs: 33 recall heads (~1 CPU-min each) and 8 tunnels "
                                                          "(~4 CPU-min each), ~70 CPU-min"},
    jobs=freeze_jobs, assemble=assemble_freeze)


#: The tunnel's freeze at initialisation at chapter 6's full budget (its book-scale bijection transformer, 2,000
#: steps with its own warm-up: four times the stored runs above), three seeds: the run length at which a small cost
#: of freezing the frame is a finding rather than a budget's effect (chapter 6's causal reading of the geometry).
FULL_SPECS: dict[str, dict[str, dict[str, Any]]] = {
    "book": {"tunnel": {"settings": {"tunnel": dataclasses.asdict(wind_tunnels.BIJECTION_TUNNELS["book"]),
                                     "n_eval": 1000}, "seeds": [0, 1, 2], "freeze_steps": [0]}},
    "fast": {"tunnel": {"settings": {"tunnel": dataclasses.asdict(wind_tunnels.BIJECTION_TUNNELS["fast"]),
                                     "n_eval": 32}, "seeds": [0], "freeze_steps": [0]}},
}
#: The file of the full-budget runs (the library reads it: :func:`~attention_dynamics.ledger.frame_results.load_frame_freeze_full`).
FULL_FILE = FRAME_FREEZE_FULL_FILE


def full_budget_jobs(scale: str, seeds: Sequence[int] | None = None) -> list[Job]:
    """Return the full-budget runs: per seed the unfrozen tunnel and the one frozen at initialisation."""
    return freeze_jobs(scale, seeds, specs=FULL_SPECS)


def assemble_full_budget(scale: str, outputs: Mapping[str, Any], folder: Path) -> None:
    """Write ``frame_freeze_full.json`` (the layout of ``frame_freeze.json``, the tunnel only)."""
    assemble_freeze(scale, outputs, folder, specs=FULL_SPECS, file=FULL_FILE, name="frame_freeze_full")


FRAME_FREEZE_FULL = StoredResult(
    name="frame_freeze_full", chapter="two_timescale_em",
    about="freezing W_Q, W_K at initialisation in chapter 6's bijection tunnel at its full budget, three seeds",
    files=(FULL_FILE,), specs=FULL_SPECS, committed_scale="book",
    expected={"fast": "2 jobs, under a minute", "book": "6 jobs (3 seeds × unfrozen and frozen at step 0, 2,000 "
                                                         "steps each, ~4 CPU-min each), ~25 CPU-min"},
    jobs=full_budget_jobs, assemble=assemble_full_budget)
