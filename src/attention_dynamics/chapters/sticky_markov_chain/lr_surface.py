"""The learning-rate surface of the sticky-chain experiment (chapter 5): which group's step makes it fast.

The paper's "EM-like" schedule multiplies SGD's learning rate 0.01 by ten on ``W_V`` only. This
module measures the paper's metric (:func:`attention_dynamics.science.speedup.paper_speedup`:
threshold = SGD's mean final loss on the same seeds, speed-up = steps / mean first step below it)
for ×10 on each parameter group alone — routing (``W_Q`` and ``W_K``), values (``W_V``), readout
(``W_O``) — on the pairs, and on all three (the matched control), and on a grid of ratios
(η_QK, η_V, η_O) / 0.01. A speed-up of 1 means the schedule reaches SGD's mean final loss, on
average, only at the last of SGD's steps: no faster than SGD.

Every run is one job of :func:`~attention_dynamics.chapters.sticky_markov_chain.paper_scale.heavy_job` (``python -m attention_dynamics compute
sticky_chain_lr_surface``, resumable per job). The jobs come in stages of decreasing priority
(:func:`surface_stages`); the committed scale (``book``) runs all but the last, the grid, which ``--scale paper``
adds; :func:`collect_surface_results` builds the results from the jobs a scale runs and lists the others as
missing, so a partial computation gives a partial but honest file.
"""

from __future__ import annotations

import itertools
import math
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd
import torch

from ...ledger.results import Job, StoredResult, save_results
from ...models.single_head import initial_head
from ...science.speedup import bootstrap_speedup_ci, bootstrap_speedup_ratio_ci, paper_speedup
from ...tasks import sticky_chain
from ...training.head_engine import closed_form_head_pass
from ...training.schedules import BASE_LR, lr_ratio_schedule, m_step_direction
from . import paper_scale

__all__ = [
    "CONDITIONS",
    "CONDITION_LABELS",
    "SURFACE_GLUES",
    "CLAIM_CONDITIONS",
    "SURFACE_FILE",
    "SURFACE_CONFIG",
    "condition_schedule",
    "surface_stages",
    "surface_jobs",
    "SCALES",
    "lr_surface_jobs",
    "assemble_lr_surface",
    "collect_surface_results",
    "with_values_only_from",
    "surface_table",
    "m_step_value_step_ratio",
    "values_axis",
    "values_axis_speedup_at",
    "LR_SURFACE",
]

#: Learning-rate ratios (routing W_Q+W_K, values W_V, readout W_O) of each condition; SGD is (1, 1, 1).
CONDITIONS: dict[str, tuple[float, float, float]] = {
    "sgd": (1, 1, 1),
    "values_only": (1, 10, 1),  # the paper's EM-like schedule
    "readout_only": (1, 1, 10),
    "routing_only": (10, 1, 1),
    "values_readout": (1, 10, 10),
    "routing_values": (10, 10, 1),
    "routing_readout": (10, 1, 10),
    "all_three": (10, 10, 10),  # the matched control, sgd_matched
}
#: The reader's name of each condition: which matrices take the tenfold learning rate.
CONDITION_LABELS = {"sgd": "none (SGD)", "values_only": "W_V (the paper's EM-like)", "readout_only": "W_O",
                    "routing_only": "W_Q, W_K", "values_readout": "W_V, W_O", "routing_values": "W_Q, W_K, W_V",
                    "routing_readout": "W_Q, W_K, W_O", "all_three": "all four"}
#: The surface's glue names, by (block: the paper's five seeds or twenty, condition or paired comparison): (point,
#: low end, high end of its 95% interval).
SURFACE_GLUES = {
    ("paper_seeds", "sgd"): ("sticky.surface_sgd_5", "sticky.surface_sgd_5_low", "sticky.surface_sgd_5_high"),
    ("paper_seeds", "values_only"):
        ("sticky.surface_values_only_5", "sticky.surface_values_only_5_low", "sticky.surface_values_only_5_high"),
    ("paper_seeds", "readout_only"):
        ("sticky.surface_readout_only_5", "sticky.surface_readout_only_5_low", "sticky.surface_readout_only_5_high"),
    ("paper_seeds", "routing_only"):
        ("sticky.surface_routing_only_5", "sticky.surface_routing_only_5_low", "sticky.surface_routing_only_5_high"),
    ("paper_seeds", "values_readout"):
        ("sticky.surface_values_readout_5", "sticky.surface_values_readout_5_low",
         "sticky.surface_values_readout_5_high"),
    ("paper_seeds", "routing_values"):
        ("sticky.surface_routing_values_5", "sticky.surface_routing_values_5_low",
         "sticky.surface_routing_values_5_high"),
    ("paper_seeds", "routing_readout"):
        ("sticky.surface_routing_readout_5", "sticky.surface_routing_readout_5_low",
         "sticky.surface_routing_readout_5_high"),
    ("paper_seeds", "all_three"):
        ("sticky.surface_all_three_5", "sticky.surface_all_three_5_low", "sticky.surface_all_three_5_high"),
    ("paper_seeds", "values_only_over_readout_only"):
        ("sticky.surface_values_only_over_readout_only_5", "sticky.surface_values_only_over_readout_only_5_low",
         "sticky.surface_values_only_over_readout_only_5_high"),
    ("paper_seeds", "values_only_over_routing_only"):
        ("sticky.surface_values_only_over_routing_only_5", "sticky.surface_values_only_over_routing_only_5_low",
         "sticky.surface_values_only_over_routing_only_5_high"),
    ("paper_seeds", "values_only_over_values_readout"):
        ("sticky.surface_values_only_over_values_readout_5", "sticky.surface_values_only_over_values_readout_5_low",
         "sticky.surface_values_only_over_values_readout_5_high"),
    ("paper_seeds", "values_only_over_routing_values"):
        ("sticky.surface_values_only_over_routing_values_5", "sticky.surface_values_only_over_routing_values_5_low",
         "sticky.surface_values_only_over_routing_values_5_high"),
    ("paper_seeds", "values_only_over_routing_readout"):
        ("sticky.surface_values_only_over_routing_readout_5", "sticky.surface_values_only_over_routing_readout_5_low",
         "sticky.surface_values_only_over_routing_readout_5_high"),
    ("paper_seeds", "values_only_over_all_three"):
        ("sticky.surface_values_only_over_all_three_5", "sticky.surface_values_only_over_all_three_5_low",
         "sticky.surface_values_only_over_all_three_5_high"),
    ("twenty_seeds", "sgd"): ("sticky.surface_sgd_20", "sticky.surface_sgd_20_low", "sticky.surface_sgd_20_high"),
    ("twenty_seeds", "values_only"):
        ("sticky.surface_values_only_20", "sticky.surface_values_only_20_low", "sticky.surface_values_only_20_high"),
    ("twenty_seeds", "readout_only"):
        ("sticky.surface_readout_only_20", "sticky.surface_readout_only_20_low", "sticky.surface_readout_only_20_high"),
    ("twenty_seeds", "routing_only"):
        ("sticky.surface_routing_only_20", "sticky.surface_routing_only_20_low", "sticky.surface_routing_only_20_high"),
    ("twenty_seeds", "values_readout"):
        ("sticky.surface_values_readout_20", "sticky.surface_values_readout_20_low",
         "sticky.surface_values_readout_20_high"),
    ("twenty_seeds", "routing_values"):
        ("sticky.surface_routing_values_20", "sticky.surface_routing_values_20_low",
         "sticky.surface_routing_values_20_high"),
    ("twenty_seeds", "routing_readout"):
        ("sticky.surface_routing_readout_20", "sticky.surface_routing_readout_20_low",
         "sticky.surface_routing_readout_20_high"),
    ("twenty_seeds", "all_three"):
        ("sticky.surface_all_three_20", "sticky.surface_all_three_20_low", "sticky.surface_all_three_20_high"),
    ("twenty_seeds", "values_only_over_readout_only"):
        ("sticky.surface_values_only_over_readout_only_20", "sticky.surface_values_only_over_readout_only_20_low",
         "sticky.surface_values_only_over_readout_only_20_high"),
    ("twenty_seeds", "values_only_over_routing_only"):
        ("sticky.surface_values_only_over_routing_only_20", "sticky.surface_values_only_over_routing_only_20_low",
         "sticky.surface_values_only_over_routing_only_20_high"),
    ("twenty_seeds", "values_only_over_values_readout"):
        ("sticky.surface_values_only_over_values_readout_20", "sticky.surface_values_only_over_values_readout_20_low",
         "sticky.surface_values_only_over_values_readout_20_high"),
    ("twenty_seeds", "values_only_over_routing_values"):
        ("sticky.surface_values_only_over_routing_values_20", "sticky.surface_values_only_over_routing_values_20_low",
         "sticky.surface_values_only_over_routing_values_20_high"),
    ("twenty_seeds", "values_only_over_routing_readout"):
        ("sticky.surface_values_only_over_routing_readout_20", "sticky.surface_values_only_over_routing_readout_20_low",
         "sticky.surface_values_only_over_routing_readout_20_high"),
    ("twenty_seeds", "values_only_over_all_three"):
        ("sticky.surface_values_only_over_all_three_20", "sticky.surface_values_only_over_all_three_20_low",
         "sticky.surface_values_only_over_all_three_20_high"),
}
#: The conditions with a ledger claim, in the order they are computed on twenty seeds.
CLAIM_CONDITIONS = ("values_only", "readout_only", "routing_only", "values_readout")

SURFACE_FILE = "sticky_chain_lr_surface.json"
_PAPER = list(sticky_chain.PAPER_SEEDS)
SURFACE_CONFIG: dict[str, Any] = {
    "steps": 1000,
    "length": sticky_chain.SEQUENCE_LENGTH,
    "paper_seeds": _PAPER,
    "extra_seeds": list(range(1, 16)),
    "values_axis_levels": [30],
    "grid_levels": [1, 3, 10],
    "bootstrap_resamples": 10_000,
    "confidence": 0.95,
}


def condition_schedule(ratios: Sequence[float]) -> str:
    """Return the schedule name of learning-rate ``ratios`` (routing, values, readout)."""
    return lr_ratio_schedule(*ratios).name


def surface_stages(config: Mapping[str, Any] = SURFACE_CONFIG) -> list[tuple[str, list[int], list[tuple]]]:
    """Return the computation's stages, most important first: ``(name, seeds, list of ratio triples)``.

    1. ``paper``: SGD and the seven ×10 conditions on the paper's five seeds;
    2. ``values_axis``: values only at the ratios ``values_axis_levels`` on the paper's seeds (where
       the closed-form M-step's step size lies);
    3. ``twenty_claims``: the four claimed conditions and SGD on the extra seeds (twenty in all);
    4. ``twenty_rest``: the other three conditions on the extra seeds;
    5. ``grid``: the other grid points (levels³) on the paper's seeds, the single-group axes first.
    """
    paper, extra = list(config["paper_seeds"]), list(config["extra_seeds"])
    corners = list(CONDITIONS.values())
    # SGD last: the paper-scale file already has SGD's final losses on these seeds (the baseline)
    claimed = [CONDITIONS[c] for c in ("readout_only", "routing_only", "values_only", "values_readout", "sgd")]
    rest = [r for r in corners if r not in claimed]
    values_axis = [(1, v, 1) for v in config["values_axis_levels"]]
    levels = config["grid_levels"]
    grid = [tuple(p) for p in itertools.product(levels, repeat=3) if tuple(p) not in corners + values_axis]
    grid.sort(key=lambda p: (sum(r != 1 for r in p), p))  # single-group points (axes) first
    return [("paper", paper, corners), ("values_axis", paper, values_axis), ("twenty_claims", extra, claimed),
            ("twenty_rest", extra, rest), ("grid", paper, grid)]


def surface_jobs(config: Mapping[str, Any] = SURFACE_CONFIG, stages: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """Return the :func:`~attention_dynamics.chapters.sticky_markov_chain.paper_scale.heavy_job` jobs of ``stages`` (default: all), in order."""
    jobs = []
    for name, seeds, points in surface_stages(config):
        if stages is not None and name not in stages:
            continue
        for ratios in points:
            for seed in seeds:
                jobs.append(dict(task="head", group="surface", seed=int(seed), schedule=condition_schedule(ratios),
                                 steps=config["steps"], length=config["length"]))
    return jobs


#: The scales: the configuration and the stages each runs. ``book``: the committed file (every stage but the
#: grid); ``paper``: the grid too (95 runs of 1,000 steps more: a cluster's job); ``fast``: the tests'.
SCALES: dict[str, tuple[dict[str, Any], tuple[str, ...]]] = {
    "book": (SURFACE_CONFIG, ("paper", "values_axis", "twenty_claims", "twenty_rest")),
    "paper": (SURFACE_CONFIG, ("paper", "values_axis", "twenty_claims", "twenty_rest", "grid")),
    "fast": ({**SURFACE_CONFIG, "steps": 30, "length": 200, "paper_seeds": [42, 2024], "extra_seeds": [1],
              "values_axis_levels": [30], "grid_levels": [1, 10], "bootstrap_resamples": 200},
             ("paper", "values_axis", "twenty_claims", "twenty_rest", "grid")),
}


def lr_surface_jobs(scale: str, seeds: Sequence[int] | None = None) -> list[Job]:
    """Return the surface's jobs at ``scale`` (its configuration's seeds; the stages the scale runs)."""
    if seeds is not None:
        raise ValueError("the surface's seeds are fixed by its configuration (paper seeds and extra seeds)")
    config, stages = LR_SURFACE.spec(scale)
    return [Job(paper_scale.job_key(j), paper_scale.heavy_job, j, cost=float(j["steps"]))
            for j in surface_jobs(config, stages)]


def assemble_lr_surface(scale: str, outputs: Mapping[str, Any], folder: Path) -> None:
    """Write ``sticky_chain_lr_surface.json``; at the committed scale, SGD's final losses on seeds the surface did not
    run come from the paper-scale file (the same computation)."""
    config, _ = LR_SURFACE.spec(scale)
    baseline = None
    if scale != "fast":
        heavy = paper_scale.PAPER_SCALE.load()["ci"]["reference"]
        baseline = dict(zip(heavy["seeds"]["sgd"], (f["loss"] for f in heavy["final"]["sgd"])))
    save_results(collect_surface_results(config, outputs, baseline_finals=baseline), folder / SURFACE_FILE)


def _block(seeds: Sequence[int], finals: Mapping[int, float], runs: Mapping[tuple, dict], names: Sequence[str],
           config: Mapping[str, Any]) -> dict[str, Any]:
    """The metric, its bootstrap interval and the paired comparisons of ``names`` on ``seeds``."""
    baseline = [finals[s] for s in seeds]
    block: dict[str, Any] = {"seeds": list(seeds), "sgd_final_loss": baseline,
                             "threshold": float(np.mean(baseline)), "conditions": {}, "comparisons": {}}
    curves = {}
    for name in names:
        ratios = CONDITIONS.get(name, name)
        curves[name] = [runs[(tuple(ratios), s)]["losses"] for s in seeds]
        speed = paper_speedup(baseline, curves[name])
        ci = bootstrap_speedup_ci(baseline, curves[name], confidence=config["confidence"],
                                  n_resamples=config["bootstrap_resamples"])
        block["conditions"][name] = {
            "ratios": list(ratios), "first_steps": speed["first_steps"], "mean_first_step": speed["mean_first_step"],
            "speedup": speed["speedup"], "ci": ci,
            "final_loss": [runs[(tuple(ratios), s)]["final"]["loss"] for s in seeds],
        }
    if "values_only" in curves:
        for other in names:
            if other not in ("values_only", "sgd"):
                block["comparisons"][f"values_only_over_{other}"] = bootstrap_speedup_ratio_ci(
                    baseline, curves["values_only"], curves[other], confidence=config["confidence"],
                    n_resamples=config["bootstrap_resamples"])
    return block


def collect_surface_results(
    config: Mapping[str, Any],
    outputs: Mapping[str, Any],
    *,
    baseline_finals: Mapping[int, float] | None = None,
) -> dict[str, Any]:
    """Return the surface's results from the jobs' ``outputs`` (``{job key: output}``; nothing is trained here).

    ``paper_seeds``: every condition finished on the paper's seeds; ``twenty_seeds``: every condition
    finished on all paper and extra seeds; ``grid``: the grid points (conditions included) finished on
    the paper's seeds; ``missing``: what is not in ``outputs``. The threshold on a seed is SGD's final loss
    from the outputs, or else from ``baseline_finals`` (seed → final loss; the paper-scale file's SGD
    runs, the same computation); ``baseline_source`` says which seeds took it from there.
    """
    runs: dict[tuple, dict] = {}
    missing: dict[str, list] = {}
    for stage, seeds, points in surface_stages(config):
        for ratios in points:
            for seed in seeds:
                job = dict(task="head", group="surface", seed=int(seed), schedule=condition_schedule(ratios),
                           steps=config["steps"], length=config["length"])
                key = paper_scale.job_key(job)
                if key in outputs:
                    runs[(tuple(ratios), int(seed))] = outputs[key]
                else:
                    missing.setdefault(stage, []).append([list(ratios), int(seed)])
    finals = {s: r["final"]["loss"] for (ratios, s), r in runs.items() if ratios == CONDITIONS["sgd"]}
    from_file = {}
    for seed, loss in (baseline_finals or {}).items():
        if int(seed) not in finals:
            finals[int(seed)] = float(loss)
            from_file[int(seed)] = float(loss)
    agreement = [abs(finals[int(s)] - float(v)) for s, v in (baseline_finals or {}).items() if int(s) not in from_file]

    def done(ratios, seeds):
        return all((tuple(ratios), s) in runs for s in seeds) and all(s in finals for s in seeds)

    paper = list(config["paper_seeds"])
    twenty = paper + list(config["extra_seeds"])
    results: dict[str, Any] = {
        "config": dict(config),
        "conditions": {name: list(r) for name, r in CONDITIONS.items()},
        "baseline_source": {"from_paper_scale_file": sorted(from_file),
                            "max_abs_difference_where_both": max(agreement) if agreement else None},
        "paper_seeds": _block(paper, finals, runs, [n for n, r in CONDITIONS.items() if done(r, paper)], config)
        if all(s in finals for s in paper) else None,
        "twenty_seeds": _block(twenty, finals, runs, [n for n, r in CONDITIONS.items() if done(r, twenty)], config)
        if any(done(r, twenty) for r in CONDITIONS.values()) else None,
        "grid": [],
        "missing": missing,
    }
    levels = config["grid_levels"]
    values_axis = [(1, v, 1) for v in config["values_axis_levels"] if (1, v, 1) not in itertools.product(levels, repeat=3)]
    for ratios in list(itertools.product(levels, repeat=3)) + values_axis:
        if done(ratios, paper):
            speed = paper_speedup([finals[s] for s in paper], [runs[(tuple(ratios), s)]["losses"] for s in paper])
            results["grid"].append({"ratios": list(ratios), "speedup": speed["speedup"],
                                    "first_steps": speed["first_steps"]})
    return results


def with_values_only_from(twenty: Mapping[str, Any] | None, paper_scale_block: Mapping[str, Any]) -> dict[str, Any]:
    """Return the twenty-seed block with values only taken from the paper-scale file where the surface lacks it.

    ``paper_scale_block`` is the paper-scale file's ``ci["reference"]``; its ``em_like`` runs are the
    values-only condition (the same learning rates, seeds, steps and SGD baseline). Returns an empty
    block when neither has twenty seeds of it.
    """
    block = {"seeds": [], "conditions": {}, "comparisons": {}, **(twenty or {})}
    block["conditions"] = dict(block["conditions"])
    if "values_only" not in block["conditions"] and "em_like" in paper_scale_block.get("speedup_ci", {}):
        speed = paper_scale_block["speedup"]["em_like"]
        block["conditions"]["values_only"] = {
            "ratios": list(CONDITIONS["values_only"]), "first_steps": speed["first_steps"],
            "mean_first_step": speed["mean_first_step"], "speedup": speed["speedup"],
            "ci": dict(paper_scale_block["speedup_ci"]["em_like"]), "source": "paper-scale file (em_like)",
            "seeds": list(paper_scale_block["seeds"]["em_like"]),
        }
    return block


def surface_table(results: Mapping[str, Any], digits: int = 3):
    """Return a pandas DataFrame of the speed-up of every condition with its 95% interval, on 5 and on 20 seeds.

    One row per condition, by the reader's name (:data:`CONDITION_LABELS`), with its ratios on routing, values,
    readout.
    """
    rows = []
    for name, ratios in CONDITIONS.items():
        row: dict[str, Any] = {"×10 on": CONDITION_LABELS[name],
                               "rate ratios (W_Q W_K, W_V, W_O)": "({:g}, {:g}, {:g})".format(*ratios)}
        for key, label in (("paper_seeds", "5 seeds"), ("twenty_seeds", "20 seeds")):
            block = results.get(key) or {"conditions": {}, "comparisons": {}}
            cond = block["conditions"].get(name)
            row[f"speed-up, {label}"] = cond["speedup"] if cond else np.nan
            row[f"95% CI, {label}"] = f"{cond['ci']['low']:.2f}–{cond['ci']['high']:.2f}" if cond else ""
        rows.append(row)
    return pd.DataFrame(rows).set_index("×10 on").round(digits)


def m_step_value_step_ratio(seed: int, rho: float, *, length: int = sticky_chain.SEQUENCE_LENGTH) -> float:
    """Return how many times larger the closed-form M-step moves ``W_V`` than SGD's step, at initialisation.

    ‖rho S⁻¹ ∇_{W_V}L‖_F / ‖0.01 ∇_{W_V}L‖_F on the seed's sequence and initial weights (float64): the
    value learning-rate ratio at which the M-step sits on the surface's values axis, by the size of
    its first step.
    """
    data = sticky_chain.make_sticky_chain_data(seed, length=length)
    x = data.x.double()
    out = closed_form_head_pass(x, initial_head(seed, dtype=torch.float64), data.y)
    grad = out.grads["W_V"]
    direction = m_step_direction(x, grad, out.soft_counts)
    return float(rho * torch.linalg.norm(direction) / (BASE_LR * torch.linalg.norm(grad)))


def values_axis(results: Mapping[str, Any]) -> dict[str, list[float]]:
    """Return the values-only points on the paper's seeds: ``ratio`` (η_V / 0.01, from 1 = SGD) and ``speedup``."""
    points = sorted((p["ratios"][1], p["speedup"]) for p in results["grid"]
                    if p["ratios"][0] == 1 and p["ratios"][2] == 1)
    return {"ratio": [float(r) for r, _ in points], "speedup": [float(v) for _, v in points]}


def values_axis_speedup_at(results: Mapping[str, Any], ratio: float) -> float:
    """Return the values-only speed-up at value-rate ``ratio``, interpolated linearly in log-log between points.

    ``nan`` outside the computed range (no extrapolation).
    """
    axis = values_axis(results)
    r, v = np.log(axis["ratio"]), np.log(axis["speedup"])
    x = math.log(ratio)
    if not len(r) or x < r[0] or x > r[-1]:
        return math.nan
    return float(np.exp(np.interp(x, r, v)))


LR_SURFACE = StoredResult(
    name="sticky_chain_lr_surface", chapter="sticky_markov_chain",
    about="the paper's speed-up for x10 on each parameter group, their pairs and all three, on 5 and 20 seeds, "
          "and the grid of learning-rate ratios",
    files=(SURFACE_FILE,), specs=SCALES, committed_scale="book", takes_seeds=False,
    expected={"fast": "26 jobs, a minute", "book": "165 jobs (runs of 1,000 steps), ~3 CPU-hours",
              "paper": "260 jobs: the grid too (95 runs more), ~4.5 CPU-hours (a cluster's job)"},
    jobs=lr_surface_jobs, assemble=assemble_lr_surface)
