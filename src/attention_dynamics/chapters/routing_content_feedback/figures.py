"""Chapter 3's figures: the recall task, the learning curves with the routing transition marked, attention
snapshots, value trajectories, the frozen variants and the first-order predictions."""

from __future__ import annotations

from typing import Mapping

import numpy as np

from ... import plotting
from ...attention import causal_mask
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
]


def plot_recall_example(example: SpecializationBatch):
    """Return ``(fig, axes)``: the inputs of one sequence by feature block, and its correct responsibilities."""
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
    return fig, axes


def _mark_milestones(axes, run: SpecializationRun) -> None:
    for a in np.atleast_1d(axes).flat:
        for i in milestones(run):
            a.axvline(run.steps[i], color="black", ls=":", lw=0.8)


def plot_learning_curves(run: SpecializationRun, advantage: np.ndarray, *, n_sources: int, n_labels: int):
    """Return ``(fig, axes)``: the full run's loss with its reference levels, E-step quality and purity, M-step
    quality and precision, and the correct source's advantage (2 × 2, milestones dotted)."""
    P = plotting.PALETTE
    fig, axes = plotting.new_figure(2, 2, width=4.2, height=2.9)
    ax = axes[0, 0]
    ax.semilogy(run.steps, run.probe_loss, color=P[0], label="probe loss")
    ax.axhline(recall.chance_loss_nats(n_labels), color="grey", ls="--", lw=1, label=r"$\ln C$ (uniform guess)")
    ax.axhline(recall.routing_blind_floor_nats(n_sources), color="grey", ls=":", lw=1, label=r"$\ln K$ (no routing)")
    ax.set(title="loss (Bayes floor: 0 nats)", xlabel="training step", ylabel="cross-entropy (nats)")
    ax.legend(loc="lower left")
    ax = axes[0, 1]
    ax.plot(run.steps, run.correct_mass, color=P[1], label="on the correct source")
    ax.plot(run.steps, run.source_mass, color=P[2], ls="--", label="on any source")
    ax.plot(run.steps, run.purity, color=P[4], label="purity of soft counts")
    ax.set(title="E-step quality and specialization", xlabel="training step", ylabel="attention weight / share")
    ax.legend(loc="center right")
    ax = axes[1, 0]
    ax.plot(run.steps, run.alignment, color=P[3], label="alignment (cosine)")
    ax.set(title="M-step quality", xlabel="training step", ylabel="cosine to ideal prototype")
    twin = ax.twinx()
    twin.plot(run.steps, run.precision_nats, color=P[5], ls="--", label="precision loss (nats)")
    twin.set_ylabel("value read alone: cross-entropy (nats)")
    twin.grid(False)
    ax.legend(handles=ax.get_lines() + twin.get_lines(), loc="center right")
    ax = axes[1, 1]
    ax.plot(run.steps, advantage, color=P[6])
    ax.set(title="advantage of the correct source", xlabel="training step",
           ylabel=r"$N \cdot (\mathbb{E}_{\alpha_i}[b] - b_{ij})$")
    _mark_milestones(axes, run)
    fig.suptitle("One head learning content-addressed recall")
    return fig, axes


def plot_attention_snapshots(run: SpecializationRun):
    """Return ``(fig, axes)``: the attention of the first probe sequence (white squares: each query's correct source)
    and the specialization matrix, at initialisation, the three milestones and the end (one column each)."""
    shown = [0, *milestones(run), len(run.steps) - 1]
    truth_cols = run.shown_sequences["correct_source"][0]
    T = run.attention_snapshots.shape[-1]
    K = T - len(truth_cols)
    fig, axes = plotting.new_figure(len(shown), 2, width=2.7, height=2.6)
    for col, i in enumerate(shown):
        last = col == len(shown) - 1
        plotting.plot_matrix(axes[0, col], run.attention_snapshots[i, 0], mask=causal_mask(T), vmax=1.0,
                             title=f"step {run.steps[i]}", cbar_label="attention" if last else "")
        axes[0, col].scatter(truth_cols, np.arange(K, T), marker="s", s=40, facecolors="none", edgecolors="white",
                             lw=1.2)
        plotting.plot_matrix(axes[1, col], run.specialization[i], vmax=1.0, title=f"step {run.steps[i]}",
                             xlabel="source tag c", ylabel="requested tag r",
                             cbar_label="mean attention" if last else "")
    fig.suptitle("Attention of one probe sequence (top) and specialization over all probe sequences (bottom)")
    return fig, axes


def plot_prototype_trajectories(run: SpecializationRun, coords: np.ndarray, explained: np.ndarray):
    """Return ``(fig, ax)``: each label prototype's path in the plane of ``coords`` (``(n_ckpt, C, 2)``, from
    :func:`~attention_dynamics.chapters.routing_content_feedback.runs.prototype_trajectories`), marked at the start, the routing transition and the end."""
    middle = milestones(run)[1]
    fig, ax = plotting.new_figure(width=5.2, height=4.2)
    for label in range(coords.shape[1]):
        color = plotting.PALETTE[label % len(plotting.PALETTE)]
        ax.plot(coords[:, label, 0], coords[:, label, 1], color=color, lw=1.2)
        ax.scatter(*coords[0, label], color=color, marker="o", s=14)
        ax.scatter(*coords[middle, label], color=color, marker="D", s=18, edgecolors="black", lw=0.5)
        ax.scatter(*coords[-1, label], color=color, marker="*", s=90, edgecolors="black", lw=0.5)
        ax.annotate(f"label {label}", coords[-1, label], textcoords="offset points", xytext=(5, 4), fontsize=8)
    ax.set(title="Label prototypes over training (o start, ◆ routing transition, * end)",
           xlabel=f"PC 1 ({explained[0]:.0%} of variance)", ylabel=f"PC 2 ({explained[1]:.0%} of variance)")
    return fig, ax


def plot_frozen_runs(runs: Mapping[str, SpecializationRun], *, n_sources: int):
    """Return ``(fig, axes)``: probe loss (with ln K) and E-step quality of every run in ``runs``."""
    fig, axes = plotting.new_figure(2, width=4.2, height=3.0)
    for k, (name, r) in enumerate(runs.items()):
        axes[0].semilogy(r.steps, r.probe_loss, color=plotting.PALETTE[k], label=name)
        axes[1].plot(r.steps, r.correct_mass, color=plotting.PALETTE[k], label=name)
    axes[0].axhline(recall.routing_blind_floor_nats(n_sources), color="grey", ls=":", lw=1, label=r"$\ln K$")
    axes[0].set(title="probe loss", xlabel="training step", ylabel="cross-entropy (nats)")
    axes[1].set(title="E-step quality", xlabel="training step", ylabel="attention on the correct source")
    axes[0].legend(loc="lower left")
    fig.suptitle("Freezing one side of the loop")
    return fig, axes


def plot_value_step_ratios(etas: np.ndarray, ratio_curves: Mapping[str, np.ndarray], bounds: Mapping[str, float]):
    """Return ``(fig, axes)``: the ratio against η, and 1 − ratio on log–log axes with its bound ηλ/2 dashed."""
    fig, axes = plotting.new_figure(2, width=4.2, height=3.1)
    for k, name in enumerate(ratio_curves):
        color = plotting.PALETTE[k]
        axes[0].semilogx(etas, ratio_curves[name], color=color, marker="o", ms=3, label=name)
        axes[1].loglog(etas, np.clip(1 - ratio_curves[name], 1e-16, None), color=color, marker="o", ms=3, label=name)
        axes[1].loglog(etas, etas * bounds[name] / 2, color=color, ls="--", lw=1)
    axes[0].axhline(1.0, color="grey", lw=1)
    axes[0].set(title="actual / predicted loss change", xlabel=r"step size $\eta$", ylabel="ratio", ylim=(-0.1, 1.1))
    axes[0].legend(loc="lower left")
    axes[1].set(title=r"$1 - $ratio (dashed: bound $\eta\lambda/2$)", xlabel=r"step size $\eta$",
                ylabel=r"$1 - \Delta L_\mathrm{actual} / \Delta L_\mathrm{predicted}$")
    fig.suptitle("A value-only step: the first-order prediction becomes exact as the step shrinks")
    return fig, axes


def plot_compatibility_changes(run: SpecializationRun, changes, error_curve: np.ndarray, *, eta: float,
                               n_positions: int):
    """Return ``(fig, axes)``: predicted against actual Δb (scaled by N²/η, ``n_positions`` = N) at initialisation
    and at the end, and the relative error over training (milestones dotted)."""
    N2 = n_positions**2  # u carries 1/N, so u·u carries 1/N²
    fig, axes = plotting.new_figure(3, width=3.6, height=3.2)
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
    fig.suptitle(r"The compatibility change after a value step: prediction vs actual ($\eta$ = " + f"{eta:g})")
    return fig, axes


def plot_advantage_change(trace: dict[str, np.ndarray], *, axes=None):
    """Plot :func:`advantage_change_along_training`: who gains advantage, and how often the rule predicts it."""
    if axes is None:
        _, axes = plotting.new_figure(2, width=4.4, height=3.2)
    steps = trace["steps"]
    ax = axes[0]
    for key, label, colour in (("gain_correct", "the source holding the answer", 0),
                               ("gain_other_source", "the other sources", 1),
                               ("gain_query_key", "earlier queries", 2)):
        ax.plot(steps, trace[key], color=plotting.PALETTE[colour], label=label)
    ax.set(title="keys gaining advantage under a value step", xlabel="training step",
           ylabel="share of attended pairs with dA/dη > 0", ylim=(-0.02, 1.02))
    ax.legend(loc="best", fontsize=8)
    ax = axes[1]
    ax.plot(steps, trace["rule_agreement"], color=plotting.PALETTE[3],
            label=r"sign of dA/dη = sign of $\alpha_{ij} - \sum_{j'} \alpha_{ij'}^2$")
    ax.plot(steps, trace["correct_rich"], color=plotting.PALETTE[0], ls="--",
            label="answer's source above the threshold")
    ax.plot(steps, trace["self_share"], color=plotting.PALETTE[4], ls=":", label="self term's share of |dA/dη|")
    ax.axhline(0.5, color="grey", lw=0.8)
    ax.set(title="the rich-get-richer rule", xlabel="training step", ylabel="fraction", ylim=(-0.02, 1.02))
    ax.legend(loc="best", fontsize=8)
    return axes
