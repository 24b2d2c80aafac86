"""Chapter 6's claims and glued numbers on frame versus precision over six seeds (from the stored result
:mod:`~attention_dynamics.chapters.bayesian_manifolds.frame_definitions`): the share of seeds whose frame settles first
by the parameter path, the function and the chapter's own rules, and the freeze intervention re-read from the stored
freeze runs. The frame row of the wind tunnel (``frame_precision_wind_tunnel`` on the verdict page) is decided by
these four claims, one definition each."""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from ...diagnostics.frame_order import FREE_FREEZE_RATIO, freeze_frame_summary, order_explanation
from ...ledger import claims
from ...ledger.frame_results import FRAME_FREEZE_FILE
from ...ledger.verdicts import render_caveat, verdict_of
from .frame_definitions import FILE

__all__ = ["TUNNEL_DEFINITION_WORDS", "record_tunnel_order_claims", "DEFINITION_GLUES", "glue_tunnel_frame_definitions",
           "INTERVENTION_PHRASE", "glue_frame_row", "tunnel_order_table"]

#: What each definition reads, in words (the claims' descriptions).
TUNNEL_DEFINITION_WORDS = {
    "path": "remaining path ≤ 10 % (every layer's attention rows against every layer's value vectors)",
    "function": "mean attention entropy (linear) against the KL divergence from the exact posterior (log), each "
                "within 10 % of its total change for good",
    "similarity": "chapter 6's rules: every layer's attention ≥ 95 % similar to the final one for good, against the "
                  "entropy error within 10 % of its total change (log)",
}


def record_tunnel_order_claims(result: Mapping[str, Any], freeze: Mapping[str, Any],
                               ratio: float = FREE_FREEZE_RATIO) -> dict[str, claims.Claim]:
    """Record chapter 6's order claims on the wind tunnel (path, function, the chapter's similarity rules) and the
    freeze intervention re-read from ``freeze`` (``data/frame_freeze.json``,
    :func:`~attention_dynamics.ledger.frame_results.load_frame_freeze`); return them by id."""
    out: dict[str, claims.Claim] = {}
    tunnel = result["settings"]["tunnel"]

    def order(claim_id: str, definition: str) -> None:
        row = result["definitions"][definition]
        out[claim_id] = claims.record(
            claim_id, row["share"], unit="fraction of seeds", lower=0.5, interval=(row["low"], row["high"]),
            description=f"chapter 6's bijection transformer (AdamW, warm-up and cosine decay, {tunnel['steps']} "
            f"steps): share of seeds whose frame settles strictly first by {TUNNEL_DEFINITION_WORDS[definition]} "
            "(95% Clopper–Pearson interval)",
            explanation=order_explanation(row),
            params={"seeds": result["seeds"], "definition": definition, "frame_steps": row["frame"],
                    "precision_steps": row["precision"], "settings": result["settings"], "data": FILE})

    order("frame_precision.tunnel_order_path_adam", "path")
    order("frame_precision.tunnel_order_function_adam", "function")
    order("frame_precision.tunnel_order_similarity_adam", "similarity")
    summary = freeze_frame_summary(freeze["tunnel"], ratio)
    in_place_at_start = summary["freeze_frame_step"] == 0
    claims.glue("ch6.fd_freeze_cost_bits", summary["cost_mean_bits"][0])
    claims.glue("ch6.fd_freeze_ratio", summary["ratio_point"][0])
    claims.glue("ch6.fd_freeze_free_ratio", ratio)
    out["frame_precision.tunnel_order_intervention_adam"] = claims.record(
        "frame_precision.tunnel_order_intervention_adam", 1.0 if in_place_at_start else 0.0,
        unit="fraction of seeds", lower=0.5,
        description="the freeze intervention on the wind tunnel (stored runs, a quarter of chapter 6's budget): "
        f"1 if freezing every layer's W_Q, W_K at initialisation already ends within {ratio}× the trained model's KL "
        "(the frame 'in place' at step 0, before anything else), else 0",
        undecided_because="a frame frozen at initialisation ends within the bound of the trained model's KL "
        f"({summary['ratio_point'][0]:.2f}× against {ratio}×): the task does not need the frame, so the intervention "
        "cannot time it and decides no order" if in_place_at_start else
        "the stored freeze runs hold final values only, not the calibration curve the order needs",
        params={"seeds": freeze["tunnel"]["seeds"], "freeze_steps": freeze["tunnel"]["freeze_steps"],
                "settings": freeze["tunnel"]["settings"], "free_ratio": ratio,
                "data": FRAME_FREEZE_FILE})
    return out


#: What the intervention says about the order, chosen by its claim's status (pass | fail | undecided).
INTERVENTION_PHRASE = ("{frame_precision.tunnel_order_intervention_adam?puts the frame first|puts the precision "
                       "first|cannot time the frame at this budget and decides no order}")


#: The glue names of each definition's numbers, written out: definition → number → name (the share of seeds whose
#: frame settles first, its 95 % interval, the definition's verdict, and the median frame and precision steps).
DEFINITION_GLUES = {
    "path": {"share": "ch6.fd_path_share", "low": "ch6.fd_path_low", "high": "ch6.fd_path_high",
             "verdict": "ch6.fd_path_verdict", "frame_median": "ch6.fd_path_frame_median",
             "precision_median": "ch6.fd_path_precision_median"},
    "function": {"share": "ch6.fd_function_share", "low": "ch6.fd_function_low", "high": "ch6.fd_function_high",
                 "verdict": "ch6.fd_function_verdict", "frame_median": "ch6.fd_function_frame_median",
                 "precision_median": "ch6.fd_function_precision_median"},
    "similarity": {"share": "ch6.fd_similarity_share", "low": "ch6.fd_similarity_low",
                   "high": "ch6.fd_similarity_high", "verdict": "ch6.fd_similarity_verdict",
                   "frame_median": "ch6.fd_similarity_frame_median",
                   "precision_median": "ch6.fd_similarity_precision_median"},
}


def glue_tunnel_frame_definitions(result: Mapping[str, Any], recorded=None) -> None:
    """Glue, for chapter 6's prose, the seeds and every definition's share, interval, verdict and median steps; with
    ``recorded`` (the claims at hand, e.g. ``claims.recorded_claims()``) also the intervention's phrase
    (``ch6.fd_intervention_phrase``)."""
    claims.glue("ch6.fd_n_seeds", len(result["seeds"]))
    for d, row in result["definitions"].items():
        names = DEFINITION_GLUES[d]
        for key in ("share", "low", "high", "verdict"):
            claims.glue(names[key], row[key])
        claims.glue(names["frame_median"], float(np.median(row["frame"])))
        claims.glue(names["precision_median"], float(np.median(row["precision"])))
    if recorded is not None:
        claims.glue("ch6.fd_intervention_phrase",
                    render_caveat(INTERVENTION_PHRASE, {c.id: c.to_json() for c in recorded}))


def glue_frame_row(recorded) -> None:
    """Glue the verdict page's row on the wind tunnel's frame and precision (``frame_precision_wind_tunnel``), read
    from the claims at hand (``recorded``): its verdict (``ch6.frame_row_verdict``) and its per-definition readings
    (``ch6.frame_row_readings``)."""
    row = verdict_of("frame_precision_wind_tunnel", recorded)
    claims.glue("ch6.frame_row_verdict", row.verdict)
    claims.glue("ch6.frame_row_readings", row.readings_text())


def tunnel_order_table(result: Mapping[str, Any]):
    """Return a pandas DataFrame: per definition, the share of seeds whose frame settles first with its interval and
    verdict, and the median frame and precision steps."""
    import pandas as pd

    steps = result["settings"]["tunnel"]["steps"]
    rows = [{"definition": d, f"seeds whose frame settles first ({steps} steps)":
             f"{r['share']:.0%} [{r['low']:.0%}, {r['high']:.0%}] {r['verdict']}",
             "frame (median step)": float(np.median(r["frame"])),
             "precision (median step)": float(np.median(r["precision"]))}
            for d, r in result["definitions"].items()]
    return pd.DataFrame(rows).set_index("definition")
