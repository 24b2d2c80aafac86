"""Chapter 2's ledger claims and glued numbers: every law's largest error against its independent computation, the
routing gradient's structure, the inverse-temperature sweep, chapter 4's finding on the order of settling, and the
weight-space checks; and the reader's tables of the checks. Every glue name is written out."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from ...ledger import claims, frame_results
from ...science import gradients
from ...tasks import sticky_chain
from .runs import WorkedExample, entropy_bound_max_ratio, worst
from .settings import DTYPE, ETA, HEAD, INIT_STDS, RELATIVE_TOL, STICKY_SEED, GradientLawsSettings

__all__ = [
    "LAW_CLAIMS",
    "FD_LABELS",
    "TRACE_GLUES",
    "glue_worked_example",
    "fixed_choices",
    "verification_params",
    "record_law_claims",
    "law_check_table",
    "record_finite_difference",
    "finite_difference_table",
    "record_structure_claims",
    "record_sweep_claims",
    "glue_frame_order",
    "record_weight_step_claims",
    "glue_weight_step_traces",
    "weight_step_trace_table",
]


#: (claim id, glue name of its error relative to the largest gradient entry, checks of gradients.law_discrepancies,
#: what is compared, the reader's label of the check)
LAW_CLAIMS = [
    ("gradients.score_law_max_abs_err", "gradients.score_law_max_abs_err_relative", ["autograd/scores"],
     "routing law ∂L/∂s vs autograd", "routing law, autograd"),
    ("gradients.value_law_max_abs_err", "gradients.value_law_max_abs_err_relative", ["autograd/v"],
     "value law ∂L/∂v vs autograd", "value law, autograd"),
    ("gradients.query_key_max_abs_err", "gradients.query_key_max_abs_err_relative", ["autograd/q", "autograd/k"],
     "query and key laws vs autograd", "query and key laws, autograd"),
    ("gradients.param_grads_max_abs_err", "gradients.param_grads_max_abs_err_relative",
     ["autograd/W_Q", "autograd/W_K", "autograd/W_V", "autograd/W_O"],
     "W_Q, W_K, W_V, W_O from the laws alone vs autograd", "weight matrices, autograd"),
    ("gradients.sdpa_agreement_max_abs_err", "gradients.sdpa_agreement_max_abs_err_relative",
     ["fused/q", "fused/k", "fused/v"],
     "query, key and value laws vs the backward of PyTorch's fused scaled_dot_product_attention kernel",
     "q, k, v laws, fused kernel"),
]

#: The reader's label of each gradient the finite differences check (the keys of gradients.GRADIENT_NAMES).
FD_LABELS = {"scores": "scores ∂L/∂s", "q": "queries ∂L/∂q", "k": "keys ∂L/∂k", "v": "values ∂L/∂v",
             "W_Q": "weights ∂L/∂W_Q", "W_K": "weights ∂L/∂W_K", "W_V": "weights ∂L/∂W_V", "W_O": "weights ∂L/∂W_O"}

#: The schedules' short names in the tables.
SCHEDULE_NAMES = {"sgd": "SGD", "em_like": "EM-like"}

#: The glue names of the weight-step traces, written out: (schedule, what) → name.
TRACE_GLUES = {
    ("sgd", "sign_min"): "ch2.ws_sgd_sign_min", ("sgd", "sign_max"): "ch2.ws_sgd_sign_max",
    ("sgd", "cosine_min"): "ch2.ws_sgd_cosine_min", ("sgd", "cosine_max"): "ch2.ws_sgd_cosine_max",
    ("sgd", "loss_end"): "ch2.ws_sgd_loss_end", ("sgd", "position"): "ch2.ws_sgd_position",
    ("em_like", "sign_min"): "ch2.ws_em_like_sign_min", ("em_like", "sign_max"): "ch2.ws_em_like_sign_max",
    ("em_like", "cosine_min"): "ch2.ws_em_like_cosine_min", ("em_like", "cosine_max"): "ch2.ws_em_like_cosine_max",
    ("em_like", "loss_end"): "ch2.ws_em_like_loss_end", ("em_like", "position"): "ch2.ws_em_like_position",
}


def glue_worked_example(example: WorkedExample) -> None:
    """Glue the worked example's largest advantage, its query, key, weight and score step for the prose."""
    query, key = example.best_pair()
    claims.glue("gradients.example_best_query", query)
    claims.glue("gradients.example_best_key", key)
    claims.glue("gradients.example_best_advantage", example.advantage.max().item())
    claims.glue("gradients.example_best_weight", example.forward.alpha[query, key].item())
    claims.glue("gradients.example_best_score_step", -example.score_grad[query, key].item())


def fixed_choices() -> dict[str, str]:
    """Return the checks' fixed choices as a reader's table (the same at every scale): the head's sizes, the weight
    scales of the random heads, the precision, the tolerance and the weight-space step."""
    return {
        "head: input → queries/keys, values → classes": (f"{HEAD['d_in']} → {HEAD['d_k']}/{HEAD['d_k']}/"
                                                         f"{HEAD['d_v']} → {HEAD['n_classes']}"),
        "weight scales of the random heads (std)": ", ".join(f"{std:g}" for std in INIT_STDS),
        "arithmetic": str(DTYPE).removeprefix("torch."),
        "tolerance of an exact law (share of the largest entry)": f"{RELATIVE_TOL:.0e}",
        "finite differences: step h, stencil": "1e-03, fourth order",
        "weight step η; sticky-chain seed": f"{ETA:g}; {STICKY_SEED}",
    }


def verification_params(cfg: GradientLawsSettings, seed: int) -> dict[str, Any]:
    """Return the settings of the random-head checks, as the ledger's claims record them."""
    return {"seed": seed, "n_heads": cfg.n_draws, "batch": cfg.batch, "T": cfg.T, **HEAD,
            "init_stds": INIT_STDS, "reduction": "mean", "causal": True, "dtype": "float64"}


def record_law_claims(draws, params: Mapping[str, Any]) -> dict[str, claims.Claim]:
    """Return the recorded claims of :data:`LAW_CLAIMS` (each law's largest error over ``draws``, with the
    tolerance 1e-12 × the largest gradient entry), gluing each error relative to that entry under its name in
    :data:`LAW_CLAIMS`, the largest of those as ``ch2.laws_max_rel_err`` and the number of heads as
    ``gradients.n_heads_checked``."""
    recorded, relative = {}, []
    for claim_id, relative_name, checks, what, _ in LAW_CLAIMS:
        error, scale = worst(draws, *checks)
        recorded[claim_id] = claims.record(
            claim_id, error, unit="nats per unit", expected=0.0, tolerance=RELATIVE_TOL * scale,
            description=f"max abs error, {what} (float64; tolerance 1e-12 × the largest gradient entry)",
            params={**params, "gradient_scale": scale})
        claims.glue(relative_name, error / scale)
        relative.append(error / scale)
    claims.glue("ch2.laws_max_rel_err", max(relative))
    claims.glue("gradients.n_heads_checked", len(draws))
    return recorded


def law_check_table(recorded: Mapping[str, claims.Claim]):
    """Return the law checks as a reader's table (a data frame, one row per check of :data:`LAW_CLAIMS`): the largest
    difference, the same relative to the gradient's largest entry (``relative``), and the tolerance."""
    import pandas as pd

    rows = {}
    for claim_id, _, _, _, label in LAW_CLAIMS:
        claim = recorded[claim_id]
        rows[label] = {"largest difference": f"{claim.value:.1e}",
                       "relative": f"{claim.value / claim.params['gradient_scale']:.1e}",
                       "tolerance": f"{claim.tolerance:.1e}"}
    table = pd.DataFrame.from_dict(rows, orient="index")
    table.index.name = "check"
    return table


def record_finite_difference(relative: Mapping[str, float], cfg: GradientLawsSettings, *, seed: int) -> None:
    """Record the largest of :func:`~attention_dynamics.chapters.gradient_laws.runs.finite_difference_errors` as ``gradients.finite_difference_max_rel_err``
    (tolerance 1e-7)."""
    claims.record(
        "gradients.finite_difference_max_rel_err", max(relative.values()), unit="", expected=0.0, tolerance=1e-7,
        description="max over the 8 gradients of max|law − central difference| / max|central difference| "
                    "(fourth-order stencil, h = 1e-3, float64)",
        params={"seed": seed, "T": cfg.fd_T, **HEAD, "init_std": 0.5, "step": 1e-3, "stencil_order": 4,
                "dtype": "float64"})


def finite_difference_table(relative: Mapping[str, float]) -> dict[str, str]:
    """Return the finite-difference check as a reader's table: gradient (:data:`FD_LABELS`) → largest difference
    relative to the finite differences' largest entry."""
    return {FD_LABELS[name]: f"{err:.1e}" for name, err in relative.items()}


def record_structure_claims(draws, params: Mapping[str, Any]) -> tuple[float, float, float]:
    """Return ``(largest row sum, largest term |α_ij b_ij|, largest masked entry)`` of the routing gradient over
    ``draws``, recording the first and last as claims (expected 0) and gluing the term scale."""
    row_error, row_scale = worst(draws, "row_sum")
    masked_error, _ = worst(draws, "masked_scores")
    claims.glue("gradients.row_sum_term_scale", row_scale)
    claims.record("gradients.row_sum_max_abs", row_error, unit="nats per unit of score", expected=0.0,
                  tolerance=RELATIVE_TOL * row_scale,
                  description="max over rows of |Σ_j ∂L/∂s_ij| (expected 0; tolerance 1e-12 × the largest term "
                              "|α_ij b_ij|)", params={**params, "term_scale": row_scale})
    claims.record("gradients.masked_score_grad_max_abs", masked_error, unit="nats per unit of score",
                  expected=0.0, tolerance=0.0,
                  description="max |∂L/∂s_ij| over causally masked entries (exactly 0 by the gate α_ij = 0)",
                  params=params)
    return row_error, row_scale, masked_error


def record_sweep_claims(sweep: gradients.InverseTemperatureSweep, cfg: GradientLawsSettings, *, seed: int) -> None:
    """Record the sweep's three claims (routing gradient vanishes, value gradient does not, the entropy bound
    holds) and glue the entropies and β the prose cites."""
    betas = sweep.inverse_temperature
    at_one = int(np.flatnonzero(betas == 1.0)[0])  # β = 1: the head as initialised
    params = {"seed": seed, "T": cfg.sweep_T, **HEAD, "init_std": 0.5, "beta_min": float(betas[0]),
              "beta_max": float(betas[-1]), "n_temperatures": cfg.n_temperatures, "dtype": "float64"}
    claims.record("gradients.one_hot_score_grad_ratio", sweep.score_grad_norm[-1] / sweep.score_grad_norm.max(),
                  unit="", upper=1e-6, params=params,
                  description="‖∂L/∂s‖ at the sharpest attention (β = β_max) / its largest value over the sweep "
                              "(target: vanishes)")
    claims.record("gradients.one_hot_value_grad_ratio", sweep.value_grad_norm[-1] / sweep.value_grad_norm[at_one],
                  unit="", lower=0.5, params=params,
                  description="‖∂L/∂v‖ at the sharpest attention (β = β_max) / its value at β = 1 (target: does "
                              "not vanish)")
    claims.record("gradients.entropy_bound_max_ratio", entropy_bound_max_ratio(sweep.score_grad_l1, sweep.score_grad_bound),
                  unit="", upper=1.0, params=params,
                  description="max over β of Σ_ij |∂L/∂s_ij| / Σ_i 2 H(α_i) R_i (the lemma says ≤ 1)")
    claims.glue("gradients.sweep_entropy_max", sweep.attention_entropy.max())
    claims.glue("gradients.sweep_entropy_min", sweep.attention_entropy.min())
    claims.glue("gradients.sweep_peak_entropy", sweep.attention_entropy[np.argmax(sweep.score_grad_norm)])
    claims.glue("gradients.sweep_beta_max", betas[-1])


def glue_frame_order(result: Mapping[str, Any] | None = None) -> None:
    """Glue what chapter 4 finds on whether routing settles before the values, from its stored result (no claim is
    recorded: the claims are chapter 4's): the reader's label as ``ch2.frame_row_label``, the rule's verdict as
    ``ch2.frame_row_verdict`` and each definition's verdict as ``ch2.frame_row_readings``."""
    row = frame_results.frame_row_verdict(result if result is not None else frame_results.load_frame_definitions())
    claims.glue("ch2.frame_row_label", row.label)
    claims.glue("ch2.frame_row_verdict", row.verdict)
    claims.glue("ch2.frame_row_readings", row.readings_text())


def record_weight_step_claims(sticky: Mapping[str, float], random: Sequence[Mapping[str, float]],
                              cfg: GradientLawsSettings, *, seed: int) -> dict[str, float]:
    """Record the weight-space claims (the formulas equal a real step; the free-activation picture's sign agreement
    and value cosine on the sticky head), glue the random heads' summaries, and return the sticky head's measures."""
    checks = [sticky, *random]
    claims.glue("gradients.ws_random_T", cfg.T)
    params = {"eta": ETA, "sticky_seed": STICKY_SEED, "n_random_heads": cfg.n_draws, "T_random": cfg.T,
              "head": HEAD, "random_init_std": 0.5, "dtype": "float64", "seed": seed}
    for claim_id, kind in (("gradients.weight_step_value_max_abs_err", "value"),
                           ("gradients.weight_step_score_max_abs_err", "score")):
        claims.record(
            claim_id, max(c[f"{kind}_err"] for c in checks), unit="",
            description=f"max |formula − one autograd step| of the {kind} change through the weights "
                        "(Gram-mixed forms; tolerance 1e-12 × the largest change), float64",
            expected=0.0, tolerance=1e-12 * max(c[f"{kind}_scale"] for c in checks), params=params)
    claims.record("dynamics.score_sign_agreement_fraction", sticky["sign_agreement"], unit="fraction",
                  description="sticky-chain head at initialisation, one step on W_Q, W_K: share of attended "
                              "pairs whose attention moves with the sign of their advantage (free scores: 1)",
                  params=params)
    claims.record("dynamics.value_step_cosine", sticky["value_cosine"], unit="cosine",
                  description="sticky-chain head at initialisation: cosine between the value law's Δv and "
                              "the actual Δv of one step on W_V (free values: 1)", params=params)
    claims.glue("gradients.ws_random_sign_mean", float(np.mean([c["sign_agreement"] for c in random])))
    claims.glue("gradients.ws_random_cosine_mean", float(np.mean([c["value_cosine"] for c in random])))
    claims.glue("gradients.ws_random_cosine_min", min(c["value_cosine"] for c in random))
    claims.glue("gradients.ws_random_cosine_max", max(c["value_cosine"] for c in random))
    return {name: value for name, value in sticky.items() if "err" not in name and "scale" not in name}


def glue_weight_step_traces(traces: Mapping[str, Mapping[str, Any]], cfg: GradientLawsSettings) -> None:
    """Glue, per schedule (:data:`TRACE_GLUES`), the range of the sign agreement and value cosine, the final loss and
    where it lies between ln 8 and the chain's floor, and the orthonormal reference's sign range and largest
    |cosine − 1|."""
    claims.glue("ch2.ws_steps", cfg.ws_steps)
    claims.glue("ch2.ws_every", cfg.ws_every)
    for name, tr in traces.items():
        for key, short in (("sign_agreement", "sign"), ("value_cosine", "cosine")):
            claims.glue(TRACE_GLUES[name, short + "_min"], min(tr[key]))
            claims.glue(TRACE_GLUES[name, short + "_max"], max(tr[key]))
        claims.glue(TRACE_GLUES[name, "loss_end"], tr["loss"][-1])
        # where the run's loss lies, by chapter 5's halfway bound: 0 at ln 8, 1 at the reference chain's H_min
        share = sticky_chain.share_of_way(tr["loss"][-1])
        claims.glue(TRACE_GLUES[name, "position"], sticky_chain.position_phrase(share))
    claims.glue("ch2.ws_ref_sign_min", min(min(t["ref_sign_agreement"]) for t in traces.values()))
    claims.glue("ch2.ws_ref_sign_max", max(max(t["ref_sign_agreement"]) for t in traces.values()))
    claims.glue("ch2.ws_ref_cosine_err", max(abs(c - 1) for t in traces.values() for c in t["ref_value_cosine"]))


def weight_step_trace_table(traces: Mapping[str, Mapping[str, Any]]):
    """Return the weight-step traces as a reader's table (a data frame, one row per schedule and checkpoint): the loss
    in nats, the share of attended pairs moving with their advantage and the value step's cosine with the law's, on the
    sticky chain and on orthonormal inputs (``X = I``)."""
    import pandas as pd

    columns = {"loss": "loss", "sign_agreement": "share", "value_cosine": "cosine", "ref_sign_agreement": "share, X = I",
               "ref_value_cosine": "cosine, X = I"}
    rows = []
    for name, tr in traces.items():
        label = SCHEDULE_NAMES.get(name, name)
        for i, step in enumerate(tr["steps"]):
            rows.append({"schedule": label, "step": step, **{c: round(float(tr[k][i]), 3) for k, c in columns.items()}})
    return pd.DataFrame(rows).set_index(["schedule", "step"])
