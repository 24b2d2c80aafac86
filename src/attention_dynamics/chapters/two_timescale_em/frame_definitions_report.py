"""Chapter 4's claims and glued numbers on frame versus precision under four definitions (from the stored result
:mod:`~attention_dynamics.chapters.two_timescale_em.frame_definitions`): the share of seeds whose frame settles first
per definition and optimiser, the path gap's growth with the run length, and the table the section shows.

The frame row of the verdict page (``frame_precision_toy``) is decided by these claims, one definition each
(:data:`~attention_dynamics.ledger.frame_results.TOY_ORDER_CLAIMS`); chapters 2 and 8, which state that row's
verdict without recording its claims, read it from the same file through
:func:`~attention_dynamics.ledger.frame_results.frame_row_verdict`.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from ...diagnostics.frame_order import order_explanation
from ...ledger import claims
from .frame_definitions import FILE

__all__ = ["DEFINITION_WORDS", "OPTIMISER_WORDS", "record_frame_definition_claims", "glue_frame_definitions",
           "horizon_stability", "order_table"]

#: What each definition reads, in words (the claims' descriptions).
DEFINITION_WORDS = {
    "path": "remaining parameter path ≤ 10 % of the whole (attention pattern against the sources' values)",
    "function": "attention on the answer's source (linear) against the probe loss (log), each within 10 % of its "
                "total change for good",
    "function_log": "attention off the answer's source and the probe loss, both on a log scale, each within 10 % of "
                    "its total change for good",
    "intervention": "earliest step from which freezing W_Q, W_K costs ≤ 1 % of the untrained gap in final probe loss, "
                    "against the probe loss within 1 % of the gap of its final value",
}
OPTIMISER_WORDS = {"sgd": "plain SGD (lr 0.5, chapter 4's)", "adam": "Adam"}


def record_frame_definition_claims(result: Mapping[str, Any]) -> dict[str, claims.Claim]:
    """Record chapter 4's order claims (share of seeds whose frame settles first, Clopper–Pearson interval against
    1/2) at the main horizon, per definition and optimiser, and the path gap's growth with the run length; return
    them by id."""
    H = str(result["main_horizon"])
    horizons = result["settings"]["horizons"]
    out: dict[str, claims.Claim] = {}

    def order(claim_id: str, definition: str, optimiser: str) -> None:
        block = result["toy"][optimiser]
        row = block["horizons"][H][definition]
        out[claim_id] = claims.record(
            claim_id, row["share"], unit="fraction of seeds", lower=0.5, interval=(row["low"], row["high"]),
            description=f"chapter 4's recall head, {OPTIMISER_WORDS[optimiser]}, {H} steps: share of seeds whose frame "
            f"settles strictly before the precision by {DEFINITION_WORDS[definition]} (95% Clopper–Pearson interval)",
            explanation=order_explanation(row),
            params={"seeds": block["seeds"], "optimiser": optimiser, "lr": block["lr"], "horizon": int(H),
                    "definition": definition, "frame_steps": row["frame"], "precision_steps": row["precision"],
                    "data": FILE, "code": result.get("provenance", {}).get("code_commit")})

    order("frame_precision.order_path_sgd", "path", "sgd")
    order("frame_precision.order_path_adam", "path", "adam")
    order("frame_precision.order_function_sgd", "function", "sgd")
    order("frame_precision.order_function_adam", "function", "adam")
    order("frame_precision.order_function_log_sgd", "function_log", "sgd")
    order("frame_precision.order_function_log_adam", "function_log", "adam")
    order("frame_precision.order_intervention_sgd", "intervention", "sgd")
    order("frame_precision.order_intervention_adam", "intervention", "adam")

    def growth(claim_id: str, optimiser: str) -> None:
        ratio = result["toy"][optimiser]["gap_horizon_ratio"]["path"]
        if ratio["point"] is None:  # no gap at the shortest horizon: the growth is undefined
            return
        out[claim_id] = claims.record(
            claim_id, ratio["point"], unit="×",
            description=f"{OPTIMISER_WORDS[optimiser]}: mean t_P − t_F by the parameter path at {horizons[-1]} steps "
            f"over the same at {horizons[0]} (the same seeds' runs read at two lengths; bootstrap interval "
            f"{ratio['low']:.2f}–{ratio['high']:.2f}); 1 if the criterion did not depend on the run's length",
            params={"seeds": result["toy"][optimiser]["seeds"], "horizons": [horizons[0], horizons[-1]],
                    "interval": [ratio["low"], ratio["high"]], "data": FILE})

    growth("frame_precision.path_gap_horizon_ratio_sgd", "sgd")
    growth("frame_precision.path_gap_horizon_ratio_adam", "adam")
    return out


def glue_frame_definitions(result: Mapping[str, Any]) -> None:
    """Glue, for chapter 4's prose, every definition's share, interval, verdict, mean gap and median steps per
    optimiser and horizon, the gaps' growth with the run length, the seeds, Adam's rate and the horizons' agreement."""
    claims.glue("ch4.fd_n_seeds", len(result["toy"]["sgd"]["seeds"]))
    claims.glue("ch4.fd_adam_lr", result["toy"]["adam"]["lr"])
    claims.glue("ch4.fd_main_horizon", result["main_horizon"])
    for opt, block in result["toy"].items():
        for h, rows in block["horizons"].items():
            for d, row in rows.items():
                for key in ("share", "low", "high", "verdict"):
                    claims.glue(f"ch4.fd_{d}_{opt}_h{h}_{key}", row[key])
                claims.glue(f"ch4.fd_{d}_{opt}_h{h}_gap", row["gap"]["mean"])
                claims.glue(f"ch4.fd_{d}_{opt}_h{h}_frame_median", float(np.median(row["frame"])))
                claims.glue(f"ch4.fd_{d}_{opt}_h{h}_precision_median", float(np.median(row["precision"])))
        for d, ratio in block["gap_horizon_ratio"].items():
            if ratio["point"] is not None:
                claims.glue(f"ch4.fd_{d}_{opt}_gap_ratio", ratio["point"])
    claims.glue("ch4.fd_horizon_stability", horizon_stability(result))


def horizon_stability(result: Mapping[str, Any]) -> str:
    """Return, in words, whether every definition's verdict under each optimiser is the same at every run length,
    and if not, which change."""
    changed = [f"{d} ({opt})" for opt, block in result["toy"].items() for d in result["definitions"]
               if len({rows[d]["verdict"] for rows in block["horizons"].values()}) > 1]
    if not changed:
        return "every definition's verdict is the same at every run length"
    return "the verdict changes with the run length for " + ", ".join(changed)


def order_table(result: Mapping[str, Any]):
    """Return a pandas DataFrame: per optimiser and definition, the share of seeds whose frame settles first with its
    interval and verdict at every run length."""
    import pandas as pd

    rows = []
    for opt, block in result["toy"].items():
        for d in result["definitions"]:
            row: dict[str, Any] = {"optimiser": opt, "definition": d}
            for h, by_def in block["horizons"].items():
                r = by_def[d]
                row[f"{h} steps"] = f"{r['share']:.0%} [{r['low']:.0%}, {r['high']:.0%}] {r['verdict']}"
            rows.append(row)
    return pd.DataFrame(rows).set_index(["optimiser", "definition"])
