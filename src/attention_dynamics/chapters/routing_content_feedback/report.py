"""Chapter 3's ledger claims and glued numbers: the task's reference levels, the full run's summary, the
first-order predictions (value-step ratio, compatibility change, advantage change) with their bounds, and every
prediction of the feedback claim over five seeds (the stored result
:mod:`~attention_dynamics.chapters.routing_content_feedback.feedback_predictions`)."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from ...ledger import claims
from ...ledger.verdicts import render_caveat
from ...science.settling import first_true
from ...tasks import specialization as recall
from ...tasks.specialization import SpecializationBatch
from ...training.recall_head import SpecializationRun
from .feedback_predictions import FILE as FEEDBACK_FILE
from .runs import first_step_reaching, milestones, moments

__all__ = [
    "glue_task",
    "glue_training",
    "run_summary",
    "record_value_step_ratio",
    "record_compatibility_change",
    "record_advantage_change",
    "glue_advantage_trace",
    "DB_BOUND",
    "WEIGHT_STEP_BOUND",
    "record_feedback_claims",
    "glue_feedback",
    "FEEDBACK_DIRECTIONS",
    "glue_feedback_directions",
]


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


def glue_training(common: Mapping[str, Any]) -> None:
    """Glue the training settings the prose cites (steps, learning rate, sequences, recording interval)."""
    for name in ("steps", "lr", "n_train", "n_probe", "record_every"):
        claims.glue(f"ch3.{name}", common[name])


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


# ---------------------------------------------------------------------------------------------
# Every prediction of the feedback claim, over five seeds (stored result ``feedback_predictions``)
# ---------------------------------------------------------------------------------------------

DB_BOUND = 0.1  # the Δb prediction "holds" within 10 % relative error (no-change predictor: 100 %)
WEIGHT_STEP_BOUND = 0.9  # free activations give 1, an unrelated change 0.5 (signs) or 0 (cosine)


def record_feedback_claims(result: Mapping[str, Any]) -> dict[str, claims.Claim]:
    """Record the feedback row's claims from the stored result (each a mean over seeds, decided by its interval);
    return them by id."""
    params = {"seeds": result["seeds"], "scale": result["scale"], "settings": result["settings"],
              "data": FEEDBACK_FILE}
    m = result["moments"]
    out: dict[str, claims.Claim] = {}

    def record(claim_id: str, stat: Mapping[str, float], **kw: Any) -> None:
        out[claim_id] = claims.record(claim_id, stat["mean"], interval=(stat["low"], stat["high"]), **kw)

    record("dynamics.db_prediction_rel_err_init", m["init"]["db_rel_err"], unit="", upper=DB_BOUND,
           description="relative error of the Δb prediction (u recomputed after a value-only step, smallest η) at "
           "initialisation, mean over five recall heads; holds below 10 % (predicting no change: 100 %)",
           explanation="the error signal's own response is not negligible here", params=params)
    record("dynamics.db_prediction_rel_err_transition", m["transition"]["db_rel_err"], unit="", upper=DB_BOUND,
           description="the same at the middle of the routing transition (half the rise of the attention on the "
           "answer's source), mean over five recall heads",
           explanation="once routing forms the readout's response to the step is as large as the term the "
           "prediction keeps: the first-order Δb picture does not hold", params=params)
    record("dynamics.feedback_gain_margin_init", m["init"]["gain_margin"], unit="fraction of queries", lower=0.0,
           description="share of queries whose answer's source gains advantage under a value step, minus the share "
           "for the other sources (the control), at initialisation, mean over five recall heads",
           explanation="at initialisation a value step does not favour the answer's source over the others",
           params=params)
    record("dynamics.feedback_gain_margin_end", m["end"]["gain_margin"], unit="fraction of queries", lower=0.0,
           description="the same at the end of training, once routing has formed",
           explanation="once routing has formed a value step lowers the answer source's advantage and raises the "
           "others': the loop is reversed", params=params)
    ws = result["weight_step"]
    sticky = {**params, "seeds": result["sticky_seeds"], "head": "sticky chain at initialisation"}
    record("dynamics.weight_step_value_cosine_seeds", ws["value_cosine"], unit="cosine", lower=WEIGHT_STEP_BOUND,
           description="cosine between the value law's Δv and a real step on W_V's, sticky-chain head at "
           "initialisation, mean over the paper's five seeds (free values: 1)",
           explanation="a step on W_V mixes the values through the inputs' Gram matrix: the value law does not give "
           "its direction", params=sticky)
    record("dynamics.weight_step_sign_agreement_seeds", ws["sign_agreement"], unit="fraction", lower=WEIGHT_STEP_BOUND,
           description="share of attended pairs whose attention moves with the sign of their advantage under a real "
           "step on W_Q, W_K, sticky-chain head at initialisation, mean over the paper's five seeds (free scores: 1; "
           "a coin: 0.5)",
           explanation="through the weights the routing law's signs are close to a coin's", params=sticky)
    return out


def glue_feedback(result: Mapping[str, Any]) -> None:
    """Glue, for chapter 3's prose, each moment's mean step, Δb error, loss ratio and gain shares (mean and interval),
    and the weight steps' means."""
    claims.glue("ch3.fb_n_seeds", len(result["seeds"]))
    for name, m in result["moments"].items():
        claims.glue(f"ch3.fb_{name}_step", float(np.mean(m["step"])))
        for key in ("db_rel_err", "loss_ratio", "gain_correct", "gain_other_source", "gain_margin"):
            for end in ("mean", "low", "high"):
                claims.glue(f"ch3.fb_{name}_{key}_{end}", m[key][end])
    for key, stat in result["weight_step"].items():
        for end in ("mean", "low", "high"):
            claims.glue(f"ch3.fb_weight_{key}_{end}", stat[end])


#: The directions chapter 3's prose states, each chosen by the status of the claim that decides it (pass | fail |
#: undecided), so that no sentence states a direction its claim does not.
FEEDBACK_DIRECTIONS = {
    "ch3.fb_db_init_phrase": "{dynamics.db_prediction_rel_err_init?holds|does not hold|is not decided}",
    "ch3.fb_db_transition_phrase": "{dynamics.db_prediction_rel_err_transition?still holds|no longer holds|is not "
                                   "decided}",
    "ch3.fb_margin_init_phrase": "{dynamics.feedback_gain_margin_init?a value step favours the answer's source over the "
                                 "others|a value step favours the other sources over the answer's|a value step favours "
                                 "neither, within the interval}",
    "ch3.fb_margin_end_phrase": "{dynamics.feedback_gain_margin_end?a value step still favours the answer's source|a "
                                "value step lowers the answer source's advantage and raises the others'|the sign is not "
                                "decided}",
    "ch3.fb_weight_phrase": "{dynamics.weight_step_value_cosine_seeds?follows|does not follow|is not decided for}",
}


def glue_feedback_directions(recorded: Sequence[claims.Claim]) -> dict[str, str]:
    """Glue, and return, each phrase of :data:`FEEDBACK_DIRECTIONS` filled from the claims at hand (e.g.
    ``claims.recorded_claims()`` after :func:`record_feedback_claims`)."""
    ledger = {c.id: c.to_json() for c in recorded}
    out = {name: render_caveat(template, ledger) for name, template in FEEDBACK_DIRECTIONS.items()}
    for name, text in out.items():
        claims.glue(name, text)
    return out
