"""Controls for the sentences that read a mechanism into a transformer's numbers, and Paper I's own geometry metric.

- **Key orthogonality, Paper I's way** (:func:`paper_key_orthogonality`): the authors' ``cmd_orthogonality``
  takes one layer's W_K applied to the *token embeddings* of the hypothesis tokens (the value tokens; no
  positions, no LayerNorm) and reports the *signed* mean off-diagonal cosine
  (:func:`~attention_dynamics.science.geometry.key_cosine_of_embeddings`); the same keys' mean ``|cos|`` beside it.
- **Which layer does the work** (:func:`layer_ablation`): each layer's attention output replaced by its mean over
  the evaluation sequences at each position (the content removed, the position kept), one layer at a time, and the
  calibration cost measured against the exact posterior.
- **What an HMM model's leading directions encode** (:func:`manifold_regression`): the leading principal components
  of the last layer's attention output regressed (cross-validated linear regression) on the sequence's matrices, on
  the exact posterior, and on the current observation and the step, with the matrices shuffled across sequences as
  the null.

KL in bits; R² cross-validated by sequence.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from ..models.transformer import CausalTransformer, probe_activations
from ..science import calibration, geometry
from ..tasks import bijection, hmm

__all__ = ["paper_key_orthogonality", "layer_ablation", "MANIFOLD_EXPLANATIONS", "manifold_regression"]


def paper_key_orthogonality(model: CausalTransformer, V: int, *, layer: int = 0,
                            token_ids: range | None = None) -> dict[str, float]:
    """Return Paper I's key orthogonality of a token-tunnel transformer at ``layer``, over its hypothesis tokens.

    The hypothesis tokens are the V value tokens of bijection (ids V .. 2V − 1, the default) or any ``token_ids``
    (binding's pair tokens, V .. V + V² − 1). ``signed``: the authors' statistic, the signed mean off-diagonal cosine
    of W_K·e over those tokens' embeddings, mean over heads; ``abs``: the mean ``|cos|`` of the same keys;
    ``signed_by_head`` / ``abs_by_head``: per head.
    """
    attn = model.attention_modules()[layer]
    D = attn.qkv.weight.shape[1]
    key_weight = attn.qkv.weight[D: 2 * D]  # (H·d_head, D): the key rows of the fused projection
    ids = range(V, 2 * V) if token_ids is None else token_ids
    values = model.embed.weight[ids.start: ids.stop]  # (n, D): the hypothesis tokens' embeddings
    signed = geometry.key_cosine_of_embeddings(values, key_weight, attn.n_heads, signed=True)
    absolute = geometry.key_cosine_of_embeddings(values, key_weight, attn.n_heads, signed=False)
    return {"signed": float(signed.mean()), "abs": float(absolute.mean()),
            "signed_by_head": signed.tolist(), "abs_by_head": absolute.tolist()}


@torch.no_grad()
def layer_ablation(model: CausalTransformer, batch: bijection.BijectionBatch) -> dict[str, Any]:
    """Return the calibration of a bijection transformer with each layer's attention mean-ablated, one at a time.

    Layer l's attention output (what it adds to the residual stream) is replaced by its mean over ``batch`` at each
    position: the layer keeps its position-dependent average and loses everything that depends on the sequence's
    content. ``intact`` and ``ablated`` (one per layer): ``{"kl_bits", "entropy_mae_bits"}`` against the exact
    posterior at the key positions; ``blind``: the context-blind predictor's (uniform over V).
    """
    model.eval()
    attn = model.attention_modules()
    means: list[torch.Tensor] = [None] * len(attn)  # type: ignore[list-item]

    def keep(l):
        def hook(_m, _i, out):
            means[l] = out.mean(0, keepdim=True)  # (1, T, D)
        return hook

    handles = [a.register_forward_hook(keep(l)) for l, a in enumerate(attn)]
    try:
        intact_logits = model(batch.tokens)
    finally:
        for h in handles:
            h.remove()

    def report(logits: torch.Tensor) -> dict[str, float]:
        rep = calibration.calibration_report(batch.posterior, torch.log_softmax(logits[:, 0::2].double(), -1))
        return {"kl_bits": rep.kl_bits, "entropy_mae_bits": rep.entropy_mae_bits}

    ablated = []
    for l, a in enumerate(attn):
        handle = a.register_forward_hook(lambda _m, _i, out, l=l: means[l].expand_as(out))
        try:
            ablated.append(report(model(batch.tokens)))
        finally:
            handle.remove()
    uniform = torch.full(batch.posterior.shape, -np.log(batch.V), dtype=torch.float64)
    blind = calibration.calibration_report(batch.posterior, uniform)
    return {"intact": report(intact_logits), "ablated": ablated,
            "blind": {"kl_bits": blind.kl_bits, "entropy_mae_bits": blind.entropy_mae_bits}}



#: What :func:`manifold_regression` regresses the leading directions on, in words.
MANIFOLD_EXPLANATIONS = {"matrices": "the sequence's own matrices vec(T), vec(E)",
                         "posterior": "the exact filtering posterior",
                         "observation_step": "the current observation and the step (one-hot)",
                         "matrices_shuffled": "another sequence's matrices (the null)"}


def manifold_regression(model: CausalTransformer, batch: hmm.HMMBatch, *, n_components: int = 2, folds: int = 5,
                        seed: int = 0) -> dict[str, float]:
    """Return the cross-validated R² of the HMM model's leading principal components on each candidate explanation.

    The representation is chapter 6's (:func:`~attention_dynamics.diagnostics.wind_tunnel_geometry.hmm_manifold`): the last
    layer's attention output, heads concatenated, at every step ``(B·K, H·d_head)``. Its first ``n_components`` PC
    scores are regressed (ordinary least squares, ``folds``-fold cross-validation with sequences kept together, R²
    weighted by each PC's variance) on ``matrices`` (vec(T), vec(E) of the sequence's HMM), ``posterior`` (the exact
    filter), ``observation_step`` (one-hot o_t and one-hot t) and ``matrices_shuffled`` (the matrices of another
    sequence: the null). Also returns ``pc_variance_share`` of those components.
    """
    from sklearn.linear_model import LinearRegression
    from sklearn.metrics import r2_score
    from sklearn.model_selection import GroupKFold, cross_val_predict

    _, layers = probe_activations(model, batch.inputs)
    B, K = batch.observations.shape
    g = layers[-1]["context"]  # (B, H, K, d_head)
    X = g.permute(0, 2, 1, 3).reshape(B * K, -1).double().numpy()
    scores, ratios = geometry.pca_projection(X, n_components)
    S = batch.transition.shape[-1]
    matrices = torch.cat([batch.transition.reshape(B, -1), batch.emission.reshape(B, -1)], 1)  # (B, S² + S·O)
    order = torch.randperm(B, generator=torch.Generator().manual_seed(seed))
    features = {
        "matrices": matrices[:, None].expand(B, K, matrices.shape[1]).reshape(B * K, -1),
        "posterior": batch.posterior.reshape(B * K, S),
        "observation_step": torch.cat([
            torch.nn.functional.one_hot(batch.observations, batch.emission.shape[-1]).double(),
            torch.nn.functional.one_hot(torch.arange(K), K).double()[None].expand(B, K, K)], -1).reshape(B * K, -1),
        "matrices_shuffled": matrices[order][:, None].expand(B, K, matrices.shape[1]).reshape(B * K, -1),
    }
    groups = np.repeat(np.arange(B), K)  # a sequence's steps stay in one fold
    out = {"pc_variance_share": float(np.sum(ratios))}
    for name, F in features.items():
        predicted = cross_val_predict(LinearRegression(), F.numpy(), scores, groups=groups, cv=GroupKFold(folds))
        out[name] = float(r2_score(scores, predicted, multioutput="variance_weighted"))
    return out


