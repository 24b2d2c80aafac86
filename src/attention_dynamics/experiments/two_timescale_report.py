"""Chapter 4's report: the Gaussian-mixture bridge, the frame-versus-precision runs, their claims, tables and figures.

The measurements themselves live below: the mixture in :mod:`attention_dynamics.em`, the recall head and
its settling records in :mod:`attention_dynamics.experiments.head_training`, the unit-free criterion and
the freeze-the-frame intervention in :mod:`attention_dynamics.experiments.frame_precision`. This module
runs them with the chapter's settings, glues the numbers the prose states, records the ledger claims
and draws the figures.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from .. import claims, em
from ..training import map_parallel
from . import frame_precision, head_training

# the recall heads of chapter 3; the paper has no such experiment, so "paper" = "book"
_BOOK = {
    "steps": 2000,
    "lr": 0.5,
    "seeds": list(range(10)),
    "sweep_seeds": list(range(5)),
    "ratios": [0.25, 0.5, 2.0, 4.0],
    "n_train": 256,
    "n_probe": 256,
    "record_every": 20,
    "settle_window": 100,
    "path_every": 2,
    "n_points": 300,
    "n_em_iterations": 30,
}
SETTINGS = {
    "fast": {**_BOOK, "steps": 300, "seeds": [0, 1], "sweep_seeds": [0, 1], "ratios": [0.5, 2.0],
             "n_train": 64, "n_probe": 64, "n_points": 120, "n_em_iterations": 10},
    "book": dict(_BOOK),
    "paper": dict(_BOOK),
}

GMM_K, GMM_D, GMM_SIGMA = 3, 2, 1.0  # the mixture of the bridge: components, dimensions, known sd
PLAIN_FACTORS = (1.0, 3.0, 10.0)  # plain gradient ascent's steps, in units of sigma² / N
TAU = 0.01  # the rate criterion's threshold, fixed before looking at the results
SENSITIVITY_THRESHOLDS = (0.03, 0.01, 0.003)
DISTANCE_TOLERANCE = 0.1  # the distance-to-final criterion's fraction
PATH_FRACTIONS = (0.3, 0.2, 0.1, 0.05, 0.02, 0.01)  # the unit-free criterion's thresholds shown
CLAIM_FRACTION = 0.1  # the unit-free criterion's threshold the claims use, chosen before the runs
FREEZE_MARGIN = 0.01  # a frozen run matches when it costs at most this fraction of the untrained gap


def _glue_all(prefix: str, values: Mapping[str, Any]) -> None:
    for name, value in values.items():
        claims.glue(f"{prefix}.{name}", value)


# --------------------------------------------------------------------------------------------
# The Gaussian-mixture bridge
# --------------------------------------------------------------------------------------------


@dataclass
class GmmBridge:
    """The EM run of the bridge: data, its components, the start, the means' path and the per-iterate errors."""

    mixture: em.GaussianMixture  # the true mixture
    points: torch.Tensor  # (n, d)
    components: torch.Tensor  # (n,) the component that drew each point
    start: em.GaussianMixture  # means at K data points
    em_path: torch.Tensor  # (iterations + 1, K, d)
    bridge_errors: list[float]  # Xu–Jordan identity error at each iterate
    attention_errors: list[float]  # |E-step as attention − E-step| at each iterate


def gmm_bridge(n_points: int, iterations: int, generator: torch.Generator) -> GmmBridge:
    """Return the :class:`GmmBridge` of ``iterations`` EM steps on ``n_points`` points of a random mixture.

    The means are drawn from N(0, 2²), the data from the mixture, and EM starts from K data points
    chosen at random, all from ``generator`` in that order. At every iterate the EM mean step is compared
    with the preconditioned gradient step (:func:`em.xu_jordan_max_abs_error`) and the E-step with its
    attention form (:func:`em.responsibilities_as_attention`).
    """
    true_mixture = em.GaussianMixture(
        means=2.0 * torch.randn(GMM_K, GMM_D, generator=generator, dtype=torch.float64),
        sigma=GMM_SIGMA,
        weights=torch.full((GMM_K,), 1.0 / GMM_K, dtype=torch.float64),
    )
    points, components = em.sample_gaussian_mixture(n_points, true_mixture, generator=generator)
    start = true_mixture.with_means(points[torch.randperm(n_points, generator=generator)[:GMM_K]])
    path, mixture, bridge_errors, attention_errors = [start.means], start, [], []
    for _ in range(iterations):
        bridge_errors.append(em.xu_jordan_max_abs_error(points, mixture))
        attention = em.responsibilities_as_attention(points, mixture)
        attention_errors.append(float((attention - em.responsibilities(points, mixture)).abs().max()))
        mixture = mixture.with_means(em.em_mean_step(points, mixture))
        path.append(mixture.means)
    return GmmBridge(true_mixture, points, components, start, torch.stack(path), bridge_errors, attention_errors)


def record_gmm_bridge(bridge: GmmBridge, *, seed: int) -> claims.Claim:
    """Return the ledger claim ``em.xu_jordan_max_err`` (largest bridge error), after gluing the bridge's sizes."""
    n_points, iterations = len(bridge.points), len(bridge.bridge_errors)
    _glue_all("ch4", {"n_points": n_points, "gmm_K": GMM_K, "gmm_d": GMM_D, "n_em_iterations": iterations,
                      "attention_err": max(bridge.attention_errors)})
    return claims.record(
        "em.xu_jordan_max_err",
        max(bridge.bridge_errors),
        unit="units of x",
        description="max |EM mean step − (μ + σ²/N_k · ∂ℓ/∂μ_k)| over all coordinates and EM iterates "
        "(Gaussian mixture, gradient by autograd, float64)",
        expected=0.0,
        tolerance=1e-10,
        params={"seed": seed, "K": GMM_K, "d": GMM_D, "sigma": GMM_SIGMA, "n_points": n_points,
                "iterations": iterations},
    )


def likelihood_curves(bridge: GmmBridge) -> dict[str, Any]:
    """Return the mean log-likelihood per point along EM (``em``), preconditioned ascent with step 1 (``precond``)
    and plain ascent with steps c σ²/N for c in :data:`PLAIN_FACTORS` (``plain``: c → curve), from the bridge's start.

    Glues ``ch4.diverging_c`` (the largest c) and ``ch4.em_precond_gap`` (largest |EM − preconditioned|).
    """
    n, iterations = len(bridge.points), len(bridge.bridge_errors)
    curves = {
        "em": em.run_em(bridge.points, bridge.start, iterations),
        "precond": em.run_gradient_ascent(bridge.points, bridge.start, iterations, 1.0, preconditioned=True),
        "plain": {c: em.run_gradient_ascent(bridge.points, bridge.start, iterations, c * GMM_SIGMA**2 / n)
                  for c in PLAIN_FACTORS},
    }
    claims.glue("ch4.diverging_c", PLAIN_FACTORS[-1])
    claims.glue("ch4.em_precond_gap", float(np.abs(curves["em"] - curves["precond"]).max()))
    return curves


def plot_gmm_em(bridge: GmmBridge, curves: Mapping[str, Any]):
    """Return ``(fig, axes)``: (a) the data by component and the means' EM paths (o start, * end);
    (b) the log-likelihood along EM, preconditioned ascent and plain ascent (:func:`likelihood_curves`)."""
    from .. import plotting

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
    return fig, axes


# --------------------------------------------------------------------------------------------
# Frame and precision: the runs
# --------------------------------------------------------------------------------------------


def run_settings(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """Return the keyword arguments every head of the chapter shares (``train_specialization_head``'s)."""
    return {k: cfg[k] for k in ("steps", "lr", "n_train", "n_probe", "record_every", "settle_window", "path_every")}


def train_heads(cfg: Mapping[str, Any]) -> tuple[list[Any], dict[float, list[Any]]]:
    """Return ``(equal_runs, sweep_runs)``: one head per seed at equal rates, and ratio → heads (one per sweep seed)
    with the values' learning rate scaled by that ratio; all trained in parallel processes."""
    common = run_settings(cfg)
    jobs = [dict(common, seed=s, value_lr_ratio=1.0) for s in cfg["seeds"]]
    jobs += [dict(common, seed=s, value_lr_ratio=r) for r in cfg["ratios"] for s in cfg["sweep_seeds"]]
    runs = map_parallel(head_training.train_specialization_head, jobs)
    n, m = len(cfg["seeds"]), len(cfg["sweep_seeds"])
    return runs[:n], {r: runs[n + k * m: n + (k + 1) * m] for k, r in enumerate(cfg["ratios"])}


def glue_equal_rates(summary: Mapping[str, Any], cfg: Mapping[str, Any]) -> dict[str, list[int]]:
    """Return the settling steps per seed (frame, values) by the rate criterion, after gluing the run's settings
    and the medians for the prose."""
    _glue_all("ch4", {
        "tau": TAU, "n_seeds": len(cfg["seeds"]), "first_seed": min(cfg["seeds"]), "last_seed": max(cfg["seeds"]),
        "lr": cfg["lr"], "steps": cfg["steps"], "n_probe": cfg["n_probe"], "record_every": cfg["record_every"],
        "settle_window": cfg["settle_window"], "unsettled": summary["unsettled"],
        "median_frame_step": float(np.median(summary["frame_steps"])),
        "median_value_step": float(np.median(summary["value_steps"])),
    })
    return {"frame settles (step)": summary["frame_steps"].astype(int).tolist(),
            "values settle (step)": summary["value_steps"].astype(int).tolist()}


def plot_settling_rates(runs: Sequence[Any], summary: Mapping[str, Any], *, tau: float = TAU, settle_window: int):
    """Return ``(fig, axes)``: (a) each seed's frame and value change per window against ``tau``;
    (b) the settling steps per seed, frame against values, with the diagonal of equal times."""
    from .. import plotting

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
    ax.legend(loc="upper right")
    ax = axes[1]
    frame, value = summary["frame_steps"], summary["value_steps"]
    lo, hi = min(frame.min(), value.min()) * 0.9, max(frame.max(), value.max()) * 1.1
    ax.scatter(frame, value, color=plotting.PALETTE[2], s=30, zorder=3)
    ax.plot([lo, hi], [lo, hi], color="grey", lw=1, label="equal times")
    ax.set(title="settling steps per seed", xlabel=r"frame settles, $t_F$ (step)",
           ylabel=r"values settle, $t_P$ (step)", xlim=(lo, hi), ylim=(lo, hi))
    ax.text(0.05, 0.92, "above the line: frame first", transform=ax.transAxes, fontsize=8)
    ax.legend(loc="lower right")
    fig.suptitle("Frame versus precision at equal learning rates")
    return fig, axes


def sensitivity_rows(runs: Sequence[Any], settle_window: int) -> list[tuple[str, float, float, int]]:
    """Return ``(criterion, frame-first fraction, median t_P/t_F, unsettled)`` for the rate criterion at each of
    :data:`SENSITIVITY_THRESHOLDS` and for the distance-to-final criterion (:data:`DISTANCE_TOLERANCE`)."""
    rows = []
    for threshold in SENSITIVITY_THRESHOLDS:
        s = head_training.frame_precision_summary(runs, threshold=threshold)
        rows.append((f"rate, tau = {threshold:.1%} per {settle_window} steps", s["frame_first_fraction"],
                     s["median_time_ratio"], s["unsettled"]))
    by_distance = np.array([r.settling_steps_by_distance(DISTANCE_TOLERANCE) for r in runs], dtype=float)
    rows.append((f"distance to final state <= {DISTANCE_TOLERANCE:.0%} of initial",
                 float(np.mean(by_distance[:, 0] < by_distance[:, 1])),
                 float(np.median(by_distance[:, 1] / by_distance[:, 0])), 0))
    return rows


def sensitivity_table(rows: Sequence[tuple[str, float, float, int]]) -> str:
    """Return the text table of :func:`sensitivity_rows`, after gluing the loosest, strictest and distance rows."""
    claims.glue("ch4.strict_fraction", rows[2][1])
    claims.glue("ch4.strict_ratio", rows[2][2])
    claims.glue("ch4.loose_fraction", rows[0][1])
    claims.glue("ch4.distance_fraction", rows[3][1])
    claims.glue("ch4.distance_ratio", rows[3][2])
    lines = [f"{'criterion':48s} {'frame first':>11s} {'median t_P/t_F':>15s} {'unsettled':>9s}"]
    lines += [f"{name:48s} {fraction:11.2f} {ratio:15.3f} {unsettled:9d}" for name, fraction, ratio, unsettled in rows]
    return "\n".join(lines)


def _interval(row: Mapping[str, Any]) -> str:
    return "[" + format(row["low"], ".1f") + ", " + format(row["high"], ".1f") + "]"


def path_comparison(runs: Sequence[Any], cfg: Mapping[str, Any], *, seed: int) -> tuple[dict[str, Any], dict[str, Any], str]:
    """Return ``(comparison, order, table)``: the unit-free comparison at :data:`PATH_FRACTIONS`
    (:func:`frame_precision.settling_comparison`), the order statistics at :data:`CLAIM_FRACTION`
    (:func:`frame_precision.order_statistics`) and the comparison as a text table; glues what the prose states."""
    comparison = frame_precision.settling_comparison(runs, PATH_FRACTIONS)
    rows = {r["fraction"]: r for r in comparison["rows"]}
    decided = [r for r in comparison["rows"] if r["verdict"] != "undecided"]
    claims.glue("ch4.path_every", cfg["path_every"])
    claims.glue("ch4.final_loss_fraction", float(np.median([r.probe_loss[-1] / r.probe_loss[0] for r in runs])))
    claims.glue("ch4.path_n_decided", len(decided))
    claims.glue("ch4.path_n_thresholds", len(PATH_FRACTIONS))
    for f in (0.3, 0.1, 0.01):
        key = f"{f:g}".replace(".", "")
        for name, field in (("diff", "mean_difference"), ("low", "low"), ("high", "high"), ("verdict", "verdict")):
            claims.glue(f"ch4.path_{name}_{key}", rows[f][field])
    order = frame_precision.order_statistics(rows[CLAIM_FRACTION], seed=seed)
    claims.glue("ch4.path_fraction_low", order["fraction_interval"][0])
    claims.glue("ch4.path_fraction_high", order["fraction_interval"][1])
    claims.glue("ch4.path_ratio_low", order["ratio_interval"][0])
    claims.glue("ch4.path_ratio_high", order["ratio_interval"][1])
    claims.glue("ch4.path_median_frame_step", float(np.median(rows[CLAIM_FRACTION]["frame"])))
    claims.glue("ch4.path_median_value_step", float(np.median(rows[CLAIM_FRACTION]["values"])))
    lines = [f"{'f':>6s} {'mean t_P - t_F':>15s} {'95% interval':>20s} {'frame first':>11s}  verdict"]
    lines += [f"{r['fraction']:6.2f} {r['mean_difference']:15.1f} {_interval(r):>20s} "
              f"{r['frame_first_share']:11.0%}  {r['verdict']}" for r in comparison["rows"]]
    return comparison, order, "\n".join(lines)


def record_order_claims(order: Mapping[str, Any], cfg: Mapping[str, Any]) -> tuple[claims.Claim, claims.Claim]:
    """Return the two ledger claims on the frame-first order at equal rates (share of seeds, median t_P/t_F),
    each decided by its interval against the paper's prediction."""
    explanation = (
        "The order is decided by a paired comparison over seeds of the unit-free path criterion "
        "(remaining path ≤ 10% of the whole, recorded every "
        f"{cfg['path_every']} steps); the claim's interval (Clopper–Pearson for the share, a "
        "bootstrap over seeds for the median ratio) decides its status against the paper's "
        "frame-first prediction (share above 1/2, ratio above 1). A straddling interval means "
        "this measurement cannot decide the order at this number of seeds. 'Final' is the end of "
        f"the {cfg['steps']}-step run, by which the probe loss has fallen to a few ten-thousandths of "
        "its untrained value; a much longer run could still add path to either quantity."
    )
    params = {"seeds": list(cfg["seeds"]), "criterion": "remaining path fraction", "fraction": CLAIM_FRACTION,
              "path_every": cfg["path_every"], "value_lr_ratio": 1.0, "scale": cfg["scale"], **run_settings(cfg)}
    share = claims.record(
        "dynamics.frame_settles_first_fraction", order["frame_first_fraction"], unit="fraction of seeds",
        description="fraction of seeds whose attention pattern settles strictly before the values "
        "(remaining path ≤ 10% of the whole; equal learning rates, recall task), with a 95% "
        "Clopper–Pearson interval",
        lower=0.5, interval=order["fraction_interval"], explanation=explanation, params=params)
    ratio = claims.record(
        "dynamics.precision_to_frame_time_ratio", order["median_ratio"], unit="",
        description="median over seeds of t_P / t_F, values' settling step over the frame's "
        "(remaining path ≤ 10% of the whole; equal learning rates, recall task), with a 95% "
        "bootstrap interval over seeds",
        lower=1.0, interval=order["ratio_interval"], explanation=explanation, params=params)
    return share, ratio


# --------------------------------------------------------------------------------------------
# The learning-rate ratio
# --------------------------------------------------------------------------------------------


def ratio_sweep(sweep_runs: Mapping[float, Sequence[Any]], equal_summary: Mapping[str, Any], *,
                tau: float = TAU) -> tuple[dict[float, dict[str, Any]], str]:
    """Return ``(sweep, table)``: ratio → rate-criterion summary (ratio 1 is ``equal_summary``), sorted by ratio,
    and its text table; glues the lowest and highest ratios' numbers for the prose."""
    sweep = {1.0: equal_summary}
    sweep.update({r: head_training.frame_precision_summary(runs, threshold=tau) for r, runs in sweep_runs.items()})
    ratios = list(sweep_runs)
    low, high = sweep[min(ratios)], sweep[max(ratios)]
    claims.glue("ch4.ratio_list", ", ".join(f"{r:g}" for r in ratios))
    claims.glue("ch4.n_sweep_seeds", len(next(iter(sweep_runs.values()))))
    claims.glue("ch4.lowest_ratio", min(ratios))
    claims.glue("ch4.highest_ratio", max(ratios))
    for name, s in (("lowest", low), ("highest", high)):
        claims.glue(f"ch4.{name}_ratio_fraction", s["frame_first_fraction"])
        claims.glue(f"ch4.{name}_ratio_time_ratio", s["median_time_ratio"])
    for name, s in (("low", low), ("high", high)):
        claims.glue(f"ch4.frame_step_{name}", float(np.median(s["frame_steps"])))
    for name, s in (("low", low), ("high", high)):
        claims.glue(f"ch4.value_step_{name}", float(np.median(s["value_steps"])))
    sweep = {r: sweep[r] for r in sorted(sweep)}
    lines = [f"{'value/routing lr':>16s} {'median t_F':>10s} {'median t_P':>10s} {'frame first':>11s} "
             f"{'median t_P/t_F':>15s}"]
    lines += [f"{r:16g} {np.median(s['frame_steps']):10.0f} {np.median(s['value_steps']):10.0f} "
              f"{s['frame_first_fraction']:11.2f} {s['median_time_ratio']:15.3f}" for r, s in sweep.items()]
    return sweep, "\n".join(lines)


def plot_ratio_sweep(sweep: Mapping[float, Mapping[str, Any]], *, tau: float = TAU):
    """Return ``(fig, axes)``: (a) settling steps of frame and values (medians and seeds) against the
    value/routing learning-rate ratio; (b) the median t_P/t_F and the share of seeds whose frame settles first."""
    from .. import plotting

    ratios = sorted(sweep)
    fig, axes = plotting.new_figure(2, width=4.3, height=3.3)
    ax = axes[0]
    for key, name, color, shift in (("frame_steps", r"frame, $t_F$", plotting.PALETTE[0], 0.97),
                                    ("value_steps", r"values, $t_P$", plotting.PALETTE[1], 1.03)):
        ax.plot(ratios, [np.median(sweep[r][key]) for r in ratios], color=color, marker="o", label=name)
        for r in ratios:
            ax.scatter(np.full(len(sweep[r][key]), r * shift), sweep[r][key], color=color, s=8, alpha=0.5)
    ax.set(title="settling steps (medians and seeds)", ylabel="settling step")
    ax.legend()
    ax = axes[1]
    ax.plot(ratios, [sweep[r]["median_time_ratio"] for r in ratios], color=plotting.PALETTE[2], marker="o",
            label=r"median $t_P / t_F$")
    ax.plot(ratios, [sweep[r]["frame_first_fraction"] for r in ratios], color=plotting.PALETTE[4], marker="s",
            label="fraction frame first")
    ax.axhline(1.0, color="grey", lw=1)
    ax.set(title="the dissociation against the ratio", ylabel="ratio / fraction")
    ax.legend()
    for ax in axes:
        ax.set_xscale("log")
        ax.minorticks_off()
        ax.set_xticks(ratios, [f"{r:g}" for r in ratios])
        ax.set_xlabel("value / routing learning rate")
    fig.suptitle(rf"Frame versus precision as the values' learning rate changes ($\tau$ = {tau:.0%})")
    return fig, axes


def sweep_path_comparison(sweep_runs: Mapping[float, Sequence[Any]]) -> tuple[dict[float, dict[str, Any]], str]:
    """Return ``(rows, table)``: ratio → the unit-free comparison at :data:`CLAIM_FRACTION` for that ratio's runs,
    and its text table; glues the lowest and highest ratios' rows."""
    rows = {r: frame_precision.settling_comparison(runs, (CLAIM_FRACTION,))["rows"][0] for r, runs in sweep_runs.items()}
    for name, r in (("low", min(rows)), ("high", max(rows))):
        for field, key in (("diff", "mean_difference"), ("low", "low"), ("high", "high"), ("verdict", "verdict")):
            claims.glue(f"ch4.sweep_path_{name}_{field}", rows[r][key])
    lines = [f"{'value/routing lr':>16s} {'mean t_P - t_F (path, f = 10%)':>32s} {'95% interval':>20s}  verdict"]
    lines += [f"{r:16g} {row['mean_difference']:32.1f} {_interval(row):>20s}  {row['verdict']}"
              for r, row in rows.items()]
    return rows, "\n".join(lines)


# --------------------------------------------------------------------------------------------
# Freezing the frame
# --------------------------------------------------------------------------------------------

FREEZE_KINDS = {  # kind → (claim prefix, where, what the score is)
    "head": ("frame_precision.freeze_frame", "chapter 4's recall head", "probe loss"),
    "tunnel": ("frame_precision.tunnel_freeze_frame", "chapter 6's bijection wind tunnel", "KL"),
}


def record_freeze_claims(freeze: Mapping[str, Any], margin: float = FREEZE_MARGIN) -> dict[str, dict[str, float]]:
    """Return kind → {freeze step → mean cost in bits} for the stored freeze runs, after recording each kind's
    two ledger claims (the step from which the frame is in place, the cost of freezing at initialisation)
    and gluing the numbers the prose states (:func:`frame_precision.freeze_frame_summary`)."""
    summaries = {kind: frame_precision.freeze_frame_summary(freeze[kind], margin) for kind in FREEZE_KINDS}
    claims.glue("ch4.freeze_margin_fraction", margin)
    claims.glue("ch4.freeze_head_seeds", summaries["head"]["n_seeds"])
    claims.glue("ch4.freeze_tunnel_seeds", summaries["tunnel"]["n_seeds"])
    claims.glue("ch4.freeze_tunnel_steps", summaries["tunnel"]["total_steps"])
    claims.glue("ch4.freeze_head_steps", summaries["head"]["total_steps"])
    for kind, (prefix, where, score) in FREEZE_KINDS.items():
        s = summaries[kind]
        params = {"settings": freeze[kind]["settings"], "seeds": freeze[kind]["seeds"],
                  "freeze_steps": freeze[kind]["freeze_steps"], "margin_fraction": margin, "code": freeze["provenance"]}
        step = s["freeze_frame_step"] if s["freeze_frame_step"] is not None else s["total_steps"]
        claims.record(
            f"{prefix}_step", step, unit="step",
            description=f"{where}: earliest step t from which freezing W_Q, W_K costs every seed at most "
            f"{margin:.0%} of its untrained gap in final {score} (the run's length if none does)",
            params=params)
        claims.record(
            f"{prefix}_cost_bits", s["cost_mean_bits"][0], unit="bits",
            description=f"{where}: final cost in bits of freezing W_Q, W_K at initialisation "
            "(mean over seeds, over the unfrozen run)",
            params=params)
        for name in ("margin_bits", "gap_bits", "unfrozen_final_bits", "unfrozen_sd_bits"):
            claims.glue(f"ch4.freeze_{kind}_{name}", s[name])
        claims.glue(f"ch4.freeze_{kind}_step_fraction", step / s["total_steps"])
        for t, c in zip(s["steps"], s["cost_mean_bits"]):
            claims.glue(f"ch4.freeze_{kind}_cost_at_{t}", c)
    return {kind: dict(zip(s["steps"], np.round(s["cost_mean_bits"], 4))) for kind, s in summaries.items()}
