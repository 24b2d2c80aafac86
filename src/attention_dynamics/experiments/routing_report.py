"""Chapter 3's report on routing–content feedback: its settings, the three runs, their summaries, claims, glue and figures.

The runs are :func:`attention_dynamics.experiments.head_training.train_specialization_head`; the measures of one
parameter state are :mod:`attention_dynamics.dynamics`. This module runs the chapter's variants, reads the runs,
records the ledger's claims and draws the chapter's figures.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np
import torch

from .. import claims, dynamics
from ..attention import causal_mask
from ..settling import first_true
from ..tasks import specialization as recall
from ..tasks.specialization import SpecializationBatch
from .head_training import SpecializationRun, milestone_indices, train_specialization_head

_RECALL = {"steps": 2000, "lr": 0.5, "n_train": 256, "n_probe": 256, "record_every": 20, "n_check": 64}
SETTINGS = {  # one head on the recall task; the paper has no such experiment, so "paper" = "book"
    "fast": {"steps": 300, "lr": 0.5, "n_train": 64, "n_probe": 64, "record_every": 20, "n_check": 16},
    "book": dict(_RECALL),
    "paper": dict(_RECALL),
}
VARIANTS = {"full": (), "values frozen": ("W_V",), "routing frozen": ("W_Q", "W_K")}  # name → frozen matrices
MILESTONES = (0.25, 0.5, 0.75)  # shares of the rise of the E-step quality that mark the routing transition
ETAS = np.logspace(-2, 4, 25)  # step sizes of the value-only steps (large: the loss is a mean over N queries)


# --------------------------------------------------------------------------------------------
# The task
# --------------------------------------------------------------------------------------------


def glue_task(example: SpecializationBatch) -> dict[str, int]:
    """Return the task's sizes (sources, queries, tags, labels, input width) for display, gluing them and the
    three reference levels of the loss (Bayes floor, ln K, ln C) for the prose."""
    K, Q, n_tags, n_labels = example.n_sources, example.n_queries, example.n_tags, example.n_labels
    claims.glue("recall.bayes_floor", recall.bayes_floor_nats())
    claims.glue("recall.blind_floor", recall.routing_blind_floor_nats(K))
    claims.glue("recall.chance", recall.chance_loss_nats(n_labels))
    d_in = example.x.shape[-1]
    for name, value in {"K": K, "Q": Q, "n_tags": n_tags, "n_labels": n_labels, "T": K + Q, "d_in": d_in}.items():
        claims.glue(f"recall.{name}", value)
    return {"sources K": K, "queries Q": Q, "tags": n_tags, "labels C": n_labels, "input width": d_in}


def correct_responsibilities(example: SpecializationBatch, index: int = 0) -> torch.Tensor:
    """Return the ``(T, T)`` ground-truth responsibilities of sequence ``index``: zero on the source rows, and on
    each query row a single 1 on the source whose tag it requests."""
    K, T = example.n_sources, example.n_sources + example.n_queries
    truth = torch.zeros(T, T)
    truth[K:] = example.responsibility[index]
    return truth


def plot_recall_example(example: SpecializationBatch):
    """Return ``(fig, axes)``: the inputs of one sequence by feature block, and its correct responsibilities."""
    from .. import plotting

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


# --------------------------------------------------------------------------------------------
# Training and its summary
# --------------------------------------------------------------------------------------------


def run_settings(cfg: Mapping[str, Any], seed: int) -> dict[str, Any]:
    """Return the keyword arguments of :func:`train_specialization_head` shared by the chapter's runs (the settling
    window is five checkpoints)."""
    return dict(seed=seed, steps=cfg["steps"], lr=cfg["lr"], n_train=cfg["n_train"], n_probe=cfg["n_probe"],
                record_every=cfg["record_every"], settle_window=5 * cfg["record_every"])


def train_variants(common: Mapping[str, Any]) -> dict[str, SpecializationRun]:
    """Return one run per :data:`VARIANTS` (full head, values frozen, routing frozen), trained in parallel with the
    settings ``common``, and glue the training settings the prose cites."""
    from ..training import map_parallel

    runs = dict(zip(VARIANTS, map_parallel(train_specialization_head,
                                           [dict(common, frozen=f) for f in VARIANTS.values()])))
    for name in ("steps", "lr", "n_train", "n_probe", "record_every"):
        claims.glue(f"ch3.{name}", common[name])
    return runs


def advantage_curve(run: SpecializationRun, batch: SpecializationBatch) -> np.ndarray:
    """Return the correct source's advantage (:func:`dynamics.correct_source_advantage`) at every checkpoint."""
    return np.array([dynamics.correct_source_advantage(run.head_at(i), batch) for i in range(len(run.steps))])


def first_step_reaching(run: SpecializationRun, curve: np.ndarray, threshold: float) -> int | None:
    """Return the first checkpoint step at which ``curve`` is at least ``threshold``, or None if it never is."""
    i = first_true(np.asarray(curve) >= threshold)
    return None if i is None else int(run.steps[i])


def run_summary(run: SpecializationRun, advantage: np.ndarray) -> dict[str, float | int]:
    """Return the full run's summary (final and initial measures; the steps at which the values align at cosine 0.9,
    the routing passes one half, the transition's middle milestone is reached and the advantage peaks; −1 for a
    threshold never reached), glued under its keys."""
    aligned_at = first_step_reaching(run, run.alignment, 0.9)
    routed_at = first_step_reaching(run, run.correct_mass, 0.5)
    summary = {
        "ch3.final_probe_loss": run.probe_loss[-1],
        "ch3.initial_correct_mass": run.correct_mass[0],
        "ch3.final_correct_mass": run.correct_mass[-1],
        "ch3.final_source_mass": run.source_mass[-1],
        "ch3.final_alignment": run.alignment[-1],
        "ch3.final_precision": run.precision_nats[-1],
        "ch3.initial_purity": run.purity[0],
        "ch3.final_purity": run.purity[-1],
        "ch3.aligned_step": aligned_at if aligned_at is not None else -1,
        "ch3.routed_step": routed_at if routed_at is not None else -1,
        "ch3.transition_step": int(run.steps[milestones(run)[1]]),
        "ch3.peak_advantage_step": int(run.steps[np.argmax(advantage)]),
    }
    for name, value in summary.items():
        claims.glue(name, value)
    return summary


def milestones(run: SpecializationRun) -> list[int]:
    """Return the checkpoint indices at which the E-step quality has covered each share of :data:`MILESTONES`."""
    return milestone_indices(run.correct_mass, MILESTONES)


def moments(run: SpecializationRun) -> dict[str, int]:
    """Return the checkpoint indices of initialisation, the middle of the routing transition and the end."""
    return {"initialisation": 0, "routing transition": milestones(run)[1], "end of training": len(run.steps) - 1}


def _mark_milestones(axes, run: SpecializationRun) -> None:
    for a in np.atleast_1d(axes).flat:
        for i in milestones(run):
            a.axvline(run.steps[i], color="black", ls=":", lw=0.8)


def plot_learning_curves(run: SpecializationRun, advantage: np.ndarray, *, n_sources: int, n_labels: int):
    """Return ``(fig, axes)``: the full run's loss with its reference levels, E-step quality and purity, M-step
    quality and precision, and the correct source's advantage (2 × 2, milestones dotted)."""
    from .. import plotting

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
    from .. import plotting

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
    :func:`head_training.prototype_trajectories`), marked at the start, the routing transition and the end."""
    from .. import plotting

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
    from .. import plotting

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


# --------------------------------------------------------------------------------------------
# The first-order predictions
# --------------------------------------------------------------------------------------------


def value_step_ratios(run: SpecializationRun, batch: SpecializationBatch, etas: Sequence[float] = ETAS):
    """Return ``(ratio_curves, bounds)``: per moment of :func:`moments`, the actual / predicted loss change of a
    value-only step for each of ``etas`` (:func:`dynamics.value_step_ratio_curve`) and the curvature bound λ."""
    ratio_curves, bounds = {}, {}
    for name, i in moments(run).items():
        head = run.head_at(i)
        ratio_curves[name] = dynamics.value_step_ratio_curve(head, batch, etas)
        bounds[name] = dynamics.value_step_curvature_bound(head, batch)
    return ratio_curves, bounds


def plot_value_step_ratios(etas: np.ndarray, ratio_curves: Mapping[str, np.ndarray], bounds: Mapping[str, float]):
    """Return ``(fig, axes)``: the ratio against η, and 1 − ratio on log–log axes with its bound ηλ/2 dashed."""
    from .. import plotting

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


def record_value_step_ratio(run: SpecializationRun, etas: np.ndarray, ratio_curves, bounds, *,
                            common: Mapping[str, Any], scale: str, n_check: int) -> claims.Claim:
    """Return the recorded claim ``dynamics.first_order_value_step_ratio``: the ratio at the smallest η and the
    routing transition, expected 1 within the a-priori bound ηλ/2 (plus 1e-9 for the float64 rounding of ΔL)."""
    transition = "routing transition"
    tolerance = etas[0] * bounds[transition] / 2 + 1e-9
    claims.glue("ch3.ratio_tolerance", tolerance)
    return claims.record(
        "dynamics.first_order_value_step_ratio", float(ratio_curves[transition][0]), unit="",
        description="actual / predicted (−η Σ_j ||Σ_i α_ij u_i||²) loss change of a value-only step, at the "
                    "smallest η and the middle of the routing transition (recall task, float64)",
        expected=1.0, tolerance=float(tolerance),
        params={"seed": common["seed"], "scale": scale, "eta": float(etas[0]),
                "step": int(run.steps[moments(run)[transition]]), "n_check": n_check,
                "curvature_bound": bounds[transition], **common})


def compatibility_changes(run: SpecializationRun, batch: SpecializationBatch, eta: float):
    """Return ``(changes, error_curve)``: :func:`dynamics.compatibility_change_after_value_step` at each moment of
    :func:`moments`, and its relative error at every checkpoint."""
    changes = {name: dynamics.compatibility_change_after_value_step(run.head_at(i), batch, eta)
               for name, i in moments(run).items()}
    curve = np.array([dynamics.compatibility_change_after_value_step(run.head_at(i), batch, eta).relative_error
                      for i in range(len(run.steps))])
    return changes, curve


def record_compatibility_change(run: SpecializationRun, changes, error_curve: np.ndarray, *, eta: float,
                                common: Mapping[str, Any], scale: str, n_check: int) -> claims.Claim:
    """Return the recorded claim ``dynamics.db_prediction_rel_err`` (the Δb prediction's relative error at
    initialisation), gluing the frozen-u residual, the errors at the transition and the end, and the last step
    before the error first exceeds 10% (the last step if it never does)."""
    transition, end = changes["routing transition"].relative_error, changes["end of training"].relative_error
    claims.glue("ch3.frozen_residual", max(c.frozen_error_signal_residual for c in changes.values()))
    claims.glue("ch3.db_err_transition", transition)
    claims.glue("ch3.db_err_end", end)
    above = first_true(error_curve > 0.1)
    claims.glue("ch3.db_err_below_10pct_until", int(run.steps[above if above is not None else -1]))
    return claims.record(
        "dynamics.db_prediction_rel_err", changes["initialisation"].relative_error, unit="",
        description="||Δb_actual − Δb_predicted||_F / ||Δb_actual||_F for a value-only step at the smallest η, at "
                    f"initialisation (u recomputed after the step; {transition:.2f} at the routing transition "
                    f"and {end:.2f} at the end of training)",
        params={"seed": common["seed"], "scale": scale, "eta": eta, "n_check": n_check, **common})


def plot_compatibility_changes(run: SpecializationRun, changes, error_curve: np.ndarray, *, eta: float,
                               n_positions: int):
    """Return ``(fig, axes)``: predicted against actual Δb (scaled by N²/η, ``n_positions`` = N) at initialisation
    and at the end, and the relative error over training (milestones dotted)."""
    from .. import plotting

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


def advantage_change_errors(run: SpecializationRun, batch: SpecializationBatch) -> tuple[list[float], list[float]]:
    """Return ``(errors, scales)`` per checkpoint: max |closed-form dA/dη − forward-mode autograd| and the largest
    |dA/dη| (:func:`dynamics.advantage_change_rate` against :func:`dynamics.advantage_change_autograd`)."""
    errors, scales = [], []
    for i in range(len(run.steps)):
        head = run.head_at(i)
        closed = dynamics.advantage_change_rate(head, batch).total
        exact = dynamics.advantage_change_autograd(head, batch)
        errors.append(float((closed - exact).abs().max()))
        scales.append(float(exact.abs().max()))
    return errors, scales


def record_advantage_change(errors: Sequence[float], scales: Sequence[float], *, common: Mapping[str, Any],
                            n_check: int) -> claims.Claim:
    """Return the recorded claim ``dynamics.advantage_change_max_abs_err`` (expected 0, tolerance 1e-12 × the largest
    rate)."""
    return claims.record(
        "dynamics.advantage_change_max_abs_err", max(errors), unit="",
        description="max |closed-form dA_ij/deta − forward-mode autograd through a real value step| over every "
                    "checkpoint (self + other-query + error-signal terms), float64; tolerance 1e-12 × the largest rate",
        expected=0.0, tolerance=1e-12 * max(scales),
        params={"n_check": n_check, "checkpoints": len(errors), "dtype": "float64", **common})


def glue_advantage_trace(trace: Mapping[str, np.ndarray], advantage: np.ndarray) -> None:
    """Glue the start, end, min and max of the advantage-change trace's shares, and two of them where the correct
    source's ``advantage`` peaks."""
    for key in ("gain_correct", "gain_other_source", "rule_agreement", "correct_rich", "self_share"):
        claims.glue(f"ch3.adv_{key}_start", float(trace[key][0]))
        claims.glue(f"ch3.adv_{key}_end", float(trace[key][-1]))
        claims.glue(f"ch3.adv_{key}_min", float(np.nanmin(trace[key])))
        claims.glue(f"ch3.adv_{key}_max", float(np.nanmax(trace[key])))
    peak = int(np.argmax(advantage))
    claims.glue("ch3.adv_gain_correct_at_peak", float(trace["gain_correct"][peak]))
    claims.glue("ch3.adv_rule_at_peak", float(trace["rule_agreement"][peak]))
