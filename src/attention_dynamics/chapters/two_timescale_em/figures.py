"""Chapter 4's figures: EM against gradient ascent on the mixture, the settling rates, the paired settling
differences, the learning-rate sweep, the freeze-the-frame costs, and the order of frame and precision under four
definitions."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ...core import plotting
from . import freeze
from .runs import GmmBridge
from .settings import TAU

__all__ = [
    "plot_gmm_em",
    "plot_settling_rates",
    "plot_ratio_sweep",
    "plot_settling_comparison",
    "plot_freeze_frame",
    "plot_frame_definitions",
    "FIGURES",
]


def plot_gmm_em(bridge: GmmBridge, curves: Mapping[str, Any]):
    """Return the figure: (a) the data by component and the means' EM paths (o start, * end);
    (b) the log-likelihood along EM, preconditioned ascent and plain ascent (:func:`likelihood_curves`)."""
    fig, axes = plotting.new_figure(2, width=4.3, height=3.4)
    ax = axes[0]
    for k in range(bridge.em_path.shape[1]):  # data coloured by the component that drew it; means in black
        ax.scatter(*bridge.points[bridge.components == k].T, s=6, alpha=0.35, color=plotting.PALETTE[k])
        ax.plot(*bridge.em_path[:, k].T, color="black", lw=1)
        ax.scatter(*bridge.em_path[0, k], marker="o", s=30, color="white", edgecolors="black", zorder=3)
        ax.scatter(*bridge.em_path[-1, k], marker="*", s=140, color="black", zorder=3)
    ax.set(title="EM on a Gaussian mixture (o start, * end)", xlabel="$x_1$", ylabel="$x_2$")
    ax = axes[1]
    em_curve = curves["em"]
    iters = np.arange(len(em_curve))
    ax.plot(iters, em_curve, color=plotting.schedule_color("m_step"), lw=3, label="EM")
    ax.plot(iters, curves["precond"], color="black", ls="--", lw=1.2, label=r"gradient $\times\,\sigma^2/N_k$ (step 1)")
    for c, curve in curves["plain"].items():
        ax.plot(iters, curve, marker="o", ms=2.5, lw=1, label=rf"plain gradient, step {c:g}$\,\sigma^2/N$")
    ax.set(title="log-likelihood along the iterations", xlabel="iteration", ylabel="mean log-likelihood (nats)",
           ylim=(em_curve[0] - 1.0, em_curve[-1] + 0.5))
    ax.legend(loc="lower right")
    return fig


def plot_settling_rates(runs: Sequence[Any], summary: Mapping[str, Any], *, tau: float = TAU, settle_window: int):
    """Return the figure: (a) each seed's frame and value change per window against ``tau``; (b) the settling
    steps per seed, frame against values, with the diagonal of equal times; one legend below both panels."""
    fig, axes = plotting.new_figure(2, width=4.4, height=3.3)
    ax = axes[0]
    for r in runs:
        ax.semilogy(r.change_steps, r.frame_change, color=plotting.PALETTE[0], lw=0.8, alpha=0.6)
        ax.semilogy(r.change_steps, r.value_change, color=plotting.PALETTE[1], lw=0.8, alpha=0.6)
    ax.plot([], [], color=plotting.PALETTE[0], label="frame: attention mass moved")
    ax.plot([], [], color=plotting.PALETTE[1], label="values: relative change")
    ax.axhline(tau, color="black", ls="--", lw=1, label=rf"threshold $\tau$ = {tau:.0%}")
    ax.set(title=f"change per {settle_window} steps ({len(runs)} seeds)", xlabel="training step (window start)",
           ylabel="fraction moved in the window")
    ax = axes[1]
    frame, value = summary["frame_steps"], summary["value_steps"]
    lo, hi = min(frame.min(), value.min()) * 0.9, max(frame.max(), value.max()) * 1.1
    ax.scatter(frame, value, color=plotting.PALETTE[2], s=30, zorder=3, label="one seed's settling steps")
    ax.plot([lo, hi], [lo, hi], color="grey", lw=1, label="equal times")
    ax.set(title="settling steps per seed", xlabel=r"frame settles, $t_F$ (step)",
           ylabel=r"values settle, $t_P$ (step)", xlim=(lo, hi), ylim=(lo, hi))
    ax.text(0.05, 0.92, "above the line: frame first", transform=ax.transAxes, fontsize=9)
    handles = [h for a in axes for h in a.get_legend_handles_labels()[0]]
    fig.legend(handles=handles, loc="outside lower center", ncols=3)
    fig.suptitle("Frame versus precision at equal learning rates")
    return fig


def plot_ratio_sweep(sweep: Mapping[float, Mapping[str, Any]], *, tau: float = TAU):
    """Return the figure: (a) settling steps of frame and values (medians and seeds) against the
    value/routing learning-rate ratio; (b) the median t_P/t_F and the share of seeds whose frame settles first;
    one legend below both panels."""
    ratios = sorted(sweep)
    fig, axes = plotting.new_figure(2, width=4.3, height=3.3)
    ax = axes[0]
    for key, name, color, shift in (("frame_steps", r"frame settles, $t_F$", plotting.PALETTE[0], 0.97),
                                    ("value_steps", r"values settle, $t_P$", plotting.PALETTE[1], 1.03)):
        ax.plot(ratios, [np.median(sweep[r][key]) for r in ratios], color=color, marker="o", label=name)
        for r in ratios:
            ax.scatter(np.full(len(sweep[r][key]), r * shift), sweep[r][key], color=color, s=8, alpha=0.5)
    ax.set(title="settling steps (medians and seeds)", ylabel="settling step")
    ax = axes[1]
    ax.plot(ratios, [sweep[r]["median_time_ratio"] for r in ratios], color=plotting.PALETTE[2], marker="o",
            label=r"median $t_P / t_F$")
    ax.plot(ratios, [sweep[r]["frame_first_fraction"] for r in ratios], color=plotting.PALETTE[4], marker="s",
            label="fraction of seeds with the frame first")
    ax.axhline(1.0, color="grey", lw=1)
    ax.set(title="the dissociation against the ratio", ylabel="ratio / fraction")
    for ax in axes:
        ax.set_xscale("log")
        ax.minorticks_off()
        ax.set_xticks(ratios, [f"{r:g}" for r in ratios])
        ax.set_xlabel("value / routing learning rate")
    handles = [h for a in axes for h in a.get_legend_handles_labels()[0]]
    fig.legend(handles=handles, loc="outside lower center", ncols=2)
    fig.suptitle(rf"Frame versus precision as the values' learning rate changes ($\tau$ = {tau:.0%})")
    return fig


def plot_settling_comparison(comparison: Mapping[str, Any]):
    """Return the figure: the paired difference t_P − t_F (mean and interval, and every seed) against the
    remaining-path fraction, with zero and ± one recording interval marked; the legend below the panel."""
    fig, ax = plotting.new_figure(1, width=5.6, height=3.6)
    rows = comparison["rows"]
    f = np.array([r["fraction"] for r in rows])
    mean = np.array([r["mean_difference"] for r in rows])
    lo = np.array([r["low"] for r in rows])
    hi = np.array([r["high"] for r in rows])
    ax.errorbar(f, mean, yerr=[mean - lo, hi - mean], fmt="o-", color=plotting.PALETTE[0], capsize=3,
                label=f"mean over {comparison['n_runs']} seeds, {comparison['confidence']:.0%} interval")
    for k, r in enumerate(rows):
        ax.scatter([r["fraction"]] * len(r["frame"]), np.subtract(r["values"], r["frame"]), s=8,
                   color=plotting.PALETTE[1], alpha=0.5, zorder=1, label="one seed" if k == 0 else None)
    ax.axhline(0, color="grey", lw=1)
    ax.axhspan(-comparison["resolution"], comparison["resolution"], color="grey", alpha=0.15,
               label=f"± one recording interval ({comparison['resolution']} steps)")
    ax.set_xscale("log")
    ax.set(xlabel=r"remaining path as a fraction $f$ of the whole (threshold)",
           ylabel=r"$t_P - t_F$ (steps; > 0: frame first)", title="values' minus frame's settling step")
    fig.legend(*ax.get_legend_handles_labels(), loc="outside lower center", ncols=2)
    return fig


def plot_freeze_frame(results: Mapping[str, Mapping[str, Any]], ratio: float = freeze.FREE_FREEZE_RATIO):
    """Return the figure: per setting, the frozen run's final loss (or KL) over the unfrozen run's against the step t
    at which W_Q, W_K were frozen (seeds and their geometric mean, symlog steps from 0), the bound below which
    freezing costs nothing and the step from which the frame is in place; one legend below the panels."""
    from matplotlib.lines import Line2D
    from matplotlib.ticker import NullFormatter

    fig, axes = plotting.new_figure(len(results), width=4.2, height=3.2)
    axes = np.atleast_1d(axes)
    for ax, (title, result) in zip(axes, results.items()):
        s = freeze.freeze_frame_summary(result, ratio)
        steps = np.array(s["steps"], dtype=float)
        r = freeze.freeze_ratios(result)
        for row in r["ratios"]:
            ax.plot(steps, row, color=plotting.PALETTE[0], lw=0.8, alpha=0.4)
        point = np.array(s["ratio_point"])
        ax.errorbar(steps, point, yerr=[point - np.array(s["ratio_low"]), np.array(s["ratio_high"]) - point],
                    fmt="o-", color=plotting.PALETTE[0], capsize=2)
        ax.axhline(ratio, color="black", ls="--", lw=1)
        if s["freeze_frame_step"] is not None:
            ax.axvline(s["freeze_frame_step"], color=plotting.PALETTE[2], lw=1)
        ax.set_xscale("symlog", linthresh=1)
        ax.set_xlim(-0.3, steps.max() * 1.5)  # a little room left of 0, where the frame may already be in place
        ax.set_yscale("log")
        low, high = ax.get_ylim()
        if high / low < 10:  # less than a decade: a few plain tick labels (0.5, 1, 2) rather than 6×10⁻¹
            ticks = [v for v in (0.5, 1, 2, 5) if low <= v <= high]
            ax.set_yticks(ticks, [f"{v:g}" for v in ticks])
            ax.yaxis.set_minor_formatter(NullFormatter())
        ax.set(title=title, xlabel=r"step $t$ at which $W_Q, W_K$ are frozen",
               ylabel="frozen ÷ trained final error (log)")
    handles = [Line2D([], [], color=plotting.PALETTE[0], lw=0.8, alpha=0.4, label="one seed"),
               Line2D([], [], color=plotting.PALETTE[0], marker="o", label="geometric mean, 95% interval"),
               Line2D([], [], color="black", ls="--", lw=1, label=f"free below {ratio}×"),
               Line2D([], [], color=plotting.PALETTE[2], lw=1, label="frame in place")]
    fig.legend(handles=handles, loc="outside lower center", ncols=4 if len(results) > 1 else 2)
    return fig


#: Panel titles of the optimisers the stored frame result holds.
OPTIMISER_TITLES = {"sgd": "plain SGD", "adam": "Adam"}
#: The definitions' names in the legend.
DEFINITION_LABELS = {"path": "parameter path", "function": "function", "function_log": "function, log errors",
                     "intervention": "freeze"}


def plot_frame_definitions(result: Mapping[str, Any]):
    """Return the figure: per optimiser, the share of seeds whose frame settles first against the run length,
    one line per definition with its Clopper–Pearson interval (above 1/2: the frame first), from the stored result
    :mod:`~attention_dynamics.chapters.two_timescale_em.frame_definitions`."""
    opts = list(result["toy"])
    fig, axes = plotting.new_figure(len(opts), width=4.0, height=3.2, sharey=True)
    axes = np.atleast_1d(axes)
    for ax, opt in zip(axes, opts):
        block = result["toy"][opt]
        hs = sorted(int(h) for h in block["horizons"])
        for k, d in enumerate(result["definitions"]):
            rows = [block["horizons"][str(h)][d] for h in hs]
            y = np.array([r["share"] for r in rows])
            shift = np.array(hs) * (1 + 0.04 * (k - 1.5))  # side by side, so the intervals do not hide each other
            ax.errorbar(shift, y, yerr=[y - [r["low"] for r in rows], np.array([r["high"] for r in rows]) - y],
                        marker="o", capsize=3, color=plotting.PALETTE[k], label=DEFINITION_LABELS.get(d, d))
        ax.axhline(0.5, color="0.4", ls=":", lw=1)
        ax.set(xscale="log", title=f"{OPTIMISER_TITLES.get(opt, opt)}: which settles first",
               xlabel="run length (steps)",
               ylabel="share of seeds: frame first", ylim=(-0.03, 1.03))
        ax.set_xticks(hs, [str(h) for h in hs])
        ax.minorticks_off()
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=len(labels), fontsize=8, frameon=False)
    return fig


#: The name each figure is glued under for the chapter's ``{glue:figure}`` directives, with the function that draws it.
FIGURES = {
    "fig-em-gmm": plot_gmm_em,
    "fig-em-settling-rates": plot_settling_rates,
    "fig-em-settling-paths": plot_settling_comparison,
    "fig-em-ratio-sweep": plot_ratio_sweep,
    "fig-em-freeze-frame": plot_freeze_frame,
    "fig-em-frame-definitions": plot_frame_definitions,
}
