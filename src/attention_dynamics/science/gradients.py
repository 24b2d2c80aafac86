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
from jaxtyping import Float, Int
from torch import Tensor

from ..core.shapes import shape_checked
from . import stats
from .attention import SingleHeadParams, causal_mask, check_reduction, compatibility, output_error, single_head_forward

__all__ = [
    "GRADIENT_NAMES",
    "compatibility",
    "expected_compatibility",
    "advantage",
    "advantage_routing_gradient",
    "responsibility_weighted_value_gradient",
    "query_gradient",
    "key_gradient",
    "query_gradient_from_scores",
    "key_gradient_from_scores",
    "closed_form_head_gradients",
    "single_head_parameter_gradients",
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
]

#: The gradients :func:`closed_form_head_gradients` and :func:`autograd_head_gradients` return.
GRADIENT_NAMES = ("scores", "q", "k", "v", "W_Q", "W_K", "W_V", "W_O")


# --------------------------------------------------------------------------------------------
# The laws
# --------------------------------------------------------------------------------------------


@shape_checked
def expected_compatibility(alpha: Float[Tensor, "*batch Tq Tk"], b: Float[Tensor, "*batch Tq Tk"]) -> Float[Tensor, "*batch Tq 1"]:
    """Return ``E_{alpha_i}[b] = Σ_j alpha_ij b_ij`` (= u_i·g_i), shape ``(..., Tq, 1)``."""
    return (alpha * _finite(b)).sum(-1, keepdim=True)


@shape_checked
def advantage(alpha: Float[Tensor, "*batch Tq Tk"], b: Float[Tensor, "*batch Tq Tk"]) -> Float[Tensor, "*batch Tq Tk"]:
    """Return the advantage ``E_{alpha_i}[b] − b_ij`` of value j for query i, shape ``(..., Tq, Tk)``.

    Positive advantage = value j is better than the current mixture for query i's error, so
    gradient descent *raises* the score s_ij, by eta · alpha_ij · advantage (chapter 2,
    eq-grad-advantage). Zero where alpha_ij = 0 (masked or unattended).
    """
    b = _finite(b)
    return torch.where(alpha > 0, expected_compatibility(alpha, b) - b, torch.zeros_like(alpha))


@shape_checked
def advantage_routing_gradient(alpha: Float[Tensor, "*batch Tq Tk"], b: Float[Tensor, "*batch Tq Tk"]) -> Float[Tensor, "*batch Tq Tk"]:
    """Return ∂L/∂s_ij = alpha_ij (b_ij − E_{alpha_i}[b]), shape ``(..., Tq, Tk)``.

    The paper's boxed advantage-based routing law (chapter 2,
    eq-grad-routing-law). Each row sums to zero; the gradient is gated by alpha_ij and vanishes
    as alpha_i becomes one-hot (eq-grad-entropy-bound).
    """
    weighted = alpha * _finite(b)  # (..., Tq, Tk): alpha_ij b_ij
    expected = weighted.sum(-1, keepdim=True)  # (..., Tq, 1): E_{alpha_i}[b]
    # alpha_ij b_ij − alpha_ij E_i[b], in place: one T² buffer for the whole law.
    return weighted.addcmul_(alpha, expected, value=-1.0)


@shape_checked
def responsibility_weighted_value_gradient(alpha: Float[Tensor, "*batch Tq Tk"],
                                           u: Float[Tensor, "*batch Tq dv"]) -> Float[Tensor, "*batch Tk dv"]:
    """Return ∂L/∂v_j = Σ_i alpha_ij u_i, shape ``(..., Tk, dv)``.

    The paper's boxed responsibility-weighted value update (chapter 2,
    eq-grad-value-law): value j moves against the responsibility-weighted mean error of the
    queries that attend to it.
    """
    return alpha.transpose(-1, -2) @ u  # (..., Tk, Tq) @ (..., Tq, dv)


@shape_checked
def query_gradient(alpha: Float[Tensor, "*batch Tq Tk"], b: Float[Tensor, "*batch Tq Tk"], k: Float[Tensor, "*batch Tk dk"],
                   scale: float) -> Float[Tensor, "*batch Tq dk"]:
    """Return ∂L/∂q_i = scale · Σ_j alpha_ij (b_ij − b̄_i) k_j, shape ``(..., Tq, dk)``.

    The paper states the idea; chapter 2 derives it (eq-grad-query-law). ``scale`` is ``1/sqrt(d_k)``.
    """
    return query_gradient_from_scores(advantage_routing_gradient(alpha, b), k, scale)


@shape_checked
def key_gradient(alpha: Float[Tensor, "*batch Tq Tk"], b: Float[Tensor, "*batch Tq Tk"], q: Float[Tensor, "*batch Tq dk"],
                 scale: float) -> Float[Tensor, "*batch Tk dk"]:
    """Return ∂L/∂k_j = scale · Σ_i alpha_ij (b_ij − b̄_i) q_i, shape ``(..., Tk, dk)``.

    The paper states the idea; chapter 2 derives it (eq-grad-key-law). ``scale`` is ``1/sqrt(d_k)``.
    """
    return key_gradient_from_scores(advantage_routing_gradient(alpha, b), q, scale)


@shape_checked
def query_gradient_from_scores(grad_scores: Float[Tensor, "*batch Tq Tk"], k: Float[Tensor, "*batch Tk dk"],
                               scale: float) -> Float[Tensor, "*batch Tq dk"]:
    """Return ∂L/∂q ``(..., Tq, dk)`` = scale · (∂L/∂S) k from the score gradient (the query law's last step)."""
    return scale * (grad_scores @ k)  # (..., Tq, Tk) @ (..., Tk, dk)


@shape_checked
def key_gradient_from_scores(grad_scores: Float[Tensor, "*batch Tq Tk"], q: Float[Tensor, "*batch Tq dk"],
                             scale: float) -> Float[Tensor, "*batch Tk dk"]:
    """Return ∂L/∂k ``(..., Tk, dk)`` = scale · (∂L/∂S)ᵀ q from the score gradient (the key law's last step)."""
    return scale * (grad_scores.transpose(-1, -2) @ q)  # (..., Tk, Tq) @ (..., Tq, dk)


@shape_checked
def closed_form_head_gradients(
    x: Float[Tensor, "*batch T d_in"],
    params: "SingleHeadParams",
    targets: Int[Tensor, "*batch T"],
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
        grad_q = query_gradient_from_scores(grad_scores, fwd.k, fwd.scale)  # (..., T, dk)
        grad_k = key_gradient_from_scores(grad_scores, fwd.q, fwd.scale)  # (..., T, dk)
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


