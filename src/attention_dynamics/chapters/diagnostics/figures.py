"""Chapter 8's figures: routing by symbol under the paper's two schedules, a healthy run against a broken one,
the collapsed heads, chapter 6's transformer along training and the plain PyTorch encoder's heads."""

from __future__ import annotations

from typing import Sequence

import numpy as np

from ...core import plotting
from ...diagnostics import DiagnosticsTrace, plot_head, plot_overview, plot_routing_matrix
from .runs import SCHEDULE_RUNS, AlarmReading

__all__ = [
    "plot_routing_by_symbol",
    "plot_healthy_vs_broken",
    "plot_collapsed_heads",
    "plot_tunnel_trace",
    "plot_encoder_overview",
]


def plot_routing_by_symbol(runs: dict[str, DiagnosticsTrace], snapshots: Sequence[int]):
    """Draw who reads whom (attention by symbol, in excess of uniform) for both schedules at ``snapshots``: one row
    per schedule, one column per step, one colour scale for all panels; return the figure."""

    fig, axes = plotting.plt.subplots(len(SCHEDULE_RUNS), len(snapshots), figsize=(plotting.MAX_FIGURE_WIDTH_IN, 6.0),
                                      layout="constrained", squeeze=False)
    excess = {(n, s): runs[n].at(s).specializations[0] for n in SCHEDULE_RUNS for s in snapshots}
    vmax = max(np.abs(x.routing_matrix - x.chance_routing_matrix).max() for x in excess.values())
    middle = len(snapshots) // 2
    for row, name in enumerate(SCHEDULE_RUNS):
        for col, step in enumerate(snapshots):
            im = plot_routing_matrix(excess[(name, step)], ax=axes[row, col], kind="excess", vmax=vmax, colorbar=False,
                                     title=f"{runs[name].label}\nstep {step}",
                                     key_name="symbol carried by key" if col == middle else "",
                                     query_name="symbol carried by query" if col == 0 else "")
    fig.colorbar(im, ax=axes, shrink=0.6, label="attention mass − chance")
    fig.suptitle("Who reads whom: attention by symbol, in excess of uniform attention")
    return fig


def _symlog_panels(axes, titles, xmax: int, xlabel: str) -> None:
    for ax, (title, ylabel) in zip(axes, titles):
        ax.set(xscale="symlog", xlabel=xlabel, title=title, ylabel=ylabel, xlim=(0, xmax))


#: The y labels of the measures the figures draw (mathtext where the prose writes math).
ENTROPY_LABEL = r"$H(\alpha)/\log n$"
ROUTING_SIGNAL_LABEL = r"$\|\partial L/\partial S\|$ (nats)"


def plot_healthy_vs_broken(healthy: DiagnosticsTrace, broken: DiagnosticsTrace, reading: AlarmReading, steps: int):
    """Draw loss, attention entropy, starved keys and routing signal of both runs (2 × 2), with the alarm and the
    fall-behind step; one legend below the panels. Return the figure."""
    from matplotlib.lines import Line2D

    fig, axes = plotting.new_figure(2, 2, width=4.2, height=2.8)
    axes = axes.ravel()
    for run, color in ((healthy, plotting.schedule_color("sgd_matched")), (broken, plotting.PALETTE[3])):
        axes[0].plot(np.arange(steps), run.losses, color=color, label=run.label)
        for ax, key in zip(axes[1:], ("normalized_attention_entropy", "starved_fraction", "routing_gradient_norm")):
            ax.plot(run.steps, run.metric(key), color=color, marker=".", ms=3)
    _symlog_panels(axes, [("training loss", "nats"), ("attention entropy", ENTROPY_LABEL),
                          ("starved keys", "fraction of keys"), ("routing signal", ROUTING_SIGNAL_LABEL)],
                   steps, "step (symlog)")
    for ax in axes:
        if reading.alarm is not None:
            ax.axvline(reading.alarm, color=plotting.PALETTE[3], ls="--", lw=1)
        ax.axvline(reading.behind_or_end, color="#555555", ls=":", lw=1)
    axes[3].set_yscale("log")
    handles, labels = axes[0].get_legend_handles_labels()
    handles += [Line2D([], [], color=plotting.PALETTE[3], ls="--", lw=1),
                Line2D([], [], color="#555555", ls=":", lw=1)]
    labels += ["the diagnostics' alarm", "the loss falls behind for good"]
    fig.legend(handles, labels, loc="outside lower center", ncols=2)
    fig.suptitle("A healthy and a broken run, diagnosed along training")
    return fig


def plot_collapsed_heads(healthy: DiagnosticsTrace, broken: DiagnosticsTrace, step: int, window: int):
    """Draw both runs' attention, compatibility and advantage matrices at ``step`` over the first ``window``
    positions: one column per run, one row per matrix. Return the figure."""

    first = slice(0, window)  # early queries see few keys, so a collapsed row's one key is in the picture
    fig, axes = plotting.plt.subplots(3, 2, figsize=(plotting.MAX_FIGURE_WIDTH_IN, 8.4), layout="constrained")
    for col, run in enumerate((healthy, broken)):
        plot_head(run.at(step).heads[0], queries=first, keys=first, axes=axes[:, col])
        axes[0, col].set_title(f"{run.label}\n" + axes[0, col].get_title())
    fig.suptitle(f"Step {step}, the first {window} positions: collapsed attention has no advantage signal")
    return fig


def plot_tunnel_trace(tunnel: DiagnosticsTrace, floor_nats: float):
    """Draw chapter 6's bijection transformer diagnosed at its checkpoints (2 × 2): loss, entropy, routing signal,
    MI by head; one legend (heads, Bayes floor, chance) below the panels. Return the figure."""

    fig, axes = plotting.new_figure(2, 2, width=4.2, height=2.8)
    axes = axes.ravel()
    axes[0].plot(tunnel.steps, tunnel.metric("loss"), color=plotting.PALETTE[0], marker=".", ms=3)
    axes[0].axhline(floor_nats, color="#555555", ls="--", lw=1, label="Bayes floor (probe loss)")
    for h in range(len(tunnel.metrics[0])):
        name = tunnel.at(tunnel.steps[-1]).heads[h].name
        color = plotting.PALETTE[h % len(plotting.PALETTE)]
        for ax, key in zip(axes[1:], ("normalized_attention_entropy", "routing_gradient_norm", "specialization_mi_nats")):
            ax.plot(tunnel.steps, tunnel.metric(key, head=h), color=color, marker=".", ms=3, label=name)
    axes[3].plot(tunnel.steps, tunnel.metric("specialization_chance_mi_nats"), color="#555555", ls=":", lw=1,
                 label="chance (uniform attention)")
    _symlog_panels(axes, [("probe loss", "nats"), ("attention entropy", ENTROPY_LABEL),
                          ("routing signal", ROUTING_SIGNAL_LABEL), ("routing by token type", "mutual information (nats)")],
                   tunnel.steps[-1], "training step (symlog)")
    axes[2].set_yscale("log")
    handles, labels = axes[3].get_legend_handles_labels()
    handles += axes[0].get_lines()[1:]
    labels += [axes[0].get_lines()[1].get_label()]
    fig.legend(handles, labels, loc="outside lower center", ncols=5)
    fig.suptitle("Chapter 6's bijection transformer, diagnosed at its checkpoints")
    return fig


def plot_encoder_overview(trace: DiagnosticsTrace, steps: int):
    """Draw the tool's per-head overview of the plain PyTorch encoder at initialisation and after ``steps`` steps, with
    the head names turned upright so that they stay apart; return the figure."""

    fig = plot_overview([trace.at(0), trace.at(steps)], labels=["step 0", f"step {steps}"])
    for ax in fig.axes:
        ax.tick_params(axis="x", labelrotation=90)
    fig.suptitle("A plain PyTorch encoder on bijection elimination: every head, before and after training")
    return fig
