"""Chapter 5's figures: the chains' transition rows, the protocol's loss curves, the long runs, the value
trajectories, the deep variant, the learning-rate surface, and the speed-up against the budget and the loss level."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch

from ...core import plotting
from ...tasks import sticky_chain
from ...training.schedules import SCHEDULES
from .lr_surface import CONDITIONS, values_axis
from .runs import trajectory_pca
from .settings import LN8, SCHEDULE_PAIR

__all__ = [
    "plot_transition_rows",
    "plot_protocol",
    "plot_long_runs",
    "plot_value_trajectories",
    "plot_deep",
    "plot_values_axis",
    "plot_condition_speedups",
    "plot_lr_surface",
    "plot_speedup_budget",
]


def plot_transition_rows(P: Mapping[str, torch.Tensor], row: int = 0):
    """Return the figure: row ``row`` of the nominal and the reference transition matrices as paired bars.
    Glued as ``fig-sticky-transition-rows``."""
    fig, ax = plotting.new_figure(width=6.0, height=3.0)
    width, n = 0.4, sticky_chain.N_SYMBOLS
    for offset, kind in ((-width / 2, "nominal"), (width / 2, "reference")):
        ax.bar(np.arange(n) + offset, P[kind][row].numpy(), width=width, label=f"{kind} chain")
    ax.set_xticks(range(n))
    ax.set_xlabel(f"next symbol $j$ (from symbol $i$ = {row})")
    ax.set_ylabel(f"transition probability $P_{{{row}j}}$")
    ax.set_title(f"Row {row} of the two transition matrices")
    ax.legend()
    return fig


def plot_protocol(runs: Mapping[tuple[str, int], Any], seeds: Sequence[int], speedup: Mapping[str, Any]):
    """Return the figure: each schedule's training loss (mean and range over ``seeds``), the paper's threshold,
    ln 8 and EM-like's mean first step below the threshold; the legend below the panel.
    Glued as ``fig-sticky-protocol``."""
    fig, ax = plotting.new_figure(width=6.4, height=4.2)
    for name in SCHEDULE_PAIR:
        curves = np.array([runs[(name, s)].losses for s in seeds])  # (seeds, steps)
        step_axis = np.arange(curves.shape[1])
        color = plotting.schedule_color(name)
        ax.plot(step_axis, curves.mean(0), color=color, label=SCHEDULES[name].label)
        ax.fill_between(step_axis, curves.min(0), curves.max(0), color=color, alpha=0.2)
    ax.axhline(speedup["threshold"], color="0.3", ls="--", lw=1, label="SGD's mean final loss (threshold)")
    ax.axhline(LN8, color="0.6", ls=":", lw=1, label=r"uniform prediction, $\ln 8$")
    ax.axvline(speedup["mean_first_step"], color=plotting.schedule_color("em_like"), ls="--", lw=1,
               label="EM-like: mean first step below threshold")
    ax.set_xlabel("training step")
    ax.set_ylabel("training loss (nats)")
    ax.set_title(f"The paper's protocol: mean and range over {len(seeds)} seeds")
    fig.legend(*ax.get_legend_handles_labels(), loc="outside lower center", ncols=2)
    return fig


def plot_long_runs(heavy: Mapping[str, Any], hmin: float, protocol_steps: int):
    """Return the figure: each schedule's long run of the first seed, (a) on its training sequence,
    (b) on the held-out sequences, against H_min, ln 8 and (b) the exact filter; a grey line marks ``protocol_steps``;
    one legend below both panels.
    Glued as ``fig-sticky-long-runs``."""
    long_runs = heavy["long_run"]["runs"]
    fig, axes = plotting.new_figure(2, width=3.8, height=3.4, sharey=True)
    for name, rs in long_runs.items():
        run, color = rs[0], plotting.schedule_color(name)
        axes[0].plot(np.array(run["loss_steps"]) + 1, run["losses"], color=color, label=SCHEDULES[name].label)
        curve = run["heldout_curve"]
        axes[1].plot(np.array(curve["steps"]) + 1, curve["loss"], color=color)
    for ax, title in zip(axes, ("training sequence", "ten held-out sequences")):
        ax.axhline(hmin, color="0.2", ls="--", lw=1, label=r"$H_{\min}$")
        ax.axhline(LN8, color="0.6", ls=":", lw=1, label=r"$\ln 8$")
        ax.axvline(protocol_steps, color="0.6", ls="-", lw=0.8, label="end of the paper's protocol")
        ax.set_xscale("log")
        ax.set_xlabel("training step (log scale)")
        ax.set_title(title)
    axes[1].axhline(long_runs["sgd"][0]["heldout"]["filtered_floor"], color="0.2", ls="-.", lw=1,
                    label="exact filter (held out)")
    axes[0].set_ylabel("loss (nats)")
    handles, labels = axes[0].get_legend_handles_labels()
    handles.append(axes[1].get_lines()[-1])
    labels.append(handles[-1].get_label())
    fig.legend(handles, labels, loc="outside lower center", ncols=3)
    fig.suptitle(f"Long runs, seed {heavy['long_run']['seeds'][0]}")
    return fig


def plot_value_trajectories(runs: Mapping[tuple[str, int], Any], seed: int, steps: int):
    """Return the figure: the 8 value prototypes' displacements of ``seed``'s run under each of the paper's two
    schedules, projected on the first two principal components of both (:func:`~attention_dynamics.chapters.sticky_markov_chain.runs.trajectory_pca`).
    Glued as ``fig-sticky-value-trajectories``."""
    projected, explained = trajectory_pca({name: runs[(name, seed)].value_prototypes for name in SCHEDULE_PAIR})
    fig, axes = plotting.new_figure(2, width=3.6, height=3.4, sharex=True, sharey=True)
    for ax, name in zip(axes, SCHEDULE_PAIR):
        for s in range(sticky_chain.N_SYMBOLS):
            path = projected[name][:, s]  # (snapshots, 2)
            color = plotting.PALETTE[s % len(plotting.PALETTE)]
            ax.plot(path[:, 0], path[:, 1], color=color, lw=1.2)
            ax.plot(*path[-1], "s", color=color, ms=4)
        ax.set_title(SCHEDULES[name].label)
        ax.plot(0, 0, "o", color="0.2", ms=4)
        ax.set_xlabel(f"PC 1 of the displacements ({100 * explained[0]:.0f}%)")
    axes[0].set_ylabel(f"PC 2 ({100 * explained[1]:.0f}%)")
    fig.suptitle(f"Displacement of the 8 value prototypes over {steps} steps, seed {seed} (square: end)")
    return fig


def plot_deep(heavy: Mapping[str, Any], loss_every: int = 10):
    """Return the figure: the deep variant's first run, training loss (recorded every ``loss_every`` steps)
    and test loss on its held-out sequence, against H_min (log scale). Glued as ``fig-sticky-deep``."""
    deep = heavy["deep"]
    run = deep["runs"][0]
    fig, ax = plotting.new_figure(width=6.4, height=3.4)
    ax.plot(np.arange(len(run["losses"])) * loss_every, run["losses"], color=plotting.PALETTE[0],
            label="training loss (dropout on)")
    ax.plot(run["test_curve"]["steps"], run["test_curve"]["loss"], color=plotting.PALETTE[1],
            label="test loss (held-out sequence)")
    ax.axhline(deep["hmin_nats"], color="0.2", ls="--", lw=1, label="$H_{\\min}$")
    ax.set_yscale("log")
    ax.set_xlabel("training step")
    ax.set_ylabel("loss (nats, log scale)")
    ax.set_title(f"Deep variant, seed {run['seed']}")
    ax.legend(loc="lower left")  # H_min lies above the training loss's start: the lower left stays clear of it
    return fig


def plot_values_axis(results: Mapping[str, Any], m_step: Mapping[float, tuple[float, float]]):
    """Plot the values-only speed-up against η_V / 0.01 and the M-step at its first step's size; return the figure.
    Glued as ``fig-sticky-values-axis``.

    ``m_step`` maps rho to (value-step ratio at initialisation, speed-up) on the same seeds.
    """
    from matplotlib.ticker import NullFormatter

    axis = values_axis(results)
    fig, ax = plotting.new_figure(width=6.0, height=4.0)
    ax.plot(axis["ratio"], axis["speedup"], "o-", color=plotting.schedule_color("em_like"),
            label=r"gradient step, $\times\eta_V$ on $W_V$ only")
    rhos = sorted(m_step)
    widest = max(ratio for ratio, _ in m_step.values())
    for k, rho in enumerate(rhos):
        ratio, speed = m_step[rho]
        ax.plot(ratio, speed, "s", color=plotting.schedule_color("m_step"),
                label=r"closed-form M-step, $\rho$ = " + ", ".join(f"{r:g}" for r in rhos) if k == 0 else None)
        left = ratio == widest  # the rightmost label goes to the left of its point, inside the axes
        ax.annotate(rf"$\rho$ = {rho:g}", (ratio, speed), textcoords="offset points", xytext=(-6 if left else 6, -12),
                    ha="right" if left else "left")
    ax.axhline(1.0, color="0.4", ls=":", lw=1)
    ax.set_xscale("log")
    ax.set_yscale("log")
    top = max([1.0, *axis["speedup"], *(speed for _, speed in m_step.values())])
    ticks = [2.0**k for k in range(int(np.ceil(np.log2(top))) + 1)]
    ax.set_yticks(ticks, [f"{t:g}" for t in ticks])
    ax.yaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel(r"size of the $W_V$ step / SGD's ($\eta_V / 0.01$; M-step: at initialisation)")
    ax.set_ylabel("speed-up over SGD (log scale)")
    ax.set_title("The values axis of the surface, paper's five seeds")
    fig.legend(*ax.get_legend_handles_labels(), loc="outside lower center", ncols=1)
    return fig


def plot_condition_speedups(results: Mapping[str, Any], *, m_step: Mapping[str, float] | None = None):
    """Plot the speed-up of every ×10 condition with its 95% interval, on 5 and 20 seeds; return the figure.
    Glued as ``fig-sticky-condition-speedups``.

    ``m_step`` (optional) maps a label to a speed-up drawn as a horizontal line (the closed-form M-step).
    """
    names = [n for n in CONDITIONS if n != "sgd"]
    fig, ax = plotting.new_figure(width=plotting.MAX_FIGURE_WIDTH_IN, height=4.4)
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
    short = {"values_only": "$W_V$", "readout_only": "$W_O$", "routing_only": "$W_Q, W_K$",
             "values_readout": "$W_V, W_O$", "routing_values": "$W_{QK}, W_V$", "routing_readout": "$W_{QK}, W_O$",
             "all_three": "all"}
    ax.set_xticklabels([f"{short[n]}\n" + "({:g}, {:g}, {:g})".format(*CONDITIONS[n]) for n in names])
    ax.set_xlabel(r"groups raised $\times 10$; ratios ($W_Q{+}W_K$, $W_V$, $W_O$) / 0.01")
    ax.set_ylabel("speed-up over SGD (log scale)")
    ax.set_title(r"The paper's metric, $\times 10$ on each group and pair (95% bootstrap intervals)")
    fig.legend(*ax.get_legend_handles_labels(), loc="outside lower center", ncols=2)
    return fig


def plot_lr_surface(results: Mapping[str, Any]):
    """Plot the grid's speed-ups as one (η_V, η_O) heat map per routing ratio; return the figure (glued as
    ``fig-sticky-lr-surface``).

    Only the grid's levels that some computed point uses are drawn: a panel per routing ratio with a point, a row per
    value ratio and a column per readout ratio that occur. A cell inside those that was not run is hatched and marked
    "not run", so that no panel is empty.
    """
    points = {tuple(p["ratios"]): p["speedup"] for p in results["grid"]}
    levels = [lv for lv in results["config"]["grid_levels"]]
    used = [[lv for lv in levels if any(point[axis] == lv for point in points)] for axis in range(3)]
    qk_levels, v_levels, o_levels = used
    if not qk_levels:
        raise ValueError("the learning-rate surface has no computed grid point to draw")
    fig, axes = plotting.new_figure(len(qk_levels), width=2.9, height=2.9, sharey=True)
    vmax = max(points.values())
    missing = 0
    for ax, qk in zip(np.atleast_1d(axes), qk_levels):
        grid = np.full((len(v_levels), len(o_levels)), np.nan)
        for i, v in enumerate(v_levels):
            for j, o in enumerate(o_levels):
                grid[i, j] = points.get((qk, v, o), np.nan)
        ax.imshow(grid, origin="lower", cmap=plotting.SEQUENTIAL_CMAP, vmin=1.0, vmax=vmax, aspect="equal")
        for i in range(len(v_levels)):
            for j in range(len(o_levels)):
                if math.isnan(grid[i, j]):  # inside the drawn levels but not run: say so
                    missing += 1
                    ax.add_patch(plotting.plt.Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, hatch="///",
                                                        edgecolor="0.7", lw=0))
                    ax.text(j, i, "not run", ha="center", va="center", fontsize=9, color="0.4")
                else:
                    ax.text(j, i, f"{grid[i, j]:.1f}×", ha="center", va="center", fontsize=11,
                            color="white" if grid[i, j] < 0.6 * vmax else "black")
        ax.set_xticks(range(len(o_levels)), [f"×{o:g}" for o in o_levels])
        ax.set_yticks(range(len(v_levels)), [f"×{v:g}" for v in v_levels])
        ax.set_xlabel(r"readout rate $\eta_O / 0.01$")
        ax.set_title(rf"routing rate $\eta_{{QK}} / 0.01$: ×{qk:g}", fontsize=10)
        ax.grid(False)
        for spine in ax.spines.values():
            spine.set_visible(True)
            spine.set_color("0.6")
    np.atleast_1d(axes)[0].set_ylabel(r"value rate $\eta_V / 0.01$")
    fig.suptitle("Speed-up over SGD, paper's five seeds" + (" (hatched: not run)" if missing else ""))
    return fig


def plot_speedup_budget(result: Mapping[str, Any]):
    """Return the figure: (a) the paper's metric against the budget, per schedule, with intervals; (b) SGD's steps
    over each schedule's to reach each loss level, with intervals (stored result
    :mod:`~attention_dynamics.chapters.sticky_markov_chain.speedup_budget`). Glued as ``fig-sticky-speedup-budget``."""
    fig, axes = plotting.new_figure(2, width=4.2, height=3.4)
    budgets = sorted(int(b) for b in result["budgets"])
    labels = {"em_like": r"EM-like (×10 on $W_V$)", "sgd_matched": "×10 on every matrix",
              "m_step": r"M-step ($\rho$ = 1)"}
    for name, label in labels.items():
        rows = [result["budgets"][str(b)][name] for b in budgets]
        y = np.array([r["speedup"] for r in rows])
        err = [y - [r["low"] for r in rows], np.array([r["high"] for r in rows]) - y]
        axes[0].errorbar(budgets, y, yerr=err, marker="o", capsize=3, color=plotting.schedule_color(name), label=label)
        levels = [(k, result["levels"][k][name]) for k in result["levels"] if result["levels"][k][name]]
        share = [100 * (result["ln8"] - result["levels"][k]["loss"]) / (result["ln8"] - result["hmin_nats"])
                 for k, _ in levels]
        ratio = np.array([r["point"] for _, r in levels])
        err = [ratio - [r["low"] for _, r in levels], np.array([r["high"] for _, r in levels]) - ratio]
        axes[1].errorbar(share, ratio, yerr=err, marker="o", capsize=3, color=plotting.schedule_color(name))
    for ax in axes:
        ax.axhline(2.3, color="0.3", ls="--", lw=1, label="the paper's 2.3×")
        ax.axhline(1.0, color="0.6", ls=":", lw=1)
        ax.set_yscale("log")
    axes[0].set(xscale="log", xlabel="budget (steps; threshold: SGD's mean loss after it)",
                ylabel="speed-up over SGD (paper's metric)", title="the metric against the budget")
    axes[0].set_xticks(budgets, [str(b) for b in budgets])  # the budgets run, not log-scale minor labels
    axes[0].xaxis.set_minor_formatter(plotting.plt.NullFormatter())
    axes[1].set(xlabel=r"share of the way from $\ln 8$ down to $H_{\min}$ (%)", ylabel="SGD's steps / schedule's",
                title="time to reach a loss level")
    handles, names = axes[0].get_legend_handles_labels()
    fig.legend(handles, names, loc="outside lower center", ncol=2, fontsize=8, frameon=False)
    return fig
