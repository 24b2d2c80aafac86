"""Bijection elimination: Paper I's wind tunnel whose posterior is known exactly (chapter 6).

Each sequence draws a fresh uniformly random bijection ``pi`` of ``V`` symbols and ``L ≤ V``
distinct keys ``k_1..k_L`` (without replacement). The tokens are

    [k_1, pi(k_1) + V, k_2, pi(k_2) + V, ..., k_L]          (length 2L − 1, vocabulary 2V)

(keys are ids ``0..V−1``, values ``V..2V−1``). At the ``t``-th key position (``t = 0..L−1``
pairs revealed so far) the model predicts ``pi(k_{t+1})``. Because ``pi`` is fresh, nothing can
be memorised: the exact posterior is uniform over the ``V − t`` values not yet revealed, its
entropy is ``log2(V − t)`` bits, and the Bayes cross-entropy floor, top-1 accuracy and the best
context-blind predictor all have closed forms (below).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

__all__ = [
    "BijectionBatch",
    "sample_bijection_batch",
    "sequence_length",
    "vocab_size",
    "key_positions",
    "exact_posterior",
    "bayes_entropy_bits",
    "bayes_ce_floor_nats",
    "bayes_top1_accuracy",
    "context_blind_entropy_error_bits",
    "check_sizes",
]


def check_sizes(V: int, L: int) -> tuple[int, int]:
    """Return ``(V, L)`` if ``V ≥ 2`` and ``1 ≤ L ≤ V`` are integers, else raise ``ValueError``."""
    for name, val in (("V", V), ("L", L)):
        if isinstance(val, bool) or not isinstance(val, (int, np.integer)):
            raise ValueError(f"{name} must be an integer, got {val!r}")
    if V < 2:
        raise ValueError(f"V (number of symbols) must be at least 2, got {V}")
    if not 1 <= L <= V:
        raise ValueError(f"L (number of keys) must be between 1 and V = {V} (keys are distinct), got {L}")
    return int(V), int(L)


def sequence_length(L: int) -> int:
    """Return the number of tokens of a sequence with ``L`` keys: 2L − 1 (the last value is never shown)."""
    return 2 * L - 1


def vocab_size(V: int) -> int:
    """Return the vocabulary size 2V (keys ``0..V−1``, values ``V..2V−1``)."""
    return 2 * V


def key_positions(L: int) -> torch.Tensor:
    """Return the token positions ``(L,)`` of the keys, 0, 2, …, 2L − 2 (where predictions are made)."""
    return torch.arange(0, sequence_length(L), 2)


@dataclass
class BijectionBatch:
    """A batch of bijection-elimination sequences with their exact posteriors.

    tokens ``(B, 2L−1)`` int64; keys ``(B, L)`` (the key shown at each key position);
    targets ``(B, L)`` = pi(key) in ``0..V−1``; bijection ``(B, V)`` (pi itself);
    posterior ``(B, L, V)`` float64, the exact posterior at each key position.
    """

    tokens: torch.Tensor
    keys: torch.Tensor
    targets: torch.Tensor
    bijection: torch.Tensor
    posterior: torch.Tensor
    V: int
    L: int

    @property
    def key_positions(self) -> torch.Tensor:
        """Return the token positions ``(L,)`` where predictions are made."""
        return key_positions(self.L)

    def __len__(self) -> int:
        return self.tokens.shape[0]

    def to(self, device: torch.device | str) -> "BijectionBatch":
        """Return a copy with every tensor moved to ``device``."""
        return BijectionBatch(
            **{n: getattr(self, n).to(device) for n in ("tokens", "keys", "targets", "bijection", "posterior")},
            V=self.V, L=self.L,
        )


def sample_bijection_batch(
    n_sequences: int, V: int, L: int, *, generator: torch.Generator | None = None
) -> BijectionBatch:
    """Return ``n_sequences`` fresh sequences (a new random bijection each) with exact posteriors."""
    V, L = check_sizes(V, L)
    if isinstance(n_sequences, bool) or not isinstance(n_sequences, (int, np.integer)) or n_sequences < 1:
        raise ValueError(f"n_sequences must be a positive integer, got {n_sequences!r}")
    B = int(n_sequences)
    # Uniform random permutations from the argsort of i.i.d. uniforms (ties have probability 0).
    bijection = torch.rand(B, V, generator=generator).argsort(dim=-1)  # (B, V): pi(k) = bijection[b, k]
    keys = torch.rand(B, V, generator=generator).argsort(dim=-1)[:, :L]  # (B, L), distinct
    targets = bijection.gather(1, keys)  # (B, L)
    tokens = torch.empty(B, sequence_length(L), dtype=torch.long)
    tokens[:, 0::2] = keys  # keys at even positions
    tokens[:, 1::2] = targets[:, :-1] + V  # revealed values at odd positions
    return BijectionBatch(tokens=tokens, keys=keys, targets=targets, bijection=bijection,
                          posterior=exact_posterior(tokens, V), V=V, L=L)


def exact_posterior(tokens: torch.Tensor, V: int) -> torch.Tensor:
    """Return the exact posterior ``(B, L, V)`` (float64) of the next value at every key position.

    Computed from the tokens alone: uniform over the values not revealed before the position.
    """
    if tokens.ndim != 2 or tokens.shape[1] % 2 != 1:
        raise ValueError(f"tokens must be (B, 2L − 1), got {tuple(tokens.shape)}")
    B, T = tokens.shape
    L = (T + 1) // 2
    revealed_values = tokens[:, 1::2] - V  # (B, L − 1)
    if revealed_values.numel() and (revealed_values.min() < 0 or revealed_values.max() >= V):
        raise ValueError("odd positions must hold value tokens V..2V−1")
    seen = torch.zeros(B, L, V, dtype=torch.float64)
    if L > 1:
        one_hot = torch.nn.functional.one_hot(revealed_values, V).to(torch.float64)  # (B, L−1, V)
        seen[:, 1:] = one_hot.cumsum(dim=1)  # values revealed before key position t
    allowed = (seen == 0).to(torch.float64)  # (B, L, V)
    return allowed / allowed.sum(-1, keepdim=True)


def bayes_entropy_bits(V: int, L: int) -> np.ndarray:
    """Return the exact posterior entropy log2(V − t) in bits at key positions t = 0..L−1, ``(L,)``."""
    V, L = check_sizes(V, L)
    return np.log2(V - np.arange(L, dtype=np.float64))


def bayes_ce_floor_nats(V: int, L: int) -> float:
    """Return the Bayes cross-entropy floor in nats per key position: (1/L) Σ_t ln(V − t)."""
    V, L = check_sizes(V, L)
    # ln Γ(V + 1) − ln Γ(V − L + 1) = Σ_{t<L} ln(V − t)
    return (math.lgamma(V + 1) - math.lgamma(V - L + 1)) / L


def bayes_top1_accuracy(V: int, L: int) -> float:
    """Return the Bayes-optimal top-1 accuracy, (1/L) Σ_t 1/(V − t) (a uniform posterior's best guess)."""
    V, L = check_sizes(V, L)
    return float(np.mean(1.0 / (V - np.arange(L, dtype=np.float64))))


def context_blind_entropy_error_bits(V: int, L: int) -> float:
    """Return the entropy error in bits of the best predictor that cannot see the context.

    A predictor that sees only the current key (and its position), not the revealed pairs, has
    expected cross-entropy minimised by the marginal of pi(k), uniform over all V values, of
    entropy log2 V. Its per-sample entropy error, averaged over key positions, is
    (1/L) Σ_t [log2 V − log2(V − t)]; the same number is the smallest mean KL(posterior ‖ q) in
    bits any context-blind q can reach (the marginal minimises the expected KL).
    """
    V, L = check_sizes(V, L)
    return float(math.log2(V) - bayes_ce_floor_nats(V, L) / math.log(2))
