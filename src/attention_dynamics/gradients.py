"""The paper's gradient laws for one softmax attention head, as closed-form functions (chapter 2).

Notation (the paper's Section 2): scores ``s_ij = q_i·k_j · scale``, attention ``alpha_ij = softmax_j(s_ij)``,
context ``g_i = Σ_j alpha_ij v_j``, upstream gradient ``u_i = ∂L/∂g_i`` and compatibility
``b_ij = u_i·v_j``. Every law works over any leading batch dimensions and is causal-mask aware:
masked entries have ``alpha_ij = 0`` and therefore receive exactly zero gradient.

Shapes: alpha ``(..., Tq, Tk)``, u ``(..., Tq, dv)``, v ``(..., Tk, dv)``, q ``(..., Tq, dk)``,
k ``(..., Tk, dk)``. Gradients are of the loss in nats (mean cross-entropy unless ``reduction="sum"``).

Sign convention used throughout the book: ``b_ij`` is the *compatibility* of value j with the
error signal of query i. A gradient-descent step moves ``s_ij`` by ``-eta · alpha_ij (b_ij - E[b])``,
so the score of a value whose compatibility is *below* the attention-weighted mean (anti-aligned
with the error) goes up. We call ``E_alpha[b] - b_ij`` the *advantage* of value j for query i.

Equation labels (``eq-grad-…``) refer to chapter 2 of the book, where each law is derived.
The module also holds the independent routes the book checks the laws against (autograd,
central finite differences, PyTorch's fused attention kernel) and the inverse-temperature sweep
behind the one-hot limit.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np
import torch
import torch.nn.functional as F

from . import stats
from .attention import (
    SingleHeadParams,
    causal_mask,
    check_reduction,
    compatibility,
    output_error,
    single_head_forward,
)

__all__ = [
    "GRADIENT_NAMES",
    "expected_compatibility",
    "advantage",
    "advantage_routing_gradient",
    "responsibility_weighted_value_gradient",
    "query_gradient",
    "key_gradient",
    "single_head_parameter_gradients",
    "closed_form_head_gradients",
    "autograd_head_gradients",
    "fused_attention_gradients",
    "loss_from_scores",
    "loss_from_qkv",
    "CENTRAL_STENCILS",
    "central_difference_gradient",
    "finite_difference_head_gradients",
    "law_discrepancies",
    "score_gradient_entropy_bound",
    "InverseTemperatureSweep",
    "inverse_temperature_sweep",
    "WeightStep",
    "weight_space_step",
    "centred_score_change",
    "score_sign_agreement",
    "value_step_cosine",
    "weight_step_check",
]

#: The gradients :func:`closed_form_head_gradients` and :func:`autograd_head_gradients` return.
GRADIENT_NAMES = ("scores", "q", "k", "v", "W_Q", "W_K", "W_V", "W_O")


# --------------------------------------------------------------------------------------------
# The laws
# --------------------------------------------------------------------------------------------


def expected_compatibility(alpha: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Return ``E_{alpha_i}[b] = Σ_j alpha_ij b_ij`` (= u_i·g_i), shape ``(..., Tq, 1)``."""
    return (alpha * _finite(b)).sum(-1, keepdim=True)


def advantage(alpha: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Return the advantage ``E_{alpha_i}[b] − b_ij`` of value j for query i, shape ``(..., Tq, Tk)``.

    Positive advantage = value j is better than the current mixture for query i's error, so
    gradient descent *raises* the score s_ij, by eta · alpha_ij · advantage (chapter 2,
    eq-grad-advantage). Zero where alpha_ij = 0 (masked or unattended).
    """
    b = _finite(b)
    return torch.where(alpha > 0, expected_compatibility(alpha, b) - b, torch.zeros_like(alpha))


def advantage_routing_gradient(alpha: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Return ∂L/∂s_ij = alpha_ij (b_ij − E_{alpha_i}[b]), shape ``(..., Tq, Tk)``.

    The paper's boxed advantage-based routing law (chapter 2,
    eq-grad-routing-law). Each row sums to zero; the gradient is gated by alpha_ij and vanishes
    as alpha_i becomes one-hot (eq-grad-entropy-bound).
    """
    weighted = alpha * _finite(b)  # (..., Tq, Tk): alpha_ij b_ij
    expected = weighted.sum(-1, keepdim=True)  # (..., Tq, 1): E_{alpha_i}[b]
    # alpha_ij b_ij − alpha_ij E_i[b], in place: one T² buffer for the whole law.
    return weighted.addcmul_(alpha, expected, value=-1.0)


def responsibility_weighted_value_gradient(alpha: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """Return ∂L/∂v_j = Σ_i alpha_ij u_i, shape ``(..., Tk, dv)``.

    The paper's boxed responsibility-weighted value update (chapter 2,
    eq-grad-value-law): value j moves against the responsibility-weighted mean error of the
    queries that attend to it.
    """
    return alpha.transpose(-1, -2) @ u  # (..., Tk, Tq) @ (..., Tq, dv)


def query_gradient(alpha: torch.Tensor, b: torch.Tensor, k: torch.Tensor, scale: float) -> torch.Tensor:
    """Return ∂L/∂q_i = scale · Σ_j alpha_ij (b_ij − b̄_i) k_j, shape ``(..., Tq, dk)``.

    The paper states the idea; chapter 2 derives it (eq-grad-query-law). ``scale`` is ``1/sqrt(d_k)``.
    """
    return _query_gradient_from_scores(advantage_routing_gradient(alpha, b), k, scale)


def key_gradient(alpha: torch.Tensor, b: torch.Tensor, q: torch.Tensor, scale: float) -> torch.Tensor:
    """Return ∂L/∂k_j = scale · Σ_i alpha_ij (b_ij − b̄_i) q_i, shape ``(..., Tk, dk)``.

    The paper states the idea; chapter 2 derives it (eq-grad-key-law). ``scale`` is ``1/sqrt(d_k)``.
    """
    return _key_gradient_from_scores(advantage_routing_gradient(alpha, b), q, scale)


def _query_gradient_from_scores(grad_scores: torch.Tensor, k: torch.Tensor, scale: float) -> torch.Tensor:
    return scale * (grad_scores @ k)  # (..., Tq, Tk) @ (..., Tk, dk)


def _key_gradient_from_scores(grad_scores: torch.Tensor, q: torch.Tensor, scale: float) -> torch.Tensor:
    return scale * (grad_scores.transpose(-1, -2) @ q)  # (..., Tk, Tq) @ (..., Tq, dk)


def closed_form_head_gradients(
    x: torch.Tensor,
    params: "SingleHeadParams",
    targets: torch.Tensor,
    *,
    causal: bool = True,
    reduction: str = "mean",
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Return ``(loss in nats, gradients)`` of the single head from the laws alone, with no autograd.

    ``gradients`` maps each name of :data:`GRADIENT_NAMES` to ∂L/∂(that tensor): the scores
    ``(..., T, T)`` by the routing law, the values ``(..., T, dv)`` by the value law, the queries
    and keys ``(..., T, dk)`` by the query and key laws, and the four weight matrices by the chain
    rule through the linear maps ``q = x W_Q``, ``k = x W_K``, ``v = x W_V``, ``logits = g W_O``
    (chapter 2, eq-grad-params). ``x`` is ``(..., T, d_in)``.
    """

    check_reduction(reduction)
    with torch.no_grad():
        fwd = single_head_forward(x, params, targets, causal=causal, reduction=reduction)
        grad_scores = advantage_routing_gradient(fwd.alpha, fwd.b)  # (..., T, T), computed once
        grad_v = responsibility_weighted_value_gradient(fwd.alpha, fwd.u)  # (..., T, dv)
        grad_q = _query_gradient_from_scores(grad_scores, fwd.k, fwd.scale)  # (..., T, dk)
        grad_k = _key_gradient_from_scores(grad_scores, fwd.q, fwd.scale)  # (..., T, dk)
        delta = output_error(fwd.p, targets, reduction=reduction)  # (..., T, C)
        x_rows = x.reshape(-1, x.shape[-1])  # (positions, d_in): batch and positions are summed
        grads = {
            "scores": grad_scores,
            "q": grad_q,
            "k": grad_k,
            "v": grad_v,
            "W_Q": x_rows.T @ grad_q.reshape(-1, grad_q.shape[-1]),  # (d_in, dk)
            "W_K": x_rows.T @ grad_k.reshape(-1, grad_k.shape[-1]),  # (d_in, dk)
            "W_V": x_rows.T @ grad_v.reshape(-1, grad_v.shape[-1]),  # (d_in, dv)
            "W_O": fwd.g.reshape(-1, fwd.g.shape[-1]).T @ delta.reshape(-1, delta.shape[-1]),  # (dv, C)
        }
    return fwd.loss, grads


def single_head_parameter_gradients(
    x: torch.Tensor,
    params: "SingleHeadParams",
    targets: torch.Tensor,
    *,
    causal: bool = True,
    reduction: str = "mean",
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Return ``(loss in nats, {"W_Q", "W_K", "W_V", "W_O"} gradients)`` of the single head from the laws alone.

    No autograd: the forward pass provides alpha, u and b; the routing law gives ∂L/∂s, the
    value law ∂L/∂v, and the chain rule through the linear maps q = x W_Q, k = x W_K,
    v = x W_V, logits = g W_O gives the parameter gradients (chapter 2, eq-grad-params).
    ``x`` is ``(..., T, d_in)``.
    """
    loss, grads = closed_form_head_gradients(x, params, targets, causal=causal, reduction=reduction)
    return loss, {name: grads[name] for name in ("W_Q", "W_K", "W_V", "W_O")}


# --------------------------------------------------------------------------------------------
# Independent routes to the same gradients (what the book checks the laws against)
# --------------------------------------------------------------------------------------------


def autograd_head_gradients(
    x: torch.Tensor,
    params: "SingleHeadParams",
    targets: torch.Tensor,
    *,
    causal: bool = True,
    reduction: str = "mean",
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Return ``(loss in nats, gradients)`` like :func:`closed_form_head_gradients`, but by autograd.

    One backward pass through :func:`attention.single_head_forward` with the intermediate
    gradients retained; it never calls the laws.
    """

    leaf = params.clone().requires_grad_(True)
    with torch.enable_grad():
        fwd = single_head_forward(x.detach(), leaf, targets, causal=causal, reduction=reduction)
        for name in ("scores", "q", "k", "v"):
            getattr(fwd, name).retain_grad()
        fwd.loss.backward()
    grads = {name: getattr(fwd, name).grad.detach() for name in ("scores", "q", "k", "v")}
    grads.update({name: t.grad.detach() for name, t in leaf.as_dict().items()})
    return fwd.loss.detach(), {name: grads[name] for name in GRADIENT_NAMES}


def fused_attention_gradients(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    upstream: torch.Tensor,
    *,
    causal: bool = True,
    scale: float | None = None,
    backend: str = "flash",
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Return ``(∂L/∂q, ∂L/∂k, ∂L/∂v)`` from the backward of ``F.scaled_dot_product_attention``.

    ``upstream`` is ∂L/∂g ``(..., Tq, dv)``; shapes as the laws'. ``backend="flash"`` forces the
    fused kernel (on the CPU, PyTorch's FlashAttention-style kernel with its own hand-written
    backward), ``"math"`` the reference composite, ``"auto"`` lets PyTorch choose.
    The fused CPU kernel wants 4-D inputs with ``d_k = d_v``; queries and keys are zero-padded
    (which leaves every score unchanged) and values zero-padded (which adds zero output columns)
    to the wider of the two, so any head fits. ``scale`` defaults to ``1/sqrt(d_k)``.
    """
    from torch.nn.attention import SDPBackend, sdpa_kernel

    backends = {"flash": [SDPBackend.FLASH_ATTENTION], "math": [SDPBackend.MATH], "auto": None}
    if backend not in backends:
        raise ValueError(f"backend must be one of {', '.join(backends)}, got {backend!r}")
    d_k, d_v, t_q = q.shape[-1], v.shape[-1], q.shape[-2]
    width = max(d_k, d_v)
    scale = 1.0 / math.sqrt(d_k) if scale is None else scale
    q_, k_, v_ = (t.detach().clone().requires_grad_(True) for t in (q, k, v))

    def _as_heads(t: torch.Tensor) -> torch.Tensor:
        # (..., T, d) -> (batch, 1 head, T, width)
        return F.pad(t, (0, width - t.shape[-1])).reshape(-1, 1, t.shape[-2], width)

    with torch.enable_grad():
        if backends[backend] is None:
            out = F.scaled_dot_product_attention(_as_heads(q_), _as_heads(k_), _as_heads(v_), is_causal=causal, scale=scale)
        else:
            with sdpa_kernel(backends[backend]):
                out = F.scaled_dot_product_attention(
                    _as_heads(q_), _as_heads(k_), _as_heads(v_), is_causal=causal, scale=scale
                )
        g = out[..., :d_v].reshape(*q.shape[:-2], t_q, d_v)  # (..., Tq, dv)
        grad_q, grad_k, grad_v = torch.autograd.grad(g, (q_, k_, v_), grad_outputs=upstream.detach())
    return grad_q, grad_k, grad_v


def loss_from_scores(
    scores: torch.Tensor, v: torch.Tensor, W_O: torch.Tensor, targets: torch.Tensor, *, reduction: str = "mean"
) -> torch.Tensor:
    """Return the cross-entropy in nats as a function of the scores ``(..., Tq, Tk)`` (−inf = masked).

    The map s → alpha → g → logits → L that the routing law differentiates; ``v`` ``(..., Tk, dv)``,
    ``W_O`` ``(dv, C)``, ``targets`` ``(..., Tq)``.
    """
    check_reduction(reduction)
    alpha = torch.softmax(scores, dim=-1)  # (..., Tq, Tk)
    logits = (alpha @ v) @ W_O  # (..., Tq, C)
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), reduction=reduction)


def loss_from_qkv(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    W_O: torch.Tensor,
    targets: torch.Tensor,
    *,
    causal: bool = True,
    reduction: str = "mean",
) -> torch.Tensor:
    """Return the cross-entropy in nats as a function of queries, keys and values (scale 1/sqrt(d_k))."""
    scores = (q @ k.transpose(-1, -2)) / math.sqrt(q.shape[-1])  # (..., Tq, Tk)
    if causal:
        allowed = torch.ones(scores.shape[-2:], dtype=torch.bool, device=scores.device).tril()
        scores = scores.masked_fill(~allowed, float("-inf"))
    return loss_from_scores(scores, v, W_O, targets, reduction=reduction)


#: Central-difference stencils: order → (offsets in units of the step, weights); the derivative is
#: Σ weight · fn(x + offset · h) / h. Order 2 is (f(x+h) − f(x−h)) / 2h; order 4 adds ±2h.
CENTRAL_STENCILS = {
    2: ((1.0, -1.0), (0.5, -0.5)),
    4: ((2.0, 1.0, -1.0, -2.0), (-1.0 / 12.0, 8.0 / 12.0, -8.0 / 12.0, 1.0 / 12.0)),
}


def central_difference_gradient(
    fn: Callable[[torch.Tensor], torch.Tensor | float],
    point: torch.Tensor,
    *,
    step: float = 1e-3,
    order: int = 4,
) -> torch.Tensor:
    """Return the gradient of the scalar ``fn`` at ``point`` by central differences, shape of ``point``.

    Each entry n is perturbed alone along e_n. ``order=4`` (the default) uses the five-point stencil
    ``(−f(x+2h) + 8f(x+h) − 8f(x−h) + f(x−2h)) / 12h``: truncation error O(h⁴), rounding error
    O(ε|fn|/h), about 1e-13·|fn| at h = 1e-3 in float64. ``order=2`` is ``(f(x+h) − f(x−h)) / 2h``
    (use h ≈ 1e-6; about 1e-10·|fn|). Entries equal to ±inf (masked scores) get zero. Use float64.
    """
    if not step > 0:
        raise ValueError(f"step must be positive, got {step!r}")
    if order not in CENTRAL_STENCILS:
        raise ValueError(f"order must be one of {sorted(CENTRAL_STENCILS)}, got {order!r}")
    offsets, weights = CENTRAL_STENCILS[order]
    base = point.detach().clone()
    flat = base.view(-1)  # shares memory with base: perturb one entry at a time
    grad = torch.zeros_like(flat)
    with torch.no_grad():
        for n in range(flat.numel()):
            original = flat[n].item()
            if not math.isfinite(original):
                continue
            total = 0.0
            for offset, weight in zip(offsets, weights):
                flat[n] = original + offset * step
                total += weight * float(fn(base))
            flat[n] = original
            grad[n] = total / step
    return grad.view_as(point)


def finite_difference_head_gradients(
    x: torch.Tensor,
    params: "SingleHeadParams",
    targets: torch.Tensor,
    *,
    causal: bool = True,
    reduction: str = "mean",
    step: float = 1e-3,
    order: int = 4,
) -> dict[str, torch.Tensor]:
    """Return the gradients of :data:`GRADIENT_NAMES` by central differences of the loss (no derivative code).

    Scores are perturbed through :func:`loss_from_scores`, queries, keys and values through
    :func:`loss_from_qkv`, weight matrices through the head's forward pass. Costs two forward passes
    per stencil point and entry (:func:`central_difference_gradient`): for small examples, in float64.
    """

    fwd = single_head_forward(x, params, targets, causal=causal, reduction=reduction)
    q, k, v, W_O = fwd.q, fwd.k, fwd.v, params.W_O
    kw = dict(reduction=reduction)
    fd = dict(step=step, order=order)
    grads = {
        "scores": central_difference_gradient(lambda s: loss_from_scores(s, v, W_O, targets, **kw), fwd.scores, **fd),
        "q": central_difference_gradient(lambda t: loss_from_qkv(t, k, v, W_O, targets, causal=causal, **kw), q, **fd),
        "k": central_difference_gradient(lambda t: loss_from_qkv(q, t, v, W_O, targets, causal=causal, **kw), k, **fd),
        "v": central_difference_gradient(lambda t: loss_from_qkv(q, k, t, W_O, targets, causal=causal, **kw), v, **fd),
    }
    weights = params.as_dict()
    for name, weight in weights.items():

        def loss_of(w: torch.Tensor, name: str = name) -> torch.Tensor:
            perturbed = SingleHeadParams(**{**weights, name: w})
            return single_head_forward(x, perturbed, targets, causal=causal, reduction=reduction).loss

        grads[name] = central_difference_gradient(loss_of, weight, **fd)
    return {name: grads[name] for name in GRADIENT_NAMES}


def law_discrepancies(
    x: torch.Tensor,
    params: "SingleHeadParams",
    targets: torch.Tensor,
    *,
    causal: bool = True,
    reduction: str = "mean",
    finite_differences: bool = False,
) -> dict[str, tuple[float, float]]:
    """Return ``{check: (max abs error, scale)}`` comparing the laws on one head with the independent routes.

    Checks: ``"autograd/<name>"`` for every name of :data:`GRADIENT_NAMES`; ``"fused/q"``,
    ``"fused/k"``, ``"fused/v"`` against the fused attention kernel; ``"row_sum"`` (the largest
    |Σ_j ∂L/∂s_ij|, expected 0); ``"masked_scores"`` (the largest |∂L/∂s_ij| over masked entries,
    expected exactly 0); with ``finite_differences``, ``"finite_difference/<name>"`` too. The scale
    is the largest entry of the reference gradient (for row sums, the largest term |alpha_ij b_ij|),
    the natural unit of the error.
    """

    fwd = single_head_forward(x, params, targets, causal=causal, reduction=reduction)
    _, laws = closed_form_head_gradients(x, params, targets, causal=causal, reduction=reduction)
    references = {f"autograd/{n}": g for n, g in autograd_head_gradients(x, params, targets, causal=causal, reduction=reduction)[1].items()}
    fused = fused_attention_gradients(fwd.q, fwd.k, fwd.v, fwd.u, causal=causal, scale=fwd.scale)
    references.update({f"fused/{n}": g for n, g in zip("qkv", fused)})
    if finite_differences:
        numeric = finite_difference_head_gradients(x, params, targets, causal=causal, reduction=reduction)
        references.update({f"finite_difference/{n}": g for n, g in numeric.items()})

    def _max(t: torch.Tensor) -> float:
        return t.abs().max().item() if t.numel() else 0.0

    out = {check: (_max(laws[check.split("/")[1]] - ref), _max(ref)) for check, ref in references.items()}
    out["row_sum"] = (_max(laws["scores"].sum(-1)), _max(fwd.alpha * fwd.b))
    masked = ~causal_mask(x.shape[-2], x.device) if causal else torch.zeros(x.shape[-2], x.shape[-2], dtype=torch.bool)
    out["masked_scores"] = (_max(laws["scores"][..., masked]), _max(laws["scores"]))
    return out


# --------------------------------------------------------------------------------------------
# The one-hot limit: why routing freezes while values keep learning
# --------------------------------------------------------------------------------------------


def score_gradient_entropy_bound(alpha: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Return the bound 2 H(alpha_i) R_i on Σ_j |∂L/∂s_ij| for each query, shape ``(..., Tq)``.

    ``R_i = max_j b_ij − min_j b_ij`` over the keys query i attends to (alpha_ij > 0) and H in
    nats (chapter 2, eq-grad-entropy-bound): the score gradient of a row vanishes at least as
    fast as its attention entropy.
    """
    b = _finite(b)
    attended = alpha > 0
    spread = torch.where(attended, b, -torch.inf).amax(-1) - torch.where(attended, b, torch.inf).amin(-1)
    spread = torch.nan_to_num(spread, nan=0.0, posinf=0.0, neginf=0.0)  # rows with no attended key
    return 2.0 * stats.entropy(alpha) * spread


@dataclass
class InverseTemperatureSweep:
    """Gradient sizes of one head as its scores are multiplied by an inverse temperature β (arrays of shape ``(n,)``).

    ``attention_entropy`` is the mean over queries of H(alpha_i) in nats; gradient norms are
    Frobenius norms of the mean-cross-entropy gradients (nats per unit); ``score_grad_l1`` is
    Σ_ij |∂L/∂s_ij| and ``score_grad_bound`` its entropy bound Σ_i 2 H(alpha_i) R_i.
    """

    inverse_temperature: np.ndarray
    attention_entropy: np.ndarray
    max_attention: np.ndarray
    loss: np.ndarray
    score_grad_norm: np.ndarray
    value_grad_norm: np.ndarray
    query_grad_norm: np.ndarray
    key_grad_norm: np.ndarray
    score_grad_l1: np.ndarray
    score_grad_bound: np.ndarray


def inverse_temperature_sweep(
    x: torch.Tensor,
    params: "SingleHeadParams",
    targets: torch.Tensor,
    inverse_temperatures: Sequence[float],
    *,
    causal: bool = True,
    reduction: str = "mean",
) -> InverseTemperatureSweep:
    """Return the gradient norms of the head with scores β·s for each β, by the closed-form laws.

    Multiplying ``W_Q`` by β multiplies every score by β: β → 0 gives uniform attention, β → ∞
    one-hot attention. The score gradient is ∂L/∂(β s), the gradient the routing law speaks of.
    """

    betas = [float(beta) for beta in inverse_temperatures]
    if not betas or any(not (beta >= 0 and math.isfinite(beta)) for beta in betas):
        raise ValueError(f"inverse temperatures must be a non-empty sequence of finite numbers ≥ 0, got {betas!r}")
    rows: dict[str, list[float]] = {f: [] for f in InverseTemperatureSweep.__dataclass_fields__}
    for beta in betas:
        tempered = params.clone()
        tempered.W_Q = tempered.W_Q * beta
        loss, grads = closed_form_head_gradients(x, tempered, targets, causal=causal, reduction=reduction)
        with torch.no_grad():
            fwd = single_head_forward(x, tempered, targets, causal=causal, reduction=reduction)
        values = {
            "inverse_temperature": beta,
            "attention_entropy": stats.entropy(fwd.alpha).mean().item(),
            "max_attention": fwd.alpha.amax(-1).mean().item(),
            "loss": loss.item(),
            "score_grad_norm": grads["scores"].norm().item(),
            "value_grad_norm": grads["v"].norm().item(),
            "query_grad_norm": grads["q"].norm().item(),
            "key_grad_norm": grads["k"].norm().item(),
            "score_grad_l1": grads["scores"].abs().sum().item(),
            "score_grad_bound": score_gradient_entropy_bound(fwd.alpha, fwd.b).sum().item(),
        }
        for name, value in values.items():
            rows[name].append(value)
    return InverseTemperatureSweep(**{name: np.asarray(vals) for name, vals in rows.items()})


def _finite(b: torch.Tensor) -> torch.Tensor:
    # Masked entries of b may be computed from arbitrary values; they are gated by alpha = 0,
    # but inf * 0 would be nan, so clear non-finite entries first. A finite sum proves every
    # entry finite in one reduction pass, with no copy (an overflowing sum just takes the slow path).
    if bool(torch.isfinite(b.sum())):
        return b
    return torch.nan_to_num(b, nan=0.0, posinf=0.0, neginf=0.0)


# --------------------------------------------------------------------------------------------
# The laws in weight space
# --------------------------------------------------------------------------------------------


@dataclass
class WeightStep:
    """What one gradient step on the weights does to the activations, beside what the laws say.

    The boxed laws treat scores and values as free: a step of size eta moves s_ij by −eta ∂L/∂s_ij
    (``score_law``) and v_j by −eta Σ_i alpha_ij u_i (``value_law``). A step moves weights. Through
    ``W_V`` the values move by the Gram-mixed ``value_step``: Δv_j = −eta Σ_k (x_j·x_k) Σ_i alpha_ik u_i
    (exact: v is linear in ``W_V``). Through ``W_Q`` and ``W_K`` the scores move by ``score_step``:
    scale (Δq kᵀ + q Δkᵀ + Δq Δkᵀ) with Δq = −eta X ∂L/∂q, Δk = −eta X ∂L/∂k and the Gram matrix
    X = x xᵀ (exact: s is bilinear in the two); ``score_step_first`` leaves out the second-order term.
    All ``(..., T, ·)``; masked entries of the score changes are 0.
    """

    score_law: torch.Tensor
    score_step_first: torch.Tensor
    score_step: torch.Tensor
    value_law: torch.Tensor
    value_step: torch.Tensor
    visible: torch.Tensor


def weight_space_step(
    x: torch.Tensor, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, alpha: torch.Tensor, u: torch.Tensor,
    *, scale: float, eta: float,
) -> WeightStep:
    """Return the :class:`WeightStep` of one gradient step of size ``eta`` on ``W_Q``, ``W_K`` and ``W_V``.

    ``x`` ``(..., T, d_in)`` are the head's inputs; ``q``, ``k``, ``v``, ``alpha`` and the error signal
    ``u`` come from its forward pass (:class:`attention_dynamics.attention.HeadForward`).
    """
    grad_scores = advantage_routing_gradient(alpha, compatibility(u, v))  # ∂L/∂s, 0 where masked
    gram = x @ x.transpose(-1, -2)  # (..., T, T): x_j · x_k
    value_law = -eta * responsibility_weighted_value_gradient(alpha, u)
    dq = -eta * gram @ _query_gradient_from_scores(grad_scores, k, scale)
    dk = -eta * gram @ _key_gradient_from_scores(grad_scores, q, scale)
    visible = alpha > 0
    first = scale * (dq @ k.transpose(-1, -2) + q @ dk.transpose(-1, -2))
    second = scale * (dq @ dk.transpose(-1, -2))
    zero = torch.zeros((), dtype=first.dtype)
    return WeightStep(
        score_law=-eta * grad_scores,
        score_step_first=torch.where(visible, first, zero),
        score_step=torch.where(visible, first + second, zero),
        value_law=value_law,
        value_step=gram @ value_law,
        visible=visible,
    )


def centred_score_change(ds: torch.Tensor, alpha: torch.Tensor) -> torch.Tensor:
    """Return ds_ij − Σ_j' alpha_ij' ds_ij' (0 where masked): the part of a score change that moves attention.

    A softmax ignores a shift of a whole row, and to first order Δalpha_ij = alpha_ij times this.
    """
    centred = ds - (alpha * ds).sum(-1, keepdim=True)
    return torch.where(alpha > 0, centred, torch.zeros((), dtype=ds.dtype))


def score_sign_agreement(step: WeightStep, alpha: torch.Tensor) -> float:
    """Return the fraction of attended pairs whose attention moves the way the free-score law says.

    Over every visible (i, j) in rows with at least two visible keys: the share where the centred
    actual score change (:func:`centred_score_change` of ``step.score_step``) has the sign of the
    centred law's change (of ``step.score_law``, i.e. of the advantage). 1 when the weights move the
    scores as if they were free; about 0.5 when the two are unrelated.
    """
    actual = centred_score_change(step.score_step, alpha)
    law = centred_score_change(step.score_law, alpha)
    rows = step.visible.sum(-1, keepdim=True) >= 2
    pairs = step.visible & rows & (law != 0)
    if not bool(pairs.any()):
        raise ValueError("no attended pair with a non-zero law change to compare")
    return float((torch.sign(actual[pairs]) == torch.sign(law[pairs])).double().mean())


def value_step_cosine(step: WeightStep) -> float:
    """Return cos(law Δv, actual Δv) over all values (flattened): 1 when ``W_V`` moves the values freely."""
    a, b = step.value_law.reshape(-1), step.value_step.reshape(-1)
    return float((a @ b) / (a.norm() * b.norm()).clamp_min(1e-300))


def weight_step_check(x: torch.Tensor, params: "SingleHeadParams", targets: torch.Tensor, *, eta: float) -> dict[str, float]:
    """Return how one real gradient step on the weights compares with the laws, on one head and input.

    ``value_err`` / ``score_err``: max |formula − actual| of :func:`weight_space_step` against one
    autograd step of size ``eta`` on ``W_Q``, ``W_K``, ``W_V`` (``W_O`` held), with ``value_scale`` /
    ``score_scale`` the largest actual change (the errors are round-off relative to these);
    ``sign_agreement`` (:func:`score_sign_agreement`) and ``value_cosine`` (:func:`value_step_cosine`):
    how far the free-activation picture is from the real step. float64 throughout.
    """

    x = x.to(torch.float64)
    weights = {n: t.detach().to(torch.float64).clone().requires_grad_(True) for n, t in params.as_dict().items()}
    fwd = single_head_forward(x, SingleHeadParams(**weights), targets)
    fwd.loss.backward()
    moved = {n: (w - eta * w.grad if n != "W_O" else w).detach() for n, w in weights.items()}
    after = single_head_forward(x, SingleHeadParams(**moved), targets)
    d = {n: t.detach() for n, t in (("q", fwd.q), ("k", fwd.k), ("v", fwd.v), ("alpha", fwd.alpha))}
    step = weight_space_step(x, d["q"], d["k"], d["v"], d["alpha"], fwd.u, scale=fwd.scale, eta=eta)
    actual_dv = (after.v - fwd.v).detach()
    visible = step.visible
    actual_ds = (after.scores - fwd.scores).detach()[visible]
    return {
        "value_err": float((step.value_step - actual_dv).abs().max()),
        "value_scale": float(actual_dv.abs().max()),
        "score_err": float((step.score_step[visible] - actual_ds).abs().max()),
        "score_scale": float(actual_ds.abs().max()),
        "sign_agreement": score_sign_agreement(step, d["alpha"]),
        "value_cosine": value_step_cosine(step),
    }
