"""Chapter 4's claims and glued numbers on frame versus precision under four definitions (from the stored result
:mod:`~attention_dynamics.chapters.two_timescale_em.frame_definitions`): the share of seeds whose frame settles first
per definition and optimiser, the path gap's growth with the run length, and the table the section shows.

The frame row of the verdict page (``frame_precision_toy``) is decided by these claims, one definition each
(:data:`~attention_dynamics.ledger.frame_results.TOY_ORDER_CLAIMS`); chapters 2 and 8, which state that row's
verdict without recording its claims, read it from the same file through
:func:`~attention_dynamics.ledger.frame_results.frame_row_verdict`.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from ...diagnostics.frame_order import order_explanation
from ...ledger import claims
from .frame_definitions import FILE

__all__ = ["DEFINITION_WORDS", "OPTIMISER_WORDS", "DEFINITION_LABELS", "OPTIMISER_LABELS", "FD_GLUE",
           "FD_GAP_RATIO_GLUE", "record_frame_definition_claims", "glue_frame_definitions", "horizon_stability",
           "order_table", "glue_frame_row"]

#: What each definition reads, in words (the claims' descriptions).
DEFINITION_WORDS = {
    "path": "remaining parameter path ≤ 10 % of the whole (attention pattern against the sources' values)",
    "function": "attention on the answer's source (linear) against the probe loss (log), each within 10 % of its "
                "total change for good",
    "function_log": "attention off the answer's source and the probe loss, both on a log scale, each within 10 % of "
                    "its total change for good",
    "intervention": "earliest step from which freezing W_Q, W_K ends within 1.25× the trained run's final probe "
                    "loss, against the first step from which the probe loss stays within 1.25× of its final value",
}
OPTIMISER_WORDS = {"sgd": "plain SGD (lr 0.5, chapter 4's)", "adam": "Adam"}
#: The reader's names of the definitions and optimisers (tables, figures, sentences).
DEFINITION_LABELS = {"path": "parameter path", "function": "function", "function_log": "function, log errors",
                     "intervention": "freeze (intervention)"}
OPTIMISER_LABELS = {"sgd": "plain SGD", "adam": "Adam"}


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


#: Per definition, optimiser and run length, the names its share of seeds with the frame first, the share's interval,
#: its order in words, the mean gap t_P − t_F and the median frame and precision steps are glued under (written out:
#: a search for a name the prose uses finds it here). Run lengths the result does not hold are skipped.
FD_GLUE = {
    ("path", "sgd", "1000"): {"share": "ch4.fd_path_sgd_h1000_share", "low": "ch4.fd_path_sgd_h1000_low",
        "high": "ch4.fd_path_sgd_h1000_high", "verdict": "ch4.fd_path_sgd_h1000_verdict",
        "gap": "ch4.fd_path_sgd_h1000_gap", "frame_median": "ch4.fd_path_sgd_h1000_frame_median",
        "precision_median": "ch4.fd_path_sgd_h1000_precision_median"},
    ("function", "sgd", "1000"): {"share": "ch4.fd_function_sgd_h1000_share", "low": "ch4.fd_function_sgd_h1000_low",
        "high": "ch4.fd_function_sgd_h1000_high", "verdict": "ch4.fd_function_sgd_h1000_verdict",
        "gap": "ch4.fd_function_sgd_h1000_gap", "frame_median": "ch4.fd_function_sgd_h1000_frame_median",
        "precision_median": "ch4.fd_function_sgd_h1000_precision_median"},
    ("function_log", "sgd", "1000"): {"share": "ch4.fd_function_log_sgd_h1000_share",
        "low": "ch4.fd_function_log_sgd_h1000_low", "high": "ch4.fd_function_log_sgd_h1000_high",
        "verdict": "ch4.fd_function_log_sgd_h1000_verdict", "gap": "ch4.fd_function_log_sgd_h1000_gap",
        "frame_median": "ch4.fd_function_log_sgd_h1000_frame_median",
        "precision_median": "ch4.fd_function_log_sgd_h1000_precision_median"},
    ("intervention", "sgd", "1000"): {"share": "ch4.fd_intervention_sgd_h1000_share",
        "low": "ch4.fd_intervention_sgd_h1000_low", "high": "ch4.fd_intervention_sgd_h1000_high",
        "verdict": "ch4.fd_intervention_sgd_h1000_verdict", "gap": "ch4.fd_intervention_sgd_h1000_gap",
        "frame_median": "ch4.fd_intervention_sgd_h1000_frame_median",
        "precision_median": "ch4.fd_intervention_sgd_h1000_precision_median"},
    ("path", "sgd", "2000"): {"share": "ch4.fd_path_sgd_h2000_share", "low": "ch4.fd_path_sgd_h2000_low",
        "high": "ch4.fd_path_sgd_h2000_high", "verdict": "ch4.fd_path_sgd_h2000_verdict",
        "gap": "ch4.fd_path_sgd_h2000_gap", "frame_median": "ch4.fd_path_sgd_h2000_frame_median",
        "precision_median": "ch4.fd_path_sgd_h2000_precision_median"},
    ("function", "sgd", "2000"): {"share": "ch4.fd_function_sgd_h2000_share", "low": "ch4.fd_function_sgd_h2000_low",
        "high": "ch4.fd_function_sgd_h2000_high", "verdict": "ch4.fd_function_sgd_h2000_verdict",
        "gap": "ch4.fd_function_sgd_h2000_gap", "frame_median": "ch4.fd_function_sgd_h2000_frame_median",
        "precision_median": "ch4.fd_function_sgd_h2000_precision_median"},
    ("function_log", "sgd", "2000"): {"share": "ch4.fd_function_log_sgd_h2000_share",
        "low": "ch4.fd_function_log_sgd_h2000_low", "high": "ch4.fd_function_log_sgd_h2000_high",
        "verdict": "ch4.fd_function_log_sgd_h2000_verdict", "gap": "ch4.fd_function_log_sgd_h2000_gap",
        "frame_median": "ch4.fd_function_log_sgd_h2000_frame_median",
        "precision_median": "ch4.fd_function_log_sgd_h2000_precision_median"},
    ("intervention", "sgd", "2000"): {"share": "ch4.fd_intervention_sgd_h2000_share",
        "low": "ch4.fd_intervention_sgd_h2000_low", "high": "ch4.fd_intervention_sgd_h2000_high",
        "verdict": "ch4.fd_intervention_sgd_h2000_verdict", "gap": "ch4.fd_intervention_sgd_h2000_gap",
        "frame_median": "ch4.fd_intervention_sgd_h2000_frame_median",
        "precision_median": "ch4.fd_intervention_sgd_h2000_precision_median"},
    ("path", "sgd", "4000"): {"share": "ch4.fd_path_sgd_h4000_share", "low": "ch4.fd_path_sgd_h4000_low",
        "high": "ch4.fd_path_sgd_h4000_high", "verdict": "ch4.fd_path_sgd_h4000_verdict",
        "gap": "ch4.fd_path_sgd_h4000_gap", "frame_median": "ch4.fd_path_sgd_h4000_frame_median",
        "precision_median": "ch4.fd_path_sgd_h4000_precision_median"},
    ("function", "sgd", "4000"): {"share": "ch4.fd_function_sgd_h4000_share", "low": "ch4.fd_function_sgd_h4000_low",
        "high": "ch4.fd_function_sgd_h4000_high", "verdict": "ch4.fd_function_sgd_h4000_verdict",
        "gap": "ch4.fd_function_sgd_h4000_gap", "frame_median": "ch4.fd_function_sgd_h4000_frame_median",
        "precision_median": "ch4.fd_function_sgd_h4000_precision_median"},
    ("function_log", "sgd", "4000"): {"share": "ch4.fd_function_log_sgd_h4000_share",
        "low": "ch4.fd_function_log_sgd_h4000_low", "high": "ch4.fd_function_log_sgd_h4000_high",
        "verdict": "ch4.fd_function_log_sgd_h4000_verdict", "gap": "ch4.fd_function_log_sgd_h4000_gap",
        "frame_median": "ch4.fd_function_log_sgd_h4000_frame_median",
        "precision_median": "ch4.fd_function_log_sgd_h4000_precision_median"},
    ("intervention", "sgd", "4000"): {"share": "ch4.fd_intervention_sgd_h4000_share",
        "low": "ch4.fd_intervention_sgd_h4000_low", "high": "ch4.fd_intervention_sgd_h4000_high",
        "verdict": "ch4.fd_intervention_sgd_h4000_verdict", "gap": "ch4.fd_intervention_sgd_h4000_gap",
        "frame_median": "ch4.fd_intervention_sgd_h4000_frame_median",
        "precision_median": "ch4.fd_intervention_sgd_h4000_precision_median"},
    ("path", "adam", "1000"): {"share": "ch4.fd_path_adam_h1000_share", "low": "ch4.fd_path_adam_h1000_low",
        "high": "ch4.fd_path_adam_h1000_high", "verdict": "ch4.fd_path_adam_h1000_verdict",
        "gap": "ch4.fd_path_adam_h1000_gap", "frame_median": "ch4.fd_path_adam_h1000_frame_median",
        "precision_median": "ch4.fd_path_adam_h1000_precision_median"},
    ("function", "adam", "1000"): {"share": "ch4.fd_function_adam_h1000_share",
        "low": "ch4.fd_function_adam_h1000_low", "high": "ch4.fd_function_adam_h1000_high",
        "verdict": "ch4.fd_function_adam_h1000_verdict", "gap": "ch4.fd_function_adam_h1000_gap",
        "frame_median": "ch4.fd_function_adam_h1000_frame_median",
        "precision_median": "ch4.fd_function_adam_h1000_precision_median"},
    ("function_log", "adam", "1000"): {"share": "ch4.fd_function_log_adam_h1000_share",
        "low": "ch4.fd_function_log_adam_h1000_low", "high": "ch4.fd_function_log_adam_h1000_high",
        "verdict": "ch4.fd_function_log_adam_h1000_verdict", "gap": "ch4.fd_function_log_adam_h1000_gap",
        "frame_median": "ch4.fd_function_log_adam_h1000_frame_median",
        "precision_median": "ch4.fd_function_log_adam_h1000_precision_median"},
    ("intervention", "adam", "1000"): {"share": "ch4.fd_intervention_adam_h1000_share",
        "low": "ch4.fd_intervention_adam_h1000_low", "high": "ch4.fd_intervention_adam_h1000_high",
        "verdict": "ch4.fd_intervention_adam_h1000_verdict", "gap": "ch4.fd_intervention_adam_h1000_gap",
        "frame_median": "ch4.fd_intervention_adam_h1000_frame_median",
        "precision_median": "ch4.fd_intervention_adam_h1000_precision_median"},
    ("path", "adam", "2000"): {"share": "ch4.fd_path_adam_h2000_share", "low": "ch4.fd_path_adam_h2000_low",
        "high": "ch4.fd_path_adam_h2000_high", "verdict": "ch4.fd_path_adam_h2000_verdict",
        "gap": "ch4.fd_path_adam_h2000_gap", "frame_median": "ch4.fd_path_adam_h2000_frame_median",
        "precision_median": "ch4.fd_path_adam_h2000_precision_median"},
    ("function", "adam", "2000"): {"share": "ch4.fd_function_adam_h2000_share",
        "low": "ch4.fd_function_adam_h2000_low", "high": "ch4.fd_function_adam_h2000_high",
        "verdict": "ch4.fd_function_adam_h2000_verdict", "gap": "ch4.fd_function_adam_h2000_gap",
        "frame_median": "ch4.fd_function_adam_h2000_frame_median",
        "precision_median": "ch4.fd_function_adam_h2000_precision_median"},
    ("function_log", "adam", "2000"): {"share": "ch4.fd_function_log_adam_h2000_share",
        "low": "ch4.fd_function_log_adam_h2000_low", "high": "ch4.fd_function_log_adam_h2000_high",
        "verdict": "ch4.fd_function_log_adam_h2000_verdict", "gap": "ch4.fd_function_log_adam_h2000_gap",
        "frame_median": "ch4.fd_function_log_adam_h2000_frame_median",
        "precision_median": "ch4.fd_function_log_adam_h2000_precision_median"},
    ("intervention", "adam", "2000"): {"share": "ch4.fd_intervention_adam_h2000_share",
        "low": "ch4.fd_intervention_adam_h2000_low", "high": "ch4.fd_intervention_adam_h2000_high",
        "verdict": "ch4.fd_intervention_adam_h2000_verdict", "gap": "ch4.fd_intervention_adam_h2000_gap",
        "frame_median": "ch4.fd_intervention_adam_h2000_frame_median",
        "precision_median": "ch4.fd_intervention_adam_h2000_precision_median"},
    ("path", "adam", "4000"): {"share": "ch4.fd_path_adam_h4000_share", "low": "ch4.fd_path_adam_h4000_low",
        "high": "ch4.fd_path_adam_h4000_high", "verdict": "ch4.fd_path_adam_h4000_verdict",
        "gap": "ch4.fd_path_adam_h4000_gap", "frame_median": "ch4.fd_path_adam_h4000_frame_median",
        "precision_median": "ch4.fd_path_adam_h4000_precision_median"},
    ("function", "adam", "4000"): {"share": "ch4.fd_function_adam_h4000_share",
        "low": "ch4.fd_function_adam_h4000_low", "high": "ch4.fd_function_adam_h4000_high",
        "verdict": "ch4.fd_function_adam_h4000_verdict", "gap": "ch4.fd_function_adam_h4000_gap",
        "frame_median": "ch4.fd_function_adam_h4000_frame_median",
        "precision_median": "ch4.fd_function_adam_h4000_precision_median"},
    ("function_log", "adam", "4000"): {"share": "ch4.fd_function_log_adam_h4000_share",
        "low": "ch4.fd_function_log_adam_h4000_low", "high": "ch4.fd_function_log_adam_h4000_high",
        "verdict": "ch4.fd_function_log_adam_h4000_verdict", "gap": "ch4.fd_function_log_adam_h4000_gap",
        "frame_median": "ch4.fd_function_log_adam_h4000_frame_median",
        "precision_median": "ch4.fd_function_log_adam_h4000_precision_median"},
    ("intervention", "adam", "4000"): {"share": "ch4.fd_intervention_adam_h4000_share",
        "low": "ch4.fd_intervention_adam_h4000_low", "high": "ch4.fd_intervention_adam_h4000_high",
        "verdict": "ch4.fd_intervention_adam_h4000_verdict", "gap": "ch4.fd_intervention_adam_h4000_gap",
        "frame_median": "ch4.fd_intervention_adam_h4000_frame_median",
        "precision_median": "ch4.fd_intervention_adam_h4000_precision_median"},
}
#: Per definition and optimiser, the name of its gap's growth from the shortest to the longest run length.
FD_GAP_RATIO_GLUE = {
    ("path", "sgd"): "ch4.fd_path_sgd_gap_ratio", ("function", "sgd"): "ch4.fd_function_sgd_gap_ratio",
    ("function_log", "sgd"): "ch4.fd_function_log_sgd_gap_ratio", ("intervention", "sgd"): "ch4.fd_intervention_sgd_gap_ratio",
    ("path", "adam"): "ch4.fd_path_adam_gap_ratio", ("function", "adam"): "ch4.fd_function_adam_gap_ratio",
    ("function_log", "adam"): "ch4.fd_function_log_adam_gap_ratio", ("intervention", "adam"): "ch4.fd_intervention_adam_gap_ratio",
}


def glue_frame_definitions(result: Mapping[str, Any]) -> None:
    """Glue, for chapter 4's prose, every definition's share, interval, verdict, mean gap and median steps per
    optimiser and horizon (:data:`FD_GLUE`), the gaps' growth with the run length (:data:`FD_GAP_RATIO_GLUE`), the
    seeds, Adam's rate, the rule of a free freeze and the horizons' agreement."""
    claims.glue("ch4.fd_n_seeds", len(result["toy"]["sgd"]["seeds"]))
    claims.glue("ch4.fd_adam_lr", result["toy"]["adam"]["lr"])
    claims.glue("ch4.fd_sgd_lr", result["toy"]["sgd"]["lr"])
    claims.glue("ch4.fd_main_horizon", result["main_horizon"])
    claims.glue("ch4.fd_short_horizon", result["settings"]["horizons"][0])
    claims.glue("ch4.fd_long_horizon", result["settings"]["horizons"][-1])
    for (d, opt, h), names in FD_GLUE.items():
        row = result["toy"].get(opt, {}).get("horizons", {}).get(h, {}).get(d)
        if row is None:
            continue
        values = {"share": row["share"], "low": row["low"], "high": row["high"], "verdict": row["verdict"],
                  "gap": row["gap"]["mean"], "frame_median": float(np.median(row["frame"])),
                  "precision_median": float(np.median(row["precision"]))}
        for key, name in names.items():
            claims.glue(name, values[key])
    for (d, opt), name in FD_GAP_RATIO_GLUE.items():
        ratio = result["toy"].get(opt, {}).get("gap_horizon_ratio", {}).get(d)
        if ratio is not None and ratio["point"] is not None:
            claims.glue(name, ratio["point"])
    claims.glue("ch4.fd_horizon_stability", horizon_stability(result))


def horizon_stability(result: Mapping[str, Any]) -> str:
    """Return, in words, whether every definition's verdict under each optimiser is the same at every run length,
    and if not, which change."""
    changed = [f"the {DEFINITION_LABELS.get(d, d)} under {OPTIMISER_LABELS.get(opt, opt)}"
               for opt, block in result["toy"].items() for d in result["definitions"]
               if len({rows[d]["verdict"] for rows in block["horizons"].values()}) > 1]
    if not changed:
        return "every definition gives the same order at every run length"
    return "the order changes with the run length only for " + " and ".join(changed)


def order_table(result: Mapping[str, Any]):
    """Return a pandas DataFrame: per optimiser and definition, the share of seeds whose frame settles first with its
    interval and verdict at every run length."""
    import pandas as pd

    rows = []
    for opt, block in result["toy"].items():
        for d in result["definitions"]:
            row: dict[str, Any] = {"optimiser": OPTIMISER_LABELS.get(opt, opt),
                                   "definition": DEFINITION_LABELS.get(d, d)}
            for h, by_def in block["horizons"].items():
                r = by_def[d]
                row[f"{h} steps"] = f"{r['share']:.0%} [{r['low']:.0%}, {r['high']:.0%}] {r['verdict']}"
            rows.append(row)
    return pd.DataFrame(rows).set_index(["optimiser", "definition"])


def glue_frame_row(recorded: Sequence[claims.Claim]) -> Any:
    """Glue the frame row's finding in the reader's words (``ch4.frame_row_label``: holds, holds in part, …), read
    from the claims just recorded, and return the row's verdict."""
    from ...ledger import verdicts

    row = verdicts.verdict_of("frame_precision_toy", recorded)
    claims.glue("ch4.frame_row_label", row.label)
    return row
