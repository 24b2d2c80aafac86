"""Bijection elimination against brute-force enumeration over every permutation (Paper I's first wind tunnel)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch

from attention_dynamics.book.nbcompare import assert_book_close
from attention_dynamics.tasks import bijection


def brute_force_posterior(keys: list[int], values: list[int], V: int, t: int) -> np.ndarray:
    """Return p(pi(keys[t]) | first t pairs) by enumerating all V! bijections (uniform prior)."""
    counts = np.zeros(V)
    for perm in itertools.permutations(range(V)):
        if all(perm[keys[s]] == values[s] for s in range(t)):
            counts[perm[keys[t]]] += 1
    return counts / counts.sum()


@pytest.mark.parametrize("V,L", [(3, 3), (4, 2), (4, 4), (5, 4), (6, 6)])
def test_exact_posterior_matches_enumeration_over_all_permutations(V, L):
    batch = bijection.sample_bijection_batch(6, V, L, generator=torch.Generator().manual_seed(V * 10 + L))
    for b in range(len(batch)):
        keys = batch.keys[b].tolist()
        values = batch.targets[b].tolist()
        for t in range(L):
            expected = brute_force_posterior(keys, values, V, t)
            assert_book_close(batch.posterior[b, t].numpy(), expected)


def test_tokens_layout_and_targets():
    V, L = 7, 5
    batch = bijection.sample_bijection_batch(50, V, L, generator=torch.Generator().manual_seed(1))
    assert batch.tokens.shape == (50, 2 * L - 1) == (50, bijection.sequence_length(L))
    assert torch.equal(batch.key_positions, torch.tensor([0, 2, 4, 6, 8]))
    for b in range(50):
        pi = batch.bijection[b]
        assert sorted(pi.tolist()) == list(range(V))  # a bijection
        keys = batch.tokens[b, 0::2]
        assert len(set(keys.tolist())) == L and int(keys.max()) < V  # distinct keys
        assert torch.equal(keys, batch.keys[b])
        assert torch.equal(batch.targets[b], pi[keys])
        assert torch.equal(batch.tokens[b, 1::2] - V, pi[keys[:-1]])  # values follow their keys
    assert int(batch.tokens.max()) < bijection.vocab_size(V)
    # the target is never among the values already revealed, and always allowed by the posterior
    assert (batch.posterior.gather(2, batch.targets[..., None]) > 0).all()


def test_sampler_is_uniform_over_bijections():
    """Every one of the 3! bijections and 3·2 key orders appears with frequency ≈ 1/6 (chi-square)."""
    batch = bijection.sample_bijection_batch(60_000, 3, 2, generator=torch.Generator().manual_seed(2))
    from scipy.stats import chisquare

    for table in (batch.bijection, batch.keys):
        _, counts = torch.unique(table, dim=0, return_counts=True)
        assert len(counts) == 6
        assert chisquare(counts.numpy()).pvalue > 1e-4


@pytest.mark.parametrize("V,L", [(2, 1), (4, 4), (10, 10), (20, 19)])
def test_closed_forms_against_direct_sums(V, L):
    remaining = V - np.arange(L)
    assert_book_close(bijection.bayes_entropy_bits(V, L), np.log2(remaining), rtol=0)
    assert_book_close(bijection.bayes_ce_floor_nats(V, L), np.mean(np.log(remaining)), rtol=0)
    assert_book_close(bijection.bayes_top1_accuracy(V, L), np.mean(1 / remaining), rtol=0)
    assert_book_close(bijection.context_blind_entropy_error_bits(V, L),
                      np.mean(math.log2(V) - np.log2(remaining)), rtol=0)


def test_closed_forms_against_enumeration():
    """Floor, Bayes accuracy and the context-blind optimum from the enumerated posterior (V = 4, L = 3)."""
    V, L = 4, 3
    ce, acc, entropy, blind_kl = np.zeros(L), np.zeros(L), np.zeros(L), np.zeros(L)
    marginal = np.zeros((L, V))
    cases = 0
    for pi in itertools.permutations(range(V)):  # every bijection and every key order, equally likely
        for keys in itertools.permutations(range(V), L):
            values = [pi[k] for k in keys]
            cases += 1
            for t in range(L):
                post = brute_force_posterior(list(keys), values, V, t)
                ce[t] += -math.log(post[values[t]])
                acc[t] += post.max()  # probability that the Bayes top-1 guess is right
                entropy[t] += -sum(p * math.log2(p) for p in post if p > 0)
                blind_kl[t] += sum(p * math.log2(p * V) for p in post if p > 0)  # KL(post ‖ uniform)
                marginal[t, values[t]] += 1
    assert_book_close(bijection.bayes_ce_floor_nats(V, L), ce.sum() / cases / L, rtol=0)
    assert_book_close(bijection.bayes_top1_accuracy(V, L), acc.sum() / cases / L, rtol=0)
    assert_book_close(bijection.bayes_entropy_bits(V, L), entropy / cases)
    # without the context the target is uniform at every position, so uniform is the best blind guess
    assert_book_close(marginal / cases, np.full((L, V), 1 / V))
    assert_book_close(bijection.context_blind_entropy_error_bits(V, L), blind_kl.sum() / cases / L, rtol=0)


@pytest.mark.parametrize("V,L", [(1, 1), (5, 0), (5, 6), (4.5, 2)])
def test_invalid_sizes_are_rejected(V, L):
    with pytest.raises(ValueError):
        bijection.sample_bijection_batch(2, V, L)
