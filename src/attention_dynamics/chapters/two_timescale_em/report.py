"""Chapter 4's ledger claims and glued numbers: the bridge's exactness, the settling orders with their intervals,
the learning-rate sweep and the freeze-the-frame intervention. Every glue name is written out, so that a search for a
name the prose uses finds where its number is glued."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ...diagnostics import frame_order
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
    FREE_FREEZE_RATIO,
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
    "glue_order_phrase",
    "glue_reparametrisation_settings",
    "REPARAMETRISATION_CLAIM_IDS",
    "REPARAMETRISATION_FUNCTION_GLUE",
    "record_reparametrisation_claims",
    "ratio_sweep",
    "sweep_path_comparison",
    "PATH_GLUE",
    "SWEEP_PATH_GLUE",
    "FREEZE_KINDS",
    "FREEZE_GLUE",
    "FREEZE_STEP_GLUE",
    "record_freeze_claims",
]


def record_gmm_bridge(bridge: GmmBridge, *, seed: int) -> claims.Claim:
    """Return the ledger claim ``em.xu_jordan_max_err`` (largest bridge error), after gluing the bridge's sizes."""
    n_points, iterations = len(bridge.points), len(bridge.bridge_errors)
    claims.glue("ch4.n_points", n_points)
    claims.glue("ch4.gmm_K", GMM_K)
    claims.glue("ch4.gmm_d", GMM_D)
    claims.glue("ch4.n_em_iterations", iterations)
    claims.glue("ch4.attention_err", max(bridge.attention_errors))
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
    claims.glue("ch4.tau", TAU)
    claims.glue("ch4.n_seeds", len(cfg.seeds))
    claims.glue("ch4.first_seed", min(cfg.seeds))
    claims.glue("ch4.last_seed", max(cfg.seeds))
    claims.glue("ch4.lr", cfg.lr)
    claims.glue("ch4.steps", cfg.steps)
    claims.glue("ch4.n_train", cfg.n_train)
    claims.glue("ch4.n_probe", cfg.n_probe)
    claims.glue("ch4.record_every", cfg.record_every)
    claims.glue("ch4.settle_window", cfg.settle_window)
    claims.glue("ch4.unsettled", summary["unsettled"])
    claims.glue("ch4.median_frame_step", float(np.median(summary["frame_steps"])))
    claims.glue("ch4.median_value_step", float(np.median(summary["value_steps"])))
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


#: The path comparison's rows the prose states, glued under these names: threshold f → {field: name}.
PATH_GLUE = {
    0.3: {"mean_difference": "ch4.path_diff_03", "low": "ch4.path_low_03", "high": "ch4.path_high_03",
          "verdict": "ch4.path_verdict_03"},
    0.1: {"mean_difference": "ch4.path_diff_01", "low": "ch4.path_low_01", "high": "ch4.path_high_01",
          "verdict": "ch4.path_verdict_01"},
    0.01: {"mean_difference": "ch4.path_diff_001", "low": "ch4.path_low_001", "high": "ch4.path_high_001",
           "verdict": "ch4.path_verdict_001"},
}


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
    for f, names in PATH_GLUE.items():
        for field, name in names.items():
            claims.glue(name, rows[f][field])
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


def glue_order_phrase(share: claims.Claim) -> str:
    """Glue ``ch4.path_order_phrase``, the order at equal rates in words, worded by the share claim's status (the
    sentence cannot drift from the ledger), and return it."""
    phrase = frame_order.order_phrase(share.status)
    claims.glue("ch4.path_order_phrase", phrase)
    return phrase


def glue_reparametrisation_settings() -> None:
    """Glue the value scales c of the stored result ``frame_reparametrisation`` (``ch4.reparam_scales``, in words)
    and its number of seeds (``ch4.reparam_seeds``), from its book settings."""
    from .reparametrisation import SETTINGS as REPARAMETRISATION

    s = REPARAMETRISATION["book"]
    claims.glue("ch4.reparam_scales", " and ".join(f"{c:g}" for c in s.scales))
    claims.glue("ch4.reparam_seeds", len(s.head.seeds))


#: The reparametrisation's claims: the path reading's share of seeds with the frame first at each value scale c.
REPARAMETRISATION_CLAIM_IDS = {("sgd", "0.5"): "frame_precision.order_path_sgd_values_halved",
                               ("sgd", "2"): "frame_precision.order_path_sgd_values_doubled",
                               ("adam", "0.5"): "frame_precision.order_path_adam_values_halved",
                               ("adam", "2"): "frame_precision.order_path_adam_values_doubled"}
#: The glue names of the reparametrisation's function readings (share of seeds, frame first), by optimiser and c.
REPARAMETRISATION_FUNCTION_GLUE = {("sgd", "0.5"): "ch4.reparam_function_sgd_halved",
                                   ("sgd", "2"): "ch4.reparam_function_sgd_doubled",
                                   ("adam", "0.5"): "ch4.reparam_function_adam_halved",
                                   ("adam", "2"): "ch4.reparam_function_adam_doubled"}


def record_reparametrisation_claims(result: Mapping[str, Any], unscaled: Mapping[str, Any],
                                    horizon: int) -> dict[str, Any]:
    """Record the parameter path's order at each value scale c (``result``: the stored ``frame_reparametrisation``;
    ``unscaled``: ``frame_definitions``, c = 1) at ``horizon`` steps, glue the function readings beside it, and return
    ``{"moves": bool, "claims": {...}}``: whether the path's order (its share of seeds with the frame first) leaves
    the c = 1 interval at any c while the function's stays — the sign that the path reads the coordinates."""
    h = str(horizon)
    out, moves = {}, False
    for (opt, c), cid in REPARAMETRISATION_CLAIM_IDS.items():
        row = result["runs"][opt][c]["horizons"][h]["path"]
        base = unscaled["toy"][opt]["horizons"][h]["path"]
        out[cid] = claims.record(
            cid, row["share"], unit="fraction of seeds",
            description=f"chapter 4's recall head under {'plain SGD' if opt == 'sgd' else 'Adam'} with its values "
                        f"scaled by {float(c):g} and its read-out by 1/{float(c):g} (the same function, new coordinates): "
                        f"share of seeds whose frame settles first by the parameter path at {horizon} steps (95% "
                        f"Clopper–Pearson interval {row['low']:.2f} to {row['high']:.2f}; at c = 1: {base['share']:.2f})",
            params={"seeds": result["runs"][opt][c]["seeds"], "value_scale": float(c), "horizon": horizon,
                    "data": "frame_reparametrisation.json", "interval": [row["low"], row["high"]]})
        function = result["runs"][opt][c]["horizons"][h]["function"]
        claims.glue(REPARAMETRISATION_FUNCTION_GLUE[(opt, c)], function["share"])
        base_fn = unscaled["toy"][opt]["horizons"][h]["function"]
        path_left = not (base["low"] <= row["share"] <= base["high"])
        function_left = not (base_fn["low"] <= function["share"] <= base_fn["high"])
        moves |= path_left and not function_left
    claims.glue("ch4.reparam_path_moves", "moves" if moves else "does not move")
    claims.glue("ch4.reparam_horizon", horizon)
    return {"moves": moves, "claims": out}


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
    claims.glue("ch4.lowest_ratio_fraction", low["frame_first_fraction"])
    claims.glue("ch4.lowest_ratio_time_ratio", low["median_time_ratio"])
    claims.glue("ch4.highest_ratio_fraction", high["frame_first_fraction"])
    claims.glue("ch4.highest_ratio_time_ratio", high["median_time_ratio"])
    claims.glue("ch4.frame_step_low", float(np.median(low["frame_steps"])))
    claims.glue("ch4.frame_step_high", float(np.median(high["frame_steps"])))
    claims.glue("ch4.value_step_low", float(np.median(low["value_steps"])))
    claims.glue("ch4.value_step_high", float(np.median(high["value_steps"])))
    sweep = {r: sweep[r] for r in sorted(sweep)}
    lines = [f"{'value/routing lr':>16s} {'median t_F':>10s} {'median t_P':>10s} {'frame first':>11s} "
             f"{'median t_P/t_F':>15s}"]
    lines += [f"{r:16g} {np.median(s['frame_steps']):10.0f} {np.median(s['value_steps']):10.0f} "
              f"{s['frame_first_fraction']:11.2f} {s['median_time_ratio']:15.3f}" for r, s in sweep.items()]
    return sweep, "\n".join(lines)


#: The path comparison at the sweep's lowest and highest ratio, glued under these names: end → {field: name}.
SWEEP_PATH_GLUE = {
    "lowest": {"mean_difference": "ch4.sweep_path_low_diff", "low": "ch4.sweep_path_low_low",
               "high": "ch4.sweep_path_low_high", "verdict": "ch4.sweep_path_low_verdict"},
    "highest": {"mean_difference": "ch4.sweep_path_high_diff", "low": "ch4.sweep_path_high_low",
                "high": "ch4.sweep_path_high_high", "verdict": "ch4.sweep_path_high_verdict"},
}


def sweep_path_comparison(sweep_runs: Mapping[float, Sequence[Any]]) -> tuple[dict[float, dict[str, Any]], str]:
    """Return ``(rows, table)``: ratio → the unit-free comparison at :data:`CLAIM_FRACTION` for that ratio's runs,
    and its text table; glues the lowest and highest ratios' rows."""
    rows = {r: settling_comparison(runs, (CLAIM_FRACTION,))["rows"][0] for r, runs in sweep_runs.items()}
    for end, names in SWEEP_PATH_GLUE.items():
        row = rows[min(rows) if end == "lowest" else max(rows)]
        for field, name in names.items():
            claims.glue(name, row[field])
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


#: The freeze runs' numbers the prose states, per kind, glued under these names: kind → {summary key: name}.
FREEZE_GLUE = {
    "head": {"n_seeds": "ch4.freeze_head_seeds", "total_steps": "ch4.freeze_head_steps",
             "gap_bits": "ch4.freeze_head_gap_bits", "unfrozen_final_bits": "ch4.freeze_head_unfrozen_final_bits",
             "unfrozen_sd_bits": "ch4.freeze_head_unfrozen_sd_bits", "step_fraction": "ch4.freeze_head_step_fraction",
             "ratio_at_init": "ch4.freeze_head_ratio_at_init"},
    "tunnel": {"n_seeds": "ch4.freeze_tunnel_seeds", "total_steps": "ch4.freeze_tunnel_steps",
               "gap_bits": "ch4.freeze_tunnel_gap_bits",
               "unfrozen_final_bits": "ch4.freeze_tunnel_unfrozen_final_bits",
               "unfrozen_sd_bits": "ch4.freeze_tunnel_unfrozen_sd_bits",
               "step_fraction": "ch4.freeze_tunnel_step_fraction", "ratio_at_init": "ch4.freeze_tunnel_ratio_at_init"},
}

#: Per kind and freeze step t, the names of: the mean cost in bits (``cost_mean_bits``), the frozen over the trained
#: run's final value (geometric mean ``ratio_point`` and its interval ``ratio_low``, ``ratio_high``) and the cost as a
#: share of the untrained gap (``gap_share``). Steps the stored runs do not hold are skipped.
FREEZE_STEP_GLUE = {
    ("head", 0): {"cost_mean_bits": "ch4.freeze_head_cost_at_0", "ratio_point": "ch4.freeze_head_ratio_at_0",
                  "ratio_low": "ch4.freeze_head_ratio_low_at_0", "ratio_high": "ch4.freeze_head_ratio_high_at_0",
                  "gap_share": "ch4.freeze_head_gap_share_at_0"},
    ("head", 25): {"cost_mean_bits": "ch4.freeze_head_cost_at_25", "ratio_point": "ch4.freeze_head_ratio_at_25",
                   "ratio_low": "ch4.freeze_head_ratio_low_at_25", "ratio_high": "ch4.freeze_head_ratio_high_at_25",
                   "gap_share": "ch4.freeze_head_gap_share_at_25"},
    ("head", 50): {"cost_mean_bits": "ch4.freeze_head_cost_at_50", "ratio_point": "ch4.freeze_head_ratio_at_50",
                   "ratio_low": "ch4.freeze_head_ratio_low_at_50", "ratio_high": "ch4.freeze_head_ratio_high_at_50",
                   "gap_share": "ch4.freeze_head_gap_share_at_50"},
    ("head", 100): {"cost_mean_bits": "ch4.freeze_head_cost_at_100", "ratio_point": "ch4.freeze_head_ratio_at_100",
                    "ratio_low": "ch4.freeze_head_ratio_low_at_100",
                    "ratio_high": "ch4.freeze_head_ratio_high_at_100", "gap_share": "ch4.freeze_head_gap_share_at_100"},
    ("head", 150): {"cost_mean_bits": "ch4.freeze_head_cost_at_150", "ratio_point": "ch4.freeze_head_ratio_at_150",
                    "ratio_low": "ch4.freeze_head_ratio_low_at_150",
                    "ratio_high": "ch4.freeze_head_ratio_high_at_150", "gap_share": "ch4.freeze_head_gap_share_at_150"},
    ("head", 200): {"cost_mean_bits": "ch4.freeze_head_cost_at_200", "ratio_point": "ch4.freeze_head_ratio_at_200",
                    "ratio_low": "ch4.freeze_head_ratio_low_at_200",
                    "ratio_high": "ch4.freeze_head_ratio_high_at_200", "gap_share": "ch4.freeze_head_gap_share_at_200"},
    ("head", 300): {"cost_mean_bits": "ch4.freeze_head_cost_at_300", "ratio_point": "ch4.freeze_head_ratio_at_300",
                    "ratio_low": "ch4.freeze_head_ratio_low_at_300",
                    "ratio_high": "ch4.freeze_head_ratio_high_at_300", "gap_share": "ch4.freeze_head_gap_share_at_300"},
    ("head", 400): {"cost_mean_bits": "ch4.freeze_head_cost_at_400", "ratio_point": "ch4.freeze_head_ratio_at_400",
                    "ratio_low": "ch4.freeze_head_ratio_low_at_400",
                    "ratio_high": "ch4.freeze_head_ratio_high_at_400", "gap_share": "ch4.freeze_head_gap_share_at_400"},
    ("head", 600): {"cost_mean_bits": "ch4.freeze_head_cost_at_600", "ratio_point": "ch4.freeze_head_ratio_at_600",
                    "ratio_low": "ch4.freeze_head_ratio_low_at_600",
                    "ratio_high": "ch4.freeze_head_ratio_high_at_600", "gap_share": "ch4.freeze_head_gap_share_at_600"},
    ("head", 1000): {"cost_mean_bits": "ch4.freeze_head_cost_at_1000", "ratio_point": "ch4.freeze_head_ratio_at_1000",
                     "ratio_low": "ch4.freeze_head_ratio_low_at_1000",
                     "ratio_high": "ch4.freeze_head_ratio_high_at_1000",
                     "gap_share": "ch4.freeze_head_gap_share_at_1000"},
    ("tunnel", 0): {"cost_mean_bits": "ch4.freeze_tunnel_cost_at_0", "ratio_point": "ch4.freeze_tunnel_ratio_at_0",
                    "ratio_low": "ch4.freeze_tunnel_ratio_low_at_0", "ratio_high": "ch4.freeze_tunnel_ratio_high_at_0",
                    "gap_share": "ch4.freeze_tunnel_gap_share_at_0"},
    ("tunnel", 50): {"cost_mean_bits": "ch4.freeze_tunnel_cost_at_50", "ratio_point": "ch4.freeze_tunnel_ratio_at_50",
                     "ratio_low": "ch4.freeze_tunnel_ratio_low_at_50",
                     "ratio_high": "ch4.freeze_tunnel_ratio_high_at_50",
                     "gap_share": "ch4.freeze_tunnel_gap_share_at_50"},
    ("tunnel", 200): {"cost_mean_bits": "ch4.freeze_tunnel_cost_at_200",
                      "ratio_point": "ch4.freeze_tunnel_ratio_at_200",
                      "ratio_low": "ch4.freeze_tunnel_ratio_low_at_200",
                      "ratio_high": "ch4.freeze_tunnel_ratio_high_at_200",
                      "gap_share": "ch4.freeze_tunnel_gap_share_at_200"},
}


def record_freeze_claims(results: Mapping[str, Any], ratio: float = FREE_FREEZE_RATIO) -> dict[str, dict[str, float]]:
    """Return kind → {freeze step → mean cost in bits} for the stored freeze runs, after recording each kind's
    two ledger claims (the step from which the frame is in place, the cost of freezing at initialisation)
    and gluing the numbers the prose states (:func:`~attention_dynamics.chapters.two_timescale_em.freeze.freeze_frame_summary`;
    names in :data:`FREEZE_GLUE` and :data:`FREEZE_STEP_GLUE`).

    Freezing costs nothing when the frozen runs end within ``ratio`` times the trained run's final value (the whole
    interval over seeds): a bound against the trained model's own error."""
    summaries = {kind: freeze.freeze_frame_summary(results[kind], ratio) for kind in FREEZE_KINDS}
    claims.glue("ch4.freeze_free_ratio", ratio)
    for kind, (step_claim, cost_claim, where, score) in FREEZE_KINDS.items():
        s = summaries[kind]
        params = {"settings": results[kind]["settings"], "seeds": results[kind]["seeds"],
                  "freeze_steps": results[kind]["freeze_steps"], "free_ratio": ratio,
                  "code": results["provenance"]}
        step = s["freeze_frame_step"] if s["freeze_frame_step"] is not None else s["total_steps"]
        claims.record(
            step_claim, step, unit="step",
            description=f"{where}: earliest step t from which freezing W_Q, W_K ends within {ratio}× the unfrozen "
            f"run's final {score} (the geometric mean's 95% interval over seeds), at t and every later freeze step "
            "(the run's length if none does)",
            params=params)
        claims.record(
            cost_claim, s["cost_mean_bits"][0], unit="bits",
            description=f"{where}: final cost in bits of freezing W_Q, W_K at initialisation "
            "(mean over seeds, over the unfrozen run)",
            params=params)
        values = {**s, "step_fraction": step / s["total_steps"], "ratio_at_init": s["ratio_point"][0]}
        for key, name in FREEZE_GLUE[kind].items():
            claims.glue(name, values[key])
        for k, t in enumerate(s["steps"]):
            for key, name in FREEZE_STEP_GLUE.get((kind, int(t)), {}).items():
                claims.glue(name, s[key][k])
    return {kind: dict(zip(s["steps"], np.round(s["cost_mean_bits"], 4))) for kind, s in summaries.items()}
