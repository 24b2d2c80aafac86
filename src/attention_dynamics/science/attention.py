"""One softmax attention head with every intermediate exposed (the paper's Section 2; chapter 1).

The head of the paper, with no residual and no LayerNorm: ``q = x W_Q``, ``k = x W_K``,
``v = x W_V`` (row-vector convention, so ``W_Q`` is ``(d_in, d_k)``), scores
``s = q kᵀ / sqrt(d_k)``, attention ``alpha = softmax(s)`` over keys (causal: key j ≤ query i),
context ``g = alpha v``, logits ``z = g W_O`` and cross-entropy against targets ``y``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

import torch
import torch.nn.functional as F
from jaxtyping import Bool, Float, Int
from torch import Tensor

from ..core.shapes import shape_checked

__all__ = [
    "SingleHeadParams",
    "HeadForward",
    "init_single_head",
    "causal_mask",
    "single_head_forward",
    "sdpa_context",
    "autograd_upstream_gradient",
    "output_error",
    "upstream_gradient",
    "compatibility",
    "check_reduction",
]

PARAM_NAMES = ("W_Q", "W_K", "W_V", "W_O")


# The error signal and the compatibility matrix (the paper's Section 2): defined with the head, so that its
# forward pass can return them and every gradient law builds on them.


@shape_checked
def output_error(p: Float[Tensor, "*batch T C"], targets: Int[Tensor, "*batch T"], *,
                 reduction: str = "mean") -> Float[Tensor, "*batch T C"]:
    """Return ∂L/∂logits = p − onehot(y) (÷ number of positions for a mean), shape ``(..., T, C)``.

    The softmax–cross-entropy identity (chapter 2, eq-grad-logits).
    """
    check_reduction(reduction)
    delta = p.clone()  # (..., T, C)
    delta.scatter_add_(-1, targets.unsqueeze(-1), -torch.ones_like(delta[..., :1]))
    if reduction == "mean":
        delta = delta / targets.numel()
    return delta


@shape_checked
def upstream_gradient(
    p: Float[Tensor, "*batch T C"], targets: Int[Tensor, "*batch T"], W_O: Float[Tensor, "dv C"], *,
    reduction: str = "mean",
) -> Float[Tensor, "*batch T dv"]:
    """Return u = ∂L/∂g, shape ``(..., T, dv)``: ``W_O(p_i − e_{y_i})`` (÷ number of positions for a mean).

    The paper's Section 2, the error signal (chapter 1, eq-upstream). ``p`` is ``(..., T, C)`` predicted
    probabilities, ``targets`` ``(..., T)`` class indices, ``W_O`` ``(dv, C)`` with ``logits = g @ W_O``.
    """
    return output_error(p, targets, reduction=reduction) @ W_O.transpose(-1, -2)  # (..., T, dv)


@shape_checked
def compatibility(u: Float[Tensor, "*batch Tq dv"], v: Float[Tensor, "*batch Tk dv"]) -> Float[Tensor, "*batch Tq Tk"]:
    """Return the compatibility matrix b, ``b_ij = u_i · v_j``, shape ``(..., Tq, Tk)`` (chapter 2, eq-grad-dalpha)."""
    return u @ v.transpose(-1, -2)  # (..., Tq, dv) @ (..., dv, Tk)


def check_reduction(reduction: str) -> None:
    """Raise ValueError unless ``reduction`` is ``"mean"`` or ``"sum"`` (how a loss sums over positions)."""
    if reduction not in ("mean", "sum"):
        raise ValueError(f"reduction must be 'mean' or 'sum', got {reduction!r}")




@dataclass
class SingleHeadParams:
    """The four weight matrices of the head: W_Q, W_K ``(d_in, d_k)``, W_V ``(d_in, d_v)``, W_O ``(d_v, C)``."""

    W_Q: torch.Tensor
    W_K: torch.Tensor
    W_V: torch.Tensor
    W_O: torch.Tensor

    def __post_init__(self) -> None:
        d_in, d_k = self.W_Q.shape
        if self.W_K.shape != (d_in, d_k):
            raise ValueError(f"W_K must have W_Q's shape {(d_in, d_k)}, got {tuple(self.W_K.shape)}")
        if self.W_V.ndim != 2 or self.W_V.shape[0] != d_in:
            raise ValueError(f"W_V must be ({d_in}, d_v), got {tuple(self.W_V.shape)}")
        if self.W_O.ndim != 2 or self.W_O.shape[0] != self.W_V.shape[1]:
            raise ValueError(f"W_O must be ({self.W_V.shape[1]}, C), got {tuple(self.W_O.shape)}")

    @property
    def d_k(self) -> int:
        """Return the query/key dimension d_k."""
        return self.W_Q.shape[1]

    def as_dict(self) -> dict[str, torch.Tensor]:
        """Return the matrices as ``{"W_Q": ..., "W_K": ..., "W_V": ..., "W_O": ...}``."""
        return {f.name: getattr(self, f.name) for f in fields(self)}

    def clone(self) -> "SingleHeadParams":
        """Return a detached deep copy."""
        return SingleHeadParams(**{n: t.detach().clone() for n, t in self.as_dict().items()})

    def to(self, *args, **kwargs) -> "SingleHeadParams":
        """Return a copy moved/cast like ``Tensor.to``."""
        return SingleHeadParams(**{n: t.to(*args, **kwargs) for n, t in self.as_dict().items()})

    def requires_grad_(self, flag: bool = True) -> "SingleHeadParams":
        """Set ``requires_grad`` on every matrix in place and return self."""
        for t in self.as_dict().values():
            t.requires_grad_(flag)
        return self


@dataclass
class HeadForward:
    """Every intermediate of one forward pass (shapes for inputs ``x`` of shape ``(..., T, d_in)``).

    q, k ``(..., T, d_k)``; v ``(..., T, d_v)``; scores, alpha ``(..., T, T)`` (query i, key j; masked
    scores are ``-inf`` and masked alpha exactly 0); g ``(..., T, d_v)``; logits, p ``(..., T, C)``.
    With targets: loss (scalar), u = ∂L/∂g ``(..., T, d_v)``, b = u vᵀ ``(..., T, T)``.
    """

    x: torch.Tensor
    q: torch.Tensor
    k: torch.Tensor
    v: torch.Tensor
    scores: torch.Tensor
    alpha: torch.Tensor
    g: torch.Tensor
    logits: torch.Tensor
    p: torch.Tensor
    scale: float
    targets: torch.Tensor | None = None
    loss: torch.Tensor | None = None
    u: torch.Tensor | None = None
    b: torch.Tensor | None = None


def init_single_head(
    d_in: int = 20,
    d_k: int = 10,
    d_v: int = 15,
    n_classes: int = 8,
    *,
    std: float = 0.1,
    generator: torch.Generator | None = None,
    dtype: torch.dtype = torch.float32,
) -> SingleHeadParams:
    """Return head weights drawn i.i.d. from N(0, std²), in the order W_Q, W_K, W_V, W_O.

    Defaults are the paper's sticky-chain head: 20 → 10/10/15 → 8, std 0.1 (chapter 5).
    """
    for name, val in (("d_in", d_in), ("d_k", d_k), ("d_v", d_v), ("n_classes", n_classes)):
        if not isinstance(val, int) or val < 1:
            raise ValueError(f"{name} must be a positive integer, got {val!r}")
    if not std > 0:
        raise ValueError(f"std must be positive, got {std!r}")
    shapes = {"W_Q": (d_in, d_k), "W_K": (d_in, d_k), "W_V": (d_in, d_v), "W_O": (d_v, n_classes)}
    return SingleHeadParams(
        **{n: torch.randn(s, generator=generator, dtype=dtype) * std for n, s in shapes.items()}
    )


@shape_checked
def causal_mask(T: int, device: torch.device | str | None = None) -> Bool[Tensor, "T T"]:
    """Return the ``(T, T)`` boolean mask that is True where query i may attend to key j (j ≤ i)."""
    return torch.ones(T, T, dtype=torch.bool, device=device).tril()


@shape_checked
def single_head_forward(
    x: Float[Tensor, "*batch T d_in"],
    params: SingleHeadParams,
    targets: Int[Tensor, "*batch T"] | None = None,
    *,
    causal: bool = True,
    reduction: str = "mean",
) -> HeadForward:
    """Return a :class:`HeadForward` with every intermediate of the head on inputs ``x`` ``(..., T, d_in)``.

    With ``targets`` ``(..., T)`` it also returns the cross-entropy (mean or sum over all positions),
    the upstream gradient u = ∂L/∂g and the compatibility matrix b (the paper's Section 2).
    """
    if x.ndim < 2 or x.shape[-1] != params.W_Q.shape[0]:
        raise ValueError(f"x must be (..., T, {params.W_Q.shape[0]}), got {tuple(x.shape)}")
    T = x.shape[-2]
    scale = 1.0 / math.sqrt(params.d_k)
    q = x @ params.W_Q  # (..., T, d_k)
    k = x @ params.W_K  # (..., T, d_k)
    v = x @ params.W_V  # (..., T, d_v)
    scores = (q @ k.transpose(-1, -2)) * scale  # (..., T, T)
    if causal:
        scores = scores.masked_fill(~causal_mask(T, x.device), float("-inf"))
    alpha = torch.softmax(scores, dim=-1)  # (..., T, T), rows sum to 1
    g = alpha @ v  # (..., T, d_v)
    logits = g @ params.W_O  # (..., T, C)
    p = torch.softmax(logits, dim=-1)
    out = HeadForward(x=x, q=q, k=k, v=v, scores=scores, alpha=alpha, g=g, logits=logits, p=p, scale=scale)
    if targets is not None:
        if targets.shape != x.shape[:-1]:
            raise ValueError(f"targets must have shape {tuple(x.shape[:-1])}, got {tuple(targets.shape)}")
        out.targets = targets
        out.loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), reduction=reduction)
        out.u = upstream_gradient(p.detach(), targets, params.W_O.detach(), reduction=reduction)
        out.b = compatibility(out.u, v.detach())
    return out


@shape_checked
def sdpa_context(x: Float[Tensor, "*batch T d_in"], params: SingleHeadParams, *,
                 causal: bool = True) -> Float[Tensor, "*batch T dv"]:
    """Return g from PyTorch's fused ``scaled_dot_product_attention`` (an independent forward pass)."""
    q, k, v = x @ params.W_Q, x @ params.W_K, x @ params.W_V
    return F.scaled_dot_product_attention(q, k, v, is_causal=causal)


@shape_checked
def autograd_upstream_gradient(
    x: Float[Tensor, "*batch T d_in"], params: SingleHeadParams, targets: Int[Tensor, "*batch T"], *,
    causal: bool = True, reduction: str = "mean",
) -> Float[Tensor, "*batch T dv"]:
    """Return ∂L/∂g by autograd (an independent check of the closed-form u of :func:`single_head_forward`)."""
    fwd = single_head_forward(x, params, causal=causal)
    g = fwd.g.detach().requires_grad_(True)
    logits = g @ params.W_O.detach()
    loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), reduction=reduction)
    (grad,) = torch.autograd.grad(loss, g)
    return grad
