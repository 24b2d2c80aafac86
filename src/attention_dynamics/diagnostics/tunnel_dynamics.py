"""The paper's dynamics measured in a token wind tunnel (bijection or binding) through training.

- :func:`frame_precision_readings`: frame (where the model attends) against precision (what it retrieves) at every
  checkpoint of a run, and the step at which each settles under three definitions: ``path`` (at most 10 % of the
  parameter path still to go: every layer's attention rows against every layer's values), ``function`` (attention
  entropy on a linear scale against the KL from the exact posterior on a log scale, each within 10 % of its total
  change) and ``similarity`` (every layer's attention at least 95 % similar to its final one, for good, against the
  per-sample entropy error within 10 % of its change on a log scale).
- :func:`attention_signals`: every layer's attention, values and error signals u = ∂L/∂g on a batch (autograd
  through hooks on the model's probes), from which :func:`source_advantage` reads the advantage-routing law's
  predictions: whether the gradient routes each query toward the position holding its answer
  (``b_i,src < E_α[b]``, so ∂L/∂s_i,src < 0), and whether a step on the values raises that source's advantage
  further (positive feedback), each against the other positions the query sees.
- :func:`attention_on_source`: the attention mass each head puts on the answer's source.

Entropies and KL in bits. The answer's source is given per query position (−1 where a query has none, e.g. a new
key in the binding tunnel: :func:`~attention_dynamics.tasks.binding.answer_source_positions`).
"""

from __future__ import annotations

import copy
import math
from typing import Any, Callable, Sequence

import numpy as np
import torch

from ..models.transformer import CausalTransformer, probe_activations
from ..science import calibration, geometry
from ..science.dynamics import attention_distance
from ..science.settling import path_settling_step, settle_step, stays_above_step
from .frame_order import attention_entropy_nats

__all__ = [
    "READING_DEFINITIONS",
    "frame_precision_readings",
    "attention_signals",
    "source_advantage",
    "attention_on_source",
    "transition_step",
]

READING_DEFINITIONS = ("path", "function", "similarity")


def frame_precision_readings(models: Callable[[int], CausalTransformer], steps: Sequence[int], tokens: torch.Tensor,
                             posterior: torch.Tensor, *, fraction: float = 0.1) -> dict[str, Any]:
    """Return the frame and precision curves of a run at its checkpoint ``steps`` and each definition's steps.

    ``models(step)`` returns the checkpoint's model; ``tokens`` ``(B, 2L − 1)`` and ``posterior`` ``(B, L, V)`` are the
    probe batch (predictions at the even positions). Keys: ``steps``; ``frame_path`` and ``value_path`` (the
    increments between checkpoints); ``attention_entropy_bits``, ``kl_bits``, ``entropy_mae_bits``,
    ``min_similarity`` per checkpoint; ``settle``: per definition, the ``frame`` and ``precision`` steps.
    """
    steps = np.asarray(sorted(int(s) for s in steps))
    rows = []
    for step in steps:
        logits, layers = probe_activations(models(int(step)), tokens)
        alpha = [lay["attn_weights"][:, :, 0::2].double() for lay in layers]  # (B, H, L, T) per layer
        values = torch.cat([lay["values"].double().flatten(1) for lay in layers], 1)  # (B, layers·H·T·d_head)
        entropy_bits = float(np.mean([attention_entropy_nats(a) for a in alpha])) / math.log(2.0)
        rep = calibration.calibration_report(posterior, torch.log_softmax(logits[:, 0::2].double(), -1))
        rows.append((alpha, values, entropy_bits, rep.kl_bits, rep.entropy_mae_bits))
    frame_inc = [float(np.mean([attention_distance(a, b) for a, b in zip(r0[0], r1[0])]))
                 for r0, r1 in zip(rows, rows[1:])]
    value_inc = [float(((r1[1] - r0[1]) ** 2).sum(-1).mean().sqrt()) for r0, r1 in zip(rows, rows[1:])]
    similarity = [min(geometry.attention_pattern_similarity(a, ref) for a, ref in zip(r[0], rows[-1][0])) for r in rows]
    entropy, kl, mae = (np.array([r[k] for r in rows]) for k in (2, 3, 4))
    similar = stays_above_step(steps, np.array(similarity), 0.95)
    settle = {
        "path": {"frame": path_settling_step(steps, np.array(frame_inc), fraction),
                 "precision": path_settling_step(steps, np.array(value_inc), fraction)},
        "function": {"frame": settle_step(steps, entropy, fraction=fraction),
                     "precision": settle_step(steps, kl, fraction=fraction, log=True)},
        "similarity": {"frame": int(steps[-1]) if similar is None else int(similar),
                       "precision": settle_step(steps, mae, fraction=fraction, log=True)},
    }
    return {"steps": steps.tolist(), "frame_path": frame_inc, "value_path": value_inc,
            "attention_entropy_bits": entropy.tolist(), "kl_bits": kl.tolist(), "entropy_mae_bits": mae.tolist(),
            "min_similarity": [float(x) for x in similarity],
            "settle": {d: {k: int(v) for k, v in pair.items()} for d, pair in settle.items()}}


def attention_signals(model: CausalTransformer, tokens: torch.Tensor, posterior: torch.Tensor, *,
                      value_step: tuple[int, float] | None = None) -> list[dict[str, torch.Tensor]]:
    """Return, per layer, the attention ``alpha`` ``(B, H, T, T)``, values ``v`` and error signals ``u`` = ∂L/∂g
    ``(B, H, T, d_head)`` of ``model`` on ``tokens`` (float64, explicit attention path).

    L is the summed soft-target cross-entropy (nats) of the predictions at the even positions against ``posterior``.
    ``value_step`` = (layer, eta): first move that layer's values by a free gradient step, v_j ← v_j − eta ∂L/∂v_j
    (the responsibility-weighted value law, every head), then measure everything again with the moved values.
    """
    model = copy.deepcopy(model).double().eval()
    attn = model.attention_modules()
    for a in attn:
        a.fused = False
    shift: dict[int, torch.Tensor] = {}
    if value_step is not None:
        layer, eta = value_step
        first = attention_signals(model, tokens, posterior)
        shift[layer] = -eta * (first[layer]["alpha"].transpose(-1, -2) @ first[layer]["u"])  # Σ_i α_ij u_i
    captured: list[dict[str, torch.Tensor]] = [{} for _ in attn]
    handles = []
    for l, a in enumerate(attn):
        handles.append(a.attn_weights.register_forward_hook(
            lambda _m, _i, out, l=l: captured[l].__setitem__("alpha", out)))

        def on_values(_m, _i, out, l=l):
            out = out + shift[l] if l in shift else out
            captured[l]["v"] = out
            return out

        handles.append(a.values.register_forward_hook(on_values))

        def on_context(_m, _i, out, l=l):
            out.register_hook(lambda grad, l=l: captured[l].__setitem__("u", grad))

        handles.append(a.context.register_forward_hook(on_context))
    try:
        with torch.enable_grad():
            logits = model(tokens)[:, 0::2]
            loss = calibration.soft_cross_entropy_nats(logits, posterior.to(logits.dtype)) * logits.shape[0] * logits.shape[1]
            loss.backward()
    finally:
        for h in handles:
            h.remove()
    return [{k: t.detach() for k, t in c.items()} for c in captured]


def _query_rows(signals: dict[str, torch.Tensor], sources: torch.Tensor):
    """Return (batch idx, query token position, source position, visible odd positions mask) of the queries with a
    source. Queries sit at the even positions 2t; the answer's source is ``sources[b, t]``."""
    b, t = torch.nonzero(sources >= 0, as_tuple=True)
    T = signals["alpha"].shape[-1]
    q = 2 * t
    odd = (torch.arange(T) % 2 == 1)[None, :] & (torch.arange(T)[None, :] < q[:, None])  # revealed positions seen
    return b, q, sources[b, t], odd


def source_advantage(model: CausalTransformer, tokens: torch.Tensor, posterior: torch.Tensor, sources: torch.Tensor,
                     *, layer: int, head: int, eta: float = 1e-3) -> dict[str, float]:
    """Return the advantage-routing law's predictions for one head at the queries that have an answer's source.

    ``routes_to_source``: the share of those queries for which the law's score gradient pulls attention toward the
    source (b_i,src below the attention-weighted mean b̄_i, i.e. ∂L/∂s_i,src < 0); ``routes_to_other``: the same share
    for the other revealed positions the query sees (the control); ``routing_margin``: the difference.
    ``feedback_source`` / ``feedback_other`` / ``feedback_margin``: the same for the change of the advantage
    −(b_ij − b̄_i) under a free value step of size ``eta`` (relative to the largest value-gradient entry) on that
    layer: whether the values a query's source holds become better for it (the paper's positive feedback).
    """
    base = attention_signals(model, tokens, posterior)
    grad_scale = float((base[layer]["alpha"].transpose(-1, -2) @ base[layer]["u"]).abs().max())
    step = eta / grad_scale if grad_scale > 0 else eta
    moved = attention_signals(model, tokens, posterior, value_step=(layer, step))

    def advantage(sig):  # −(b_ij − b̄_i) for the head, (B, T, T)
        alpha, u, v = sig["alpha"][:, head], sig["u"][:, head], sig["v"][:, head]
        bmat = u @ v.transpose(-1, -2)
        return -(bmat - (alpha * bmat).sum(-1, keepdim=True))

    a0, a1 = advantage(base[layer]), advantage(moved[layer])
    b, q, src, odd = _query_rows(base[layer], sources)
    rows0, rows1 = a0[b, q], a1[b, q]  # (n, T)
    n = torch.arange(len(b))
    other = odd.clone()
    other[n, src] = False
    has_other = other.any(-1)

    def shares(values):
        at_source = (values[n, src] > 0).double()
        at_other = ((values > 0) & other).double().sum(-1) / other.sum(-1).clamp(min=1)
        return float(at_source[has_other].mean()), float(at_other[has_other].mean())

    route_src, route_other = shares(rows0)
    feed_src, feed_other = shares((rows1 - rows0) / step)
    return {"routes_to_source": route_src, "routes_to_other": route_other, "routing_margin": route_src - route_other,
            "feedback_source": feed_src, "feedback_other": feed_other, "feedback_margin": feed_src - feed_other,
            "queries": int(has_other.sum())}


def attention_on_source(model: CausalTransformer, tokens: torch.Tensor, sources: torch.Tensor) -> np.ndarray:
    """Return ``(n_layers, n_heads)``: the mean attention mass each head puts on the answer's source (queries with
    one)."""
    _, layers = probe_activations(model, tokens)
    b, t = torch.nonzero(sources >= 0, as_tuple=True)
    q, src = 2 * t, sources[b, t]
    return np.array([[float(lay["attn_weights"][b, h, q, src].double().mean()) for h in range(lay["attn_weights"].shape[1])]
                     for lay in layers])


def transition_step(steps: Sequence[int], curve: Sequence[float]) -> int:
    """Return the first checkpoint at which ``curve`` has covered half of its way from its first to its last value."""
    steps, curve = np.asarray(steps), np.asarray(curve, dtype=float)
    if steps.shape != curve.shape or steps.size < 2:
        raise ValueError("need one value per step, at least two")
    halfway = curve[0] + 0.5 * (curve[-1] - curve[0])
    crossed = (curve >= halfway) if curve[-1] >= curve[0] else (curve <= halfway)
    return int(steps[int(np.argmax(crossed))])
