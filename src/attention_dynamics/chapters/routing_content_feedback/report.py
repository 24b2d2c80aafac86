"""Chapter 3's ledger claims and glued numbers: the task's reference levels, the full run's summary, the
first-order predictions (value-step ratio, compatibility change, advantage change) with their bounds, and every
prediction of the feedback claim over five seeds (the stored result
:mod:`~attention_dynamics.chapters.routing_content_feedback.feedback_predictions`)."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from ...ledger import claims
from ...ledger.verdicts import reader_label, render_caveat, verdict_of
from ...science.settling import first_true
from ...tasks import specialization as recall
from ...tasks.specialization import SpecializationBatch
from ...training.recall_head import SpecializationRun
from .feedback_predictions import FILE as FEEDBACK_FILE
from .runs import first_step_reaching, milestones, moments

__all__ = [
    "TASK_GLUE",
    "TRAINING_GLUE",
    "glue_task",
    "glue_training",
    "run_summary",
    "SUMMARY_LABELS",
    "summary_table",
    "glue_frozen_runs",
    "glue_prototypes",
    "glue_value_step_settings",
    "value_step_table",
    "record_value_step_ratio",
    "record_compatibility_change",
    "record_advantage_change",
    "ADVANTAGE_TRACE_GLUE",
    "glue_advantage_trace",
    "ADVANTAGE_TRACE_LABELS",
    "advantage_trace_table",
    "DB_BOUND",
    "WEIGHT_STEP_BOUND",
    "record_feedback_claims",
    "FEEDBACK_GLUE",
    "glue_feedback",
    "feedback_table",
    "FEEDBACK_DIRECTIONS",
    "glue_feedback_directions",
    "glue_feedback_row",
]


#: The task's sizes, glued under these names (written out, so that a search for a name the prose uses finds it).
TASK_GLUE = {"K": "recall.K", "Q": "recall.Q", "n_tags": "recall.n_tags", "n_labels": "recall.n_labels",
             "T": "recall.T", "d_in": "recall.d_in"}
#: The training settings the prose cites, glued under these names.
TRAINING_GLUE = {"steps": "ch3.steps", "lr": "ch3.lr", "n_train": "ch3.n_train", "n_probe": "ch3.n_probe",
                 "record_every": "ch3.record_every"}


def glue_task(example: SpecializationBatch) -> dict[str, int]:
    """Return the task's sizes (sources, queries, tags, labels, input width) for display, gluing them and the
    three reference levels of the loss (Bayes floor, ln K, ln C) for the prose."""
    K, Q, n_tags, n_labels = example.n_sources, example.n_queries, example.n_tags, example.n_labels
    claims.glue("recall.bayes_floor", recall.bayes_floor_nats())
    claims.glue("recall.blind_floor", recall.routing_blind_floor_nats(K))
    claims.glue("recall.chance", recall.chance_loss_nats(n_labels))
    d_in = example.x.shape[-1]
    for name, value in {"K": K, "Q": Q, "n_tags": n_tags, "n_labels": n_labels, "T": K + Q, "d_in": d_in}.items():
        claims.glue(TASK_GLUE[name], value)
    return {"sources K": K, "queries Q": Q, "tags": n_tags, "labels C": n_labels, "input width": d_in}


def glue_training(common: Mapping[str, Any]) -> None:
    """Glue the training settings the prose cites (steps, learning rate, sequences, recording interval)."""
    for name, glue_name in TRAINING_GLUE.items():
        claims.glue(glue_name, common[name])


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


#: The run summary's entries as a reader reads them (the table a chapter shows of :func:`run_summary`).
SUMMARY_LABELS = {
    "ch3.final_probe_loss": "probe loss at the end (nats)",
    "ch3.initial_correct_mass": "attention on the answer's source at initialisation",
    "ch3.final_correct_mass": "attention on the answer's source at the end",
    "ch3.final_source_mass": "attention on any source at the end",
    "ch3.final_alignment": "values' cosine to their ideal prototypes at the end",
    "ch3.final_precision": "values' precision loss at the end (nats)",
    "ch3.initial_purity": "purity of the soft counts at initialisation",
    "ch3.final_purity": "purity of the soft counts at the end",
    "ch3.aligned_step": "step at which the values' cosine passes 0.9",
    "ch3.routed_step": "step at which the answer's attention passes one half",
    "ch3.transition_step": "middle of the routing transition (step)",
    "ch3.peak_advantage_step": "step at which the answer's advantage peaks",
}


def summary_table(summary: Mapping[str, float | int]) -> dict[str, float | int]:
    """Return :func:`run_summary`'s entries under the reader's labels (:data:`SUMMARY_LABELS`), rounded to four
    decimals, for display."""
    return {SUMMARY_LABELS[k]: round(float(v), 4) if isinstance(v, float) or hasattr(v, "dtype") else v
            for k, v in summary.items()}


def glue_frozen_runs(variants: Mapping[str, SpecializationRun]) -> None:
    """Glue the final probe loss of the runs with one side of the loop frozen (``ch3.frozen_routing_loss``,
    ``ch3.frozen_values_loss``)."""
    claims.glue("ch3.frozen_routing_loss", float(variants["routing frozen"].probe_loss[-1]))
    claims.glue("ch3.frozen_values_loss", float(variants["values frozen"].probe_loss[-1]))


def glue_prototypes(explained: np.ndarray) -> None:
    """Glue the share of the final label prototypes' variance the two principal axes carry (``ch3.pca_explained``)."""
    claims.glue("ch3.pca_explained", float(np.sum(explained)))


def glue_value_step_settings(etas: np.ndarray, n_check: int) -> None:
    """Glue the value steps' smallest and largest η (``ch3.eta_min``, ``ch3.eta_max``) and the check batch's size
    (``ch3.n_check``)."""
    claims.glue("ch3.eta_min", float(etas[0]))
    claims.glue("ch3.eta_max", float(etas[-1]))
    claims.glue("ch3.n_check", int(n_check))


def value_step_table(etas: np.ndarray, ratio_curves, bounds) -> dict[str, dict[str, float]]:
    """Return, per moment, the ratio at the smallest η and its a-priori bound on 1 − ratio, under the reader's
    labels, for display."""
    return {name: {"actual / predicted at the smallest step": float(r[0]),
                   "bound on 1 − ratio": float(etas[0] * bounds[name] / 2)} for name, r in ratio_curves.items()}


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


#: The advantage-change trace's shares, glued at the start, the end, their minimum and maximum under these names.
ADVANTAGE_TRACE_GLUE = {
    "gain_correct": {"start": "ch3.adv_gain_correct_start", "end": "ch3.adv_gain_correct_end",
                     "min": "ch3.adv_gain_correct_min", "max": "ch3.adv_gain_correct_max"},
    "gain_other_source": {"start": "ch3.adv_gain_other_source_start", "end": "ch3.adv_gain_other_source_end",
                          "min": "ch3.adv_gain_other_source_min", "max": "ch3.adv_gain_other_source_max"},
    "rule_agreement": {"start": "ch3.adv_rule_agreement_start", "end": "ch3.adv_rule_agreement_end",
                       "min": "ch3.adv_rule_agreement_min", "max": "ch3.adv_rule_agreement_max"},
    "correct_rich": {"start": "ch3.adv_correct_rich_start", "end": "ch3.adv_correct_rich_end",
                     "min": "ch3.adv_correct_rich_min", "max": "ch3.adv_correct_rich_max"},
    "self_share": {"start": "ch3.adv_self_share_start", "end": "ch3.adv_self_share_end",
                   "min": "ch3.adv_self_share_min", "max": "ch3.adv_self_share_max"},
}


def glue_advantage_trace(trace: Mapping[str, np.ndarray], advantage: np.ndarray) -> None:
    """Glue the start, end, min and max of the advantage-change trace's shares, and two of them where the correct
    source's ``advantage`` peaks."""
    reducers = {"start": lambda x: x[0], "end": lambda x: x[-1], "min": np.nanmin, "max": np.nanmax}
    for key, names in ADVANTAGE_TRACE_GLUE.items():
        for end, glue_name in names.items():
            claims.glue(glue_name, float(reducers[end](trace[key])))
    peak = int(np.argmax(advantage))
    claims.glue("ch3.adv_gain_correct_at_peak", float(trace["gain_correct"][peak]))
    claims.glue("ch3.adv_rule_at_peak", float(trace["rule_agreement"][peak]))


#: The advantage-change trace's entries as a reader reads them.
ADVANTAGE_TRACE_LABELS = {
    "steps": "training step",
    "gain_correct": "answer's source gains advantage (share)",
    "gain_other_source": "another source gains advantage (share)",
    "gain_query_key": "an earlier query gains advantage (share)",
    "rule_agreement": "rich-get-richer rule has the right sign (share)",
    "correct_rich": "answer's source above the threshold (share)",
    "self_share": "self term's share of the three terms",
}


def advantage_trace_table(trace: Mapping[str, np.ndarray], every: int = 10) -> dict[str, list[float]]:
    """Return the advantage-change trace at every ``every``-th checkpoint under the reader's labels, for display."""
    return {ADVANTAGE_TRACE_LABELS[k]: np.round(np.asarray(v)[::every], 2).tolist() for k, v in trace.items()}


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


#: The stored result's numbers chapter 3 glues: per moment its mean step and, for each quantity, the mean and the
#: ends of its 95 % interval over seeds; the weight steps' the same (names written out, so that a search finds them).
FEEDBACK_GLUE = {
    "init": {
        "step": "ch3.fb_init_step",
        "db_rel_err": {"mean": "ch3.fb_init_db_rel_err_mean",
                       "low": "ch3.fb_init_db_rel_err_low",
                       "high": "ch3.fb_init_db_rel_err_high"},
        "loss_ratio": {"mean": "ch3.fb_init_loss_ratio_mean",
                       "low": "ch3.fb_init_loss_ratio_low",
                       "high": "ch3.fb_init_loss_ratio_high"},
        "gain_correct": {"mean": "ch3.fb_init_gain_correct_mean",
                         "low": "ch3.fb_init_gain_correct_low",
                         "high": "ch3.fb_init_gain_correct_high"},
        "gain_other_source": {"mean": "ch3.fb_init_gain_other_source_mean",
                              "low": "ch3.fb_init_gain_other_source_low",
                              "high": "ch3.fb_init_gain_other_source_high"},
        "gain_margin": {"mean": "ch3.fb_init_gain_margin_mean",
                        "low": "ch3.fb_init_gain_margin_low",
                        "high": "ch3.fb_init_gain_margin_high"},
    },
    "transition": {
        "step": "ch3.fb_transition_step",
        "db_rel_err": {"mean": "ch3.fb_transition_db_rel_err_mean",
                       "low": "ch3.fb_transition_db_rel_err_low",
                       "high": "ch3.fb_transition_db_rel_err_high"},
        "loss_ratio": {"mean": "ch3.fb_transition_loss_ratio_mean",
                       "low": "ch3.fb_transition_loss_ratio_low",
                       "high": "ch3.fb_transition_loss_ratio_high"},
        "gain_correct": {"mean": "ch3.fb_transition_gain_correct_mean",
                         "low": "ch3.fb_transition_gain_correct_low",
                         "high": "ch3.fb_transition_gain_correct_high"},
        "gain_other_source": {"mean": "ch3.fb_transition_gain_other_source_mean",
                              "low": "ch3.fb_transition_gain_other_source_low",
                              "high": "ch3.fb_transition_gain_other_source_high"},
        "gain_margin": {"mean": "ch3.fb_transition_gain_margin_mean",
                        "low": "ch3.fb_transition_gain_margin_low",
                        "high": "ch3.fb_transition_gain_margin_high"},
    },
    "end": {
        "step": "ch3.fb_end_step",
        "db_rel_err": {"mean": "ch3.fb_end_db_rel_err_mean",
                       "low": "ch3.fb_end_db_rel_err_low",
                       "high": "ch3.fb_end_db_rel_err_high"},
        "loss_ratio": {"mean": "ch3.fb_end_loss_ratio_mean",
                       "low": "ch3.fb_end_loss_ratio_low",
                       "high": "ch3.fb_end_loss_ratio_high"},
        "gain_correct": {"mean": "ch3.fb_end_gain_correct_mean",
                         "low": "ch3.fb_end_gain_correct_low",
                         "high": "ch3.fb_end_gain_correct_high"},
        "gain_other_source": {"mean": "ch3.fb_end_gain_other_source_mean",
                              "low": "ch3.fb_end_gain_other_source_low",
                              "high": "ch3.fb_end_gain_other_source_high"},
        "gain_margin": {"mean": "ch3.fb_end_gain_margin_mean",
                        "low": "ch3.fb_end_gain_margin_low",
                        "high": "ch3.fb_end_gain_margin_high"},
    },
    "weight_step": {
        "value_cosine": {"mean": "ch3.fb_weight_value_cosine_mean", "low": "ch3.fb_weight_value_cosine_low",
                         "high": "ch3.fb_weight_value_cosine_high"},
        "sign_agreement": {"mean": "ch3.fb_weight_sign_agreement_mean", "low": "ch3.fb_weight_sign_agreement_low",
                           "high": "ch3.fb_weight_sign_agreement_high"},
    },
}


def glue_feedback(result: Mapping[str, Any]) -> None:
    """Glue, for chapter 3's prose, each moment's mean step, Δb error, loss ratio and gain shares (mean and interval),
    and the weight steps' means (the names of :data:`FEEDBACK_GLUE`)."""
    claims.glue("ch3.fb_n_seeds", len(result["seeds"]))
    for name, m in result["moments"].items():
        names = FEEDBACK_GLUE[name]
        claims.glue(names["step"], float(np.mean(m["step"])))
        for key in ("db_rel_err", "loss_ratio", "gain_correct", "gain_other_source", "gain_margin"):
            for end in ("mean", "low", "high"):
                claims.glue(names[key][end], m[key][end])
    for key, stat in result["weight_step"].items():
        for end in ("mean", "low", "high"):
            claims.glue(FEEDBACK_GLUE["weight_step"][key][end], stat[end])


#: The feedback row's claims as a reader reads them (the table a chapter shows of :func:`record_feedback_claims`).
FEEDBACK_LABELS = {
    "dynamics.db_prediction_rel_err_init": "Δb prediction's relative error, initialisation",
    "dynamics.db_prediction_rel_err_transition": "Δb prediction's relative error, routing transition",
    "dynamics.feedback_gain_margin_init": "answer's source favoured over the others, initialisation",
    "dynamics.feedback_gain_margin_end": "answer's source favoured over the others, end",
    "dynamics.weight_step_value_cosine_seeds": "W_V step against the value law (cosine)",
    "dynamics.weight_step_sign_agreement_seeds": "W_Q, W_K step with the advantage's sign (share)",
}


def feedback_table(recorded: Mapping[str, claims.Claim]) -> dict[str, dict[str, Any]]:
    """Return the feedback claims of :func:`record_feedback_claims` under the reader's labels: each mean over seeds,
    its 95 % interval and what it shows (holds, does not hold, open at this scale), for display."""
    words = {"pass": "holds", "fail": "does not hold", "undecided": "open at this scale", "new": "the book's own"}
    out = {}
    for claim_id, label in FEEDBACK_LABELS.items():
        c = recorded[claim_id]
        low, high = c.interval if c.interval is not None else (float("nan"), float("nan"))
        out[label] = {"mean": round(float(c.value), 4), "95 % interval": f"{low:.3f} to {high:.3f}",
                      "finding": words[c.status]}
    return out


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


def glue_feedback_row(recorded: Sequence[claims.Claim]) -> Any:
    """Glue the verdict on the paper's feedback claim from the claims at hand: the reader's label
    (``ch3.feedback_row_label``: holds, holds in part, …), the verdict itself (``ch3.feedback_row_verdict``) and
    its parts grouped by verdict (``ch3.feedback_row_readings``); the parts grouped by the reader's label
    (``ch3.feedback_row_parts``); return the verdict."""
    row = verdict_of("feedback_first_order", recorded)
    claims.glue("ch3.feedback_row_label", reader_label(row.verdict))
    claims.glue("ch3.feedback_row_verdict", row.verdict)
    claims.glue("ch3.feedback_row_readings", row.readings_text())
    grouped: dict[str, list[str]] = {}
    for name, verdict in row.by_group.items():
        grouped.setdefault(reader_label(verdict), []).append(name)
    order = ("holds", "holds in part", "open at this scale", "not tested here", "does not hold")
    parts = " ".join(f"{label[0].upper()}{label[1:]}: {'; '.join(grouped[label])}." for label in order
                     if label in grouped)
    claims.glue("ch3.feedback_row_parts", parts)
    return row
