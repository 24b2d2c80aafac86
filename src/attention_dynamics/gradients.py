"""The paper's gradient laws for one softmax attention head, as closed-form functions (PAPER.md §3).

Notation (PAPER.md §2): scores ``s_ij = q_i·k_j · scale``, attention ``alpha_ij = softmax_j(s_ij)``,
context ``g_i = Σ_j alpha_ij v_j``, upstream gradient ``u_i = ∂L/∂g_i`` and compatibility
``b_ij = u_i·v_j``. Every function works over any leading batch dimensions and is causal-mask
aware: masked entries have ``alpha_ij = 0`` and therefore receive exactly zero gradient.

Shapes: alpha ``(..., Tq, Tk)``, u ``(..., Tq, dv)``, v ``(..., Tk, dv)``, q ``(..., Tq, dk)``,
k ``(..., Tk, dk)``.

Sign convention used throughout the book: ``b_ij`` is the *compatibility* of value j with the
error signal of query i. A gradient-descent step moves ``s_ij`` by ``-eta · alpha_ij (b_ij - E[b])``,
so a value whose compatibility is *below* the attention-weighted mean (anti-aligned with the
error) gains attention. We call ``E_alpha[b] - b_ij`` the *advantage* of value j for query i.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:  # pragma: no cover
    from .attention import SingleHeadParams

__all__ = [
    "output_error",
    "upstream_gradient",
    "compatibility",
    "expected_compatibility",
    "advantage",
    "advantage_routing_gradient",
    "responsibility_weighted_value_gradient",
    "query_gradient",
    "key_gradient",
    "single_head_parameter_gradients",
]


def output_error(p: torch.Tensor, targets: torch.Tensor, *, reduction: str = "mean") -> torch.Tensor:
    """Return ∂L/∂logits = p − onehot(y) (÷ number of positions for a mean), shape ``(..., T, C)``."""
    _check_reduction(reduction)
    delta = p.clone()  # (..., T, C)
    delta.scatter_add_(-1, targets.unsqueeze(-1), -torch.ones_like(delta[..., :1]))
    if reduction == "mean":
        delta = delta / targets.numel()
    return delta


def upstream_gradient(
    p: torch.Tensor, targets: torch.Tensor, W_O: torch.Tensor, *, reduction: str = "mean"
) -> torch.Tensor:
    """Return u = ∂L/∂g, shape ``(..., T, dv)``: ``W_Oᵀ(p_i − e_{y_i})`` (÷ number of positions for a mean).

    PAPER.md §2, the error signal. ``p`` is ``(..., T, C)`` predicted probabilities, ``targets``
    ``(..., T)`` class indices, ``W_O`` ``(dv, C)`` with ``logits = g @ W_O``.
    """
    return output_error(p, targets, reduction=reduction) @ W_O.transpose(-1, -2)  # (..., T, dv)


def compatibility(u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Return the compatibility matrix b, ``b_ij = u_i · v_j``, shape ``(..., Tq, Tk)`` (PAPER.md §2)."""
    return u @ v.transpose(-1, -2)


def expected_compatibility(alpha: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Return ``E_{alpha_i}[b] = Σ_j alpha_ij b_ij`` (= u_i·g_i), shape ``(..., Tq, 1)``."""
    return (alpha * _finite(b)).sum(-1, keepdim=True)


def advantage(alpha: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Return the advantage ``E_{alpha_i}[b] − b_ij`` of value j for query i, shape ``(..., Tq, Tk)``.

    Positive advantage = value j is better than the current mixture for query i's error, so
    gradient descent *raises* alpha_ij. Zero where alpha_ij = 0 (masked or unattended).
    """
    return torch.where(alpha > 0, expected_compatibility(alpha, b) - _finite(b), torch.zeros_like(alpha))


def advantage_routing_gradient(alpha: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Return ∂L/∂s_ij = alpha_ij (b_ij − E_{alpha_i}[b]), shape ``(..., Tq, Tk)``.

    The paper's boxed advantage-based routing law (PAPER.md §3, result 1). Each row sums to
    zero; the gradient is gated by alpha_ij and vanishes as alpha_i becomes one-hot.
    """
    b = _finite(b)
    return alpha * (b - expected_compatibility(alpha, b))


def responsibility_weighted_value_gradient(alpha: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """Return ∂L/∂v_j = Σ_i alpha_ij u_i, shape ``(..., Tk, dv)``.

    The paper's boxed responsibility-weighted value update (PAPER.md §3, result 2): value j
    moves against the responsibility-weighted mean error of the queries that attend to it.
    """
    return alpha.transpose(-1, -2) @ u


def query_gradient(alpha: torch.Tensor, b: torch.Tensor, k: torch.Tensor, scale: float) -> torch.Tensor:
    """Return ∂L/∂q_i = scale · Σ_j alpha_ij (b_ij − b̄_i) k_j, shape ``(..., Tq, dk)`` (PAPER.md §3, result 3)."""
    return scale * (advantage_routing_gradient(alpha, b) @ k)


def key_gradient(alpha: torch.Tensor, b: torch.Tensor, q: torch.Tensor, scale: float) -> torch.Tensor:
    """Return ∂L/∂k_j = scale · Σ_i alpha_ij (b_ij − b̄_i) q_i, shape ``(..., Tk, dk)`` (PAPER.md §3, result 3)."""
    return scale * (advantage_routing_gradient(alpha, b).transpose(-1, -2) @ q)


def single_head_parameter_gradients(
    x: torch.Tensor,
    params: "SingleHeadParams",
    targets: torch.Tensor,
    *,
    causal: bool = True,
    reduction: str = "mean",
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Return ``(loss, {"W_Q", "W_K", "W_V", "W_O"} gradients)`` of the single head from the laws alone.

    No autograd: the forward pass provides alpha, u and b; the routing law gives ∂L/∂s, the
    value law ∂L/∂v, and the chain rule through the linear maps q = x W_Q, k = x W_K,
    v = x W_V, logits = g W_O gives the parameter gradients. ``x`` is ``(..., T, d_in)``.
    """
    from .attention import single_head_forward  # late import: attention uses these laws too

    with torch.no_grad():
        fwd = single_head_forward(x, params, targets, causal=causal, reduction=reduction)
        d_in = x.shape[-1]
        xf = x.reshape(-1, x.shape[-2], d_in)  # (B, T, d_in)

        def _outer(a: torch.Tensor, grad: torch.Tensor) -> torch.Tensor:
            # Σ over batch and positions of aᵀ grad: (B,T,m),(B,T,n) -> (m,n)
            return torch.einsum("btm,btn->mn", a.reshape(xf.shape[0], -1, a.shape[-1]),
                                grad.reshape(xf.shape[0], -1, grad.shape[-1]))

        grad_W_O = _outer(fwd.g, output_error(fwd.p, targets, reduction=reduction))
        grad_v = responsibility_weighted_value_gradient(fwd.alpha, fwd.u)
        grad_q = query_gradient(fwd.alpha, fwd.b, fwd.k, fwd.scale)
        grad_k = key_gradient(fwd.alpha, fwd.b, fwd.q, fwd.scale)
        grads = {
            "W_Q": _outer(x, grad_q),
            "W_K": _outer(x, grad_k),
            "W_V": _outer(x, grad_v),
            "W_O": grad_W_O,
        }
    return fwd.loss, grads


def _finite(b: torch.Tensor) -> torch.Tensor:
    # Masked entries of b may be computed from arbitrary values; they are gated by alpha = 0,
    # but inf * 0 would be nan, so clear non-finite entries first.
    return torch.nan_to_num(b, nan=0.0, posinf=0.0, neginf=0.0)


def _check_reduction(reduction: str) -> None:
    if reduction not in ("mean", "sum"):
        raise ValueError(f"reduction must be 'mean' or 'sum', got {reduction!r}")
