"""Chapter 4's ledger claims and glued numbers: the bridge's exactness, the settling orders with their intervals,
the learning-rate sweep and the freeze-the-frame intervention."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ...ledger import claims
from ...science import em
from . import freeze
from .runs import (
    GmmBridge,
    order_statistics,
    rate_settling_summary,
    run_settings,
    settling_comparison,
)
from .settings import (
    CLAIM_FRACTION,
    FREEZE_MARGIN,
    GMM_D,
    GMM_K,
    GMM_SIGMA,
    PATH_FRACTIONS,
    PLAIN_FACTORS,
    TAU,
    TwoTimescaleSettings,
)

__all__ = [
    "record_gmm_bridge",
    "likelihood_curves",
    "glue_equal_rates",
    "sensitivity_table",
    "path_comparison",
    "record_order_claims",
    "ratio_sweep",
    "sweep_path_comparison",
    "FREEZE_KINDS",
    "record_freeze_claims",
]


def _glue_all(prefix: str, values: Mapping[str, Any]) -> None:
    for name, value in values.items():
        claims.glue(f"{prefix}.{name}", value)


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


def glue_equal_rates(summary: Mapping[str, Any], cfg: TwoTimescaleSettings) -> dict[str, list[int]]:
    """Return the settling steps per seed (frame, values) by the rate criterion, after gluing the run's settings
    and the medians for the prose."""
    _glue_all("ch4", {
        "tau": TAU, "n_seeds": len(cfg.seeds), "first_seed": min(cfg.seeds), "last_seed": max(cfg.seeds),
        "lr": cfg.lr, "steps": cfg.steps, "n_probe": cfg.n_probe, "record_every": cfg.record_every,
        "settle_window": cfg.settle_window, "unsettled": summary["unsettled"],
        "median_frame_step": float(np.median(summary["frame_steps"])),
        "median_value_step": float(np.median(summary["value_steps"])),
    })
    return {"frame settles (step)": summary["frame_steps"].astype(int).tolist(),
            "values settle (step)": summary["value_steps"].astype(int).tolist()}


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


def path_comparison(runs: Sequence[Any], cfg: TwoTimescaleSettings, *, seed: int) -> tuple[dict[str, Any], dict[str, Any], str]:
    """Return ``(comparison, order, table)``: the unit-free comparison at :data:`PATH_FRACTIONS`
    (:func:`settling_comparison`), the order statistics at :data:`CLAIM_FRACTION`
    (:func:`order_statistics`) and the comparison as a text table; glues what the prose states."""
    comparison = settling_comparison(runs, PATH_FRACTIONS)
    rows = {r["fraction"]: r for r in comparison["rows"]}
    decided = [r for r in comparison["rows"] if r["verdict"] != "undecided"]
    claims.glue("ch4.path_every", cfg.path_every)
    claims.glue("ch4.final_loss_fraction", float(np.median([r.probe_loss[-1] / r.probe_loss[0] for r in runs])))
    claims.glue("ch4.path_n_decided", len(decided))
    claims.glue("ch4.path_n_thresholds", len(PATH_FRACTIONS))
    for f in (0.3, 0.1, 0.01):
        key = f"{f:g}".replace(".", "")
        for name, field in (("diff", "mean_difference"), ("low", "low"), ("high", "high"), ("verdict", "verdict")):
            claims.glue(f"ch4.path_{name}_{key}", rows[f][field])
    order = order_statistics(rows[CLAIM_FRACTION], seed=seed)
    claims.glue("ch4.path_fraction_low", order["fraction_interval"][0])
    claims.glue("ch4.path_fraction_high", order["fraction_interval"][1])
    claims.glue("ch4.path_ratio_low", order["ratio_interval"][0])
    claims.glue("ch4.path_ratio_high", order["ratio_interval"][1])
    claims.glue("ch4.path_intervals_phrase", prediction_side_phrase(order["fraction_interval"], order["ratio_interval"]))
    claims.glue("ch4.path_median_frame_step", float(np.median(rows[CLAIM_FRACTION]["frame"])))
    claims.glue("ch4.path_median_value_step", float(np.median(rows[CLAIM_FRACTION]["values"])))
    lines = [f"{'f':>6s} {'mean t_P - t_F':>15s} {'95% interval':>20s} {'frame first':>11s}  verdict"]
    lines += [f"{r['fraction']:6.2f} {r['mean_difference']:15.1f} {_interval(r):>20s} "
              f"{r['frame_first_share']:11.0%}  {r['verdict']}" for r in comparison["rows"]]
    return comparison, order, "\n".join(lines)


def record_order_claims(order: Mapping[str, Any], cfg: TwoTimescaleSettings) -> tuple[claims.Claim, claims.Claim]:
    """Return the two ledger claims on the frame-first order at equal rates (share of seeds, median t_P/t_F),
    each decided by its interval against the paper's prediction."""
    explanation = (
        "The order is decided by a paired comparison over seeds of the unit-free path criterion "
        "(remaining path ≤ 10% of the whole, recorded every "
        f"{cfg.path_every} steps); the claim's interval (Clopper–Pearson for the share, a "
        "bootstrap over seeds for the median ratio) decides its status against the paper's "
        "frame-first prediction (share above 1/2, ratio above 1). A straddling interval means "
        "this measurement cannot decide the order at this number of seeds. 'Final' is the end of "
        f"the {cfg.steps}-step run, by which the probe loss has fallen to a few ten-thousandths of "
        "its untrained value; a much longer run could still add path to either quantity."
    )
    params = {"seeds": list(cfg.seeds), "criterion": "remaining path fraction", "fraction": CLAIM_FRACTION,
              "path_every": cfg.path_every, "value_lr_ratio": 1.0, "scale": cfg.scale, **run_settings(cfg)}
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


def _majority(frame_first_fraction: float) -> str:
    """Return which settles first in most seeds: "frame", "values" or "neither" (a tie)."""
    return "frame" if frame_first_fraction > 0.5 else "values" if frame_first_fraction < 0.5 else "neither"


def prediction_side_phrase(fraction_interval: Sequence[float], ratio_interval: Sequence[float]) -> str:
    """Return where the two 95% intervals lie against the paper's prediction (frame first in more than half the seeds,
    t_P/t_F above 1): both beyond it, both on its side, or not both on one side."""
    if fraction_interval[1] < 0.5 and ratio_interval[1] < 1.0:
        return "both intervals on the far side of the prediction"
    if fraction_interval[0] > 0.5 and ratio_interval[0] > 1.0:
        return "both intervals on the side of the prediction"
    return "the two intervals not both on one side of the prediction"


def ratio_sweep(sweep_runs: Mapping[float, Sequence[Any]], equal_summary: Mapping[str, Any], *,
                tau: float = TAU) -> tuple[dict[float, dict[str, Any]], str]:
    """Return ``(sweep, table)``: ratio → rate-criterion summary (ratio 1 is ``equal_summary``), sorted by ratio,
    and its text table; glues the lowest and highest ratios' numbers for the prose."""
    sweep = {1.0: equal_summary}
    sweep.update({r: rate_settling_summary(runs, threshold=tau) for r, runs in sweep_runs.items()})
    ratios = list(sweep_runs)
    low, high = sweep[min(ratios)], sweep[max(ratios)]
    claims.glue("ch4.ratio_list", ", ".join(f"{r:g}" for r in ratios))
    claims.glue("ch4.n_sweep_seeds", len(next(iter(sweep_runs.values()))))
    claims.glue("ch4.lowest_ratio", min(ratios))
    claims.glue("ch4.highest_ratio", max(ratios))
    claims.glue("ch4.highest_ratio_order_phrase", {"frame": "the frame still finishes first",
                                                    "values": "the frame then finishes after the values",
                                                    "neither": "neither finishes first more often"}[
        _majority(high["frame_first_fraction"])])
    claims.glue("ch4.lowest_ratio_order_phrase", {"frame": "separate them the paper's way",
                                                   "values": "still leave the values first",
                                                   "neither": "leave neither first more often"}[
        _majority(low["frame_first_fraction"])])
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


def sweep_path_comparison(sweep_runs: Mapping[float, Sequence[Any]]) -> tuple[dict[float, dict[str, Any]], str]:
    """Return ``(rows, table)``: ratio → the unit-free comparison at :data:`CLAIM_FRACTION` for that ratio's runs,
    and its text table; glues the lowest and highest ratios' rows."""
    rows = {r: settling_comparison(runs, (CLAIM_FRACTION,))["rows"][0] for r, runs in sweep_runs.items()}
    for name, r in (("low", min(rows)), ("high", max(rows))):
        for field, key in (("diff", "mean_difference"), ("low", "low"), ("high", "high"), ("verdict", "verdict")):
            claims.glue(f"ch4.sweep_path_{name}_{field}", rows[r][key])
    lines = [f"{'value/routing lr':>16s} {'mean t_P - t_F (path, f = 10%)':>32s} {'95% interval':>20s}  verdict"]
    lines += [f"{r:16g} {row['mean_difference']:32.1f} {_interval(row):>20s}  {row['verdict']}"
              for r, row in rows.items()]
    return rows, "\n".join(lines)


FREEZE_KINDS = {  # kind → (claim of the step, claim of the cost at initialisation, where, what is scored)
    "head": ("frame_precision.freeze_frame_step", "frame_precision.freeze_frame_cost_bits", "chapter 4's recall head",
             "probe loss"),
    "tunnel": ("frame_precision.tunnel_freeze_frame_step", "frame_precision.tunnel_freeze_frame_cost_bits",
               "chapter 6's bijection wind tunnel", "KL"),
}


def record_freeze_claims(results: Mapping[str, Any], margin: float = FREEZE_MARGIN) -> dict[str, dict[str, float]]:
    """Return kind → {freeze step → mean cost in bits} for the stored freeze runs, after recording each kind's
    two ledger claims (the step from which the frame is in place, the cost of freezing at initialisation)
    and gluing the numbers the prose states (:func:`~attention_dynamics.chapters.two_timescale_em.freeze.freeze_frame_summary`)."""
    summaries = {kind: freeze.freeze_frame_summary(results[kind], margin) for kind in FREEZE_KINDS}
    claims.glue("ch4.freeze_margin_fraction", margin)
    claims.glue("ch4.freeze_head_seeds", summaries["head"]["n_seeds"])
    claims.glue("ch4.freeze_tunnel_seeds", summaries["tunnel"]["n_seeds"])
    claims.glue("ch4.freeze_tunnel_steps", summaries["tunnel"]["total_steps"])
    claims.glue("ch4.freeze_head_steps", summaries["head"]["total_steps"])
    for kind, (step_claim, cost_claim, where, score) in FREEZE_KINDS.items():
        s = summaries[kind]
        params = {"settings": results[kind]["settings"], "seeds": results[kind]["seeds"],
                  "freeze_steps": results[kind]["freeze_steps"], "margin_fraction": margin,
                  "code": results["provenance"]}
        step = s["freeze_frame_step"] if s["freeze_frame_step"] is not None else s["total_steps"]
        claims.record(
            step_claim, step, unit="step",
            description=f"{where}: earliest step t from which freezing W_Q, W_K costs every seed at most "
            f"{margin:.0%} of its untrained gap in final {score} (the run's length if none does)",
            params=params)
        claims.record(
            cost_claim, s["cost_mean_bits"][0], unit="bits",
            description=f"{where}: final cost in bits of freezing W_Q, W_K at initialisation "
            "(mean over seeds, over the unfrozen run)",
            params=params)
        for name in ("margin_bits", "gap_bits", "unfrozen_final_bits", "unfrozen_sd_bits"):
            claims.glue(f"ch4.freeze_{kind}_{name}", s[name])
        claims.glue(f"ch4.freeze_{kind}_step_fraction", step / s["total_steps"])
        for t, c in zip(s["steps"], s["cost_mean_bits"]):
            claims.glue(f"ch4.freeze_{kind}_cost_at_{t}", c)
    return {kind: dict(zip(s["steps"], np.round(s["cost_mean_bits"], 4))) for kind, s in summaries.items()}
