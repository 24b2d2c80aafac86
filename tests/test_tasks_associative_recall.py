"""Associative recall against a brute-force dictionary lookup (Paper I v3's binding task)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy.stats import chi2_contingency, chisquare

from attention_dynamics.book.nbcompare import assert_book_close
from attention_dynamics.tasks import associative_recall as ar


def test_layout_and_exact_answer_match_a_dictionary_lookup():
    N, M, K, V = 5, 3, 9, 4
    batch = ar.sample_associative_recall_batch(200, N, M, K, V, generator=torch.Generator().manual_seed(0))
    assert batch.tokens.shape == (200, ar.sequence_length(N, M)) == (200, 13)
    assert torch.equal(batch.query_positions, torch.tensor([10, 11, 12]))
    assert int(batch.tokens.max()) < ar.vocab_size(K, V)
    for b in range(len(batch)):
        toks = batch.tokens[b].tolist()
        stored = {toks[2 * p]: toks[2 * p + 1] - K for p in range(N)}  # key -> value class
        assert len(stored) == N  # distinct keys
        assert all(0 <= k < K for k in stored) and all(0 <= v < V for v in stored.values())
        queries = toks[2 * N :]
        assert len(set(queries)) == M and set(queries) <= set(stored)  # distinct stored keys
        assert [stored[q] for q in queries] == batch.targets[b].tolist()
    assert torch.equal(ar.exact_answer(batch.tokens, N, K), batch.targets)
    posterior = ar.exact_posterior(batch.tokens, N, K, V)
    assert posterior.shape == (200, M, V)
    assert torch.equal(posterior.argmax(-1), batch.targets) and torch.all(posterior.sum(-1) == 1)


def test_exact_answer_reports_a_query_with_no_stored_key():
    tokens = torch.tensor([[0, 5, 1, 6, 2]])  # K = 4: pairs (0 -> 1), (1 -> 2), query 2 was never stored
    assert ar.exact_answer(tokens, 2, 4).tolist() == [[-1]]
    with pytest.raises(ValueError, match="matches no stored key"):
        ar.exact_posterior(tokens, 2, 4, 3)


def test_answer_is_independent_of_the_query_so_context_blind_accuracy_is_chance():
    """Values are uniform and independent of keys: a predictor without the pairs gets 1/V at best."""
    N, M, K, V = 3, 2, 4, 3
    batch = ar.sample_associative_recall_batch(30_000, N, M, K, V, generator=torch.Generator().manual_seed(1))
    q, a = batch.queries.reshape(-1).numpy(), batch.targets.reshape(-1).numpy()
    table = np.zeros((K, V))
    np.add.at(table, (q, a), 1)
    assert chi2_contingency(table).pvalue > 1e-3  # query and answer independent
    assert chisquare(table.sum(0)).pvalue > 1e-3  # answers uniform
    best_blind = table.max(1).sum() / table.sum()  # the best guess for each query, with hindsight
    assert_book_close(best_blind, ar.context_blind_accuracy(V), rtol=0, atol=0.01)
    assert ar.bayes_accuracy() == 1.0


@pytest.mark.parametrize("sizes", [(0, 1, 4, 4), (5, 1, 4, 4), (2, 3, 4, 4), (2, 1, 4, 1), (2.5, 1, 4, 4)])
def test_invalid_sizes_are_rejected(sizes):
    with pytest.raises(ValueError):
        ar.sample_associative_recall_batch(2, *sizes)


def test_same_generator_seed_same_batch():
    a = ar.sample_associative_recall_batch(8, 4, 2, 6, 5, generator=torch.Generator().manual_seed(3))
    b = ar.sample_associative_recall_batch(8, 4, 2, 6, 5, generator=torch.Generator().manual_seed(3))
    assert torch.equal(a.tokens, b.tokens)


def test_pair_layout_carries_the_same_pairs_and_its_answer_matches():
    N, M, K, V = 4, 3, 7, 5
    batch = ar.sample_associative_recall_batch(100, N, M, K, V, generator=torch.Generator().manual_seed(4))
    features = ar.pair_features(batch)
    assert features.shape == (100, N + M, ar.pair_feature_dim(K, V))
    assert torch.equal(ar.pair_query_positions(N, M), torch.tensor([4, 5, 6]))
    for b in range(100):
        for p in range(N):  # two-hot: the key, then the value, no query flag
            assert torch.nonzero(features[b, p]).flatten().tolist() == [int(batch.keys[b, p]), K + int(batch.values[b, p])]
        for m in range(M):  # the queried key and the query flag
            assert torch.nonzero(features[b, N + m]).flatten().tolist() == [int(batch.queries[b, m]), K + V]
    assert torch.equal(ar.exact_answer_from_pair_features(features, N, K), batch.targets)
    features[0, N, :K] = 0  # a query that matches nothing
    assert ar.exact_answer_from_pair_features(features, N, K)[0, 0] == -1


@pytest.mark.parametrize("N,V", [(1, 3), (2, 2), (3, 4), (4, 3), (5, 5), (4, 16)])
def test_bag_of_values_accuracy_matches_enumeration_of_every_value_sequence(N, V):
    import itertools
    from collections import Counter

    best = [max(Counter(seq).values()) for seq in itertools.product(range(V), repeat=N)]
    assert_book_close(ar.bag_of_values_accuracy(N, V), np.mean(best) / N, rtol=0)


def test_bag_of_values_accuracy_is_what_the_mode_guess_scores_on_samples():
    N, M, K, V = 4, 4, 16, 16
    batch = ar.sample_associative_recall_batch(20_000, N, M, K, V, generator=torch.Generator().manual_seed(5))
    counts = torch.nn.functional.one_hot(batch.values, V).sum(1)  # (B, V): the bag of stored values
    guess = counts.argmax(1, keepdim=True)  # a most frequent stored value (ties: the first)
    accuracy = (batch.targets == guess).double().mean().item()
    assert_book_close(accuracy, ar.bag_of_values_accuracy(N, V), rtol=0, atol=0.01)
