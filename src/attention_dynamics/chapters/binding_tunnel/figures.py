"""Chapter 9's figures: which tasks need routing, and the binding tunnel's dynamics (routing forming before the
calibration, the cost of freezing it, the EM-like step).

Each function draws one figure from the stored results and returns it, made for the book's column
(:func:`~attention_dynamics.core.plotting.new_figure`).
"""

from __future__ import annotations

from typing import Any, Mapping

import matplotlib.ticker
import numpy as np

from ...core import plotting
from .report import TASK_LABELS, binding_costs, sticky_costs, freeze_table
from .settings import FREE_FREEZE_RATIO

__all__ = ["plot_routing_need", "plot_frame_before_precision", "plot_freeze_sweep", "plot_em_like"]

#: Log-axis tick labels as plain multiples ("0.5×", "10×", "1000×").
_TIMES = matplotlib.ticker.FuncFormatter(lambda v, _pos: f"{v:g}×")

_CONTROL_COLORS = {"learned": plotting.PALETTE[0], "uniform": plotting.PALETTE[1], "frozen": plotting.PALETTE[2],
                   "identity": plotting.PALETTE[4]}


def plot_routing_need(controls: Mapping[str, Any], tunnel: Mapping[str, Any]):
    """Return the figure "Which tasks need routing": per task, the uniform and frozen controls' error over the trained
    model's (log scale, 95 % intervals over seeds) against the bound above which a task needs routing."""
    rows = [("recall_head", controls["recall_head"]["costs"]), ("sticky", sticky_costs(controls["sticky"])[0]),
            *((t, b["costs"]) for t, b in controls["tunnels"].items()),
            *((f"architectures_{t}", b["costs"]) for t, b in controls["architectures"].items()),
            ("binding", {k.split("-x")[0]: v for k, v in binding_costs(tunnel).items() if k.endswith("-x1")})]
    fig, ax = plotting.new_figure(width=6.4, height=0.45 * len(rows) + 1.2)
    y = np.arange(len(rows))
    for offset, control in ((-0.17, "uniform"), (0.17, "frozen")):
        point = np.array([c[control]["ratio"]["point"] for _, c in rows])
        low = np.array([c[control]["ratio"]["low"] for _, c in rows])
        high = np.array([c[control]["ratio"]["high"] for _, c in rows])
        ax.errorbar(point, y + offset, xerr=[point - low, high - point], fmt="o", capsize=3,
                    color=_CONTROL_COLORS[control], label=f"{control} routing")
    ax.axvline(FREE_FREEZE_RATIO, color="0.3", ls="--", lw=1)
    ax.text(FREE_FREEZE_RATIO * 1.08, 0.99, f"needs routing →\n(above {FREE_FREEZE_RATIO}×)", fontsize=8, va="top",
            transform=ax.get_xaxis_transform())
    ax.set_xscale("log")
    ax.set_yticks(y, [TASK_LABELS[t][0] for t, _ in rows])
    ax.invert_yaxis()
    ax.set_xlabel("error with routing removed ÷ trained model's (log scale)")
    ax.xaxis.set_major_formatter(_TIMES)
    ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax.set_title("Which tasks need routing")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.28), ncol=2, frameon=False)
    return fig


def plot_frame_before_precision(tunnel: Mapping[str, Any]):
    """Return the figure of routing against calibration through training: the attention the reading head puts on the
    answer's source (left axis) and the KL from the exact posterior (right axis, log), every seed."""
    fig, ax = plotting.new_figure(width=6.4, height=3.4)
    kl_ax = ax.twinx()
    for i, run in enumerate(tunnel["learned"]):
        label = i == 0
        src = run["attention_on_source"]
        ax.plot(src["steps"], src["lookup"], color=plotting.PALETTE[0], lw=1.2, alpha=0.8,
                label="attention on the answer's source" if label else None)
        readings = run["readings"]
        kl_ax.plot(readings["steps"], readings["kl_bits"], color=plotting.PALETTE[3], lw=1.2, alpha=0.8,
                   label="KL from the exact posterior" if label else None)
    kl_ax.set_yscale("log")
    kl_ax.grid(False)
    ax.set_xlabel("training step")
    ax.set_ylabel("attention on the source", color=plotting.PALETTE[0])
    kl_ax.set_ylabel("KL (bits, log scale)", color=plotting.PALETTE[3])
    ax.set_title("Attention on the answer's source and the KL through training")
    handles = ax.get_legend_handles_labels()[0] + kl_ax.get_legend_handles_labels()[0]
    ax.legend(handles=handles, loc="center right")
    return fig


def plot_freeze_sweep(tunnel: Mapping[str, Any]):
    """Return the figure of the freeze sweep: the frozen model's KL over the trained model's against the step at
    which routing was frozen (log scale, 95 % intervals), and the trained model's KL at that step over its final."""
    table = freeze_table(tunnel)
    steps = table.index.to_numpy()
    fig, ax = plotting.new_figure(width=6.4, height=3.2)
    ratio = table["KL ratio"].to_numpy()
    ax.errorbar(steps, ratio, yerr=[ratio - table["ratio low"], table["ratio high"] - ratio], fmt="o-", capsize=3,
                color=plotting.PALETTE[2], label="routing frozen from step t: KL ÷ trained")
    ax.plot(steps, table["trained KL at t over final"], "s--", color=plotting.PALETTE[3],
            label="trained model's KL at step t ÷ its final KL")
    ax.axhline(FREE_FREEZE_RATIO, color="0.3", ls="--", lw=1, label=f"free: within {FREE_FREEZE_RATIO}×")
    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(_TIMES)
    ax.yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax.set_xlabel("step t at which routing is frozen")
    ax.set_ylabel("ratio (log scale)")
    ax.set_title("Freezing routing from step t")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.22), ncol=2, frameon=False)
    return fig


def plot_em_like(tunnel: Mapping[str, Any]):
    """Return the figure of the EM-like step on the binding tunnel: the training loss (50-step moving average, mean
    over seeds) of the plain and the EM-like step, with routing learned and frozen."""
    fig, axes = plotting.new_figure(2, width=3.2, height=3.0, sharey=True)
    for ax, routing, base in ((axes[0], "learned", tunnel["learned"]), (axes[1], "frozen",
                                                                         tunnel["controls"]["frozen-x1"])):
        for label, runs, color in (("plain step", base, plotting.schedule_color("sgd")),
                                   ("EM-like (values × 10)", tunnel["em_like"][routing],
                                    plotting.schedule_color("em_like"))):
            steps = runs[0]["loss_curve"]["steps"]
            ax.plot(steps, np.mean([r["loss_curve"]["loss"] for r in runs], axis=0), color=color, label=label)
        ax.set_title(f"routing {routing}")
        ax.set_xlabel("training step")
    axes[0].set_ylabel("training loss (nats)")
    axes[0].legend()
    return fig
