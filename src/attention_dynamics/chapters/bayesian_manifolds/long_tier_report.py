"""Chapter 6's long-tier section: the committed long runs loaded, measured here, and their claims.

The runs are :mod:`~attention_dynamics.chapters.bayesian_manifolds.long_tier` (computed once, weights committed). Everything this module reports is measured in
the chapter on the loaded weights: calibration on freshly drawn held-out sequences, geometry beside its nulls (the
untrained model of the same seed and size, and the trained model on scrambled sequences), and the training curves
stored by the run, which say whether it had stopped moving.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import pandas as pd
import torch

from ...diagnostics.wind_tunnel_geometry import (
    HMMManifold,
    bijection_geometry_nulls,
    bijection_scrambled_probe,
    hmm_manifold,
)
from ...ledger import claims
from ...models.transformer import count_parameters
from ...science import calibration, settling
from ...tasks import bijection, hmm
from ...training.wind_tunnels import (
    bijection_batch_for_eval,
    bijection_log_probs,
    bijection_probe_batch,
    hmm_batch_for_eval,
    hmm_log_probs,
)
from . import long_tier, mechanism_report, memory_report
from .long_tier import LongRun

# As at the book scale: the bijection's target, the HMM's entropy-error bound, the KL ratio's plateau amount,
# and (for transport carried to untrained lengths) chapter 6's transport fraction.
from .settings import (
    BIJECTION_TARGET_BITS,
    GEOMETRY_PLATEAU,
    HMM_ENTROPY_BOUND_BITS,
    HMM_PLATEAU_RATIO as RATIO_PLATEAU,
    TRANSPORT_FRACTION as LENGTH_GEN_FRACTION,
)

__all__ = [
    "LONG_TRANSPORT_FRACTION",
    "MAE_PLATEAU_BITS",
    "GEOMETRY_PLATEAU_OTHER",
    "load_runs",
    "RUN_LABELS",
    "RUN_GLUES",
    "HMM_LENGTH_GLUES",
    "GEOMETRY_GLUES",
    "HMM_MANIFOLD_GLUES",
    "runs_table",
    "BijectionV20",
    "record_bijection_v20",
    "HMMLong",
    "record_hmm_long",
    "LongGeometry",
    "record_long_geometry",
    "record_long_mechanism",
    "curve",
]

#: The long tier's HMM bound: KL at the training length at most this multiple of the context-blind level.
LONG_TRANSPORT_FRACTION = 0.3
#: An entropy-error curve (bits) has plateaued when it moved less than this over the last 20 % of training.
MAE_PLATEAU_BITS = 0.002
#: The claims of transport carried to the lengths the long HMM model was not trained on.
LENGTH_GEN_CLAIMS = {30: "hmm_long.length_gen_kl_bits_30", 50: "hmm_long.length_gen_kl_bits_50"}
#: The plateau amount of the geometry numbers chapter 6 gives none (the value manifold's PC1 share and ρ).
GEOMETRY_PLATEAU_OTHER = 0.05


#: How the runs table names each stored run.
RUN_LABELS = {"bijection_v20": "bijection at V = 20", "hmm_long": "HMM, deeper and longer"}
#: The runs' glue names, written out: run → number → name.
RUN_GLUES = {
    "bijection_v20": {"steps": "long_tier.bijection_v20_steps", "cpu_minutes": "long_tier.bijection_v20_cpu_minutes",
                      "parameters": "long_tier.bijection_v20_parameters"},
    "hmm_long": {"steps": "long_tier.hmm_long_steps", "cpu_minutes": "long_tier.hmm_long_cpu_minutes",
                 "parameters": "long_tier.hmm_long_parameters"},
}
#: The long HMM model's glue names at the book's test lengths, written out: length → number → name (its KL, its KL
#: over the context-blind level, that level, and how much the ratio moved over the last 20 % of the run). Other
#: lengths (the fast scale's) are named the same way.
HMM_LENGTH_GLUES = {
    20: {"kl": "long_tier.hmm_kl_20", "ratio": "long_tier.hmm_ratio_20", "blind_kl": "long_tier.hmm_blind_kl_20",
         "late": "long_tier.hmm_late_change_20"},
    30: {"kl": "long_tier.hmm_kl_30", "ratio": "long_tier.hmm_ratio_30", "blind_kl": "long_tier.hmm_blind_kl_30",
         "late": "long_tier.hmm_late_change_30"},
    50: {"kl": "long_tier.hmm_kl_50", "ratio": "long_tier.hmm_ratio_50", "blind_kl": "long_tier.hmm_blind_kl_50",
         "late": "long_tier.hmm_late_change_50"},
}
#: The V = 20 geometry's glue names, written out: measure → (trained, untrained, scrambled values, late change along
#: the run; the last only for the four claimed measures).
GEOMETRY_GLUES = {
    "key |cos|, layer 0, all positions": (
        "long_tier.geo_key_cos_layer_0_all_positions", "long_tier.geo_key_cos_layer_0_all_positions_untrained",
        "long_tier.geo_key_cos_layer_0_all_positions_scrambled", None),
    "key |cos|, layer 0, key tokens": (
        "long_tier.geo_key_cos_layer_0_key_tokens", "long_tier.geo_key_cos_layer_0_key_tokens_untrained",
        "long_tier.geo_key_cos_layer_0_key_tokens_scrambled", "long_tier.geo_key_cos_layer_0_key_tokens_late"),
    "value PC1 share": (
        "long_tier.geo_value_pc1_share", "long_tier.geo_value_pc1_share_untrained",
        "long_tier.geo_value_pc1_share_scrambled", "long_tier.geo_value_pc1_share_late"),
    "ρ(value PC1, entropy)": (
        "long_tier.geo_rho_value_pc1_entropy", "long_tier.geo_rho_value_pc1_entropy_untrained",
        "long_tier.geo_rho_value_pc1_entropy_scrambled", "long_tier.geo_rho_value_pc1_entropy_late"),
    "attention entropy, layer 0 (bits)": (
        "long_tier.geo_attention_entropy_layer_0_bits", "long_tier.geo_attention_entropy_layer_0_bits_untrained",
        "long_tier.geo_attention_entropy_layer_0_bits_scrambled", None),
    "attention entropy, layer 1 (bits)": (
        "long_tier.geo_attention_entropy_layer_1_bits", "long_tier.geo_attention_entropy_layer_1_bits_untrained",
        "long_tier.geo_attention_entropy_layer_1_bits_scrambled", None),
    "attention entropy, layer 2 (bits)": (
        "long_tier.geo_attention_entropy_layer_2_bits", "long_tier.geo_attention_entropy_layer_2_bits_untrained",
        "long_tier.geo_attention_entropy_layer_2_bits_scrambled", None),
    "attention entropy, layer 3 (bits)": (
        "long_tier.geo_attention_entropy_layer_3_bits", "long_tier.geo_attention_entropy_layer_3_bits_untrained",
        "long_tier.geo_attention_entropy_layer_3_bits_scrambled", None),
    "attention entropy reduction, first → last layer": (
        "long_tier.geo_attention_entropy_reduction_first_last_layer",
        "long_tier.geo_attention_entropy_reduction_first_last_layer_untrained",
        "long_tier.geo_attention_entropy_reduction_first_last_layer_scrambled",
        "long_tier.geo_attention_entropy_reduction_first_last_layer_late"),
}
#: The long HMM model's manifold glue names, written out: condition → number → name.
HMM_MANIFOLD_GLUES = {
    "trained": {"pc1": "long_tier.hmm_pc1_ratio_trained", "rho": "long_tier.hmm_pc1_spearman_trained",
                "within": "long_tier.hmm_pc1_within_trained"},
    "untrained": {"pc1": "long_tier.hmm_pc1_ratio_untrained", "rho": "long_tier.hmm_pc1_spearman_untrained",
                  "within": "long_tier.hmm_pc1_within_untrained"},
}


def load_runs(folder: Path | None = None) -> dict[str, LongRun]:
    """Return the committed long-tier runs by tunnel
    (:data:`~attention_dynamics.chapters.bayesian_manifolds.long_tier.LONG_TIER`'s ``load``)."""
    return {tunnel: long_tier.LONG_TIER.load(tunnel, folder=folder) for tunnel in long_tier.TUNNELS}


def runs_table(runs: Mapping[str, LongRun]) -> pd.DataFrame:
    """Return (and glue) what each loaded run is: task sizes, model, steps, parameters, CPU time, code commit."""
    rows = {}
    for tunnel, lr in runs.items():
        s, r = lr.settings, lr.results
        bij, t = lr.run.task == "bijection", s.tunnel
        cpu_min = r["curve"][-1]["cpu_seconds"] / 60
        rows[tunnel] = {
            "task": f"bijection V = {t.V}, L = {t.L}" if bij else f"HMM S = O = {t.n_states}, K = {t.length}",
            "model (d, layers, heads)": f"{t.d_model}, {t.n_layers}, {t.n_heads}",
            "parameters": count_parameters(lr.run.model()),
            "steps": r["steps"], "learning rate": t.lr, "batch": t.batch,
            "CPU minutes (one core)": round(cpu_min, 1),
            "code commit": (r["provenance"]["code_commit"] or "unknown")[:10],
            "weights file": f"data/{long_tier.DATA_FOLDER}/{lr.weights_file.name}",
        }
        names = RUN_GLUES[tunnel]
        claims.glue(names["steps"], r["steps"])
        claims.glue(names["cpu_minutes"], cpu_min)
        claims.glue(names["parameters"], rows[tunnel]["parameters"])
    return pd.DataFrame(rows)


def curve(lr: LongRun, name: str) -> tuple[np.ndarray, np.ndarray]:
    """Return ``(steps, values)`` of measurement ``name`` stored along a long run (:func:`~attention_dynamics.chapters.bayesian_manifolds.long_tier.measure`)."""
    rows = lr.results["curve"]
    if name not in rows[0]:
        raise KeyError(f"{lr.tunnel} stored no measurement {name!r}; it has {', '.join(k for k in rows[0] if k != 'step')}")
    return np.array([r["step"] for r in rows]), np.array([r[name] for r in rows])


def _params(lr: LongRun, **extra: Any) -> dict[str, Any]:
    s, bij = lr.settings, lr.run.task == "bijection"
    t = s.tunnel
    out = {"tunnel": lr.tunnel, "seed": lr.results["seed"], "steps": lr.results["steps"], "d_model": t.d_model,
           "n_layers": t.n_layers, "n_heads": t.n_heads, "lr": t.lr, "batch": t.batch,
           "n_sequences": s.n_eval, "stored_in": f"data/{long_tier.DATA_FOLDER}/{lr.weights_file.name}"}
    out.update({"V": t.V, "L": t.L, "target": t.target} if bij else
               {"states": t.n_states, "symbols": t.n_symbols, "length": t.length})
    return {**out, **extra}


def _plateau(moved: float, amount: float, what: str) -> str:
    return (f"{what} moved {moved:.4f} over the last 20 % of the long run "
            f"({'below' if moved < amount else 'above'} the plateau amount {amount})")


@dataclass
class BijectionV20:
    """The V = 20 bijection model against the exact posterior: ``report``, the uniform predictor's ``blind``
    report, the entropy error's ``late_change`` along the run, and the recorded ``claims``."""

    report: calibration.CalibrationReport
    blind: calibration.CalibrationReport
    late_change: float
    claims: dict[str, claims.Claim] = field(default_factory=dict)


def record_bijection_v20(lr: LongRun) -> BijectionV20:
    """Return the :class:`BijectionV20` of the loaded run on a fresh held-out batch, recording its claims.

    The context-blind level (the uniform predictor, checked against its closed form) is the reference:
    the target 0.01 bits is a small fraction of it.
    """
    s, seed = lr.settings, lr.results["seed"]
    V, L = s.tunnel.V, s.tunnel.L
    batch = bijection_batch_for_eval(s.tunnel, seed=seed, n=s.n_eval)
    rep = calibration.calibration_report(batch.posterior, bijection_log_probs(lr.run.model(), batch))
    blind = calibration.calibration_report(batch.posterior, torch.full(batch.posterior.shape, -np.log(V), dtype=torch.float64))
    steps, mae = curve(lr, "entropy_mae_bits")
    late = settling.late_change(steps, mae)
    params = _params(lr)
    out = BijectionV20(report=rep, blind=blind, late_change=late)
    out.claims["bijection_v20.context_blind_entropy_mae_bits"] = claims.record(
        "bijection_v20.context_blind_entropy_mae_bits", blind.entropy_mae_bits, unit="bits",
        description="bijection at V = 20, L = 19: entropy error of the best context-blind predictor (uniform over V) "
        "on held-out sequences, vs the closed form (1/L) Σ_t [log2 V − log2(V − t)]",
        expected=bijection.context_blind_entropy_error_bits(V, L), tolerance=1e-9, params=params)
    out.claims["bijection_v20.entropy_mae_bits"] = claims.record(
        "bijection_v20.entropy_mae_bits", rep.entropy_mae_bits, unit="bits",
        description="bijection at Paper I's size V = 20, L = 19 (long tier, loaded weights): per-sample entropy error "
        f"|H(model) − H(Bayes)|, held-out sequences and key positions (target ≤ {BIJECTION_TARGET_BITS} bits; "
        "Paper I: 0.007)",
        paper_value=0.007, upper=BIJECTION_TARGET_BITS, params=params,
        undecided_because=None if rep.entropy_mae_bits <= BIJECTION_TARGET_BITS or late < MAE_PLATEAU_BITS else
        "not decided at this scale: " + _plateau(late, MAE_PLATEAU_BITS, "the entropy error"),
        explanation="the long run stops above the target; " + _plateau(late, MAE_PLATEAU_BITS, "the entropy error"))
    out.claims["bijection_v20.kl_bits"] = claims.record(
        "bijection_v20.kl_bits", rep.kl_bits, unit="bits",
        description="bijection at V = 20, L = 19 (long tier): KL(exact posterior ‖ model), held-out sequences and "
        "key positions", params=params)
    claims.glue("long_tier.bij_blind_kl_bits", blind.kl_bits)
    claims.glue("long_tier.bij_mae_fraction_of_blind", rep.entropy_mae_bits / blind.entropy_mae_bits)
    claims.glue("long_tier.bij_curve_mae_bits", rep.curve_mae_bits)
    claims.glue("long_tier.bij_late_change", late)
    claims.glue("long_tier.bij_mae_plateau", MAE_PLATEAU_BITS)
    claims.glue("long_tier.bij_mae_at_3000", float(np.interp(3000, steps, mae)))
    return out


@dataclass
class HMMLong:
    """The long HMM model against the exact filter at every test length: ``reports`` and ``blind_reports``
    (K → report), the KL ratio's ``late_change`` along the run per length, and the recorded ``claims``."""

    reports: dict[int, calibration.CalibrationReport]
    blind_reports: dict[int, calibration.CalibrationReport]
    late_change: dict[int, float]
    claims: dict[str, claims.Claim] = field(default_factory=dict)

    def ratio(self, K: int) -> float:
        """Return the model's KL at length ``K`` over the context-blind level there."""
        return self.reports[K].kl_bits / self.blind_reports[K].kl_bits


def record_hmm_long(lr: LongRun) -> HMMLong:
    """Return the :class:`HMMLong` of the loaded run on fresh held-out batches at every test length, recording
    its KL against :data:`LONG_TRANSPORT_FRACTION` × the context-blind level, its entropy error against Paper I's
    0.049, and its KL at the two untrained lengths against :data:`LENGTH_GEN_FRACTION` × the level there."""
    s, seed = lr.settings, lr.results["seed"]
    model = lr.run.model()
    reports, blind = {}, {}
    for K in s.tunnel.test_lengths:
        b = hmm_batch_for_eval(s.tunnel, K, seed=seed, n=s.n_eval)
        reports[K] = calibration.calibration_report(b.posterior, hmm_log_probs(model, b))
        blind[K] = calibration.calibration_report(
            b.posterior, hmm.context_blind_posterior(b.transition, b.emission, b.observations).log())
    late = {K: settling.late_change(*curve(lr, f"kl_ratio_K{K}")) for K in s.tunnel.test_lengths}
    out = HMMLong(reports=reports, blind_reports=blind, late_change=late)
    K_train, *K_longer = s.tunnel.test_lengths

    def undecided(K: int, bound: float) -> str | None:
        if reports[K].kl_bits <= bound or late[K] < RATIO_PLATEAU:
            return None
        return "not decided at this scale: " + _plateau(late[K], RATIO_PLATEAU, "the KL ratio")

    note = {K: _plateau(late[K], RATIO_PLATEAU, "the KL ratio") + " under a learning rate decaying to zero"
            for K in s.tunnel.test_lengths}
    bound = LONG_TRANSPORT_FRACTION * blind[K_train].kl_bits
    out.claims["hmm_long.kl_bits"] = claims.record(
        "hmm_long.kl_bits", reports[K_train].kl_bits, unit="bits",
        description=f"HMM filtering, long tier (loaded weights): KL(exact filter ‖ model) at the training length K; "
        f"bound {LONG_TRANSPORT_FRACTION} × the context-blind level (hmm.context_blind_kl_bits; Paper I v3: 0.049)",
        paper_value=0.049, upper=bound, params=_params(lr), undecided_because=undecided(K_train, bound),
        explanation=note[K_train])
    mae = reports[K_train].entropy_mae_bits
    mae_late = settling.late_change(*curve(lr, "entropy_mae_bits"))
    mae_note = _plateau(mae_late, MAE_PLATEAU_BITS, "the entropy error")
    out.claims["hmm_long.entropy_mae_bits"] = claims.record(
        "hmm_long.entropy_mae_bits", mae, unit="bits",
        description="HMM filtering, long tier: per-sample entropy error at the training length K, against Paper I's "
        f"0.049 (bound {HMM_ENTROPY_BOUND_BITS}; the context-blind predictor's is above it)",
        paper_value=0.049, upper=HMM_ENTROPY_BOUND_BITS, params=_params(lr),
        undecided_because=None if mae <= HMM_ENTROPY_BOUND_BITS or mae_late < MAE_PLATEAU_BITS else
        "not decided at this scale: " + mae_note, explanation=mae_note + " under a learning rate decaying to zero")
    claims.glue("long_tier.hmm_mae_late_change", mae_late)
    for K in K_longer:
        bound_K = LENGTH_GEN_FRACTION * blind[K].kl_bits
        claim_id = LENGTH_GEN_CLAIMS.get(K, f"hmm_long.length_gen_kl_bits_{K}")  # other lengths: the fast scale
        out.claims[claim_id] = claims.record(
            claim_id, reports[K].kl_bits, unit="bits",
            description=f"HMM filtering, long tier: KL(exact filter ‖ model) at K = {K}, trained at K = {K_train}; "
            f"transport carried to that length if ≤ {LENGTH_GEN_FRACTION} × the context-blind level there",
            upper=bound_K, params=_params(lr, length=K), undecided_because=undecided(K, bound_K), explanation=note[K])
    for K in s.tunnel.test_lengths:
        names = HMM_LENGTH_GLUES.get(K) or {what: f"long_tier.hmm_{stem}_{K}" for what, stem in (
            ("kl", "kl"), ("ratio", "ratio"), ("blind_kl", "blind_kl"), ("late", "late_change"))}
        claims.glue(names["kl"], reports[K].kl_bits)
        claims.glue(names["ratio"], out.ratio(K))
        claims.glue(names["blind_kl"], blind[K].kl_bits)
        claims.glue(names["late"], late[K])
    claims.glue("long_tier.hmm_curve_mae_bits", reports[K_train].curve_mae_bits)
    claims.glue("long_tier.hmm_transport_fraction", LONG_TRANSPORT_FRACTION)
    claims.glue("long_tier.hmm_length_gen_fraction", LENGTH_GEN_FRACTION)
    claims.glue("long_tier.ratio_plateau", RATIO_PLATEAU)
    return out


@dataclass
class LongGeometry:
    """The long tier's geometry: ``bijection`` (condition → geometry numbers: trained, untrained, scrambled values),
    ``hmm`` (condition → HMM manifold numbers: trained, untrained), their tables, each claimed number's
    ``late_change`` along the run, and the recorded ``claims``."""

    bijection: dict[str, dict[str, float]]
    hmm: dict[str, HMMManifold]
    late_change: dict[str, float]
    claims: dict[str, claims.Claim] = field(default_factory=dict)

    def bijection_table(self) -> pd.DataFrame:
        """Return the bijection's geometry numbers, one column per condition."""
        return pd.DataFrame(self.bijection).round(3)

    def hmm_table(self) -> pd.DataFrame:
        """Return the HMM manifold's PC1 share and ρ with the entropy (all steps, within a step), per condition."""
        return pd.DataFrame({c: {"PC1 share": m.ratios[0], "ρ(PC1, entropy)": m.spearman,
                                 "ρ within a step": m.within_position_spearman} for c, m in self.hmm.items()}).round(3)


def record_long_geometry(bij: LongRun, hmm_run: LongRun) -> LongGeometry:
    """Return the :class:`LongGeometry` of the two loaded models, recording Paper I's geometry claims at V = 20.

    Each bijection number is measured on the trained model, on the untrained model of the same seed and size
    (checkpoint 0, rebuilt from the seed) and on scrambled sequences (chapter 6's controls); the HMM manifold on
    the trained and the untrained model. The claims state the trained value; the table puts the nulls beside it.
    """
    s, seed = bij.settings, bij.results["seed"]
    nulls = bijection_geometry_nulls(bij.run, bijection_probe_batch(s.tunnel, seed=seed, n=s.n_probe),
                                     bijection_scrambled_probe(s.tunnel, seed=seed, n=s.n_probe))
    hs = hmm_run.settings
    batch = hmm_batch_for_eval(hs.tunnel, hs.tunnel.length, seed=hmm_run.results["seed"], n=hs.n_probe)
    manifolds = {"trained": hmm_manifold(hmm_run.run.model(), batch), "untrained": hmm_manifold(hmm_run.run.model(0), batch)}
    late: dict[str, float] = {}
    out = LongGeometry(bijection=nulls, hmm=manifolds, late_change=late)
    trained, params = nulls["trained"], _params(bij, n_sequences=s.n_probe)
    beside = {name: f"untrained {nulls['untrained'][name]:.3f}, scrambled values {nulls['scrambled values'][name]:.3f}"
              for name in trained}
    for claim, name, unit, bound in (
        ("geometry_v20.key_abs_cos_layer0_key_tokens", "key |cos|, layer 0, key tokens", "mean |cos|",
         {"upper": 0.1}),
        ("geometry_v20.attention_entropy_reduction", "attention entropy reduction, first → last layer", "fraction",
         {"lower": 0.85}),
        ("geometry_v20.value_pc1_ratio", "value PC1 share", "fraction of variance", {"lower": 0.8}),
        ("geometry_v20.value_pc1_entropy_spearman", "ρ(value PC1, entropy)", "Spearman rho", {"lower": 0.9}),
    ):
        moved = settling.late_change(*curve(bij, name))
        amount = GEOMETRY_PLATEAU.get(name, GEOMETRY_PLATEAU_OTHER)
        met = trained[name] <= bound["upper"] if "upper" in bound else trained[name] >= bound["lower"]
        along = _plateau(moved, amount, "along the run (64 probe sequences), it")
        late[name] = moved
        claims.glue(_geometry_glue(name, 3), moved)
        out.claims[claim] = claims.record(
            claim, trained[name], unit=unit,
            description=f"{name} of the long tier's V = 20 bijection model (loaded weights, one seed; Paper I's bound); "
            f"nulls: {beside[name]}", params=params, **bound,
            undecided_because=None if met or moved < amount else "not decided at this scale: " + along,
            explanation=f"{along} under a learning rate decaying to zero; one seed of one model size; nulls: {beside[name]}")
    for name, value in trained.items():
        claims.glue(_geometry_glue(name, 0), value)
        claims.glue(_geometry_glue(name, 1), nulls["untrained"][name])
        claims.glue(_geometry_glue(name, 2), nulls["scrambled values"][name])
    for condition, m in manifolds.items():
        claims.glue(HMM_MANIFOLD_GLUES[condition]["pc1"], m.ratios[0])
        claims.glue(HMM_MANIFOLD_GLUES[condition]["rho"], m.spearman)
        claims.glue(HMM_MANIFOLD_GLUES[condition]["within"], m.within_position_spearman)
    return out


def _geometry_glue(name: str, which: int) -> str:
    """Return the glue name of geometry measure ``name`` (``which``: 0 trained, 1 untrained, 2 scrambled values,
    3 late change): :data:`GEOMETRY_GLUES`'s, or, for a measure it does not list (a model of another depth), the
    same pattern."""
    listed = GEOMETRY_GLUES.get(name)
    if listed is not None and listed[which] is not None:
        return listed[which]
    return f"long_tier.geo_{_slug(name)}" + ("", "_untrained", "_scrambled", "_late")[which]


def _slug(name: str) -> str:
    keep = "".join(c if c.isalnum() else "_" for c in name.lower().replace("ρ", "rho").replace("|cos|", "cos"))
    return "_".join(part for part in keep.split("_") if part)


def record_long_mechanism(runs: Mapping[str, LongRun], hmm_long: HMMLong, *,
                          chapter_batches: Mapping[int, hmm.HMMBatch] | None = None,
                          chapter_ladders: Mapping[int, Any] | None = None) -> dict[str, Any]:
    """Record the long tier's claims beside the chapter's mechanism controls: the long HMM model's memory on the ladder
    of its held-out sequences (:func:`~.memory_report.record_chapter6_memory`, the chapter's own ladders where the
    sequences are the same), Paper I's key metric and the layer ablation on the V = 20 bijection model, and what the
    long HMM model's leading directions encode. Returns ``{"ladders", "memory", "keys", "ablation", "regression"}``."""
    bij20, h_long = runs["bijection_v20"], runs["hmm_long"]
    ladders = memory_report.long_tier_ladders(h_long, chapter_batches=chapter_batches, chapter_ladders=chapter_ladders)
    memory = memory_report.record_chapter6_memory(
        ladders, {K: r.kl_bits for K, r in hmm_long.reports.items()}, model="long_tier",
        params={"source": f"data/{long_tier.DATA_FOLDER}/{h_long.weights_file.name}"},
        ratio_late_change=hmm_long.late_change)
    v20_params = {"stored_in": f"data/{long_tier.DATA_FOLDER}/{bij20.weights_file.name}"}
    v20_text = "the long tier's V = 20 bijection model"
    t = bij20.settings.tunnel
    keys = mechanism_report.record_paper_key_metric("geometry_v20", bij20.run.model(), bij20.run.model(0), t.V,
                                                    params=v20_params, model_text=v20_text)
    ablation = mechanism_report.record_layer_ablation(
        "geometry_v20", bij20.run.model(), bijection_batch_for_eval(t, seed=0, n=bij20.settings.n_eval),
        params=v20_params, model_text=v20_text)
    ht = h_long.settings.tunnel
    regression = mechanism_report.record_manifold_regression(
        "hmm_long", h_long.run.model(), hmm_batch_for_eval(ht, ht.length, seed=0, n=h_long.settings.n_probe),
        params={"stored_in": f"data/{long_tier.DATA_FOLDER}/{h_long.weights_file.name}"},
        model_text="the long tier's HMM model")
    return {"ladders": ladders, "memory": memory, "keys": keys, "ablation": ablation, "regression": regression}
