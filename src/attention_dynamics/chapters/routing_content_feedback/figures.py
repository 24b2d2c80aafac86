"""Chapter 3's figures: the recall task, the learning curves with the routing transition marked, attention
snapshots, value trajectories, the frozen variants and the first-order predictions."""

from __future__ import annotations

from typing import Mapping

import numpy as np
from matplotlib.lines import Line2D

from ...core import plotting
from ...science.attention import causal_mask
from ...tasks import specialization as recall
from ...tasks.specialization import SpecializationBatch
from ...training.recall_head import SpecializationRun
from .runs import correct_responsibilities, milestones

__all__ = [
    "plot_recall_example",
    "plot_learning_curves",
    "plot_attention_snapshots",
    "plot_prototype_trajectories",
    "plot_frozen_runs",
    "plot_value_step_ratios",
    "plot_compatibility_changes",
    "plot_advantage_change",
    "FIGURES",
]


def plot_recall_example(example: SpecializationBatch):
    """Return the figure: the inputs of one sequence by feature block, and its correct responsibilities."""
    K, T, n_tags, n_labels = example.n_sources, example.n_sources + example.n_queries, example.n_tags, example.n_labels
    fig, axes = plotting.new_figure(2, width=4.0, height=3.4)
    plotting.plot_matrix(axes[0], example.x[0].T, title="inputs of one sequence", xlabel="position",
                         ylabel="feature", cbar_label="value")
    for edge in (n_tags, 2 * n_tags):
        axes[0].axhline(edge - 0.5, color="white", lw=1.5)
    axes[0].set_yticks([n_tags / 2 - 0.5, 1.5 * n_tags - 0.5, 2 * n_tags + n_labels / 2 - 0.5],
                       ["tag", "request", "label"])
    axes[0].set_ylabel("feature block")
    plotting.plot_matrix(axes[1], correct_responsibilities(example), mask=causal_mask(T),
                         title="correct responsibilities", cbar_label="responsibility")
    axes[1].axhline(K - 0.5, color="white", lw=1.5)
    fig.suptitle(f"Content-addressed recall: sources 0–{K - 1} hold (tag, label), queries {K}–{T - 1} request a tag")
    return fig


def _mark_milestones(axes, run: SpecializationRun) -> None:
    for a in np.atleast_1d(axes).flat:
        for i in milestones(run):
            a.axvline(run.steps[i], color="black", ls=":", lw=0.8)


def plot_learning_curves(run: SpecializationRun, advantage: np.ndarray, *, n_sources: int, n_labels: int):
    """Return the figure: the full run's loss with its reference levels, E-step quality and purity, M-step
    quality and precision, and the correct source's advantage (2 × 2, milestones dotted; one legend below)."""
    P = plotting.PALETTE
    fig, axes = plotting.new_figure(2, 2, width=4.2, height=2.9)
    ax = axes[0, 0]
    ax.semilogy(run.steps, run.probe_loss, color=P[0], label="probe loss")
    ax.axhline(recall.chance_loss_nats(n_labels), color="grey", ls="--", lw=1, label=r"loss $\ln C$ (uniform guess)")
    ax.axhline(recall.routing_blind_floor_nats(n_sources), color="grey", ls=":", lw=1,
               label=r"loss $\ln K$ (no routing)")
    ax.set(title="loss (Bayes floor: 0 nats)", xlabel="training step", ylabel="cross-entropy (nats)")
    ax = axes[0, 1]
    ax.plot(run.steps, run.correct_mass, color=P[1], label="attention on the correct source")
    ax.plot(run.steps, run.source_mass, color=P[2], ls="--", label="attention on any source")
    ax.plot(run.steps, run.purity, color=P[4], label="purity of soft counts")
    ax.set(title="E-step quality and specialization", xlabel="training step", ylabel="attention weight / share")
    ax = axes[1, 0]
    ax.plot(run.steps, run.alignment, color=P[3], label="value alignment (cosine, left axis)")
    ax.set(title="M-step quality", xlabel="training step", ylabel="cosine to ideal prototype")
    twin = ax.twinx()
    twin.plot(run.steps, run.precision_nats, color=P[5], ls="--", label="precision loss (nats, right axis)")
    twin.set_ylabel("value read alone (nats)")
    twin.grid(False)
    ax = axes[1, 1]
    ax.plot(run.steps, advantage, color=P[6])
    ax.set(title="advantage of the correct source", xlabel="training step",
           ylabel=r"$N \cdot (\mathbb{E}_{\alpha_i}[b] - b_{ij})$")
    _mark_milestones(axes, run)
    curves = [*axes[0, 0].get_lines()[:3], *axes[0, 1].get_lines()[:3], axes[1, 0].get_lines()[0],
              twin.get_lines()[0]]
    milestone = Line2D([], [], color="black", ls=":", lw=0.8, label="E-step quality: 25, 50, 75% of its rise")
    fig.legend(handles=[*curves, milestone], loc="outside lower center", ncols=3)
    fig.suptitle("One head learning content-addressed recall")
    return fig


def _heat_map(ax, matrix, *, title: str, xlabel: str, ylabel: str, mask=None):
    """Draw ``matrix`` (entries in [0, 1], masked entries blank) without a colour bar of its own; return the image."""
    m = np.asarray(matrix, dtype=float)
    if mask is not None:
        m = np.where(np.asarray(mask, dtype=bool), m, np.nan)
    im = ax.imshow(m, cmap=plotting.SEQUENTIAL_CMAP, vmin=0.0, vmax=1.0, interpolation="nearest")
    ax.set(title=title, xlabel=xlabel, ylabel=ylabel)
    ax.grid(False)
    return im


def plot_attention_snapshots(run: SpecializationRun):
    """Return the figure: the attention of the first probe sequence (white squares: each query's correct source)
    and the specialization matrix, at initialisation, the three milestones and the end (one column each; one colour
    scale from 0 to 1 for all panels)."""
    shown = [0, *milestones(run), len(run.steps) - 1]
    truth_cols = run.shown_sequences["correct_source"][0]
    T = run.attention_snapshots.shape[-1]
    K = T - len(truth_cols)
    fig, axes = plotting.plt.subplots(2, len(shown), figsize=(plotting.MAX_FIGURE_WIDTH_IN, 4.1),
                                      layout="constrained", squeeze=False)
    for col, i in enumerate(shown):
        first, middle = col == 0, col == len(shown) // 2
        im = _heat_map(axes[0, col], run.attention_snapshots[i, 0], mask=causal_mask(T), title=f"step {run.steps[i]}",
                       xlabel="key position j" if middle else "", ylabel="query position i" if first else "")
        axes[0, col].scatter(truth_cols, np.arange(K, T), marker="s", s=30, facecolors="none", edgecolors="white",
                             lw=1.2)
        _heat_map(axes[1, col], run.specialization[i], title=f"step {run.steps[i]}",
                  xlabel="source tag c" if middle else "", ylabel="requested tag r" if first else "")
    fig.colorbar(im, ax=axes, shrink=0.8, label="attention weight")
    fig.suptitle("Attention of one probe sequence (top) and specialization over all probe sequences (bottom)")
    return fig


def plot_prototype_trajectories(run: SpecializationRun, coords: np.ndarray, explained: np.ndarray):
    """Return the figure: each label prototype's path in the plane of ``coords`` (``(n_ckpt, C, 2)``, from
    :func:`~attention_dynamics.chapters.routing_content_feedback.runs.prototype_trajectories`), marked at the start,
    the routing transition and the end, and numbered by its label at the end."""
    middle = milestones(run)[1]
    fig, ax = plotting.new_figure(width=5.6, height=4.6)
    for label in range(coords.shape[1]):
        color = plotting.PALETTE[label % len(plotting.PALETTE)]
        ax.plot(coords[:, label, 0], coords[:, label, 1], color=color, lw=1.2)
        ax.scatter(*coords[0, label], color=color, marker="o", s=14)
        ax.scatter(*coords[middle, label], color=color, marker="D", s=18, edgecolors="black", lw=0.5)
        ax.scatter(*coords[-1, label], color=color, marker="*", s=90, edgecolors="black", lw=0.5)
        ax.annotate(str(label), coords[-1, label], textcoords="offset points", xytext=(6, 3), fontsize=10,
                    fontweight="bold", color=color)
    ax.set(title="Label prototypes over training (numbered by label)",
           xlabel=f"PC 1 ({explained[0]:.0%} of variance)", ylabel=f"PC 2 ({explained[1]:.0%} of variance)")
    markers = [Line2D([], [], ls="", marker=m, color="0.5", markeredgecolor="black", markeredgewidth=0.5, ms=ms,
                      label=name) for m, ms, name in (("o", 4, "start"), ("D", 4.5, "routing transition"),
                                                      ("*", 10, "end"))]
    fig.legend(handles=markers, loc="outside lower center", ncols=3)
    return fig


def plot_frozen_runs(runs: Mapping[str, SpecializationRun], *, n_sources: int):
    """Return the figure: probe loss (with ln K) and E-step quality of every run in ``runs``; one legend below."""
    fig, axes = plotting.new_figure(2, width=4.2, height=3.0)
    for k, (name, r) in enumerate(runs.items()):
        axes[0].semilogy(r.steps, r.probe_loss, color=plotting.PALETTE[k], label=name)
        axes[1].plot(r.steps, r.correct_mass, color=plotting.PALETTE[k], label=name)
    axes[0].axhline(recall.routing_blind_floor_nats(n_sources), color="grey", ls=":", lw=1,
                    label=r"$\ln K$ (no routing)")
    axes[0].set(title="probe loss", xlabel="training step", ylabel="cross-entropy (nats)")
    axes[1].set(title="E-step quality", xlabel="training step", ylabel="attention on the correct source")
    fig.legend(*axes[0].get_legend_handles_labels(), loc="outside lower center", ncols=len(runs) + 1)
    fig.suptitle("Freezing one side of the loop")
    return fig


def plot_value_step_ratios(etas: np.ndarray, ratio_curves: Mapping[str, np.ndarray], bounds: Mapping[str, float]):
    """Return the figure: the ratio against η, and 1 − ratio on log–log axes with its bound ηλ/2 dashed; one legend
    below."""
    fig, axes = plotting.new_figure(2, width=4.2, height=3.1)
    for k, name in enumerate(ratio_curves):
        color = plotting.PALETTE[k]
        axes[0].semilogx(etas, ratio_curves[name], color=color, marker="o", ms=3, label=name)
        axes[1].loglog(etas, np.clip(1 - ratio_curves[name], 1e-16, None), color=color, marker="o", ms=3, label=name)
        axes[1].loglog(etas, etas * bounds[name] / 2, color=color, ls="--", lw=1)
    axes[0].axhline(1.0, color="grey", lw=1)
    axes[0].set(title="actual / predicted loss change", xlabel=r"step size $\eta$", ylabel="ratio", ylim=(-0.1, 1.1))
    axes[1].set(title=r"$1 - $ratio and its bound", xlabel=r"step size $\eta$",
                ylabel=r"$1 - \Delta L_\mathrm{actual} / \Delta L_\mathrm{predicted}$")
    bound = Line2D([], [], color="0.3", ls="--", lw=1, label=r"bound $\eta\lambda/2$ (right)")
    fig.legend(handles=[*axes[0].get_lines()[: len(ratio_curves)], bound], loc="outside lower center",
               ncols=len(ratio_curves) + 1)
    fig.suptitle("A value-only step: the first-order prediction becomes exact as the step shrinks")
    return fig


def plot_compatibility_changes(run: SpecializationRun, changes, error_curve: np.ndarray, *, eta: float,
                               n_positions: int):
    """Return the figure: predicted against actual Δb (scaled by N²/η, ``n_positions`` = N) at initialisation
    and at the end, and the relative error over training (milestones dotted)."""
    N2 = n_positions**2  # u carries 1/N, so u·u carries 1/N²
    width = min(7.2, plotting.MAX_FIGURE_WIDTH_IN)
    fig, grid = plotting.plt.subplot_mosaic([["initialisation", "end of training"], ["error", "error"]],
                                            figsize=(width, 6.0), layout="constrained",
                                            height_ratios=(1.15, 0.85))
    axes = [grid["initialisation"], grid["end of training"], grid["error"]]  # the error panel spans the bottom row
    for ax, name in zip(axes[:2], ("initialisation", "end of training")):
        c = changes[name]
        m = c.mask.expand_as(c.actual)
        pred, act = (c.predicted[m] / eta * N2).numpy(), (c.actual[m] / eta * N2).numpy()
        lim = float(np.abs(np.concatenate([pred, act])).max()) * 1.05
        ax.scatter(pred, act, s=4, alpha=0.4, color=plotting.PALETTE[0])
        ax.plot([-lim, lim], [-lim, lim], color="grey", lw=1)
        ax.set(title=f"{name}: rel. error {c.relative_error:.2f}", xlabel=r"predicted $\Delta b_{ij}\,N^2/\eta$",
               ylabel=r"actual $\Delta b_{ij}\,N^2/\eta$", xlim=(-lim, lim), ylim=(-lim, lim))
    axes[2].plot(run.steps, error_curve, color=plotting.PALETTE[3])
    _mark_milestones(axes[2], run)
    axes[2].set(title="relative error over training", xlabel="training step",
                ylabel=r"$\|\Delta b_\mathrm{actual} - \Delta b_\mathrm{pred}\| / \|\Delta b_\mathrm{actual}\|$")
    fig.suptitle(r"The compatibility change after a value step: prediction against actual ($\eta$ = " + f"{eta:g})")
    return fig


def plot_advantage_change(trace: dict[str, np.ndarray]):
    """Return the figure of :func:`advantage_change_along_training`: who gains advantage under a value step (top),
    and how often the rich-get-richer rule predicts its sign (bottom); legends to the right of the panels."""
    fig, axes = plotting.plt.subplots(2, 1, figsize=(8.0, 5.6), layout="constrained", sharex=True)
    steps = trace["steps"]
    ax = axes[0]
    for key, label, colour in (("gain_correct", "the source holding the answer", 0),
                               ("gain_other_source", "the other sources", 1),
                               ("gain_query_key", "earlier queries", 2)):
        ax.plot(steps, trace[key], color=plotting.PALETTE[colour], label=label)
    ax.set(title="keys gaining advantage under a value step",
           ylabel="share of attended pairs\n" + r"with $dA_{ij}/d\eta > 0$", ylim=(-0.02, 1.02))
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1))
    ax = axes[1]
    ax.plot(steps, trace["rule_agreement"], color=plotting.PALETTE[3],
            label="sign of " + r"$dA_{ij}/d\eta$" + " is the sign of\n" + r"$\alpha_{ij} - \sum_{j'} \alpha_{ij'}^2$")
    ax.plot(steps, trace["correct_rich"], color=plotting.PALETTE[0], ls="--",
            label="answer's source above\nthe threshold")
    ax.plot(steps, trace["self_share"], color=plotting.PALETTE[4], ls=":",
            label="self term's share\nof " + r"$|dA_{ij}/d\eta|$")
    ax.axhline(0.5, color="grey", lw=0.8)
    ax.set(title="the rich-get-richer rule", xlabel="training step", ylabel="fraction", ylim=(-0.02, 1.02))
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1))
    return fig


#: The name each figure is glued under for the chapter's ``{glue:figure}`` directives, with the function that draws it.
FIGURES = {
    "fig-recall-task": plot_recall_example,
    "fig-recall-learning-curves": plot_learning_curves,
    "fig-recall-snapshots": plot_attention_snapshots,
    "fig-recall-prototypes": plot_prototype_trajectories,
    "fig-recall-frozen": plot_frozen_runs,
    "fig-recall-value-step": plot_value_step_ratios,
    "fig-recall-compatibility-change": plot_compatibility_changes,
    "fig-recall-advantage-change": plot_advantage_change,
}
