"""The paper's laws in weight space (chapter 2): what one step on ``W_Q``, ``W_K``, ``W_V`` does.

The laws are stated for free scores and free value vectors. A step on the weights moves every score and every value
at once, through the inputs' Gram matrix ``X Xᵀ``: :func:`weight_space_step` gives the exact first-order changes
(tested against one autograd step), and :func:`weight_step_check` measures how far the free-activation picture is
from them — the share of attended pairs whose attention moves with the sign of their advantage, and the cosine
between the value law's Δv and the actual one.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .attention import SingleHeadParams, compatibility, single_head_forward
from .gradients import (
    advantage_routing_gradient,
    key_gradient_from_scores,
    query_gradient_from_scores,
    responsibility_weighted_value_gradient,
)

__all__ = [
    "WeightStep",
    "weight_space_step",
    "centred_score_change",
    "score_sign_agreement",
    "value_step_cosine",
    "weight_step_check",
]


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
    ``u`` come from its forward pass (:class:`attention_dynamics.science.attention.HeadForward`).
    """
    grad_scores = advantage_routing_gradient(alpha, compatibility(u, v))  # ∂L/∂s, 0 where masked
    gram = x @ x.transpose(-1, -2)  # (..., T, T): x_j · x_k
    value_law = -eta * responsibility_weighted_value_gradient(alpha, u)
    dq = -eta * gram @ query_gradient_from_scores(grad_scores, k, scale)
    dk = -eta * gram @ key_gradient_from_scores(grad_scores, q, scale)
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
