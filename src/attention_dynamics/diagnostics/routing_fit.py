"""How much of a model's routing gradient the advantage form explains: exactly all of it for any softmax-normalised
content router (:func:`softmax_routing_gradients`), a measured share for Mamba's unnormalised scan
(:func:`mamba_advantage_fit`), each beside a null with the compatibilities permuted within rows.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import torch
import torch.nn.functional as F

from ..models.mamba import (
    MambaSequenceModel,
    block_output_from_routing,
    forward_with_explicit_routing,
    selective_scan_routing,
)
from ..models.routing import ContentRouter
from ..science.gradients import advantage_routing_gradient
from ..tasks.wind_tunnels import TaskBatch, loss_from_logits


def pooled_r2(fits: Sequence["AdvantageFit"]) -> float:
    """Return the R² of several :class:`AdvantageFit` pooled by their gradients' squared norms."""
    total = sum(f.total for f in fits)
    return 1.0 - sum(f.residual for f in fits) / total




def softmax_routing_gradients(router: ContentRouter, x: torch.Tensor, targets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Return ``(∂L/∂s by autograd, advantage form alpha ⊙ (b − E_alpha[b]), alpha, b)``, each ``(B, T, T)``.

    L is the mean cross-entropy (nats) of the router's logits against ``targets`` ``(B, T)``; b = u vᵀ
    with u = ∂L/∂g from autograd. The routing law says the first two are equal whatever function of
    the content the scores are.
    """
    fwd = router(x)
    loss = F.cross_entropy(fwd.logits.reshape(-1, fwd.logits.shape[-1]), targets.reshape(-1))
    grad_scores, u = torch.autograd.grad(loss, [fwd.scores, fwd.context])
    b = u @ fwd.values.detach().transpose(-1, -2)  # (B, T, T): b_ij = u_i · v_j
    alpha = fwd.alpha.detach()
    grad_scores = torch.where(alpha > 0, grad_scores, torch.zeros_like(grad_scores))  # masked entries: no gradient
    return grad_scores, advantage_routing_gradient(alpha, b), alpha, b


@dataclass
class AdvantageFit:
    """How much of a routing-logit gradient the advantage form explains.

    r2: 1 − ‖G − λ A‖² / ‖G‖² summed over all rows, with A_ij = alpha_ij (b_ij − E_{alpha_i}[b]) and the
    best scale λ_i per row (so the cosine between G and the fit is sqrt(r2)); true, fitted: a
    sample of matching entries of G and λ A (for scatter plots); n_rows: rows (query × channel) fitted;
    residual, total: ‖G − λA‖² and ‖G‖² (to pool several fits).
    """

    r2: float
    true: np.ndarray
    fitted: np.ndarray
    n_rows: int
    residual: float
    total: float


def advantage_form_fit(logit_grad: torch.Tensor, alpha: torch.Tensor, b: torch.Tensor, *, sample: int = 4000,
                       generator: torch.Generator | None = None) -> AdvantageFit:
    """Return the :class:`AdvantageFit` of the gradient ``logit_grad`` ``(..., Tq, Tk)`` w.r.t. routing logits.

    ``alpha`` ``(..., Tq, Tk)``: the routing distribution of each row (rows sum to 1, zeros where
    masked); ``b``: the compatibilities. Each row's best advantage-form fit is λ_i A_i with
    λ_i = ⟨G_i, A_i⟩ / ⟨A_i, A_i⟩ (0 where A_i = 0, e.g. a row with one visible key).
    """
    G = logit_grad.detach().to(torch.float64)
    A = advantage_routing_gradient(alpha.detach().to(torch.float64), b.detach().to(torch.float64))
    AA = (A * A).sum(-1, keepdim=True)
    lam = torch.where(AA > 0, (G * A).sum(-1, keepdim=True) / AA.clamp_min(1e-300), torch.zeros_like(AA))
    fitted = lam * A
    total = float((G * G).sum())
    residual = float(((G - fitted) ** 2).sum())
    r2 = 1.0 - residual / total if total > 0 else float("nan")
    visible = alpha.detach() > 0
    g_flat, f_flat = G[visible], fitted[visible]
    if g_flat.numel() > sample:
        pick = torch.randperm(g_flat.numel(), generator=generator)[:sample]
        g_flat, f_flat = g_flat[pick], f_flat[pick]
    return AdvantageFit(r2=r2, true=g_flat.numpy(), fitted=f_flat.numpy(), n_rows=int(np.prod(G.shape[:-1])),
                        residual=residual, total=total)


def permute_within_rows(values: torch.Tensor, visible: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
    """Return ``values`` with the visible entries of every row (last axis) randomly permuted among themselves.

    Entries where ``visible`` is False stay where they are. The null of an advantage-form fit: the
    same compatibilities, no longer paired with their own keys.
    """
    keys = torch.rand(values.shape, generator=generator, dtype=torch.float64)
    keys = keys.masked_fill(~visible, 2.0)  # masked entries sort last
    order = keys.argsort(-1)  # visible entries first, in random order
    slots = (~visible).to(torch.int8).argsort(dim=-1, stable=True)  # visible positions first, in index order
    out = values.clone()
    out.scatter_(-1, slots, values.gather(-1, order))
    return torch.where(visible, out, values)


def mamba_advantage_fit(model: MambaSequenceModel, batch: TaskBatch, layer: int, *, sample: int = 4000,
                        generator: torch.Generator | None = None, permuted: bool = False) -> AdvantageFit:
    """Return the :class:`AdvantageFit` of Mamba's routing gradient in layer ``layer`` on ``batch``.

    The scan's weights w_ij[c] (:func:`~attention_dynamics.models.mamba.selective_scan_routing`) are
    unnormalised and signed. Their logits are ℓ_ij = ln|w_ij| (w = sign · e^ℓ, as alpha = e^{s − ln Z}),
    so the true logit gradient is G_ij = w_ij ∂L/∂w_ij. Against it we fit the advantage form built
    from the routing distribution alpha_ij = |w_ij| / Σ_j |w_ij| and the sign-carrying compatibility
    b_ij = sign(w_ij) ∂L/∂w_ij. Since G_ij = Z_i [alpha_ij (b_ij − E_alpha[b]) + alpha_ij E_alpha[b]]
    with Z_i = Σ_j |w_ij|, what the advantage form cannot explain is the second, "gain" term: the
    total routing mass, which a softmax holds fixed and Mamba does not.

    With ``permuted`` the fit is the null: the same compatibilities permuted within each row among
    the visible keys (:func:`permute_within_rows`), so that an R² from near-uniform weights and
    roughly centred compatibilities alone is seen for what it is.
    """
    model.eval()
    logits, routing = forward_with_explicit_routing(model, batch.inputs, layer)
    loss = loss_from_logits(logits[:, batch.positions], batch)
    (grad_w,) = torch.autograd.grad(loss, routing.weights)  # (B, ED, T, T): ∂L/∂w_ij
    w = routing.weights.detach().to(torch.float64)
    grad_w = grad_w.to(torch.float64)
    magnitude = w.abs()
    alpha = magnitude / magnitude.sum(-1, keepdim=True).clamp_min(1e-300)
    b = torch.sign(w) * grad_w
    if permuted:
        b = permute_within_rows(b, alpha > 0, generator)
    return advantage_form_fit(w * grad_w, alpha, b, sample=sample, generator=generator)


def scan_reproduction_error(model: MambaSequenceModel, inputs: torch.Tensor) -> float:
    """Return max |mambapy block output − output rebuilt from the routing weights| over every layer (float64 copy)."""
    model = copy.deepcopy(model).double().eval()
    inputs = inputs if not torch.is_floating_point(inputs) else inputs.double()
    worst = 0.0
    with torch.no_grad():
        h = model.embed(inputs)
        for residual in model.backbone.layers:
            x = residual.norm(h)
            rebuilt = block_output_from_routing(residual.mixer, selective_scan_routing(residual.mixer, x))
            worst = max(worst, float((rebuilt - residual.mixer(x)).abs().max()))
            h = residual(h)
    return worst
