"""The routing–content feedback loop and the two-timescale EM view, measured (chapters 3 and 4).

Three groups of tools, used by chapters 3 and 4 on the content-addressed recall task
(:mod:`attention_dynamics.tasks.specialization`):

- **First-order predictions** of the paper. A step of size ``eta`` on the value vectors alone,
  ``Δv_j = −eta Σ_i alpha_ij u_i``, changes the loss by ``−eta Σ_j ||Σ_i alpha_ij u_i||²`` to first
  order (:func:`value_step_loss_change`) and changes the compatibilities by
  ``Δb_ij = −eta Σ_i' alpha_i'j u_i·u_i'`` when the error signal ``u`` is held fixed
  (:func:`compatibility_change_after_value_step`).
- **E-step and M-step quality** against the task's ground truth: the attention mass on the
  correct source (:func:`attention_on_correct_source`), the alignment of each value with its
  ideal prototype (:func:`value_prototype_alignment`), the value's own precision
  (:func:`value_precision_nats`) and which values serve which queries
  (:func:`specialization_matrix`, :func:`responsibility_purity`).
- **Settling times**: when the routing frame (the attention pattern) and the values stop moving
  (:func:`~attention_dynamics.science.settling.quiescence_step`, and the alternative
  :func:`~attention_dynamics.science.settling.settle_step`), measured along a training run
  (:func:`~attention_dynamics.training.recall_head.train_specialization_head`).

Conventions: the loss is the mean cross-entropy over query positions (nats); ``u = ∂L/∂g``
includes the ``1/N`` of the mean; a value step acts on the value *vectors* ``v_j`` of a batch
(the paper's free prototypes), not on ``W_V``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import torch
import torch.nn.functional as F

from .attention import SingleHeadParams
from .gradients import advantage, compatibility, responsibility_weighted_value_gradient
from .recall_head import RecallBatch, query_cross_entropy, query_forward

__all__ = [
    "value_step_loss_change",
    "value_step_curvature_bound",
    "value_step_ratio_curve",
    "CompatibilityChange",
    "compatibility_change_after_value_step",
    "attention_on_correct_source",
    "attention_on_sources",
    "correct_source_advantage",
    "ideal_prototypes",
    "value_prototype_alignment",
    "value_precision_nats",
    "specialization_matrix",
    "responsibility_purity",
    "attention_distance",
    "value_distance",
    "AdvantageChange",
    "advantage_change_rate",
    "advantage_change_autograd",
]


# ---------------------------------------------------------------------------------------------
# The head as a module (what training.fit drives)
# ---------------------------------------------------------------------------------------------


# ---------------------------------------------------------------------------------------------
# First-order predictions (the paper's positive-feedback result; chapter 3)
# ---------------------------------------------------------------------------------------------


def _query_loss_from_values(alpha: torch.Tensor, v: torch.Tensor, W_O: torch.Tensor,
                            batch: RecallBatch) -> torch.Tensor:
    """Return the mean query cross-entropy (nats) when the values are ``v`` ``(B, T, d_v)`` and alpha is fixed."""
    K = batch.n_sources
    return query_cross_entropy((alpha[:, K:] @ v) @ W_O, batch)  # logits (B, Q, C)


def value_step_loss_change(
    params: SingleHeadParams, batch: RecallBatch, etas: Sequence[float] | np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Return ``(actual, predicted)`` loss changes in nats, ``(len(etas),)`` each, of a value-only step.

    The step moves every value vector of the batch by ``Δv_j = −eta Σ_i alpha_ij u_i`` (the
    responsibility-weighted value law), with W_Q, W_K, W_O and hence alpha unchanged. The paper's
    first-order prediction is ``ΔL ≈ −eta Σ_j ||Σ_i alpha_ij u_i||²`` (summed over the batch).
    Work in float64 to see the ratio approach 1 at small ``eta``.
    """
    with torch.no_grad():
        fwd = query_forward(params, batch)
        grad_v = responsibility_weighted_value_gradient(fwd.alpha, fwd.u)  # (B, T, d_v)
        squared_norm = float((grad_v ** 2).sum())
        base = float(fwd.loss)
        actual = np.array([
            float(_query_loss_from_values(fwd.alpha, fwd.v - eta * grad_v, params.W_O, batch)) - base
            for eta in np.asarray(etas, dtype=float)
        ])
    predicted = -np.asarray(etas, dtype=float) * squared_norm
    return actual, predicted


def value_step_curvature_bound(params: SingleHeadParams, batch: RecallBatch) -> float:
    """Return λ, an upper bound on the loss Hessian with respect to the values (nats per unit² of v).

    The query loss is a mean over ``N = B·Q`` cross-entropies of logits that are linear in the
    values, ``z_i = W_Oᵀ Σ_j alpha_ij v_j``; the softmax Jacobian ``diag(p) − p pᵀ`` has spectral
    norm ≤ 1/2. Hence the Hessian is ≼ ``||W_O||₂² max_b ||A_b||₂² / (2N)`` everywhere, with
    ``A_b`` the ``(Q, T)`` query attention of sequence b. Because the loss is convex in the
    values, Taylor's theorem with this bound gives ``0 ≤ 1 − actual/predicted ≤ eta λ / 2`` for
    the value-only step of :func:`value_step_loss_change`: an a-priori tolerance for the ratio.
    """
    with torch.no_grad():
        fwd = query_forward(params, batch)
        K = batch.n_sources
        attention_norm = torch.linalg.matrix_norm(fwd.alpha[:, K:], ord=2).max()  # max_b ||A_b||₂
        readout_norm = torch.linalg.matrix_norm(params.W_O, ord=2)
        n = batch.targets.numel()
    return float(readout_norm ** 2 * attention_norm ** 2 / (2 * n))


def value_step_ratio_curve(
    params: SingleHeadParams, batch: RecallBatch, etas: Sequence[float] | np.ndarray
) -> np.ndarray:
    """Return ``actual / predicted`` loss change of the value-only step for each ``eta`` (→ 1 as eta → 0)."""
    actual, predicted = value_step_loss_change(params, batch, etas)
    return actual / predicted


@dataclass
class CompatibilityChange:
    """How the compatibilities ``b_ij`` of the query rows change after one value-only step.

    actual ``(B, Q, T)``: ``u'_i·v'_j − u_i·v_j`` with u recomputed after the step;
    predicted ``(B, Q, T)``: the paper's ``−eta Σ_i' alpha_i'j u_i·u_i'`` (u held fixed);
    error_signal_part ``(B, Q, T)``: ``(u'_i − u_i)·v'_j``, the part of the change the prediction
    leaves out (the readout's response to the step); mask ``(Q, T)``: True where key j ≤ query i.
    """

    eta: float
    actual: torch.Tensor
    predicted: torch.Tensor
    error_signal_part: torch.Tensor
    mask: torch.Tensor

    @property
    def relative_error(self) -> float:
        """Return ``||actual − predicted||_F / ||actual||_F`` over the unmasked entries."""
        m = self.mask.expand_as(self.actual)
        diff = (self.actual - self.predicted)[m]
        return float(diff.norm() / self.actual[m].norm())

    @property
    def frozen_error_signal_residual(self) -> float:
        """Return ``||actual − error_signal_part − predicted||_F / ||predicted||_F`` (rounding only: u fixed is exact)."""
        m = self.mask.expand_as(self.actual)
        diff = (self.actual - self.error_signal_part - self.predicted)[m]
        return float(diff.norm() / self.predicted[m].norm())


def compatibility_change_after_value_step(
    params: SingleHeadParams, batch: RecallBatch, eta: float
) -> CompatibilityChange:
    """Return the :class:`CompatibilityChange` of the query rows after a value-only step of size ``eta``."""
    with torch.no_grad():
        fwd = query_forward(params, batch)
        K = batch.n_sources
        grad_v = responsibility_weighted_value_gradient(fwd.alpha, fwd.u)  # (B, T, d_v)
        v_new = fwd.v - eta * grad_v  # (B, T, d_v)
        # Prediction: Δb_ij = u_i·Δv_j = −eta Σ_i' alpha_i'j u_i·u_i'  = −eta (u uᵀ alpha)_ij
        predicted = -eta * (fwd.u @ fwd.u.transpose(-1, -2) @ fwd.alpha)  # (B, T, T)
        # Actual: the error signal responds to the new values (p changes), so recompute
        # u' = ∂L/∂g' at g' = alpha v' (by autograd, independently of the closed form).
        with torch.enable_grad():
            g_new = (fwd.alpha @ v_new).requires_grad_(True)  # (B, T, d_v)
            loss_new = query_cross_entropy(g_new[:, K:] @ params.W_O, batch)  # logits (B, Q, C)
            (u_new,) = torch.autograd.grad(loss_new, g_new)  # (B, T, d_v), zero on source rows
        b_new = compatibility(u_new, v_new)
        actual = b_new - fwd.b
        error_signal_part = compatibility(u_new - fwd.u, v_new)
        T = batch.x.shape[1]
        mask = torch.ones(T, T, dtype=torch.bool).tril()[K:]  # (Q, T)
    return CompatibilityChange(eta=float(eta), actual=actual[:, K:], predicted=predicted[:, K:],
                               error_signal_part=error_signal_part[:, K:], mask=mask)


# ---------------------------------------------------------------------------------------------
# E-step and M-step quality against the ground truth (the two-timescale EM reading; chapter 4)
# ---------------------------------------------------------------------------------------------


def attention_on_correct_source(alpha: torch.Tensor, batch: RecallBatch) -> float:
    """Return the mean attention weight that queries put on the source holding their answer (E-step quality, 0..1)."""
    K = batch.n_sources
    return float(alpha[:, K:].gather(2, batch.correct_source.unsqueeze(-1)).mean())


def attention_on_sources(alpha: torch.Tensor, batch: RecallBatch) -> float:
    """Return the mean attention weight that queries put on source positions at all (0..1)."""
    K = batch.n_sources
    return float(alpha[:, K:, :K].sum(-1).mean())


def correct_source_advantage(params: SingleHeadParams, batch: RecallBatch) -> float:
    """Return the mean advantage ``E_alpha[b] − b_ij`` of the correct source j for its query, per query.

    Multiplied by the number of queries ``N = B·Q`` so that it does not shrink with the batch
    (``u`` carries the 1/N of the mean loss). Positive: gradient descent moves attention toward
    the correct source (the sign convention of :func:`attention_dynamics.science.gradients.advantage`).
    """
    with torch.no_grad():
        fwd = query_forward(params, batch)
        K = batch.n_sources
        adv = advantage(fwd.alpha, fwd.b)[:, K:]  # (B, Q, T)
        at_source = adv.gather(2, batch.correct_source.unsqueeze(-1))  # (B, Q, 1)
    return float(at_source.mean()) * batch.targets.numel()


def ideal_prototypes(W_O: torch.Tensor) -> torch.Tensor:
    """Return the ideal value prototype of each label, ``W_O (e_y − 1/C)``, shape ``(C, d_v)``.

    It is the direction in value space that raises ``log p(y)`` fastest from an uninformative
    value (the gradient of ``log softmax(W_Oᵀ v)_y`` at uniform ``p``), and hence the direction in
    which the responsibility-weighted value law pulls a value whose queries all want label ``y``.
    """
    C = W_O.shape[1]
    centred = torch.eye(C, dtype=W_O.dtype, device=W_O.device) - 1.0 / C  # (C, C), row y = e_y − 1/C
    return centred @ W_O.transpose(0, 1)  # (C, d_v)


def value_prototype_alignment(v: torch.Tensor, W_O: torch.Tensor, batch: RecallBatch) -> float:
    """Return the mean cosine between each source's value and its label's ideal prototype (M-step direction, −1..1)."""
    K = batch.n_sources
    protos = ideal_prototypes(W_O)[batch.source_labels]  # (B, K, d_v)
    return float(F.cosine_similarity(v[:, :K], protos, dim=-1).mean())


def value_precision_nats(v: torch.Tensor, W_O: torch.Tensor, batch: RecallBatch) -> float:
    """Return the mean cross-entropy (nats) of each source's value read out alone against its own label.

    This is the loss the head would have under perfect routing (the M-step objective at the
    ideal E-step): it falls as values become precise prototypes of their labels.
    """
    K = batch.n_sources
    logits = v[:, :K] @ W_O  # (B, K, C)
    return float(F.cross_entropy(logits.reshape(-1, logits.shape[-1]), batch.source_labels.reshape(-1)))


def specialization_matrix(alpha: torch.Tensor, batch: RecallBatch) -> np.ndarray:
    """Return ``S`` ``(n_tags, n_tags)``: mean attention from queries requesting tag r to the source with tag c.

    Rows are requests, columns source tags; a specialised head has ``S`` close to the identity
    (each value serves exactly the queries that ask for it). Pairs never seen are NaN.
    """
    K, n = batch.n_sources, batch.n_tags
    a = alpha[:, K:, :K].detach().double()  # (B, Q, K)
    req = F.one_hot(batch.requests, n).double()  # (B, Q, n)
    tag = F.one_hot(batch.source_tags, n).double()  # (B, K, n)
    mass = torch.einsum("bqr,bqk,bkc->rc", req, a, tag)  # total attention request r → tag c
    count = torch.einsum("bqr,bkc->rc", req, tag)  # number of (query, source) pairs
    return (mass / count).numpy()  # NaN where count = 0


def responsibility_purity(alpha: torch.Tensor, batch: RecallBatch) -> float:
    """Return the fraction of each source's soft count ``N_j = Σ_i alpha_ij`` that comes from its own queries.

    Averaged over sources that some query asks for; 1 = every value serves only the queries whose
    answer it holds, ``1/K`` or less = no specialization.
    """
    K = batch.n_sources
    a = alpha[:, K:, :K]  # (B, Q, K)
    truth = batch.responsibility[:, :, :K]  # (B, Q, K)
    soft_count = a.sum(1)  # (B, K)
    own = (a * truth).sum(1)  # (B, K)
    asked = truth.sum(1) > 0  # (B, K)
    return float((own[asked] / soft_count[asked]).mean())


# ---------------------------------------------------------------------------------------------
# Settling times (frame vs precision)
# ---------------------------------------------------------------------------------------------


def attention_distance(alpha_a: torch.Tensor, alpha_b: torch.Tensor) -> float:
    """Return the mean total-variation distance between two attention patterns' rows (0..1)."""
    return float(0.5 * (alpha_a - alpha_b).abs().sum(-1).mean())


def value_distance(v_a: torch.Tensor, v_b: torch.Tensor) -> float:
    """Return the root-mean-square Euclidean distance between two sets of value vectors (units of v)."""
    return float(((v_a - v_b) ** 2).sum(-1).mean().sqrt())


# ---------------------------------------------------------------------------------------------
# One training run with every measurement
# ---------------------------------------------------------------------------------------------


# ---------------------------------------------------------------------------------------------
# The rich-get-richer threshold: how a value step changes the advantage (issue 16, item 2)
# ---------------------------------------------------------------------------------------------


@dataclass
class AdvantageChange:
    """The first-order change of the query rows' advantages under the value-only step (rates d/deta).

    The step moves every value by ``Δv_j = eta w_j`` with ``w_j = −Σ_i' alpha_i'j u_i'`` (the value
    law), the attention held (scores do not move). The advantage ``A_ij = Σ_j' alpha_ij' b_ij' − b_ij``
    (:func:`attention_dynamics.science.gradients.advantage`; positive: the score rises) then changes at the rate
    ``dA_ij/deta = self_term + cross_term + response_term``, all ``(B, Q, T)`` over the query rows:

    - ``self_term = |u_i|² (alpha_ij − Σ_j' alpha_ij'²)``: query i's own pull on the values. Alone, it
      makes A_ij grow exactly when alpha_ij exceeds Σ_j' alpha_ij'² (rich get richer);
    - ``cross_term = c_ij − Σ_j' alpha_ij' c_ij'`` with ``c_ij = Σ_{i'≠i} alpha_i'j u_i·u_i'``: the pull
      of the other queries that share the values;
    - ``response_term = du_i·(g_i − v_j)``: the error signal's own change, ``du_i = H_i dg_i`` with
      ``dg_i = Σ_j alpha_ij w_j`` and ``H_i = W_O (diag p_i − p_i p_iᵀ) W_Oᵀ / N`` (the readout's
      response to the moved values; the paper's u-fixed picture leaves it out).

    ``threshold = alpha_ij − Σ_j' alpha_ij'²``; ``mask`` ``(Q, T)``: True where key j ≤ query i.
    """

    alpha: torch.Tensor
    advantage: torch.Tensor
    self_term: torch.Tensor
    cross_term: torch.Tensor
    response_term: torch.Tensor
    threshold: torch.Tensor
    mask: torch.Tensor

    @property
    def total(self) -> torch.Tensor:
        """Return the whole first-order rate ``dA_ij/deta`` ``(B, Q, T)``."""
        return self.self_term + self.cross_term + self.response_term


def _centred_rows(c: torch.Tensor, alpha: torch.Tensor) -> torch.Tensor:
    """Return ``c_ij − Σ_j' alpha_ij' c_ij'`` (zero where alpha is 0)."""
    out = c - (alpha * c).sum(-1, keepdim=True)
    return torch.where(alpha > 0, out, torch.zeros((), dtype=c.dtype))


def advantage_change_rate(params: SingleHeadParams, batch: RecallBatch) -> AdvantageChange:
    """Return the :class:`AdvantageChange` of the value-only step on ``batch`` (closed form; use float64)."""
    with torch.no_grad():
        fwd = query_forward(params, batch)
        K = batch.n_sources
        alpha, u, v = fwd.alpha, fwd.u, fwd.v  # (B, T, T), (B, T, d_v) with u = 0 on sources
        w = -responsibility_weighted_value_gradient(alpha, u)  # (B, T, d_v): dv_j/deta
        uu = u @ u.transpose(-1, -2)  # (B, T, T): u_i·u_i'
        a_q = alpha[:, K:]  # (B, Q, T)
        u_sq = (u[:, K:] ** 2).sum(-1, keepdim=True)  # (B, Q, 1)
        purity = (a_q ** 2).sum(-1, keepdim=True)  # Σ_j' alpha_ij'²
        threshold = torch.where(a_q > 0, a_q - purity, torch.zeros((), dtype=a_q.dtype))
        self_term = u_sq * threshold
        c_all = (uu @ alpha)[:, K:]  # Σ_i' (u_i·u_i') alpha_i'j, every i' (u = 0 on sources)
        cross = c_all - u_sq * a_q  # leave out i' = i
        cross_term = _centred_rows(cross, a_q)
        dg = (a_q @ w)  # (B, Q, d_v)
        p = fwd.p[:, K:]  # (B, Q, C)
        dz = dg @ params.W_O  # (B, Q, C)
        dp = p * dz - p * (p * dz).sum(-1, keepdim=True)
        du = dp @ params.W_O.transpose(0, 1) / batch.targets.numel()  # (B, Q, d_v)
        r = du @ v.transpose(-1, -2)  # (B, Q, T): du_i·v_j
        response_term = -_centred_rows(r, a_q)  # du_i·(g_i − v_j)
        A = advantage(a_q, compatibility(u[:, K:], v))
    T = batch.x.shape[1]
    return AdvantageChange(alpha=a_q, advantage=A, self_term=self_term, cross_term=cross_term,
                           response_term=response_term, threshold=threshold,
                           mask=torch.ones(T, T, dtype=torch.bool).tril()[K:])


def advantage_change_autograd(params: SingleHeadParams, batch: RecallBatch) -> torch.Tensor:
    """Return ``dA_ij/deta`` at eta = 0 ``(B, Q, T)`` by forward-mode autograd through a real value step.

    The error signal is the autograd gradient of the query loss with respect to the mixtures, so this
    shares nothing with the closed form of :func:`advantage_change_rate` but the forward pass.
    """
    from torch.func import grad, jvp

    with torch.no_grad():
        fwd = query_forward(params, batch)
        K = batch.n_sources
        alpha = fwd.alpha
        w = -responsibility_weighted_value_gradient(alpha, fwd.u)
        v0 = fwd.v

    def loss_of_g(g: torch.Tensor) -> torch.Tensor:
        return query_cross_entropy(g[:, K:] @ params.W_O, batch)

    def adv(eta: torch.Tensor) -> torch.Tensor:
        v = v0 + eta * w
        u = grad(loss_of_g)(alpha @ v)
        return advantage(alpha[:, K:], compatibility(u[:, K:], v))

    zero = torch.zeros((), dtype=v0.dtype)
    return jvp(adv, (zero,), (torch.ones((), dtype=v0.dtype),))[1].detach()


# ---------------------------------------------------------------------------------------------
# The free-activation picture along training of the sticky-chain head (issue 16, item 1)
# ---------------------------------------------------------------------------------------------


