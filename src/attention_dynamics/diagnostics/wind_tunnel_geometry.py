"""Measures of a trained wind-tunnel transformer (chapters 6 and 8): Paper I's geometry beside its nulls, the value
manifolds against the posterior entropy, and routing ("frame") against calibration through training.

- :func:`bijection_geometry` (:class:`GeometryReport`): key orthogonality, attention entropy by layer, query–key
  alignment and the value manifold of a bijection transformer on a probe batch; :func:`geometry_summary` names the
  numbers; :func:`bijection_geometry_nulls` puts them beside the untrained model and the scrambled-values control.
- :func:`hmm_manifold` (:class:`HMMManifold`): the HMM transformer's representations against the posterior entropy.
- :func:`frame_and_calibration` (:class:`FrameCalibrationCurves`): the attention pattern's distance from its final
  state and the calibration error at every checkpoint of a bijection run, with their settling steps.

Entropies in bits; attention similarity is 1 − mean total-variation distance.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np
import torch
import torch.nn.functional as F

from ..core.seeding import stream, torch_generator
from ..models.transformer import CausalTransformer, probe_activations
from ..science import calibration, geometry, settling, stats
from ..tasks import bijection, hmm
from ..training.wind_tunnels import BijectionTraining, TrainedRun, bijection_probe_batch

__all__ = [
    "FrameCalibrationCurves",
    "frame_and_calibration",
    "GeometryReport",
    "bijection_geometry",
    "token_tunnel_geometry",
    "HMMManifold",
    "hmm_manifold",
    "bijection_scrambled_probe",
    "geometry_summary",
    "bijection_geometry_nulls",
    "bijection_geometry_through_training",
]


@dataclass
class FrameCalibrationCurves:
    """Routing ("frame") vs calibration ("precision") through training, at the checkpoint steps.

    ``attention_similarity`` ``(n_ckpt, n_layers)``: 1 − mean TV distance between the checkpoint's
    attention rows at the key positions and the final model's, on the probe batch;
    ``entropy_mae_bits`` and ``kl_bits`` ``(n_ckpt,)``: calibration against the exact posterior;
    ``value_pcs`` ``(n_ckpt, n, 2)``: the value manifold (last layer's attention output at key
    positions, as in :class:`GeometryReport`) projected on the *final* model's first two PCs, and
    ``value_pc1_spearman`` ``(n_ckpt,)`` the rank correlation of that PC1 coordinate with the Bayes
    entropy.

    Settling (see :mod:`~attention_dynamics.science.geometry`): ``frame_settle_step`` is the first checkpoint
    from which *every* layer's similarity stays ≥ ``frame_threshold`` (at most 5 % of the attention
    mass routed differently from the end, by default); ``frame_settle_step_relative`` applies the
    10 %-of-total-change rule of :func:`~attention_dynamics.science.settling.settle_step` to the mean
    attention distance instead; ``calibration_settle_step`` applies that rule to log10 of the entropy
    error (which falls by orders of magnitude), ``calibration_settle_step_linear`` to the error itself.
    """

    steps: np.ndarray
    attention_similarity: np.ndarray
    entropy_mae_bits: np.ndarray
    kl_bits: np.ndarray
    value_pcs: np.ndarray
    value_entropy_bits: np.ndarray
    value_pc1_spearman: np.ndarray
    frame_settle_step: int
    frame_settle_step_relative: int
    calibration_settle_step: int
    calibration_settle_step_linear: int
    frame_threshold: float
    fraction: float


def _key_position_outputs(layers: Sequence[Mapping[str, torch.Tensor]]) -> torch.Tensor:
    """Return the last layer's attention output at the key positions, heads concatenated: ``(B·L, H·d_head)``."""
    return _heads_concatenated(layers[-1]["context"][:, :, 0::2])


def frame_and_calibration(run: TrainedRun, probe: bijection.BijectionBatch, *, frame_threshold: float = 0.95,
                          fraction: float = 0.1) -> FrameCalibrationCurves:
    """Return the :class:`FrameCalibrationCurves` of a bijection run with checkpoints, measured on ``probe``.

    Attention rows are compared at the key positions (the queries that make predictions).
    """
    if not run.checkpoints:
        raise ValueError("this run kept no checkpoints; train with checkpoints=n")
    steps = np.array(sorted(run.checkpoints))
    final_logits, final_layers = probe_activations(run.model(int(steps[-1])), probe.tokens)
    final_alpha = [lay["attn_weights"][:, :, 0::2] for lay in final_layers]  # (B, H, L, T) per layer
    final_values = _key_position_outputs(final_layers).double().numpy()
    entropy = np.broadcast_to(bijection.bayes_entropy_bits(probe.V, probe.L), (len(probe), probe.L)).reshape(-1).copy()
    mean = final_values.mean(0)
    _, _, components = np.linalg.svd(final_values - mean, full_matrices=False)
    basis = components[:2].T  # (H·d, 2): the final model's first two principal directions
    if geometry.spearman_correlation((final_values - mean) @ basis[:, 0], entropy) < 0:
        basis[:, 0] *= -1  # PC1 points toward higher posterior entropy, as in bijection_geometry
    if basis[np.argmax(np.abs(basis[:, 1])), 1] < 0:
        basis[:, 1] *= -1  # PC2: largest loading positive (sklearn's convention)
    similarity, mae, kl, pcs = [], [], [], []
    for step in steps:
        logits, layers = probe_activations(run.model(int(step)), probe.tokens)
        similarity.append([geometry.attention_pattern_similarity(lay["attn_weights"][:, :, 0::2], ref)
                           for lay, ref in zip(layers, final_alpha)])
        rep = calibration.calibration_report(probe.posterior, torch.log_softmax(logits[:, 0::2].double(), -1))
        mae.append(rep.entropy_mae_bits)
        kl.append(rep.kl_bits)
        pcs.append((_key_position_outputs(layers).double().numpy() - mean) @ basis)
    similarity = np.array(similarity)
    mae = np.array(mae)
    distance = 1.0 - similarity.mean(1)
    return FrameCalibrationCurves(
        steps=steps, attention_similarity=similarity, entropy_mae_bits=mae, kl_bits=np.array(kl),
        value_pcs=np.array(pcs), value_entropy_bits=entropy,
        value_pc1_spearman=np.array([geometry.spearman_correlation(z[:, 0], entropy) for z in pcs]),
        frame_settle_step=settling.stays_above_step(steps, similarity.min(1), frame_threshold),
        frame_settle_step_relative=settling.settle_step(steps, distance, fraction=fraction),
        calibration_settle_step=settling.settle_step(steps, mae, fraction=fraction, log=True),
        calibration_settle_step_linear=settling.settle_step(steps, mae, fraction=fraction),
        frame_threshold=frame_threshold, fraction=fraction,
    )


@dataclass
class GeometryReport:
    """Paper I's geometry measured on a trained bijection transformer (on a probe batch).

    Per layer ``(n_layers,)``:

    - ``key_abs_cos``: mean ``|cos|`` over pairs of key vectors of one sequence (every position),
      averaged over sequences and heads; ``key_abs_cos_value_tokens`` / ``key_abs_cos_key_tokens``:
      the same over the positions holding value tokens / key tokens only;
    - ``attention_entropy_bits``: mean entropy of the attention rows of the key-position queries
      that see more than one token (t ≥ 1), over heads and sequences;
    - ``qk_alignment_attended`` / ``qk_alignment_visible``: mean cos(q_i, k_j) weighted by the
      attention vs uniformly over the visible keys (all queries).

    ``key_abs_cos_baseline``: ``E|cos|`` of isotropic random vectors of the head dimension;
    ``attention_entropy_uniform_bits``: the same rows' entropy under uniform attention.
    ``key_cosines`` ``(T, T)``: layer 0, head 0 cosines between the keys of the first probe sequence.
    The **value manifold** is the last layer's attention output g_i = Σ_j α_ij v_j (heads
    concatenated) at the key positions: ``value_scores`` ``(B·L, 2)`` (PC1 oriented so that its
    Spearman ρ with the Bayes entropy is ≥ 0), ``value_ratios`` (explained variance of PC1, PC2),
    ``value_pc1_entropy_spearman``. ``manifold_table`` holds PC1 ratio and ρ for every candidate
    representation (values, attention outputs, residual stream, per layer).
    """

    key_abs_cos: np.ndarray
    key_abs_cos_value_tokens: np.ndarray
    key_abs_cos_key_tokens: np.ndarray
    key_abs_cos_baseline: float
    key_cosines: np.ndarray
    key_token_types: np.ndarray
    attention_entropy_bits: np.ndarray
    attention_entropy_uniform_bits: float
    qk_alignment_attended: np.ndarray
    qk_alignment_visible: np.ndarray
    value_scores: np.ndarray
    value_ratios: np.ndarray
    value_pc1_entropy_spearman: float
    manifold_table: list[dict[str, Any]]
    entropy_bits: np.ndarray

    @property
    def attention_entropy_reduction(self) -> float:
        """Return the fractional fall of attention entropy from the first to the last layer (negative = rise)."""
        return geometry.relative_reduction(float(self.attention_entropy_bits[0]), float(self.attention_entropy_bits[-1]))


def _heads_concatenated(t: torch.Tensor) -> torch.Tensor:
    """Return per-head tensors ``(B, H, n, d)`` as rows ``(B·n, H·d)``."""
    B, H, n, d = t.shape
    return t.permute(0, 2, 1, 3).reshape(B * n, H * d)


def _pc1(X: torch.Tensor, entropy: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    """Return (scores (n, 2), ratios (2,), ρ(PC1, entropy) ≥ 0), orienting PC1 along increasing entropy."""
    scores, ratios = geometry.pca_projection(X.double().numpy(), 2)
    rho = geometry.spearman_correlation(scores[:, 0], entropy)
    if rho < 0:
        scores[:, 0] *= -1
        rho = -rho
    return scores, ratios, rho


def bijection_geometry(model: CausalTransformer, probe: bijection.BijectionBatch, *,
                       table: bool = True) -> GeometryReport:
    """Return the :class:`GeometryReport` of a trained bijection transformer on the ``probe`` batch.

    ``table=False`` leaves ``manifold_table`` empty (it is the costly part; the curves through
    training do not need it).
    """
    entropy = np.broadcast_to(bijection.bayes_entropy_bits(probe.V, probe.L), (len(probe), probe.L)).reshape(-1).copy()
    return token_tunnel_geometry(model, probe.tokens, entropy, table=table)


def token_tunnel_geometry(model: CausalTransformer, tokens: torch.Tensor, entropy: np.ndarray, *,
                          table: bool = True, keys: bool = True) -> GeometryReport:
    """Return the :class:`GeometryReport` of a token-tunnel transformer (bijection, binding) on ``tokens``
    ``(B, 2L − 1)``: keys at the even positions (where it predicts), revealed values or pairs at the odd ones.

    ``entropy`` ``(B·L,)``: the exact posterior's entropy (bits) at every key position, against which the value
    manifold is ordered (a function of position in bijection; of the content in binding, where a repeated key's
    posterior is a point mass). ``keys=False`` leaves the key and query–key measures NaN (a model whose query and key
    weights are zero, uniform attention, has no key directions).
    """
    _, layers = probe_activations(model, tokens)
    entropy = np.asarray(entropy, dtype=float)
    key_cos, key_cos_values, key_cos_keys, attn_entropy, attended, visible = [], [], [], [], [], []
    rows: list[dict[str, Any]] = []
    for l, lay in enumerate(layers):
        alpha_q = lay["attn_weights"][:, :, 2::2]  # key positions t ≥ 1 (they see more than one token)
        attn_entropy.append(float(stats.entropy(alpha_q, unit="bits").mean()))
        if keys:
            key_vectors = lay["keys"]  # (B, H, T, d_head)
            key_cos.append(float(geometry.mean_abs_cosine_per_set(key_vectors).mean()))
            key_cos_values.append(float(geometry.mean_abs_cosine_per_set(key_vectors[:, :, 1::2]).mean()))
            key_cos_keys.append(float(geometry.mean_abs_cosine_per_set(key_vectors[:, :, 0::2]).mean()))
            a, v = geometry.query_key_alignment(lay["queries"], lay["keys"], lay["attn_weights"])
        else:
            key_cos.append(math.nan), key_cos_values.append(math.nan), key_cos_keys.append(math.nan)
            a = v = math.nan
        attended.append(a)
        visible.append(v)
        for name, label in (("values", "values v_j"), ("context", "attention output g_i"),
                            ("residual", "residual stream (in)")) if table else ():
            t = lay[name][:, 0::2] if name == "residual" else _heads_concatenated(lay[name][:, :, 0::2])
            _, ratios, rho = _pc1(t.reshape(len(entropy), -1), entropy)
            rows.append({"layer": l, "representation": label, "pc1_ratio": float(ratios[0]), "spearman": rho})
    if table:
        out = layers[-1]["residual_out"][:, 0::2].reshape(len(entropy), -1)
        _, ratios, rho = _pc1(out, entropy)
        rows.append({"layer": len(layers) - 1, "representation": "residual stream (out)",
                     "pc1_ratio": float(ratios[0]), "spearman": rho})
    v_scores, v_ratios, v_rho = _pc1(_heads_concatenated(layers[-1]["context"][:, :, 0::2]), entropy)
    first = F.normalize(layers[0]["keys"][0, 0].double(), dim=-1)  # (T, d_head): sequence 0, head 0
    T = tokens.shape[1]
    uniform = float(np.mean(np.log2(np.arange(3, T + 1, 2))))  # the t-th key position sees 2t + 1 tokens
    return GeometryReport(
        key_abs_cos=np.array(key_cos), key_abs_cos_value_tokens=np.array(key_cos_values),
        key_abs_cos_key_tokens=np.array(key_cos_keys),
        key_abs_cos_baseline=geometry.isotropic_abs_cosine_baseline(layers[0]["keys"].shape[-1]),
        key_cosines=(first @ first.T).numpy(), key_token_types=np.array(["key", "value"] * (T // 2) + ["key"]),
        attention_entropy_bits=np.array(attn_entropy), attention_entropy_uniform_bits=uniform,
        qk_alignment_attended=np.array(attended), qk_alignment_visible=np.array(visible),
        value_scores=v_scores, value_ratios=v_ratios, value_pc1_entropy_spearman=v_rho,
        manifold_table=rows, entropy_bits=entropy,
    )


@dataclass
class HMMManifold:
    """The HMM transformer's representations at every step, against the exact posterior entropy.

    ``scores`` ``(B·K, 2)``, ``ratios`` and ``spearman``: PCA of the last layer's attention output
    (heads concatenated, as for the bijection) and the Spearman ρ of its PC1 with the posterior
    entropy (PC1 oriented so that ρ ≥ 0); ``within_position_spearman``: the mean over steps t of
    the same correlation among sequences at one step — free of position, since here the entropy
    varies from sequence to sequence; ``manifold_table``: the three numbers for every candidate
    representation (values, attention outputs, residual stream, per layer); ``entropy_bits`` ``(B·K,)``.
    """

    scores: np.ndarray
    ratios: np.ndarray
    spearman: float
    within_position_spearman: float
    manifold_table: list[dict[str, Any]]
    entropy_bits: np.ndarray


def hmm_manifold(model: CausalTransformer, batch: hmm.HMMBatch) -> HMMManifold:
    """Return the :class:`HMMManifold` of a trained HMM transformer on ``batch``."""
    _, layers = probe_activations(model, batch.inputs)
    B, K = batch.observations.shape
    entropy = stats.entropy(batch.posterior, unit="bits").numpy()  # (B, K)

    def measure(rows: torch.Tensor) -> tuple[np.ndarray, np.ndarray, float, float]:
        scores, ratios, rho = _pc1(rows, entropy.reshape(-1))
        pc1 = scores[:, 0].reshape(B, K)
        within = float(np.mean([geometry.spearman_correlation(pc1[:, t], entropy[:, t]) for t in range(K)]))
        return scores, ratios, rho, within

    table: list[dict[str, Any]] = []
    candidates = [(l, label, _heads_concatenated(lay[name]) if name != "residual" else lay[name].reshape(B * K, -1))
                  for l, lay in enumerate(layers)
                  for name, label in (("values", "values v_j"), ("context", "attention output g_i"),
                                      ("residual", "residual stream (in)"))]
    candidates.append((len(layers) - 1, "residual stream (out)", layers[-1]["residual_out"].reshape(B * K, -1)))
    for l, label, rows in candidates:
        _, ratios, rho, within = measure(rows)
        table.append({"layer": l, "representation": label, "pc1_ratio": float(ratios[0]), "spearman": rho,
                      "within_step_spearman": within})
    scores, ratios, rho, within = measure(_heads_concatenated(layers[-1]["context"]))
    return HMMManifold(scores=scores, ratios=ratios, spearman=rho, within_position_spearman=within,
                       manifold_table=table, entropy_bits=entropy.reshape(-1))


def bijection_scrambled_probe(settings: BijectionTraining, *, seed: int, n: int) -> bijection.BijectionBatch:
    """Return the probe batch with every revealed value replaced by an independent uniform value token.

    The control for the bijection geometry: positions and token types (key, value) are those of the
    probe, but the values are no longer a bijection's (repeats occur), so nothing is left to
    eliminate consistently. ``posterior`` is recomputed from the scrambled tokens
    (:func:`~attention_dynamics.tasks.bijection.exact_posterior`: uniform over the values not shown);
    ``keys`` / ``targets`` / ``bijection`` are the original sequences' and do not match the tokens —
    the batch is for geometry only.
    """
    probe = bijection_probe_batch(settings, seed=seed, n=n)
    g = torch_generator(stream(seed, "probe", 1))
    tokens = probe.tokens.clone()
    tokens[:, 1::2] = probe.V + torch.randint(probe.V, tokens[:, 1::2].shape, generator=g)
    return bijection.BijectionBatch(tokens=tokens, keys=probe.keys, targets=probe.targets, bijection=probe.bijection,
                                    posterior=bijection.exact_posterior(tokens, probe.V), V=probe.V, L=probe.L)


def geometry_summary(report: GeometryReport) -> dict[str, float]:
    """Return the geometry numbers the chapter states, by name, from one :class:`GeometryReport`.

    Key ``|cos|`` at layer 0 over every position and over the key-token positions only (Paper I's
    measure), the value manifold's PC1 share and its Spearman ρ with the entropy log2(V − t), the
    attention entropy of every layer (bits) and its relative fall from the first to the last layer.
    """
    out = {"key |cos|, layer 0, all positions": float(report.key_abs_cos[0]),
           "key |cos|, layer 0, key tokens": float(report.key_abs_cos_key_tokens[0]),
           "value PC1 share": float(report.value_ratios[0]),
           "ρ(value PC1, entropy)": float(report.value_pc1_entropy_spearman)}
    for l, h in enumerate(report.attention_entropy_bits):
        out[f"attention entropy, layer {l} (bits)"] = float(h)
    out["attention entropy reduction, first → last layer"] = float(report.attention_entropy_reduction)
    return out


def bijection_geometry_nulls(run: TrainedRun, probe: bijection.BijectionBatch,
                             scrambled: bijection.BijectionBatch) -> dict[str, dict[str, float]]:
    """Return :func:`geometry_summary` of the trained model, of its untrained self and of the control.

    ``"trained"``: the final weights on ``probe``; ``"untrained"``: the same model at step 0 (its
    initialisation: same size, same seed, no training; the run must have kept checkpoint 0);
    ``"scrambled values"``: the trained model on ``scrambled`` (:func:`bijection_scrambled_probe`).
    The untrained column is what size, initialisation and the inputs' statistics give with no
    learning; the scrambled column is what the trained weights give when positions and token types
    are kept but the sequence no longer holds a bijection to eliminate.
    """
    if 0 not in run.checkpoints:
        raise ValueError("the run kept no checkpoint at step 0; train with checkpoints=n")
    return {"trained": geometry_summary(bijection_geometry(run.model(), probe, table=False)),
            "untrained": geometry_summary(bijection_geometry(run.model(0), probe, table=False)),
            "scrambled values": geometry_summary(bijection_geometry(run.model(), scrambled, table=False))}


def bijection_geometry_through_training(run: TrainedRun, probe: bijection.BijectionBatch) -> dict[str, np.ndarray]:
    """Return :func:`geometry_summary` at every checkpoint of a bijection run: name → ``(n_ckpt,)``, plus ``"step"``."""
    if not run.checkpoints:
        raise ValueError("this run kept no checkpoints; train with checkpoints=n")
    steps = sorted(run.checkpoints)
    rows = [geometry_summary(bijection_geometry(run.model(int(t)), probe, table=False)) for t in steps]
    return {"step": np.array(steps), **{k: np.array([r[k] for r in rows]) for k in rows[0]}}
