"""Chapter 6's ledger claims and glued numbers: the reference levels, calibration in bits, the geometry beside its
nulls, the HMM manifold and frame against calibration through training.

The models and their training are :mod:`attention_dynamics.training.wind_tunnels`; the measures of a trained model
:mod:`attention_dynamics.diagnostics.wind_tunnel_geometry`; the figures :mod:`~attention_dynamics.chapters.bayesian_manifolds.figures`. Each ``record_*`` function
records one section's claims (:func:`attention_dynamics.ledger.claims.record`), glues the numbers its prose states and
returns what the section's figures and later sections need, with the recorded claims by id.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np
import pandas as pd
import torch

from ...diagnostics.wind_tunnel_geometry import (
    FrameCalibrationCurves,
    GeometryReport,
    HMMManifold,
    bijection_geometry,
    bijection_geometry_nulls,
    bijection_geometry_through_training,
    bijection_scrambled_probe,
    frame_and_calibration,
    hmm_manifold,
)
from ...ledger import claims
from ...ledger.results import seed_range
from ...ledger.verdicts import render_caveat
from ...models.transformer import count_parameters
from ...science import calibration, geometry, settling
from ...tasks import bijection, hmm
from ...training.wind_tunnels import (
    HMMCurve,
    TrainedRun,
    bijection_log_probs,
    hmm_batch_for_eval,
    hmm_kl_through_training,
    hmm_log_probs,
)
from . import seed_spread
from .settings import (
    BIJECTION_TARGET_BITS,
    GEOMETRY_PLATEAU,
    HMM_ENTROPY_BOUND_BITS,
    HMM_PLATEAU_RATIO,
    KEYS_ALL,
    KEYS_KEY,
    REDUCTION,
    TRANSPORT_FRACTION,
    ManifoldsSettings,
)

__all__ = [
    "bijection_params",
    "hmm_params",
    "geometry_params",
    "MANIFOLD_COLUMNS",
    "manifold_frame",
    "nulls_table",
    "HMM_LENGTH_GLUES",
    "record_reference_levels",
    "glue_training",
    "BijectionCalibration",
    "record_bijection_calibration",
    "HMMCalibration",
    "record_hmm_calibration",
    "BijectionGeometry",
    "plateau_note",
    "record_bijection_geometry",
    "glue_hmm_manifold",
    "record_frame_and_calibration",
    "ONE_SEED_ORDER_PHRASE",
    "glue_one_seed_order",
]


# --------------------------------------------------------------------------------------------
# Examples, batches and the claims' parameters
# --------------------------------------------------------------------------------------------


def bijection_params(settings: ManifoldsSettings, *, seed: int) -> dict[str, Any]:
    """Return the bijection claims' parameters: sizes, held-out sequences, seed, model, training and scale."""
    s = settings
    return {"V": s.bijection.V, "L": s.bijection.L, "n_sequences": s.n_eval, "seed": seed, "d_model": s.bijection.d_model,
            "n_layers": s.bijection.n_layers, "n_heads": s.bijection.n_heads, "steps": s.bijection.steps,
            "batch": s.bijection.batch, "lr": s.bijection.lr, "target": s.bijection.target, "scale": s.scale}


def hmm_params(settings: ManifoldsSettings, *, seed: int) -> dict[str, Any]:
    """Return the HMM claims' parameters: task sizes, lengths, model, training, held-out sequences, seed, scale."""
    s = settings
    return {"n_states": s.hmm.n_states, "n_symbols": s.hmm.n_symbols, "train_length": s.hmm.test_lengths[0],
            "test_lengths": list(s.hmm.test_lengths), "grid": s.hmm.grid, "d_model": s.hmm.d_model,
            "n_layers": s.hmm.n_layers, "n_heads": s.hmm.n_heads, "steps": s.hmm.steps,
            "batch": s.hmm.batch, "lr": s.hmm.lr, "fused_adamw": s.hmm.fused_adamw, "n_sequences": s.n_eval,
            "seed": seed,
            "scale": s.scale}


def geometry_params(settings: ManifoldsSettings, *, seed: int) -> dict[str, Any]:
    """Return the geometry claims' parameters: :func:`bijection_params` with the probe size and head dimension."""
    return {**bijection_params(settings, seed=seed), "n_probe": settings.n_probe,
            "d_head": settings.bijection.d_model // settings.bijection.n_heads}


#: How a manifold table names its columns.
MANIFOLD_COLUMNS = {"pc1_ratio": "PC1 share of the variance", "spearman": "ρ(PC1, entropy)",
                    "within_step_spearman": "ρ within a step"}


def manifold_frame(rows):
    """Return a manifold table (rows of layer, representation, PC1 share, ρ …) as a data frame indexed by
    layer and representation, rounded to 3 digits, its columns named by :data:`MANIFOLD_COLUMNS`."""
    return pd.DataFrame(rows).set_index(["layer", "representation"]).round(3).rename(columns=MANIFOLD_COLUMNS)


def nulls_table(nulls: Mapping[str, Mapping[str, float]]) -> pd.DataFrame:
    """Return the geometry's numbers beside its controls: one row per measure, one column per condition (trained,
    untrained, scrambled values), rounded to 3 digits."""
    return pd.DataFrame(nulls).rename_axis("measure").round(3)


# --------------------------------------------------------------------------------------------
# Reference levels and training
# --------------------------------------------------------------------------------------------


def record_reference_levels(settings: ManifoldsSettings, eval_bij: bijection.BijectionBatch, *,
                            seed: int) -> dict[str, claims.Claim]:
    """Return the recorded claims of the bijection's three reference levels, measured on ``eval_bij``.

    Each is checked against its closed form: the Bayes cross-entropy floor, the Bayes top-1 accuracy
    and the entropy error of the best context-blind predictor (uniform over V); the latter's KL and
    its closed form at Paper I's sizes (V = 20, L = 19) are glued.
    """
    V, L = settings.bijection.V, settings.bijection.L
    sizes = {"V": V, "L": L, "n_sequences": settings.n_eval, "seed": seed}
    p_true = eval_bij.posterior.gather(2, eval_bij.targets[..., None])  # (B, L, 1): posterior of the true value
    uniform = torch.full(eval_bij.posterior.shape, -np.log(V), dtype=torch.float64)  # the context-blind optimum
    blind = calibration.calibration_report(eval_bij.posterior, uniform)
    out = {}
    out["bijection.bayes_ce_floor_nats"] = claims.record(
        "bijection.bayes_ce_floor_nats", -p_true.log().mean(), unit="nats per key position",
        description="Bayes cross-entropy floor: mean −ln p(true value) under the exact posterior, "
        "held-out sequences, vs the closed form (1/L) Σ_t ln(V − t)",
        expected=bijection.bayes_ce_floor_nats(V, L), tolerance=1e-9, params=sizes)
    out["bijection.bayes_top1_accuracy"] = claims.record(
        "bijection.bayes_top1_accuracy", eval_bij.posterior.max(-1).values.mean(), unit="fraction",
        description="Bayes top-1 accuracy: mean max-probability of the exact posterior (held-out sequences) "
        "vs the closed form (1/L) Σ_t 1/(V − t)",
        expected=bijection.bayes_top1_accuracy(V, L), tolerance=1e-9, params=sizes)
    out["bijection.context_blind_entropy_mae_bits"] = claims.record(
        "bijection.context_blind_entropy_mae_bits", blind.entropy_mae_bits, unit="bits",
        description="entropy error of the best context-blind predictor (uniform over V), measured on held-out "
        "sequences, vs the closed form (1/L) Σ_t [log2 V − log2(V − t)]",
        expected=bijection.context_blind_entropy_error_bits(V, L), tolerance=1e-9, params=sizes)
    claims.glue("manifolds.blind_kl_bits", blind.kl_bits)
    claims.glue("manifolds.blind_paper_sizes_bits", bijection.context_blind_entropy_error_bits(20, 19))
    claims.glue("manifolds.V", V)
    claims.glue("manifolds.L", L)
    return out


def glue_training(settings: ManifoldsSettings, bij_model: torch.nn.Module, hmm_model: torch.nn.Module) -> dict[str, float]:
    """Return (and glue) the training steps and parameter counts of the two models, and the HMM's learning rate."""
    out = {"manifolds.bij_steps": settings.bijection.steps, "manifolds.hmm_steps": settings.hmm.steps,
           "manifolds.hmm_lr": settings.hmm.lr,
           "manifolds.bij_parameters": count_parameters(bij_model),
           "manifolds.hmm_parameters": count_parameters(hmm_model)}
    for name, value in out.items():
        claims.glue(name, value)
    return out


# --------------------------------------------------------------------------------------------
# Calibration
# --------------------------------------------------------------------------------------------


@dataclass
class BijectionCalibration:
    """The bijection model against the exact posterior: its calibration ``report``, its ``log_probs``
    ``(B, L, V)`` on the held-out batch and the recorded ``claims`` by id."""

    report: calibration.CalibrationReport
    log_probs: torch.Tensor
    claims: dict[str, claims.Claim] = field(default_factory=dict)


def record_bijection_calibration(settings: ManifoldsSettings, model: torch.nn.Module,
                                 eval_bij: bijection.BijectionBatch, *, seed: int) -> BijectionCalibration:
    """Return the :class:`BijectionCalibration` of the trained bijection model, recording its entropy error
    (target ≤ 0.01 bits) and KL, and gluing its curve error, cross-entropy, top-1 accuracy and the exact
    posterior's mean probability of its guesses."""
    log_probs = bijection_log_probs(model, eval_bij)
    report = calibration.calibration_report(eval_bij.posterior, log_probs)
    params = bijection_params(settings, seed=seed)
    out = BijectionCalibration(report=report, log_probs=log_probs)
    out.claims["bijection.entropy_mae_bits"] = claims.record(
        "bijection.entropy_mae_bits", report.entropy_mae_bits, unit="bits",
        description="bijection: per-sample entropy error |H(model) − H(Bayes)|, mean over held-out sequences "
        f"and key positions (target ≤ {BIJECTION_TARGET_BITS} bits; Paper I: 0.007 bits at V = 20 on a GPU)",
        paper_value=0.007, upper=BIJECTION_TARGET_BITS, params=params,
        explanation="the CPU-sized run stops above the target; more steps or a larger model close the gap")
    out.claims["bijection.kl_bits"] = claims.record(
        "bijection.kl_bits", report.kl_bits, unit="bits",
        description="bijection: KL(exact posterior ‖ model), mean over held-out sequences and key positions",
        params=params)
    claims.glue("manifolds.bij_target_bits", BIJECTION_TARGET_BITS)
    claims.glue("manifolds.bij_curve_mae_bits", report.curve_mae_bits)
    claims.glue("manifolds.bij_model_ce_nats", float(-log_probs.gather(2, eval_bij.targets[..., None]).mean()))
    claims.glue("manifolds.bij_model_top1", float((log_probs.argmax(-1) == eval_bij.targets).double().mean()))
    claims.glue("manifolds.bij_sampled_top1_bayes",
                float(eval_bij.posterior.gather(2, log_probs.argmax(-1, keepdim=True)).mean()))
    return out


@dataclass
class HMMCalibration:
    """The HMM model against the exact filter at every test length K: ``reports`` and ``blind_reports``
    (K → calibration report of the model / of the context-blind posterior), the KL ``curve`` through
    training, its ``late_change`` over the last 20 % of training per length, and the recorded ``claims``."""

    reports: dict[int, calibration.CalibrationReport]
    blind_reports: dict[int, calibration.CalibrationReport]
    curve: HMMCurve
    late_change: dict[int, float]
    claims: dict[str, claims.Claim] = field(default_factory=dict)


#: The HMM numbers glued at each test length, written out: length role (the training length, the middle and the
#: longest test length) → number → glue name.
HMM_LENGTH_GLUES = {
    "train": {"blind_kl": "manifolds.blind_kl_train", "blind_mae": "manifolds.blind_mae_train",
              "kl_ratio": "manifolds.hmm_kl_ratio_train", "kl": "manifolds.hmm_kl_train",
              "mae": "manifolds.hmm_mae_train", "curve": "manifolds.hmm_curve_train"},
    "mid": {"blind_kl": "manifolds.blind_kl_mid", "blind_mae": "manifolds.blind_mae_mid",
            "kl_ratio": "manifolds.hmm_kl_ratio_mid", "kl": "manifolds.hmm_kl_mid",
            "mae": "manifolds.hmm_mae_mid", "curve": "manifolds.hmm_curve_mid"},
    "long": {"blind_kl": "manifolds.blind_kl_long", "blind_mae": "manifolds.blind_mae_long",
             "kl_ratio": "manifolds.hmm_kl_ratio_long", "kl": "manifolds.hmm_kl_long",
             "mae": "manifolds.hmm_mae_long", "curve": "manifolds.hmm_curve_long"},
}


def record_hmm_calibration(settings: ManifoldsSettings, run: TrainedRun, eval_hmm: Mapping[int, hmm.HMMBatch], *,
                           seed: int) -> HMMCalibration:
    """Return the :class:`HMMCalibration` of an HMM run on the held-out batches ``eval_hmm`` (length → batch).

    Every HMM bound is stated against the context-blind level: the exact posterior given only the
    current observation and the matrices (:func:`~attention_dynamics.tasks.hmm.context_blind_posterior`).
    Records that level at the training and the longest length, the model's KL (transport if ≤
    :data:`TRANSPORT_FRACTION` × the level), its entropy error and its KL at the longest length; the
    KL ratio's late change through training (:data:`HMM_PLATEAU_RATIO`) is the reason stated when a
    verdict is not decided. Glues the per-length numbers the prose states.
    """
    model = run.model()
    reports = {K: calibration.calibration_report(b.posterior, hmm_log_probs(model, b)) for K, b in eval_hmm.items()}
    K_train, K_mid, K_long = settings.hmm.test_lengths
    params = hmm_params(settings, seed=seed)
    blind_reports = {
        K: calibration.calibration_report(
            b.posterior, hmm.context_blind_posterior(b.transition, b.emission, b.observations).log())
        for K, b in eval_hmm.items()
    }
    blind_kl, blind_kl_long = blind_reports[K_train].kl_bits, blind_reports[K_long].kl_bits
    out = {}
    out["hmm.context_blind_kl_bits"] = claims.record(
        "hmm.context_blind_kl_bits", blind_kl, unit="bits",
        description="KL(exact filter ‖ posterior given only the current observation and the matrices) at "
        "the training length K: the level a model with no memory reaches", params=params)
    out["hmm.context_blind_kl_bits_long"] = claims.record(
        "hmm.context_blind_kl_bits_long", blind_kl_long, unit="bits",
        description="the same context-blind level at 2.5× the training length", params={**params, "length": K_long})
    # The KL at every checkpoint, as a multiple of the context-blind level: has it plateaued?
    curve = hmm_kl_through_training(run, {K: eval_hmm[K] for K in (K_train, K_long)})
    late = {K: settling.late_change(curve.steps, curve.ratio(K)) for K in (K_train, K_long)}
    under_budget = (
        f"the KL ratio to the context-blind level moved by {late[K_train]:.3f} over the last 20 % "
        f"of training ({'below' if late[K_train] < HMM_PLATEAU_RATIO else 'above'} the plateau amount "
        f"{HMM_PLATEAU_RATIO}) under a learning rate decaying to zero; without a 4× longer run this is not "
        "decided at this scale"
    )
    out["hmm.kl_bits"] = claims.record(
        "hmm.kl_bits", reports[K_train].kl_bits, unit="bits",
        description="HMM filtering: KL(exact filter ‖ model) at the training length K, mean over held-out "
        "sequences and steps; transport shown if ≤ 0.6 × the context-blind level "
        "(hmm.context_blind_kl_bits; Paper I v3 reports 0.049)",
        paper_value=0.049, upper=TRANSPORT_FRACTION * blind_kl, params=params, explanation=under_budget)
    out["hmm.entropy_mae_bits"] = claims.record(
        "hmm.entropy_mae_bits", reports[K_train].entropy_mae_bits, unit="bits",
        description="HMM filtering: per-sample entropy error at the training length K (Paper I: 0.049 "
        f"bits in the v3 table, 7.5e-5 in the authors' README; the context-blind level is above {HMM_ENTROPY_BOUND_BITS})",
        paper_value=0.049, upper=HMM_ENTROPY_BOUND_BITS, params=params,
        undecided_because=None if reports[K_train].entropy_mae_bits <= HMM_ENTROPY_BOUND_BITS else (
            "Not decided at this scale: the error is above the bound, but the run's learning rate decays to zero, "
            "so the flat end of training is no plateau evidence; the long tier's deeper model, trained six times as long "
            "(hmm_long.entropy_mae_bits), goes below the bound, so the miss here is the budget; Paper I's "
            "0.049 may moreover be a curve error rather than a per-sample one (see the text)"))
    out["hmm.length_gen_kl_bits"] = claims.record(
        "hmm.length_gen_kl_bits", reports[K_long].kl_bits, unit="bits",
        description="HMM filtering: KL(exact filter ‖ model) at 2.5× the training length, trained at K; "
        "length generalisation of transport if below the context-blind level there "
        "(hmm.context_blind_kl_bits_long)",
        upper=blind_kl_long, params={**params, "length": K_long}, explanation=under_budget)
    for role, K in (("train", K_train), ("mid", K_mid), ("long", K_long)):
        names = HMM_LENGTH_GLUES[role]
        claims.glue(names["blind_kl"], blind_reports[K].kl_bits)
        claims.glue(names["blind_mae"], blind_reports[K].entropy_mae_bits)
        claims.glue(names["kl_ratio"], reports[K].kl_bits / blind_reports[K].kl_bits)
        claims.glue(names["kl"], reports[K].kl_bits)
        claims.glue(names["mae"], reports[K].entropy_mae_bits)
        claims.glue(names["curve"], reports[K].curve_mae_bits)
    claims.glue("manifolds.transport_target", TRANSPORT_FRACTION * blind_kl)
    claims.glue("manifolds.transport_fraction", TRANSPORT_FRACTION)
    claims.glue("manifolds.hmm_entropy_bound_bits", HMM_ENTROPY_BOUND_BITS)
    claims.glue("manifolds.hmm_late_change_train", late[K_train])
    claims.glue("manifolds.hmm_late_change_long", late[K_long])
    claims.glue("manifolds.plateau_ratio", HMM_PLATEAU_RATIO)
    claims.glue("manifolds.hmm_K_train", K_train)
    claims.glue("manifolds.hmm_K_mid", K_mid)
    claims.glue("manifolds.hmm_K_long", K_long)
    claims.glue("manifolds.hmm_kl_first_step", reports[K_train].kl_by_position[0])
    claims.glue("manifolds.hmm_kl_later_steps", reports[K_train].kl_by_position[1:].mean())
    return HMMCalibration(reports=reports, blind_reports=blind_reports, curve=curve, late_change=late, claims=out)


# --------------------------------------------------------------------------------------------
# Geometry
# --------------------------------------------------------------------------------------------


@dataclass
class BijectionGeometry:
    """The bijection transformer's geometry: its :class:`~attention_dynamics.diagnostics.wind_tunnel_geometry.GeometryReport` ``report``, the
    ``nulls`` (trained / untrained / scrambled values → measures), the measures through training
    (``curve``), their ``late_change`` over the last 20 % of training and the recorded ``claims``."""

    report: GeometryReport
    nulls: dict[str, dict[str, float]]
    curve: dict[str, np.ndarray]
    late_change: dict[str, float]
    claims: dict[str, claims.Claim] = field(default_factory=dict)


#: The geometry's nulls as ledger claims, by (measure, null) (written out so that a search for an id finds them). The
#: key tokens' layer-0 keys on scrambled values are not a null: a layer-0 key is computed from its own token and
#: position, and scrambling leaves the key tokens in place, so that number is the trained one by construction. It is
#: no claim of its own (one number, one claim: ``geometry.key_abs_cos_layer0_key_tokens``); the prose glues it as
#: ``geometry.key_abs_cos_layer0_key_tokens_scrambled`` to show it (:data:`SAME_BY_CONSTRUCTION`).
NULL_CLAIMS = {
    (KEYS_ALL, "untrained"): "geometry.key_abs_cos_layer0_untrained",
    (KEYS_KEY, "untrained"): "geometry.key_abs_cos_layer0_key_tokens_untrained",
    ("value PC1 share", "untrained"): "geometry.value_pc1_ratio_this_seed_untrained",
    ("ρ(value PC1, entropy)", "untrained"): "geometry.value_pc1_entropy_spearman_this_seed_untrained",
    (REDUCTION, "untrained"): "geometry.attention_entropy_reduction_untrained",
    (KEYS_ALL, "scrambled"): "geometry.key_abs_cos_layer0_scrambled",
    ("value PC1 share", "scrambled"): "geometry.value_pc1_ratio_this_seed_scrambled",
    ("ρ(value PC1, entropy)", "scrambled"): "geometry.value_pc1_entropy_spearman_this_seed_scrambled",
    (REDUCTION, "scrambled"): "geometry.attention_entropy_reduction_scrambled",
}
#: Nulls equal to the trained number by construction: glued for the prose, not recorded (see :data:`NULL_CLAIMS`).
SAME_BY_CONSTRUCTION = {(KEYS_KEY, "scrambled"): "geometry.key_abs_cos_layer0_key_tokens_scrambled"}


def plateau_note(name: str, moved: float) -> str:
    """Return the sentence saying whether geometry measure ``name`` has plateaued, having moved by ``moved``
    over the last 20 % of training (against :data:`GEOMETRY_PLATEAU`)."""
    amount = GEOMETRY_PLATEAU[name]
    if moved < amount:
        return f"the metric has plateaued (it moved {moved:.3f} < {amount} over the last 20 % of training)"
    return f"it still moved {moved:.3f} ≥ {amount} over the last 20 % of training: not decided"


def record_bijection_geometry(settings: ManifoldsSettings, run: TrainedRun, probe: bijection.BijectionBatch, *,
                              seed: int, generator: torch.Generator, spread: Mapping[str, Any] | None = None,
                              baseline_draws: int = 4000) -> BijectionGeometry:
    """Return the :class:`BijectionGeometry` of a bijection run on ``probe``, recording Paper I's geometry claims.

    Key orthogonality at layer 0 (all positions, key tokens) and the attention-entropy reduction,
    each with its plateau note; the two nulls of every seed-0 number (untrained, scrambled values);
    the isotropic baseline of |cos| by Monte Carlo (``baseline_draws`` draws with ``generator``)
    against its closed form; and the value manifold's PC1 share and ρ with the entropy as the mean
    over the stored seed-spread runs (``spread``, default :data:`~attention_dynamics.chapters.bayesian_manifolds.seed_spread.BIJECTION_SEED_SPREAD`'s) with their 95 %
    interval, since one seed cannot decide them.
    """
    geo = bijection_geometry(run.model(), probe)
    params = geometry_params(settings, seed=seed)
    # Nulls: the same model untrained (step 0) and on scrambled values; every number through training.
    nulls = bijection_geometry_nulls(run, probe, bijection_scrambled_probe(settings.bijection, seed=seed, n=settings.n_probe))
    curve = bijection_geometry_through_training(run, probe)
    late = {name: settling.late_change(curve["step"], curve[name]) for name in GEOMETRY_PLATEAU}
    out = {}
    out["geometry.key_abs_cos_layer0"] = claims.record(
        "geometry.key_abs_cos_layer0", geo.key_abs_cos[0], unit="mean |cos|",
        description="layer-0 keys: mean |cos| between the key vectors of a sequence (all positions), "
        "averaged over probe sequences and heads (Paper I: < 0.1)",
        upper=0.1, params=params,
        explanation="our layer-0 keys are not orthogonal: they group by token type (the key tokens' "
        f"keys nearly coincide), not by hypothesis; {plateau_note(KEYS_ALL, late[KEYS_ALL])}")
    out["geometry.key_abs_cos_layer0_key_tokens"] = claims.record(
        "geometry.key_abs_cos_layer0_key_tokens", geo.key_abs_cos_key_tokens[0], unit="mean |cos|",
        description="layer-0 keys at the key-token positions only (Paper I's measure): mean |cos| "
        "between them, over probe sequences and heads (Paper I: < 0.1)",
        upper=0.1, params=params,
        explanation="training makes the key tokens' layer-0 keys nearly coincide; "
        + plateau_note(KEYS_KEY, late[KEYS_KEY]))
    for condition, suffix in (("untrained", "untrained"), ("scrambled values", "scrambled")):
        for name, unit in ((KEYS_ALL, "mean |cos|"), (KEYS_KEY, "mean |cos|"), ("value PC1 share", "fraction of variance"),
                           ("ρ(value PC1, entropy)", "Spearman rho"), (REDUCTION, "fraction")):
            if (name, suffix) in SAME_BY_CONSTRUCTION:
                claims.glue(SAME_BY_CONSTRUCTION[(name, suffix)], nulls[condition][name])
                continue
            claim_id = NULL_CLAIMS[(name, suffix)]
            out[claim_id] = claims.record(
                claim_id, nulls[condition][name], unit=unit,
                description=f"{name}: the null for this seed's number — the same model "
                + ("untrained (its initialisation, step 0)" if suffix == "untrained"
                   else "trained, on probe sequences whose revealed values are scrambled"),
                params=params)
    d_head = settings.bijection.d_model // settings.bijection.n_heads
    draws = torch.randn(baseline_draws, settings.bijection.n_heads, bijection.sequence_length(settings.bijection.L), d_head,
                        generator=generator, dtype=torch.float64)
    out["geometry.key_abs_cos_random_baseline"] = claims.record(
        "geometry.key_abs_cos_random_baseline", geometry.mean_abs_cosine_per_set(draws).mean(), unit="mean |cos|",
        description="the same measurement on isotropic Gaussian vectors of the head dimension (Monte Carlo), "
        "vs the closed form Γ(d/2) / (√π Γ((d+1)/2))",
        expected=geo.key_abs_cos_baseline, tolerance=0.002, params={"d_head": d_head, "draws": baseline_draws})
    # One seed cannot decide these two: their seed-to-seed spread reaches the threshold. They are stated as
    # the mean over the seed-spread runs (chapter 6's own training, seeds 0-4, stored) with a 95 % interval.
    spread = seed_spread.BIJECTION_SEED_SPREAD.load() if spread is None else spread
    spread_params = {**params, "seed": None, "seeds": spread["seeds"], "interval": "Student-t 95% over seeds",
                     "stored_in": f"data/{seed_spread.SPREAD_FILE}"}
    pc1 = spread["intervals"]["value_pc1_ratio"]
    pc1_low, pc1_high = seed_range(spread, "geometry", "value_pc1_ratio")
    out["geometry.value_pc1_ratio"] = claims.record(
        "geometry.value_pc1_ratio", pc1["mean"], interval=(pc1["low"], pc1["high"]), unit="fraction of variance",
        description="value manifold (last layer's attention output at key positions): variance share of PC1, "
        f"mean over {pc1['n']} seeds with its 95% interval (Paper I: > 80 %)",
        lower=0.8, params=spread_params,
        explanation=f"one seed cannot decide it: over {pc1['n']} seeds PC1 carries {pc1_low:.2f} to "
        f"{pc1_high:.2f} of the variance, and the 95% interval of the mean reaches both sides of 80 %")
    rho = spread["intervals"]["value_pc1_entropy_spearman"]
    out["geometry.value_pc1_entropy_spearman"] = claims.record(
        "geometry.value_pc1_entropy_spearman", rho["mean"], interval=(rho["low"], rho["high"]), unit="Spearman rho",
        description="value manifold: Spearman correlation of PC1 with the Bayes entropy log2(V − t), mean over "
        f"{rho['n']} seeds with its 95% interval (Paper I: 'ordered by posterior entropy'; bound: ρ ≥ 0.9)",
        lower=0.9, params=spread_params,
        explanation="the seeds do not agree on whether PC1 is ordered by the posterior entropy to ρ ≥ 0.9")
    claims.glue("manifolds.value_pc1_ratio_this_seed", geo.value_ratios[0])
    claims.glue("manifolds.value_pc1_spearman_this_seed", geo.value_pc1_entropy_spearman)
    claims.glue("manifolds.value_pc1_ratio_low", pc1["low"])
    claims.glue("manifolds.value_pc1_ratio_high", pc1["high"])
    claims.glue("manifolds.value_pc1_ratio_seed_min", pc1_low)
    claims.glue("manifolds.value_pc1_ratio_seed_max", pc1_high)
    claims.glue("manifolds.value_pc1_spearman_low", rho["low"])
    claims.glue("manifolds.value_pc1_spearman_high", rho["high"])
    claims.glue("manifolds.spread_n_seeds", pc1["n"])
    out["geometry.attention_entropy_reduction"] = claims.record(
        "geometry.attention_entropy_reduction", geo.attention_entropy_reduction, unit="fraction",
        description="attention entropy (key-position queries) falls by this fraction from the first to the last "
        "layer (Paper I: 85–90 %)",
        paper_value=0.875, lower=0.85, params=params,
        explanation="here the first layer attends most sharply and the later layers almost uniformly, so attention "
        "entropy rises with depth instead of falling (the task needs no learned routing: uniform attention reaches "
        "the trained model's KL, chapter 9); " + plateau_note(REDUCTION, late[REDUCTION]))
    claims.glue("manifolds.key_cos_value_tokens", geo.key_abs_cos_value_tokens[0])
    claims.glue("manifolds.key_cos_key_tokens", geo.key_abs_cos_key_tokens[0])
    claims.glue("manifolds.value_pc2_ratio", geo.value_ratios[1])
    last = settings.bijection.n_layers - 1
    claims.glue("manifolds.attn_entropy_first", geo.attention_entropy_bits[0])
    claims.glue("manifolds.qk_attended_first", geo.qk_alignment_attended[0])
    claims.glue("manifolds.qk_visible_first", geo.qk_alignment_visible[0])
    claims.glue("manifolds.attn_entropy_last", geo.attention_entropy_bits[last])
    claims.glue("manifolds.qk_attended_last", geo.qk_alignment_attended[last])
    claims.glue("manifolds.qk_visible_last", geo.qk_alignment_visible[last])
    claims.glue("manifolds.attn_entropy_first_untrained", nulls["untrained"]["attention entropy, layer 0 (bits)"])
    claims.glue("manifolds.bij_n_layers", settings.bijection.n_layers)
    claims.glue("manifolds.attn_entropy_uniform", geo.attention_entropy_uniform_bits)
    claims.glue("manifolds.late_change_keys_all", late[KEYS_ALL])
    claims.glue("manifolds.plateau_keys_all", GEOMETRY_PLATEAU[KEYS_ALL])
    claims.glue("manifolds.late_change_keys_key", late[KEYS_KEY])
    claims.glue("manifolds.plateau_keys_key", GEOMETRY_PLATEAU[KEYS_KEY])
    claims.glue("manifolds.late_change_reduction", late[REDUCTION])
    claims.glue("manifolds.plateau_reduction", GEOMETRY_PLATEAU[REDUCTION])
    return BijectionGeometry(report=geo, nulls=nulls, curve=curve, late_change=late, claims=out)


def glue_hmm_manifold(settings: ManifoldsSettings, model: torch.nn.Module, *, seed: int) -> HMMManifold:
    """Return the :class:`~attention_dynamics.diagnostics.wind_tunnel_geometry.HMMManifold` of the HMM model on ``n_probe`` held-out sequences of the
    training length, gluing its PC1 share, ρ with the entropy (all steps, within a step) and the largest |ρ|
    over its representations."""
    K_train = settings.hmm.test_lengths[0]
    hmm_geo = hmm_manifold(model, hmm_batch_for_eval(settings.hmm, K_train, seed=seed, n=settings.n_probe))
    claims.glue("manifolds.hmm_pc1_ratio", hmm_geo.ratios[0])
    claims.glue("manifolds.hmm_pc1_spearman", hmm_geo.spearman)
    claims.glue("manifolds.hmm_pc1_within_spearman", hmm_geo.within_position_spearman)
    claims.glue("manifolds.hmm_max_abs_spearman", max(abs(r["spearman"]) for r in hmm_geo.manifold_table))
    return hmm_geo


# --------------------------------------------------------------------------------------------
# Frame and precision through training
# --------------------------------------------------------------------------------------------


def record_frame_and_calibration(settings: ManifoldsSettings, run: TrainedRun, probe: bijection.BijectionBatch, *,
                                 seed: int) -> FrameCalibrationCurves:
    """Return the :class:`~attention_dynamics.diagnostics.wind_tunnel_geometry.FrameCalibrationCurves` of a bijection run on ``probe``, recording when the
    frame settles (bound: before step 1000) and when the calibration settles (bound: after the frame), and
    gluing the numbers the prose states (the entropy error when the frame settles and at the end, the
    relative and linear settling rules, the attention's similarity at initialisation, ρ of PC1)."""
    fp = frame_and_calibration(run, probe)
    params = {
        **bijection_params(settings, seed=seed),
        "checkpoints": fp.steps.tolist(),
        "frame_threshold": fp.frame_threshold,
        "fraction": fp.fraction,
        "frame_measure": "every layer's 1 − mean TV distance of attention rows at key positions to the final "
        "model stays >= frame_threshold",
        "calibration_measure": "per-sample entropy MAE (bits) within `fraction` of its total change, log10 scale",
    }
    claims.record(
        "frame_precision.frame_settle_step", fp.frame_settle_step, unit="training steps",
        description="first step from which every layer's attention patterns stay ≥ 95 % similar to the final "
        "ones (Paper I: 'in place after a few hundred steps'; bound: < 1000)",
        upper=999, params=params,
        explanation="the attention patterns of this run keep moving for longer than Paper I's few hundred steps")
    claims.record(
        "frame_precision.calibration_settle_step", fp.calibration_settle_step, unit="training steps",
        description="first step from which the entropy error stays within 10 % of its total change (log10 scale) "
        "from its final value; the dissociation: later than the frame settles",
        lower=fp.frame_settle_step + 1, params=params,
        explanation="calibration settles no later than routing in this run: no frame–precision dissociation")
    at_frame = int(np.nonzero(fp.steps == fp.frame_settle_step)[0][0])
    similarity_at_init = fp.attention_similarity[0, 1:] if fp.attention_similarity.shape[1] > 1 \
        else fp.attention_similarity[0, :1]
    claims.glue("manifolds.n_checkpoints", len(fp.steps))
    claims.glue("manifolds.frame_settle_relative", fp.frame_settle_step_relative)
    claims.glue("manifolds.calibration_settle_linear", fp.calibration_settle_step_linear)
    claims.glue("manifolds.mae_at_frame_settle", fp.entropy_mae_bits[at_frame])
    claims.glue("manifolds.mae_final", fp.entropy_mae_bits[-1])
    claims.glue("manifolds.mae_improvement_after_frame", fp.entropy_mae_bits[at_frame] / fp.entropy_mae_bits[-1])
    claims.glue("manifolds.min_similarity_at_init", similarity_at_init.min())
    claims.glue("manifolds.rho_at_frame_settle", fp.value_pc1_spearman[at_frame])
    claims.glue("manifolds.rho_final", fp.value_pc1_spearman[-1])
    return fp


#: The one-seed order in words, chosen by the calibration claim's status (pass | fail | undecided).
ONE_SEED_ORDER_PHRASE = ("{frame_precision.calibration_settle_step"
                         "?the attention is in place before the calibration settles"
                         "|the calibration settles no later than the attention|the order is not decided}")


def glue_one_seed_order(recorded) -> str:
    """Glue (and return) ``ch6.one_seed_order_phrase``: :data:`ONE_SEED_ORDER_PHRASE` rendered from the claims at
    hand (``recorded``, e.g. ``claims.recorded_claims()``), so that the sentence follows the ledger."""
    phrase = render_caveat(ONE_SEED_ORDER_PHRASE, {c.id: c.to_json() for c in recorded})
    claims.glue("ch6.one_seed_order_phrase", phrase)
    return phrase
