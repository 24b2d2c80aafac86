"""The single head on a content-addressed recall batch: its forward with the loss taken over the query positions only.

The recall task (:mod:`attention_dynamics.tasks.specialization`) puts ``K`` source positions before ``Q`` query
positions; only the queries have targets. :func:`query_forward` runs the head (:func:`~attention_dynamics.science.attention.single_head_forward`)
and takes the mean cross-entropy over the queries, with the closed-form error signal ``u = ∂L/∂g`` (zero on the
source rows) and the compatibilities ``b = u vᵀ``, so the paper's laws hold as written. The batch is anything with
the fields of :class:`RecallBatch` (the task's ``SpecializationBatch`` has them): this layer reads a batch, it
does not make one.
"""

from __future__ import annotations

from typing import Protocol

import torch
import torch.nn.functional as F

from .attention import HeadForward, SingleHeadParams, single_head_forward
from .gradients import compatibility

__all__ = ["RecallBatch", "query_forward", "query_loss", "query_cross_entropy", "query_output_error"]


class RecallBatch(Protocol):
    """What the science layer reads of a recall batch (:class:`~attention_dynamics.tasks.specialization.SpecializationBatch`).

    x ``(B, T, d_in)`` inputs, sources at positions ``0..K−1``; targets ``(B, Q)``; source_tags, source_labels
    ``(B, K)``; requests, correct_source ``(B, Q)``; responsibility ``(B, Q, T)`` the correct responsibilities;
    target_distribution ``(B, Q, C)``.
    """

    x: torch.Tensor
    targets: torch.Tensor
    source_tags: torch.Tensor
    source_labels: torch.Tensor
    requests: torch.Tensor
    correct_source: torch.Tensor
    n_tags: int
    n_labels: int
    target_smoothing: float

    @property
    def n_sources(self) -> int:
        """Return K, the number of source positions."""

    @property
    def responsibility(self) -> torch.Tensor:
        """Return the correct responsibilities ``(B, Q, T)``."""

    @property
    def target_distribution(self) -> torch.Tensor:
        """Return the target distribution ``(B, Q, C)``."""


def query_forward(params: SingleHeadParams, batch: RecallBatch) -> HeadForward:
    """Return the head's :class:`HeadForward` on ``batch`` with the loss taken over the queries only.

    ``loss`` is the mean cross-entropy (nats) over the ``B·Q`` query positions (differentiable);
    ``u = ∂L/∂g`` ``(B, T, d_v)`` is the closed-form error signal, exactly zero on source rows
    (they carry no target), and ``b = u vᵀ`` ``(B, T, T)``. The paper's laws then hold as written.
    """
    fwd = single_head_forward(batch.x, params)  # causal; no targets: the loss is defined here
    K = batch.n_sources
    fwd.loss = query_cross_entropy(fwd.logits[:, K:], batch)
    u = torch.zeros_like(fwd.g.detach())  # (B, T, d_v)
    u[:, K:] = query_output_error(fwd.p[:, K:].detach(), batch) @ params.W_O.detach().transpose(0, 1)
    fwd.u = u
    fwd.b = compatibility(u, fwd.v.detach())  # (B, T, T)
    full_targets = torch.full(fwd.x.shape[:-1], -1, dtype=torch.long, device=fwd.x.device)
    full_targets[:, K:] = batch.targets
    fwd.targets = full_targets  # −1 on sources: no target
    return fwd


def query_loss(params: SingleHeadParams, batch: RecallBatch) -> torch.Tensor:
    """Return the mean cross-entropy over query positions, in nats (a differentiable scalar)."""
    return query_cross_entropy(single_head_forward(batch.x, params).logits[:, batch.n_sources:], batch)


def query_cross_entropy(logits_q: torch.Tensor, batch: RecallBatch) -> torch.Tensor:
    """Return the mean cross-entropy (nats) of query logits ``(B, Q, C)`` against the batch's targets."""
    flat = logits_q.reshape(-1, logits_q.shape[-1])
    if batch.target_smoothing == 0:
        return F.cross_entropy(flat, batch.targets.reshape(-1))
    return F.cross_entropy(flat, batch.target_distribution.reshape(flat.shape))


def query_output_error(p_q: torch.Tensor, batch: RecallBatch) -> torch.Tensor:
    """Return ∂L/∂logits at the queries, ``(p − target distribution) / (B·Q)``, shape ``(B, Q, C)``."""
    return (p_q - batch.target_distribution.to(p_q.dtype)) / batch.targets.numel()
