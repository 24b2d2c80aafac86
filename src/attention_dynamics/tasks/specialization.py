"""Content-addressed recall: a specialization task whose correct responsibilities are known exactly.

Chapters 3 and 4 need a task in which, for every query, *which* earlier position carries the
answer is known, so that the attention weights can be scored as an E-step against the true
responsibilities. Each sequence has ``K`` **source** positions followed by ``Q`` **query**
positions (``T = K + Q``); nothing marks a position's place in the sequence (no positional
encoding), so a source can be found only by its content:

- source ``j`` carries a *tag* ``c_j`` and a *label* ``y_j``: ``x_j = e_tag(c_j) + e_label(y_j)``;
  the ``K`` tags of a sequence are distinct (drawn from ``n_tags``), and so are its ``K`` labels
  (drawn from ``n_labels``), both fresh for every sequence;
- query ``i`` carries a *request* ``r_i`` (one of the sequence's tags, uniformly):
  ``x_i = e_request(r_i)``; its target is the label of the source whose tag is ``r_i``.

Inputs are sums of one-hot blocks, ``[source tag (n_tags) | request (n_tags) | label (n_labels)]``,
so ``d_in = 2 n_tags + n_labels`` (optionally plus isotropic Gaussian noise). The request and
the tag are *different* features: a head must learn the bilinear match ``request r ↔ tag r``
(its hypothesis frame, ``W_Q W_Kᵀ``) and must learn to read the label out of the matched value.
Exactly one source holds each query's answer, so the correct responsibility of every (query,
position) pair is 0 or 1, and the Bayes cross-entropy floor is 0 nats (the answer is a
deterministic function of the sequence). A head that cannot bind requests to tags can at best
spread its belief over the ``K`` labels present: ``ln K`` nats (the routing-blind floor).

The loss is the mean cross-entropy over the query positions only; sources have no targets. The head's forward
with that loss is science, not data: :func:`attention_dynamics.science.recall_head.query_forward`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

import numpy as np
import torch
import torch.nn.functional as F

__all__ = [
    "SpecializationBatch",
    "check_sizes",
    "input_dim",
    "sample_specialization_batch",
    "bayes_floor_nats",
    "routing_blind_floor_nats",
    "chance_loss_nats",
]


def check_sizes(n_sources: int, n_queries: int, n_tags: int, n_labels: int) -> tuple[int, int, int, int]:
    """Return the four sizes as ints if they describe a valid task, else raise ``ValueError``."""
    vals = {"n_sources": n_sources, "n_queries": n_queries, "n_tags": n_tags, "n_labels": n_labels}
    for name, val in vals.items():
        if isinstance(val, bool) or not isinstance(val, (int, np.integer)) or val < 1:
            raise ValueError(f"{name} must be a positive integer, got {val!r}")
    if n_sources < 2:
        raise ValueError(f"n_sources must be at least 2 (one source makes routing trivial), got {n_sources}")
    if n_sources > n_tags:
        raise ValueError(f"the {n_sources} sources need distinct tags, but n_tags is only {n_tags}")
    if n_sources > n_labels:
        raise ValueError(f"the {n_sources} sources need distinct labels, but n_labels is only {n_labels}")
    return int(n_sources), int(n_queries), int(n_tags), int(n_labels)


def input_dim(n_tags: int, n_labels: int) -> int:
    """Return the input width ``2 n_tags + n_labels`` (source tag, request, label one-hot blocks)."""
    return 2 * int(n_tags) + int(n_labels)


@dataclass
class SpecializationBatch:
    """A batch of content-addressed recall sequences with their ground truth.

    x ``(B, T, d_in)`` inputs (sources at positions ``0..K−1``, queries at ``K..T−1``);
    targets ``(B, Q)`` the label each query must output; source_tags, source_labels ``(B, K)``;
    requests ``(B, Q)`` the tag each query asks for; correct_source ``(B, Q)`` the position
    (``0..K−1``) of the source that holds the answer; responsibility ``(B, Q, T)`` its one-hot
    (the correct responsibility of every (query, position) pair).
    """

    x: torch.Tensor
    targets: torch.Tensor
    source_tags: torch.Tensor
    source_labels: torch.Tensor
    requests: torch.Tensor
    correct_source: torch.Tensor
    n_tags: int
    n_labels: int
    target_smoothing: float = 0.0

    @property
    def n_sources(self) -> int:
        """Return K, the number of source positions."""
        return self.source_tags.shape[1]

    @property
    def n_queries(self) -> int:
        """Return Q, the number of query positions."""
        return self.requests.shape[1]

    @property
    def query_positions(self) -> torch.Tensor:
        """Return the positions ``(Q,)`` of the queries, ``K..K+Q−1``."""
        return torch.arange(self.n_sources, self.n_sources + self.n_queries, device=self.x.device)

    @property
    def responsibility(self) -> torch.Tensor:
        """Return the correct responsibilities ``(B, Q, T)``: 1 on the answer's source, 0 elsewhere."""
        T = self.x.shape[1]
        return F.one_hot(self.correct_source, T).to(self.x.dtype)

    @property
    def target_distribution(self) -> torch.Tensor:
        """Return the target distribution ``(B, Q, C)``: ``(1 − ρ)`` one-hot on the answer plus ``ρ/C`` everywhere."""
        one_hot = F.one_hot(self.targets, self.n_labels).to(self.x.dtype)
        return (1.0 - self.target_smoothing) * one_hot + self.target_smoothing / self.n_labels

    def __len__(self) -> int:
        return self.x.shape[0]

    def to(self, *args, **kwargs) -> "SpecializationBatch":
        """Return a copy with ``x`` moved/cast like ``Tensor.to`` and the index tensors moved."""
        x = self.x.to(*args, **kwargs)
        moved = {f.name: getattr(self, f.name).to(x.device) for f in fields(self)
                 if f.name not in ("x", "n_tags", "n_labels", "target_smoothing")}
        return SpecializationBatch(x=x, n_tags=self.n_tags, n_labels=self.n_labels,
                                   target_smoothing=self.target_smoothing, **moved)


def sample_specialization_batch(
    n_sequences: int,
    *,
    n_sources: int = 4,
    n_queries: int = 4,
    n_tags: int = 8,
    n_labels: int = 8,
    noise: float = 0.0,
    target_smoothing: float = 0.0,
    generator: torch.Generator | None = None,
    dtype: torch.dtype = torch.float32,
) -> SpecializationBatch:
    """Return ``n_sequences`` fresh sequences (new tags, labels and requests in each) with ground truth."""
    K, Q, n_tags, n_labels = check_sizes(n_sources, n_queries, n_tags, n_labels)
    if isinstance(n_sequences, bool) or not isinstance(n_sequences, (int, np.integer)) or n_sequences < 1:
        raise ValueError(f"n_sequences must be a positive integer, got {n_sequences!r}")
    if not noise >= 0:
        raise ValueError(f"noise must be non-negative, got {noise!r}")
    if not 0 <= target_smoothing < 1:
        raise ValueError(f"target_smoothing must be in [0, 1), got {target_smoothing!r}")
    B = int(n_sequences)
    # Distinct tags and labels per sequence: the first K entries of uniform random permutations.
    source_tags = torch.rand(B, n_tags, generator=generator).argsort(-1)[:, :K]  # (B, K)
    source_labels = torch.rand(B, n_labels, generator=generator).argsort(-1)[:, :K]  # (B, K)
    correct_source = torch.randint(0, K, (B, Q), generator=generator)  # (B, Q) in 0..K−1
    requests = source_tags.gather(1, correct_source)  # (B, Q)
    targets = source_labels.gather(1, correct_source)  # (B, Q)

    d_in = input_dim(n_tags, n_labels)
    x = torch.zeros(B, K + Q, d_in, dtype=dtype)
    x[:, :K, :n_tags] = F.one_hot(source_tags, n_tags).to(dtype)  # source tag block
    x[:, :K, 2 * n_tags:] = F.one_hot(source_labels, n_labels).to(dtype)  # label block
    x[:, K:, n_tags:2 * n_tags] = F.one_hot(requests, n_tags).to(dtype)  # request block
    if noise > 0:
        x = x + noise * torch.randn(x.shape, generator=generator, dtype=dtype)
    return SpecializationBatch(x=x, targets=targets, source_tags=source_tags, source_labels=source_labels,
                               requests=requests, correct_source=correct_source,
                               n_tags=n_tags, n_labels=n_labels, target_smoothing=float(target_smoothing))


def bayes_floor_nats(target_smoothing: float = 0.0, n_labels: int = 8) -> float:
    """Return the Bayes cross-entropy floor in nats: the entropy of the target distribution.

    Each answer is a deterministic function of the sequence, so with hard targets (ρ = 0) the
    floor is 0; with smoothed targets it is the entropy of ``(1 − ρ + ρ/C, ρ/C, …, ρ/C)``.
    """
    if not 0 <= target_smoothing < 1:
        raise ValueError(f"target_smoothing must be in [0, 1), got {target_smoothing!r}")
    if target_smoothing == 0:
        return 0.0
    top = 1.0 - target_smoothing + target_smoothing / n_labels
    rest = target_smoothing / n_labels
    return float(-top * math.log(top) - (n_labels - 1) * rest * math.log(rest))


def routing_blind_floor_nats(n_sources: int) -> float:
    """Return ln K nats: the best loss without binding requests to tags (uniform over the K labels present)."""
    if n_sources < 1:
        raise ValueError(f"n_sources must be positive, got {n_sources}")
    return math.log(n_sources)


def chance_loss_nats(n_labels: int) -> float:
    """Return ln C nats: the loss of a uniform prediction over all labels."""
    if n_labels < 1:
        raise ValueError(f"n_labels must be positive, got {n_labels}")
    return math.log(n_labels)
