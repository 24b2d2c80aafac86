"""The learning-rate surface of the sticky-chain experiment (chapter 5): which group's step makes it fast.

The paper's "EM-like" schedule multiplies SGD's learning rate 0.01 by ten on ``W_V`` only. This
module measures the paper's metric (:func:`attention_dynamics.experiments.em_vs_sgd.paper_speedup`:
threshold = SGD's mean final loss on the same seeds, speed-up = steps / mean first step below it)
for ×10 on each parameter group alone — routing (``W_Q`` and ``W_K``), values (``W_V``), readout
(``W_O``) — on the pairs, and on all three (the matched control), and on a grid of ratios
(η_QK, η_V, η_O) / 0.01. A speed-up of 1 means the schedule reaches SGD's mean final loss, on
average, only at the last of SGD's steps: no faster than SGD.

Every run is one job of :func:`attention_dynamics.experiments.em_vs_sgd.run_heavy_job` (the
paper-scale runner, cached per job so an interrupted computation resumes). The jobs come in
stages of decreasing priority (:func:`surface_jobs`); :func:`collect_surface_results` builds the
results from whatever jobs are finished, so a partial computation gives a partial but honest file.
"""

from __future__ import annotations

import itertools
import math
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import scipy.stats

from ..training.schedules import lr_ratio_schedule
from .em_vs_sgd import (
    _first_crossings,
    bootstrap_speedup_ci,
    heavy_job_cache_path,
    paper_speedup,
    run_heavy_job,
)
from ..tasks import sticky_chain
from ..training import map_parallel

__all__ = [
    "CONDITIONS",
    "CLAIM_CONDITIONS",
    "SURFACE_FILE",
    "SURFACE_CONFIG",
    "condition_schedule",
    "surface_stages",
    "surface_jobs",
    "bootstrap_speedup_ratio_ci",
    "collect_surface_results",
    "compute_lr_surface",
    "intervals_separate",
    "surface_table",
    "with_values_only_from",
    "m_step_value_step_ratio",
    "values_axis",
    "values_axis_speedup_at",
    "plot_values_axis",
    "plot_condition_speedups",
    "plot_lr_surface",
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
    """Return the :func:`~attention_dynamics.experiments.em_vs_sgd.run_heavy_job` jobs of ``stages`` (default: all), in order."""
    jobs = []
    for name, seeds, points in surface_stages(config):
        if stages is not None and name not in stages:
            continue
        for ratios in points:
            for seed in seeds:
                jobs.append(dict(task="head", group="surface", seed=int(seed), schedule=condition_schedule(ratios),
                                 steps=config["steps"], length=config["length"]))
    return jobs


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
    config: Mapping[str, Any] = SURFACE_CONFIG,
    *,
    cache_dir: str | Path,
    baseline_finals: Mapping[int, float] | None = None,
) -> dict[str, Any]:
    """Return the surface's results from the finished jobs in ``cache_dir`` (nothing is trained here).

    ``paper_seeds``: every condition finished on the paper's seeds; ``twenty_seeds``: every condition
    finished on all paper and extra seeds; ``grid``: the grid points (conditions included) finished on
    the paper's seeds; ``missing``: what is not finished. The threshold on a seed is SGD's final loss
    from the cache, or else from ``baseline_finals`` (seed → final loss; the paper-scale file's SGD
    runs, the same computation); ``baseline_source`` says which seeds took it from there.
    """
    cache = Path(cache_dir)
    runs: dict[tuple, dict] = {}
    missing: dict[str, list] = {}
    for stage, seeds, points in surface_stages(config):
        for ratios in points:
            for seed in seeds:
                job = dict(task="head", group="surface", seed=int(seed), schedule=condition_schedule(ratios),
                           steps=config["steps"], length=config["length"])
                if heavy_job_cache_path(cache, **job).exists():
                    runs[(tuple(ratios), int(seed))] = run_heavy_job(cache_dir=str(cache), **job)
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


def compute_lr_surface(
    config: Mapping[str, Any] = SURFACE_CONFIG,
    *,
    cache_dir: str | Path,
    stages: Sequence[str] | None = None,
    processes: int | None = None,
    baseline_finals: Mapping[int, float] | None = None,
) -> dict[str, Any]:
    """Run the jobs of ``stages`` (default: all; finished ones are read from ``cache_dir``) and collect the results."""
    jobs = surface_jobs(config, stages)
    for job in jobs:
        job["cache_dir"] = str(cache_dir)
    map_parallel(run_heavy_job, jobs, processes=processes)
    return collect_surface_results(config, cache_dir=cache_dir, baseline_finals=baseline_finals)


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

    One row per condition (its ratios on routing, values, readout); the values-only-over-condition
    column is the paired bootstrap ratio (above 1: values only is faster).
    """
    import pandas as pd

    rows = []
    for name, ratios in CONDITIONS.items():
        row: dict[str, Any] = {"condition": name, "lr ratios (QK, V, O)": "({:g}, {:g}, {:g})".format(*ratios)}
        for key, label in (("paper_seeds", "5 seeds"), ("twenty_seeds", "20 seeds")):
            block = results.get(key) or {"conditions": {}, "comparisons": {}}
            cond = block["conditions"].get(name)
            row[f"speed-up, {label}"] = cond["speedup"] if cond else np.nan
            row[f"95% CI, {label}"] = f"{cond['ci']['low']:.2f}–{cond['ci']['high']:.2f}" if cond else ""
        rows.append(row)
    return pd.DataFrame(rows).set_index("condition").round(digits)


def m_step_value_step_ratio(seed: int, rho: float, *, length: int = sticky_chain.SEQUENCE_LENGTH) -> float:
    """Return how many times larger the closed-form M-step moves ``W_V`` than SGD's step, at initialisation.

    ‖rho S⁻¹ ∇_{W_V}L‖_F / ‖0.01 ∇_{W_V}L‖_F on the seed's sequence and initial weights (float64): the
    value learning-rate ratio at which the M-step sits on the surface's values axis, by the size of
    its first step.
    """
    import torch

    from ..training.head_engine import closed_form_head_pass
    from ..training.schedules import BASE_LR, m_step_direction
    from .em_vs_sgd import initial_head

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


def plot_values_axis(results: Mapping[str, Any], m_step: Mapping[float, tuple[float, float]]):
    """Plot the values-only speed-up against η_V / 0.01 and the M-step at its first step's size; return the figure.

    ``m_step`` maps rho to (value-step ratio at initialisation, speed-up) on the same seeds.
    """
    from .. import plotting

    axis = values_axis(results)
    fig, ax = plotting.new_figure(width=5.2, height=3.4)
    ax.plot(axis["ratio"], axis["speedup"], "o-", color=plotting.schedule_color("em_like"),
            label="gradient step, ×η_V on W_V only")
    for k, (rho, (ratio, speed)) in enumerate(sorted(m_step.items())):
        ax.plot(ratio, speed, "s", color=plotting.schedule_color("m_step"),
                label="closed-form M-step (ρ = 0.1, 0.3, 1, 3)" if k == 0 else None)
        ax.annotate(f"ρ = {rho:g}", (ratio, speed), textcoords="offset points", xytext=(5, -10), fontsize=7)
    ax.axhline(1.0, color="0.4", ls=":", lw=1)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("size of the W_V step / SGD's (η_V / 0.01; M-step: at initialisation)")
    ax.set_ylabel("speed-up over SGD (log scale)")
    ax.set_title("The values axis of the surface, paper's five seeds")
    ax.legend(fontsize=7)
    return fig


def plot_condition_speedups(results: Mapping[str, Any], *, m_step: Mapping[str, float] | None = None):
    """Plot the speed-up of every ×10 condition with its 95% interval, on 5 and 20 seeds; return the figure.

    ``m_step`` (optional) maps a label to a speed-up drawn as a horizontal line (the closed-form M-step).
    """
    from .. import plotting

    names = [n for n in CONDITIONS if n != "sgd"]
    fig, ax = plotting.new_figure(width=6.6, height=3.6)
    for offset, key, label in ((-0.17, "paper_seeds", "paper's 5 seeds"), (0.17, "twenty_seeds", "20 seeds")):
        block = results.get(key)
        if not block:
            continue
        xs, ys, lo, hi = [], [], [], []
        for k, name in enumerate(names):
            cond = block["conditions"].get(name)
            if cond:
                xs.append(k + offset)
                ys.append(cond["speedup"])
                lo.append(cond["speedup"] - cond["ci"]["low"])
                hi.append(cond["ci"]["high"] - cond["speedup"])
        ax.errorbar(xs, ys, yerr=[lo, hi], fmt="o", capsize=3, label=label,
                    color=plotting.PALETTE[0 if key == "paper_seeds" else 1])
    ax.axhline(1.0, color="0.4", ls=":", lw=1, label="1: threshold reached at SGD's last step")
    sgd = (results.get("paper_seeds") or {}).get("conditions", {}).get("sgd")
    if sgd:
        ax.axhline(sgd["speedup"], color="0.2", ls="--", lw=1, label="SGD's own score (paper's seeds)")
    for k, (label, value) in enumerate((m_step or {}).items()):
        ax.axhline(value, color=plotting.PALETTE[3 + k % 5], ls="--", lw=1, label=label)
    ax.set_yscale("log")
    ax.set_xticks(range(len(names)))
    short = {"values_only": "W_V", "readout_only": "W_O", "routing_only": "W_Q, W_K", "values_readout": "W_V, W_O",
             "routing_values": "W_QK, W_V", "routing_readout": "W_QK, W_O", "all_three": "all"}
    ax.set_xticklabels([f"{short[n]}\n" + "({:g}, {:g}, {:g})".format(*CONDITIONS[n]) for n in names], fontsize=7)
    ax.set_xlabel("groups raised ×10; ratios (W_Q+W_K, W_V, W_O) / 0.01")
    ax.set_ylabel("speed-up over SGD (log scale)")
    ax.set_title("The paper's metric, ×10 on each group and pair (95% bootstrap intervals)")
    ax.legend(fontsize=7, loc="upper left")
    return fig


def plot_lr_surface(results: Mapping[str, Any]):
    """Plot the grid's speed-ups as one (η_V, η_O) heat map per routing ratio; return the figure.

    Points not computed are left blank and marked "not run".
    """
    from .. import plotting

    levels = list(results["config"]["grid_levels"])
    points = {tuple(p["ratios"]): p["speedup"] for p in results["grid"]}
    fig, axes = plotting.new_figure(len(levels), width=2.5, height=2.6, sharey=True)
    vmax = max(points.values()) if points else 1.0
    for ax, qk in zip(np.atleast_1d(axes), levels):
        grid = np.full((len(levels), len(levels)), np.nan)
        for i, v in enumerate(levels):
            for j, o in enumerate(levels):
                grid[i, j] = points.get((qk, v, o), np.nan)
        ax.imshow(grid, origin="lower", cmap=plotting.SEQUENTIAL_CMAP, vmin=1.0, vmax=vmax,
                  norm=None, aspect="equal")
        for i in range(len(levels)):
            for j in range(len(levels)):
                text = "not run" if math.isnan(grid[i, j]) else f"{grid[i, j]:.1f}"
                ax.text(j, i, text, ha="center", va="center", fontsize=7 if math.isnan(grid[i, j]) else 9,
                        color="0.4" if math.isnan(grid[i, j]) else ("white" if grid[i, j] < 0.6 * vmax else "black"))
        ax.set_xticks(range(len(levels)), [f"{o:g}" for o in levels])
        ax.set_yticks(range(len(levels)), [f"{v:g}" for v in levels])
        ax.set_xlabel("η_O / 0.01")
        ax.set_title(f"η_QK / 0.01 = {qk:g}", fontsize=10)
        ax.grid(False)
    np.atleast_1d(axes)[0].set_ylabel("η_V / 0.01")
    fig.suptitle("Speed-up over SGD on the paper's five seeds")
    return fig


def main(argv: Sequence[str] | None = None) -> int:
    """Run the surface's jobs stage by stage, writing the results after each (``python -m attention_dynamics.experiments.lr_surface``)."""
    import argparse

    from ..paths import data_path
    from .em_vs_sgd import PAPER_SCALE_FILE
    from ..results import load_results, save_results

    parser = argparse.ArgumentParser(description="Compute the sticky chain's learning-rate surface.")
    parser.add_argument("--output", type=Path, default=data_path(SURFACE_FILE), help="JSON file to write")
    parser.add_argument("--cache-dir", default="build/lr_surface/cache", help="folder for finished jobs (resumes)")
    parser.add_argument("--stages", nargs="*", default=None, help="stages to run (default: all, in order)")
    parser.add_argument("--processes", type=int, default=1, help="worker processes")
    parser.add_argument("--collect-only", action="store_true", help="only collect what the cache holds")
    args = parser.parse_args(argv)
    heavy = load_results(data_path(PAPER_SCALE_FILE))["ci"]["reference"]
    baseline = dict(zip(heavy["seeds"]["sgd"], (f["loss"] for f in heavy["final"]["sgd"])))
    stages = [] if args.collect_only else (args.stages or [name for name, _, _ in surface_stages(SURFACE_CONFIG)])
    for stage in stages:
        compute_lr_surface(SURFACE_CONFIG, cache_dir=args.cache_dir, stages=[stage], processes=args.processes,
                           baseline_finals=baseline)
        print(f"stage {stage} done", flush=True)
    results = collect_surface_results(SURFACE_CONFIG, cache_dir=args.cache_dir, baseline_finals=baseline)
    print(f"wrote {save_results(results, args.output)}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
