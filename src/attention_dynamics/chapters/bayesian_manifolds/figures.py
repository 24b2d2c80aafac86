"""Chapter 6's figures: the wind tunnels' exact posteriors, training, calibration, geometry and frame–precision.

Each function draws one figure of the chapter from the runs (:mod:`attention_dynamics.training.wind_tunnels`), their
measures (:mod:`attention_dynamics.diagnostics.wind_tunnel_geometry`) and the chapter's claims (:mod:`~attention_dynamics.chapters.bayesian_manifolds.report`,
:mod:`~attention_dynamics.chapters.bayesian_manifolds.long_tier_report`), and returns the figure, made for the book's
column (:func:`~attention_dynamics.core.plotting.new_figure`): text of at least 8 pt, legends clear of the reference lines.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from ...core import plotting
from ...diagnostics.wind_tunnel_geometry import FrameCalibrationCurves, GeometryReport, HMMManifold
from ...science import stats
from ...tasks import bijection, hmm
from ...training.wind_tunnels import HMMCurve, TrainedRun
from .long_tier import LongRun
from .long_tier_report import LONG_TRANSPORT_FRACTION, curve
from .settings import BIJECTION_TARGET_BITS, TRANSPORT_FRACTION as LENGTH_GEN_FRACTION, ManifoldsSettings

__all__ = [
    "FIGURE_NAMES",
    "hmm_floor_nats",
    "plot_hmm_posterior",
    "plot_training_losses",
    "plot_bijection_calibration",
    "plot_hmm_calibration",
    "plot_hmm_kl_through_training",
    "plot_geometry_through_training",
    "figure_hmm_kl_through_training",
    "plot_geometry",
    "GEOMETRY_PANELS",
    "figure_geometry_through_training",
    "plot_value_manifolds",
    "plot_frame_and_calibration",
    "manifold_checkpoints",
    "plot_manifold_through_training",
    "plot_long_curves",
]

#: The chapter's figures as the notebook glues them (``plotting.glue_figure``) and the prose shows them
#: (``{glue:figure}``), written out: glue name → the function that draws it.
FIGURE_NAMES = {
    "fig-manifold-hmm-posterior": "plot_hmm_posterior",
    "fig-manifold-training-losses": "plot_training_losses",
    "fig-manifold-bijection-calibration": "plot_bijection_calibration",
    "fig-manifold-hmm-calibration": "plot_hmm_calibration",
    "fig-manifold-hmm-kl-training": "figure_hmm_kl_through_training",
    "fig-manifold-geometry": "plot_geometry",
    "fig-manifold-geometry-training": "figure_geometry_through_training",
    "fig-manifold-value-manifolds": "plot_value_manifolds",
    "fig-manifold-frame-precision": "plot_frame_and_calibration",
    "fig-manifold-through-training": "plot_manifold_through_training",
    "fig-manifold-long-tier": "plot_long_curves",
}


def hmm_floor_nats(batch: hmm.HMMBatch) -> float:
    """Return the HMM task's cross-entropy floor in nats per step: the mean entropy of the exact filter on ``batch``."""
    return float(stats.entropy(batch.posterior, unit="nats").mean())


def plot_hmm_posterior(example: hmm.HMMBatch):
    """Return the figure of the exact filtering posterior of the first sequence of ``example`` (stacked areas),
    with the observed symbol at every step as a coloured square above the axes."""
    K = example.observations.shape[1]
    n_states = example.posterior.shape[-1]
    fig, ax = plotting.new_figure(width=7.0, height=2.8)
    steps = np.arange(K)
    ax.stackplot(steps, example.posterior[0].T.numpy(), labels=[f"state {s}" for s in range(n_states)], alpha=0.85,
                 step="mid")
    ax.scatter(steps, np.full(K, 1.04), c=example.observations[0].numpy(), cmap="tab10", vmin=0, vmax=9, marker="s",
               s=18, clip_on=False)
    ax.set(xlabel=r"step $t$", ylabel=r"$p(s_t \mid o_0, \dots, o_t)$", ylim=(0, 1), xlim=(-0.5, K - 0.5))
    ax.set_title("Exact filtering posterior of one sequence (squares: observed symbol)", pad=16)
    ax.legend(ncols=n_states, loc="upper center", bbox_to_anchor=(0.5, -0.3), frameon=False)
    return fig


def plot_training_losses(settings: ManifoldsSettings, bij_run: TrainedRun, hmm_run: TrainedRun,
                         hmm_batch: hmm.HMMBatch, *, window: int = 25):
    """Return the figure of both runs' training loss (moving average over ``window`` steps) against the exact floor.

    The bijection floor is the closed form (1/L) Σ_t ln(V − t); the HMM floor is the mean posterior
    entropy on the held-out ``hmm_batch`` (:func:`hmm_floor_nats`).
    """
    fig, axes = plotting.new_figure(2, width=3.6, height=3.0)
    for ax, run, floor, name in (
        (axes[0], bij_run, bijection.bayes_ce_floor_nats(settings.bijection.V, settings.bijection.L), "bijection"),
        (axes[1], hmm_run, hmm_floor_nats(hmm_batch), "HMM filtering"),
    ):
        ax.plot(*stats.moving_average(run.losses, window), color=plotting.PALETTE[0], label="training loss")
        ax.axhline(floor, color="k", ls="--", lw=1, label="Bayes floor")
        ax.set(title=name, xlabel="training step", ylabel="cross-entropy (nats per position)")
        ax.legend(frameon=False, loc="upper right")
    fig.suptitle(f"Training loss (moving average over {window} steps) against the exact floor")
    return fig


def plot_bijection_calibration(settings: ManifoldsSettings, report, log_probs, *, target: float = 0.01):
    """Return the figure of (a) the model's predictive entropy (mean, 5–95 % band) against log2(V − t);
    (b) entropy error and KL by position, log scale, with the ``target`` in bits.

    ``report``: the :class:`~attention_dynamics.science.calibration.CalibrationReport` of the model on the
    held-out batch; ``log_probs`` ``(B, L, V)``: the model's log-probabilities on it.
    """
    V, L = settings.bijection.V, settings.bijection.L
    h_model = stats.entropy(log_probs.exp(), unit="bits")  # (B, L) per-sample model entropy
    fig, axes = plotting.new_figure(2, width=3.7, height=3.6)
    t = np.arange(L)
    axes[0].plot(t, bijection.bayes_entropy_bits(V, L), "k--", lw=1.2, label=r"exact: $\log_2(V - t)$")
    axes[0].plot(t, report.model_entropy_curve, "o", color=plotting.PALETTE[0], ms=4, label="model (mean)")
    lo, hi = np.quantile(h_model.numpy(), [0.05, 0.95], axis=0)
    axes[0].fill_between(t, lo, hi, color=plotting.PALETTE[0], alpha=0.25, label="model (5–95 % of sequences)")
    axes[0].set(xlabel=r"pairs revealed $t$", ylabel="entropy (bits)", title="Predictive entropy")
    axes[1].semilogy(t, np.maximum(report.entropy_mae_by_position, 1e-6), "o-", ms=4, label="entropy error")
    axes[1].semilogy(t, np.maximum(report.kl_by_position, 1e-6), "s-", ms=4,
                     label=r"$\mathrm{KL}(\mathrm{posterior}\,\|\,\mathrm{model})$")
    axes[1].axhline(target, color="k", ls=":", lw=1, label=f"target {target} bits")
    axes[1].set(xlabel=r"pairs revealed $t$", ylabel="bits", title="Calibration error by position")
    for ax in axes:  # below the panel: the target line crosses the whole width
        ax.legend(frameon=False, loc="upper center", bbox_to_anchor=(0.5, -0.23))
    fig.suptitle(f"Bijection elimination, $V = L = {V}$: the model against the exact posterior")
    return fig


def plot_hmm_calibration(reports: Mapping[int, Any], blind_reports: Mapping[int, Any]):
    """Return the figure of (a) KL(filter ‖ model) by step at every test length (dashed: the context-blind
    predictor's); (b) the model's mean predictive entropy at every length against the exact one.

    ``reports`` / ``blind_reports``: length K → calibration report of the model / of the context-blind
    posterior; the first length is the training length (dotted line).
    """
    from matplotlib.lines import Line2D

    lengths = list(reports)
    K_train, K_long = lengths[0], lengths[-1]
    fig, axes = plotting.new_figure(2, width=3.7, height=3.6)
    for i, (K, rep) in enumerate(reports.items()):
        axes[0].plot(np.arange(K), rep.kl_by_position, color=plotting.PALETTE[i], lw=1.2, label=f"model, $K = {K}$")
        axes[0].plot(np.arange(K), blind_reports[K].kl_by_position, color=plotting.PALETTE[i], lw=0.8, ls="--")
        axes[1].plot(np.arange(K), rep.model_entropy_curve, color=plotting.PALETTE[i], lw=1.2, label=f"model, $K = {K}$")
    axes[1].plot(np.arange(K_long), reports[K_long].bayes_entropy_curve, "k--", lw=1, label="exact")
    trained = Line2D([], [], color="grey", ls=":", lw=1, label="training length")
    for ax in axes:
        ax.axvline(K_train - 0.5, color="grey", ls=":", lw=1)
    axes[0].set(xlabel=r"step $t$", ylabel="KL (bits)", title=r"$\mathrm{KL}(\mathrm{filter}\,\|\,\mathrm{model})$ by step",
                ylim=(0, None))
    axes[1].set(xlabel=r"step $t$", ylabel="entropy (bits)", title="Mean predictive entropy")
    blind = Line2D([], [], color="grey", ls="--", lw=0.8, label="context-blind, same $K$")
    for ax, extra in ((axes[0], [blind, trained]), (axes[1], [trained])):
        handles, _ = ax.get_legend_handles_labels()
        ax.legend(handles=handles + extra, frameon=False, loc="upper center", bbox_to_anchor=(0.5, -0.23), ncols=2)
    fig.suptitle(f"HMM filtering: trained at $K = {K_train}$, tested up to $K = {K_long}$")
    return fig


def plot_hmm_kl_through_training(ax, curve: HMMCurve, *, target: float = 0.6) -> None:
    """Draw the HMM model's KL at every checkpoint as a multiple of the context-blind level, one line per length.

    1 (dashed) is the level of a model with no memory; ``target`` (dotted) is the book's transport bound.
    The legend stands to the right of the axes, clear of the two levels.
    """

    x = np.maximum(curve.steps, 1)
    for i, K in enumerate(curve.kl_bits):
        ax.plot(x, curve.ratio(K), "o-", ms=3, color=plotting.PALETTE[i], label=f"$K = {K}$")
    ax.axhline(1.0, color="k", ls="--", lw=1, label="context-blind level")
    ax.axhline(target, color="k", ls=":", lw=1, label=f"transport bound ({target}×)")
    ax.set(xscale="log", xlabel="training step (step 0 drawn at 1)", ylabel="KL / context-blind KL",
           ylim=(0, min(3.0, 1.1 * max(float(np.max(curve.ratio(K)[1:])) for K in curve.kl_bits) + 0.1)))
    ax.legend(frameon=False, loc="upper left", bbox_to_anchor=(1.01, 1))


def plot_geometry_through_training(axes, curve: Mapping[str, np.ndarray], nulls: Mapping[str, Mapping[str, float]],
                                   panels: Sequence[tuple[str, float]]) -> None:
    """Draw geometry measures through training, one panel per ``(name, paper bound)`` in ``panels``.

    Each panel shows the checkpoint values (:func:`~attention_dynamics.diagnostics.wind_tunnel_geometry.bijection_geometry_through_training`), the paper's
    bound (dotted) and the scrambled-values control (dashed); step 0 is the untrained model. The last
    20 % of training is shaded: the window in which a plateau is judged (:func:`~attention_dynamics.science.settling.late_change`).
    The legend is the figure's, below the panels (the levels cross every panel).
    """

    x = np.maximum(curve["step"], 1)
    for ax, (name, bound) in zip(axes, panels):
        ax.plot(x, curve[name], "o-", ms=3, color=plotting.PALETTE[0], label="trained (step 0: untrained)")
        ax.axhline(nulls["scrambled values"][name], color=plotting.PALETTE[1], ls="--", lw=1, label="scrambled-values control")
        ax.axhline(bound, color="k", ls=":", lw=1, label="Paper I's bound")
        ax.axvspan(0.8 * curve["step"][-1], curve["step"][-1], color="grey", alpha=0.15, lw=0,
                   label="last 20 % of training")
        ax.set(xscale="log", xlabel="training step")
        ax.set_title(name, fontsize=10)
    handles, labels = axes[0].get_legend_handles_labels()
    axes[0].figure.legend(handles, labels, loc="outside lower center", ncols=2, frameon=False)


def figure_hmm_kl_through_training(curve: HMMCurve, *, target: float = 0.6):
    """Return the figure of :func:`plot_hmm_kl_through_training`, with its title."""
    fig, ax = plotting.new_figure(width=7.4, height=3.2)
    plot_hmm_kl_through_training(ax, curve, target=target)
    ax.set_title("HMM filtering: KL over the context-blind level, through training")
    return fig


def plot_geometry(geo: GeometryReport, *, paper_key_bound: float = 0.1):
    """Return the figure (2 × 2) of the layer-0 key cosines of one sequence; mean key |cos| by layer and token type
    against the isotropic baseline and Paper I's bound; attention entropy by layer against uniform
    attention; query–key alignment by layer, attention-weighted against uniform over the visible keys."""
    layers = np.arange(len(geo.key_abs_cos))
    fig, axes = plotting.new_figure(2, 2, width=3.8, height=3.4)
    plotting.plot_matrix(axes[0, 0], np.abs(geo.key_cosines), title="$|\\cos|$ between layer-0 keys\n(one sequence, head 0)",
                         xlabel=r"position $j$ (even: key token)", ylabel=r"position $i$", cbar_label=r"$|\cos|$",
                         vmax=1.0)
    axes[0, 0].set_aspect("auto")  # fill the panel, the colour bar beside it
    w = 0.27
    axes[0, 1].bar(layers - w, geo.key_abs_cos, w, label="all positions")
    axes[0, 1].bar(layers, geo.key_abs_cos_value_tokens, w, label="value tokens")
    axes[0, 1].bar(layers + w, geo.key_abs_cos_key_tokens, w, label="key tokens")
    axes[0, 1].axhline(geo.key_abs_cos_baseline, color="k", ls="--", lw=1, label="isotropic baseline")
    axes[0, 1].axhline(paper_key_bound, color="k", ls=":", lw=1, label=f"Paper I: < {paper_key_bound}")
    axes[0, 1].set(xticks=layers, xlabel="layer", ylabel=r"mean $|\cos|$ between keys", title="Key orthogonality",
                   ylim=(0, 1.6), yticks=np.linspace(0, 1, 6))
    handles, labels = axes[0, 1].get_legend_handles_labels()
    order = [2, 3, 4, 0, 1]  # the bars, then the two levels
    axes[0, 1].legend([handles[i] for i in order], [labels[i] for i in order], frameon=False, ncols=2,
                      loc="upper center", columnspacing=0.8, handlelength=1.5)
    axes[1, 0].bar(layers, geo.attention_entropy_bits, 0.6, label="trained model")
    axes[1, 0].axhline(geo.attention_entropy_uniform_bits, color="k", ls="--", lw=1, label="uniform attention")
    axes[1, 0].set(xticks=layers, xlabel="layer", ylabel="attention entropy (bits)", title="Attention entropy by layer",
                   ylim=(0, 1.5 * geo.attention_entropy_uniform_bits))
    axes[1, 0].legend(frameon=False, loc="upper left")
    axes[1, 1].plot(layers, geo.qk_alignment_attended, "o-", label="weighted by attention")
    axes[1, 1].plot(layers, geo.qk_alignment_visible, "s--", label="uniform over visible keys")
    axes[1, 1].set(xticks=layers, xlabel="layer", ylabel=r"mean $\cos(q_i, k_j)$", title="Query–key alignment")
    axes[1, 1].legend(frameon=False)
    fig.suptitle("Geometry of the bijection transformer (probe sequences)")
    return fig


#: The four geometry measures followed through training, each with Paper I's bound.
GEOMETRY_PANELS = (
    ("key |cos|, layer 0, all positions", 0.1),
    ("key |cos|, layer 0, key tokens", 0.1),
    ("attention entropy reduction, first → last layer", 0.85),
    ("value PC1 share", 0.8),
)


def figure_geometry_through_training(curve: Mapping[str, np.ndarray], nulls: Mapping[str, Mapping[str, float]],
                                     panels: Sequence[tuple[str, float]] = GEOMETRY_PANELS):
    """Return the figure (2 × 2) of :func:`plot_geometry_through_training`
    for the ``panels`` (name, Paper I's bound), with its title."""
    fig, axes = plotting.new_figure(2, 2, width=3.8, height=2.9)
    plot_geometry_through_training(axes.ravel(), curve, nulls, list(panels))
    fig.suptitle("The geometry through training (shaded: the last 20 %, where a plateau is judged)")
    return fig


def plot_value_manifolds(geo: GeometryReport, hmm_geo: HMMManifold):
    """Return the figure of the value manifold (PC1, PC2 of the last layer's attention output) of the
    bijection and of the HMM transformer, each point coloured by its exact posterior entropy."""
    fig, axes = plotting.new_figure(2, width=3.7, height=3.2)
    for ax, scores, entropy, title in (
        (axes[0], geo.value_scores, geo.entropy_bits, "Bijection"),
        (axes[1], hmm_geo.scores, hmm_geo.entropy_bits, "HMM filtering"),
    ):
        sc = ax.scatter(scores[:, 0], scores[:, 1], c=entropy, s=5, cmap="viridis", alpha=0.7, rasterized=True)
        ax.set(xlabel="PC1", ylabel="PC2", title=title)
        fig.colorbar(sc, ax=ax, shrink=0.85).set_label("exact posterior entropy (bits)")
    fig.suptitle("Value manifold: last layer's attention output at the prediction positions")
    return fig


def plot_frame_and_calibration(fp: FrameCalibrationCurves):
    """Return the figure of every layer's attention similarity to the final model through training (left axis,
    with the frame threshold and the frame's settling step) and the entropy error (right axis, log scale, with
    the calibration's settling step). The right axis is ``fig.axes[1]``; the legend is the figure's, below the axes
    (the threshold and the two settling steps cross the whole panel)."""
    fig, ax = plotting.new_figure(width=7.4, height=3.8)
    x = np.maximum(fp.steps, 1)
    for l in range(fp.attention_similarity.shape[1]):
        ax.plot(x, fp.attention_similarity[:, l], "o-", ms=3, color=plotting.PALETTE[l], label=f"attention, layer {l}")
    ax.axhline(fp.frame_threshold, color="grey", ls="--", lw=0.8, label="frame threshold")
    ax.set(xscale="log", xlabel="training step (step 0 drawn at 1)", ylabel="similarity to final attention\n(1 − TV)",
           title="Frame and precision through training")
    ax.axvline(fp.frame_settle_step, color="k", ls=":", lw=1.2, label="frame settles")
    axr = ax.twinx()
    axr.semilogy(x, fp.entropy_mae_bits, "s-", ms=3, color="k", label="entropy error (bits, right axis)")
    axr.axvline(fp.calibration_settle_step, color="k", ls="-.", lw=1.2, label="calibration settles")
    axr.set_ylabel("per-sample entropy error (bits)")
    axr.grid(False)
    h1, l1 = ax.get_legend_handles_labels()
    h2, l2 = axr.get_legend_handles_labels()
    fig.legend(h1 + h2, l1 + l2, frameon=False, loc="outside lower center", ncols=3)
    return fig


def manifold_checkpoints(fp: FrameCalibrationCurves) -> list[int]:
    """Return the indices of the checkpoints nearest to step 0, half the frame's settling step, that step and the end."""
    return [int(np.argmin(np.abs(fp.steps - s)))
            for s in (0, fp.frame_settle_step // 2, fp.frame_settle_step, fp.steps[-1])]


def plot_manifold_through_training(fp: FrameCalibrationCurves):
    """Return the figure (2 × 2) of the value manifold at the :func:`manifold_checkpoints`, projected on the final
    model's two principal directions and coloured by the posterior entropy, with ρ(PC1, entropy) in each title."""
    picks = manifold_checkpoints(fp)
    fig, grid = plotting.new_figure(2, 2, width=2.9, height=2.8, sharex=True, sharey=True)
    axes = grid.ravel()
    for ax, i in zip(axes, picks):
        z = fp.value_pcs[i]
        sc = ax.scatter(z[:, 0], z[:, 1], c=fp.value_entropy_bits, s=4, cmap="viridis", alpha=0.7, rasterized=True)
        ax.set_title(f"step {fp.steps[i]}\n" + rf"$\rho$(PC1, entropy) = {fp.value_pc1_spearman[i]:.2f}")
    for ax in grid[-1]:
        ax.set_xlabel("final PC1")
    for ax in grid[:, 0]:
        ax.set_ylabel("final PC2")
    fig.colorbar(sc, ax=grid, shrink=0.6).set_label("posterior entropy (bits)")
    fig.suptitle("The value manifold through training")
    return fig


def plot_long_curves(bij: LongRun, hmm_run: LongRun):
    """Return the figure of the long runs' held-out measurements along training, one panel above the other.

    Top: the V = 20 bijection's entropy error (log scale) with the 0.01-bit target and Paper I's 0.007.
    Bottom: the HMM model's KL over the context-blind level at every test length, with the level (1), chapter 6's
    transport bound and the long tier's bound. The last 20 % of training, where a plateau is judged, is shaded.
    Each legend stands to the right of its panel, clear of the levels.
    """
    fig, axes = plotting.new_figure(1, 2, width=7.4, height=2.9)
    steps, mae = curve(bij, "entropy_mae_bits")
    ax = axes[0]
    ax.plot(steps, mae, "o-", ms=3, color=plotting.PALETTE[0], label="model (held out)")
    ax.axhline(BIJECTION_TARGET_BITS, color="k", ls=":", lw=1, label=f"target {BIJECTION_TARGET_BITS}")
    ax.axhline(0.007, color=plotting.PALETTE[3], ls="--", lw=1, label="Paper I: 0.007")
    ax.set(yscale="log", xlabel="training step", ylabel="entropy error (bits)",
           title=f"bijection $V = {bij.settings.tunnel.V}$, $L = {bij.settings.tunnel.L}$")
    ax = axes[1]
    for i, K in enumerate(hmm_run.settings.tunnel.test_lengths):
        s, r = curve(hmm_run, f"kl_ratio_K{K}")
        ax.plot(s, r, "o-", ms=3, color=plotting.PALETTE[i], label=f"$K = {K}$")
    ax.axhline(1.0, color="k", ls="--", lw=1, label="context-blind level")
    ax.axhline(LENGTH_GEN_FRACTION, color="grey", ls="-.", lw=1, label=f"{LENGTH_GEN_FRACTION}× (chapter's\ntransport bound)")
    ax.axhline(LONG_TRANSPORT_FRACTION, color="k", ls=":", lw=1, label=f"{LONG_TRANSPORT_FRACTION}× (long tier's\nbound)")
    ax.set(yscale="log", xlabel="training step", ylabel="KL / context-blind KL",
           title=f"HMM filtering, trained at $K = {hmm_run.settings.tunnel.length}$")
    for ax, run in zip(axes, (bij, hmm_run)):
        end = run.results["steps"]
        ax.axvspan(0.8 * end, end, color="grey", alpha=0.15, lw=0, label="last 20 % of training")
        ax.legend(frameon=False, loc="upper left", bbox_to_anchor=(1.01, 1))
    fig.suptitle("The long tier along training (held-out measurements stored by the runs)")
    return fig
