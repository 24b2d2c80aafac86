"""Associative recall: random-access binding, Paper I v3's third inference primitive (chapter 7).

Each sequence stores ``N`` key–value pairs, then asks for the values of ``M`` of the stored keys:

    [k_1, v_1 + K, k_2, v_2 + K, ..., k_N, v_N + K, q_1, q_2, ..., q_M]      (length 2N + M)

Keys are ids ``0..K−1`` (distinct within a sequence), values ids ``K..K+V−1`` (drawn uniformly, with
replacement), queries are distinct stored keys. At query position m the model must output the
value bound to ``q_m``. The pairs are fresh in every sequence, so nothing can be memorised; the
answer is deterministic given the context (the exact posterior is one-hot, Bayes accuracy 1), while
a predictor that cannot see the stored pairs can do no better than chance, 1/V.

The same sequences have a second layout, **one position per pair** (:func:`pair_features`): N + M
positions, position p < N carrying the two-hot vector [one-hot(k_p), one-hot(v_p), 0] and query
position N + m carrying [one-hot(q_m), 0, 1]. Retrieval is then one content-routing step (match the
query's key against the stored keys, read the value stored at the same position) instead of the
two-step "find the key, read its successor" of the token layout, and the sequence is shorter.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

__all__ = [
    "AssociativeRecallBatch",
    "check_sizes",
    "sequence_length",
    "vocab_size",
    "query_positions",
    "sample_associative_recall_batch",
    "exact_answer",
    "exact_posterior",
    "pair_features",
    "pair_feature_dim",
    "pair_query_positions",
    "exact_answer_from_pair_features",
    "bayes_accuracy",
    "context_blind_accuracy",
    "bag_of_values_accuracy",
]


def check_sizes(n_pairs: int, n_queries: int, n_keys: int, n_values: int) -> tuple[int, int, int, int]:
    """Return the sizes as ints if ``1 ≤ M ≤ N ≤ K`` and ``V ≥ 2``, else raise ``ValueError``."""
    sizes = {"n_pairs": n_pairs, "n_queries": n_queries, "n_keys": n_keys, "n_values": n_values}
    for name, val in sizes.items():
        if isinstance(val, bool) or not isinstance(val, (int, np.integer)) or val < 1:
            raise ValueError(f"{name} must be a positive integer, got {val!r}")
    if n_pairs > n_keys:
        raise ValueError(f"n_pairs ({n_pairs}) cannot exceed n_keys ({n_keys}): stored keys are distinct")
    if n_queries > n_pairs:
        raise ValueError(f"n_queries ({n_queries}) cannot exceed n_pairs ({n_pairs}): queries are distinct stored keys")
    if n_values < 2:
        raise ValueError(f"n_values must be at least 2, got {n_values}")
    return int(n_pairs), int(n_queries), int(n_keys), int(n_values)


def sequence_length(n_pairs: int, n_queries: int) -> int:
    """Return the number of tokens, 2N + M."""
    return 2 * n_pairs + n_queries


def vocab_size(n_keys: int, n_values: int) -> int:
    """Return the vocabulary size K + V (keys ``0..K−1``, values ``K..K+V−1``)."""
    return n_keys + n_values


def query_positions(n_pairs: int, n_queries: int) -> torch.Tensor:
    """Return the token positions ``(M,)`` of the queries, 2N .. 2N + M − 1 (where predictions are made)."""
    return torch.arange(2 * n_pairs, 2 * n_pairs + n_queries)


@dataclass
class AssociativeRecallBatch:
    """A batch of associative-recall sequences.

    tokens ``(B, 2N+M)`` int64; keys, values ``(B, N)`` (value classes ``0..V−1``); queries
    ``(B, M)`` (key ids); targets ``(B, M)`` the value class bound to each query.
    """

    tokens: torch.Tensor
    keys: torch.Tensor
    values: torch.Tensor
    queries: torch.Tensor
    targets: torch.Tensor
    n_keys: int
    n_values: int

    @property
    def n_pairs(self) -> int:
        """Return N, the number of stored pairs."""
        return self.keys.shape[1]

    @property
    def n_queries(self) -> int:
        """Return M, the number of queries."""
        return self.queries.shape[1]

    @property
    def query_positions(self) -> torch.Tensor:
        """Return the token positions ``(M,)`` where predictions are made."""
        return query_positions(self.n_pairs, self.n_queries)

    def __len__(self) -> int:
        return self.tokens.shape[0]


def sample_associative_recall_batch(
    n_sequences: int,
    n_pairs: int,
    n_queries: int,
    n_keys: int,
    n_values: int,
    *,
    generator: torch.Generator | None = None,
) -> AssociativeRecallBatch:
    """Return ``n_sequences`` fresh sequences (new pairs each) with their exact answers."""
    N, M, K, V = check_sizes(n_pairs, n_queries, n_keys, n_values)
    if isinstance(n_sequences, bool) or not isinstance(n_sequences, (int, np.integer)) or n_sequences < 1:
        raise ValueError(f"n_sequences must be a positive integer, got {n_sequences!r}")
    B = int(n_sequences)
    keys = torch.rand(B, K, generator=generator).argsort(dim=-1)[:, :N]  # (B, N), distinct
    values = torch.randint(0, V, (B, N), generator=generator)  # (B, N), with replacement
    slots = torch.rand(B, N, generator=generator).argsort(dim=-1)[:, :M]  # (B, M): which stored pairs are asked
    queries = keys.gather(1, slots)  # (B, M)
    targets = values.gather(1, slots)  # (B, M)
    tokens = torch.empty(B, sequence_length(N, M), dtype=torch.long)
    tokens[:, 0 : 2 * N : 2] = keys
    tokens[:, 1 : 2 * N : 2] = values + K
    tokens[:, 2 * N :] = queries
    return AssociativeRecallBatch(tokens=tokens, keys=keys, values=values, queries=queries, targets=targets,
                                  n_keys=K, n_values=V)


def exact_answer(tokens: torch.Tensor, n_pairs: int, n_keys: int) -> torch.Tensor:
    """Return the value class ``(B, M)`` bound to each query, read from the tokens alone.

    The stored pair whose key equals the query is found by comparing the query with every stored
    key (``-1`` where a query matches no stored key, which the sampler never produces).
    """
    if tokens.ndim != 2 or tokens.shape[1] <= 2 * n_pairs:
        raise ValueError(f"tokens must be (B, 2N + M) with M ≥ 1 for N = {n_pairs}, got {tuple(tokens.shape)}")
    stored_keys = tokens[:, 0 : 2 * n_pairs : 2]  # (B, N)
    stored_values = tokens[:, 1 : 2 * n_pairs : 2] - n_keys  # (B, N)
    queries = tokens[:, 2 * n_pairs :]  # (B, M)
    match = queries[:, :, None] == stored_keys[:, None, :]  # (B, M, N)
    found = match.any(-1)
    slot = match.to(torch.int64).argmax(-1)  # (B, M): the matching pair
    answer = stored_values.gather(1, slot)
    return torch.where(found, answer, torch.full_like(answer, -1))


def exact_posterior(tokens: torch.Tensor, n_pairs: int, n_keys: int, n_values: int) -> torch.Tensor:
    """Return the exact posterior over the answer ``(B, M, V)`` (float64): one-hot on :func:`exact_answer`."""
    answer = exact_answer(tokens, n_pairs, n_keys)
    if (answer < 0).any():
        raise ValueError("a query matches no stored key: its posterior is not defined by the context")
    return torch.nn.functional.one_hot(answer, n_values).to(torch.float64)


def pair_feature_dim(n_keys: int, n_values: int) -> int:
    """Return the feature size of the one-position-per-pair layout: K + V + 1 (the last entry flags a query)."""
    return n_keys + n_values + 1


def pair_query_positions(n_pairs: int, n_queries: int) -> torch.Tensor:
    """Return the positions ``(M,)`` of the queries in the one-position-per-pair layout, N .. N + M − 1."""
    return torch.arange(n_pairs, n_pairs + n_queries)


def pair_features(batch: AssociativeRecallBatch) -> torch.Tensor:
    """Return the one-position-per-pair inputs ``(B, N + M, K + V + 1)`` float32 (module docstring)."""
    K, V = batch.n_keys, batch.n_values
    N, M = batch.n_pairs, batch.n_queries
    B = len(batch)
    features = torch.zeros(B, N + M, pair_feature_dim(K, V))
    one = torch.ones(B, N)
    features[:, :N].scatter_(2, batch.keys[..., None], one[..., None])  # one-hot key
    features[:, :N].scatter_(2, (batch.values + K)[..., None], one[..., None])  # one-hot value
    features[:, N:].scatter_(2, batch.queries[..., None], torch.ones(B, M, 1))  # one-hot queried key
    features[:, N:, K + V] = 1.0  # query flag
    return features


def exact_answer_from_pair_features(features: torch.Tensor, n_pairs: int, n_keys: int) -> torch.Tensor:
    """Return the value class ``(B, M)`` bound to each query, read from the pair-layout features alone (−1: no match)."""
    K = n_keys
    keys = features[:, :n_pairs, :K]  # (B, N, K) one-hot stored keys
    values = features[:, :n_pairs, K:-1].argmax(-1)  # (B, N) value classes
    queries = features[:, n_pairs:, :K]  # (B, M, K) one-hot queried keys
    match = torch.einsum("bmk,bnk->bmn", queries, keys) > 0.5  # (B, M, N)
    answer = values.gather(1, match.to(torch.int64).argmax(-1))
    return torch.where(match.any(-1), answer, torch.full_like(answer, -1))


def bayes_accuracy() -> float:
    """Return the accuracy of the exact posterior's answer: 1 (the context determines it)."""
    return 1.0


def context_blind_accuracy(n_values: int) -> float:
    """Return the best accuracy without the stored pairs: 1/V (values are uniform and independent of keys)."""
    _, _, _, V = check_sizes(1, 1, 1, n_values)
    return 1.0 / V


def _partitions(n: int, largest: int):
    """Yield the partitions of ``n`` into parts ≤ ``largest``, as non-increasing tuples."""
    if n == 0:
        yield ()
        return
    for first in range(min(n, largest), 0, -1):
        for rest in _partitions(n - first, first):
            yield (first,) + rest


def bag_of_values_accuracy(n_pairs: int, n_values: int) -> float:
    """Return the best accuracy of a predictor that knows the stored values but not which key holds which.

    Such a predictor — accumulation without binding — sees the multiset of the N stored values; the
    answer is a uniformly chosen element of it, so its best guess is a most frequent value and its
    accuracy is E[max_v count(v)] / N. Computed exactly over the count profiles (partitions of N), each
    with probability N! / Π λ_i! · V! / ((V − k)! Π m_j!) / V^N (k parts, m_j parts of equal size).
    """
    N, _, _, V = check_sizes(n_pairs, 1, n_pairs, n_values)
    expected_max = 0.0
    for parts in _partitions(N, N):
        k = len(parts)
        if k > V:
            continue
        arrangements = math.factorial(N) / math.prod(math.factorial(p) for p in parts)
        multiplicities = [parts.count(size) for size in set(parts)]
        value_choices = math.perm(V, k) / math.prod(math.factorial(m) for m in multiplicities)
        expected_max += parts[0] * arrangements * value_choices / V**N
    return expected_max / N
