"""Geometry measurements against brute-force loops, closed forms and independent libraries."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch
from scipy.stats import entropy as scipy_entropy, rankdata

from attention_dynamics.book.nbcompare import assert_book_close
from attention_dynamics.science import geometry, settling, stats


def _rng(seed):
    return np.random.default_rng(seed)


def test_mean_abs_cosine_matches_pairwise_loop():
    X = _rng(0).normal(size=(7, 5))
    pairs = [abs(X[i] @ X[j]) / np.linalg.norm(X[i]) / np.linalg.norm(X[j]) for i, j in itertools.combinations(range(7), 2)]
    assert_book_close(geometry.mean_abs_cosine(X), np.mean(pairs), rtol=0)
    assert geometry.mean_abs_cosine(np.eye(4)) == 0.0


def test_mean_abs_cosine_per_set_matches_the_single_set_version():
    X = torch.as_tensor(_rng(6).normal(size=(3, 2, 6, 4)))
    batched = geometry.mean_abs_cosine_per_set(X)
    assert batched.shape == (3, 2)
    for i, j in itertools.product(range(3), range(2)):
        assert_book_close(float(batched[i, j]), geometry.mean_abs_cosine(X[i, j]), rtol=0)


@pytest.mark.parametrize("d", [2, 3, 16, 32])
def test_isotropic_baseline_matches_monte_carlo(d):
    X = _rng(d).normal(size=(200_000, 2, d))
    cos = np.abs((X[:, 0] * X[:, 1]).sum(-1)) / np.linalg.norm(X[:, 0], axis=-1) / np.linalg.norm(X[:, 1], axis=-1)
    assert_book_close(geometry.isotropic_abs_cosine_baseline(d),
                      cos.mean(), rtol=0, atol=4 * cos.std() / math.sqrt(len(cos)))
    if d == 2:
        assert_book_close(geometry.isotropic_abs_cosine_baseline(2), 2 / math.pi, rtol=0)
    if d == 3:
        assert_book_close(geometry.isotropic_abs_cosine_baseline(3), 0.5, rtol=0)


def test_pca_projection_matches_numpy_svd():
    X = _rng(1).normal(size=(60, 6)) @ np.diag([5, 3, 1, 0.5, 0.2, 0.1])
    scores, ratios = geometry.pca_projection(X, 2)
    Xc = X - X.mean(0)
    _, sv, Vt = np.linalg.svd(Xc, full_matrices=False)
    assert_book_close(ratios, (sv**2 / (sv**2).sum())[:2], rtol=1e-10)
    assert_book_close(np.abs(scores), np.abs(Xc @ Vt[:2].T), rtol=1e-9, atol=1e-9)
    assert_book_close(geometry.pca_spectrum(X), sv**2 / (sv**2).sum(), rtol=1e-10)


def test_spearman_is_pearson_of_average_ranks():
    a = _rng(2).integers(0, 5, size=40).astype(float)  # with ties
    b = a + _rng(3).normal(size=40)
    expected = np.corrcoef(rankdata(a), rankdata(b))[0, 1]
    assert_book_close(geometry.spearman_correlation(a, b), expected, rtol=0)
    assert_book_close(geometry.spearman_correlation(np.arange(5), np.exp(np.arange(5))), 1.0)


def _causal_softmax(scores):
    T = scores.shape[-1]
    mask = torch.ones(T, T, dtype=torch.bool).tril()
    return torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)


def test_attention_entropy_bits_uniform_onehot_and_scipy():
    T = 6
    uniform = _causal_softmax(torch.zeros(T, T, dtype=torch.float64))
    assert_book_close(stats.entropy(uniform, unit="bits").numpy(), np.log2(np.arange(1, T + 1)))
    assert torch.all(stats.entropy(torch.eye(T), unit="bits") == 0)
    alpha = _causal_softmax(torch.randn(3, T, T, generator=torch.Generator().manual_seed(0), dtype=torch.float64))
    h = stats.entropy(alpha, unit="bits")
    for b, i in itertools.product(range(3), range(T)):
        assert_book_close(float(h[b, i]), scipy_entropy(alpha[b, i, : i + 1].numpy(), base=2), rtol=0)


def test_relative_reduction():
    assert_book_close(geometry.relative_reduction(2.0, 0.2), 0.9)
    with pytest.raises(ValueError):
        geometry.relative_reduction(0.0, 1.0)


def test_query_key_alignment_matches_loops_and_uniform_attention_has_no_gap():
    g = torch.Generator().manual_seed(4)
    B, T, d = 2, 5, 4
    q, k = torch.randn(B, T, d, generator=g, dtype=torch.float64), torch.randn(B, T, d, generator=g, dtype=torch.float64)
    alpha = _causal_softmax(torch.randn(B, T, T, generator=g, dtype=torch.float64))
    attended, visible = geometry.query_key_alignment(q, k, alpha)
    cos = lambda a, b: float(a @ b / a.norm() / b.norm())  # noqa: E731
    exp_att = np.mean([sum(float(alpha[b, i, j]) * cos(q[b, i], k[b, j]) for j in range(i + 1))
                       for b in range(B) for i in range(T)])
    exp_vis = np.mean([np.mean([cos(q[b, i], k[b, j]) for j in range(i + 1)]) for b in range(B) for i in range(T)])
    assert_book_close(attended, exp_att, rtol=0)
    assert_book_close(visible, exp_vis, rtol=0)
    uniform = _causal_softmax(torch.zeros(B, T, T, dtype=torch.float64))
    a_u, v_u = geometry.query_key_alignment(q, k, uniform)
    assert_book_close(a_u, v_u, rtol=0)


def test_attention_pattern_similarity():
    g = torch.Generator().manual_seed(5)
    a = _causal_softmax(torch.randn(3, 4, 4, generator=g, dtype=torch.float64))
    b = _causal_softmax(torch.randn(3, 4, 4, generator=g, dtype=torch.float64))
    assert_book_close(geometry.attention_pattern_similarity(a, a), 1.0)
    tv = np.mean([0.5 * float((a[n, i] - b[n, i]).abs().sum()) for n in range(3) for i in range(4)])
    assert_book_close(geometry.attention_pattern_similarity(a, b), 1 - tv, rtol=0)
    one, other = torch.tensor([[1.0, 0.0]]), torch.tensor([[0.0, 1.0]])
    assert geometry.attention_pattern_similarity(one, other) == 0.0


def test_settle_step_on_constructed_trajectories():
    steps = np.array([0, 10, 20, 30, 40, 50])
    # 0 → 1 with a dip back out of the band at step 30: settled only from step 40 on
    assert settling.settle_step(steps, [0.0, 0.95, 0.97, 0.5, 0.95, 1.0]) == 40
    assert settling.settle_step(steps, [0.0, 0.95, 0.97, 0.99, 0.95, 1.0]) == 10
    # errors falling by orders of magnitude: 1 → 1e-5; linear settles at once, log10 late
    err = 10.0 ** -np.array([0, 1, 2, 3, 4.6, 5])
    assert settling.settle_step(steps, err) == 10
    assert settling.settle_step(steps, err, log=True) == 40
    assert settling.settle_step(steps, np.ones(6)) == 0  # never changed: settled from the start
    with pytest.raises(ValueError):
        settling.settle_step([0, 0, 1], [1, 2, 3])


def test_stays_above_step():
    steps = [0, 10, 20, 30]
    assert settling.stays_above_step(steps, [0.5, 0.96, 0.94, 0.97], 0.95) == 30
    assert settling.stays_above_step(steps, [0.5, 0.96, 0.97, 0.99], 0.95) == 10
    assert settling.stays_above_step(steps, [0.96, 0.97, 0.98, 0.99], 0.95) == 0
    assert settling.stays_above_step(steps, [0.96, 0.97, 0.98, 0.90], 0.95) is None


def test_late_change_is_the_range_over_the_last_fifth():
    steps = np.arange(0, 101, 10)
    values = np.array([5.0, 4, 3, 2, 1, 0.5, 0.4, 0.3, 0.25, 0.31, 0.2])
    # steps 80, 90, 100 lie in the last 20 %: range of (0.25, 0.31, 0.2)
    assert_book_close(settling.late_change(steps, values), 0.11)
    assert_book_close(settling.late_change(steps, values, last=0.45), 0.4 - 0.2)  # steps 60..100
    assert settling.late_change(steps, np.full(11, 7.0)) == 0.0
    with pytest.raises(ValueError):
        settling.late_change(steps[::-1], values)
    with pytest.raises(ValueError):
        settling.late_change(steps, values, last=1.0)


def test_signed_cosine_of_closed_form_configurations():
    assert_book_close(geometry.signed_mean_offdiagonal_cosine(torch.eye(4)), 0.0, rtol=0)
    assert_book_close(geometry.signed_mean_offdiagonal_cosine(torch.ones(3, 5)), 1.0)
    # the n vertices of a regular simplex centred at 0: every pairwise cosine is −1/(n − 1)
    n = 5
    simplex = torch.eye(n, dtype=torch.float64) - 1.0 / n
    assert_book_close(geometry.signed_mean_offdiagonal_cosine(simplex), -1 / (n - 1), rtol=1e-12)
    assert_book_close(geometry.mean_abs_cosine(simplex), 1 / (n - 1), rtol=1e-12)
    with pytest.raises(ValueError):
        geometry.signed_mean_offdiagonal_cosine(torch.zeros(3, 2))


def test_key_cosine_of_embeddings_applies_each_heads_key_rows():
    d, H, dh = 6, 2, 3
    embeddings = torch.eye(d)[:4]  # tokens e_0 .. e_3
    key = torch.zeros(H * dh, d)
    key[:dh, :dh] = torch.eye(dh)  # head 0 reads coordinates 0..2: keys e_0, e_1, e_2 orthogonal, e_3 → 0 …
    key[:dh, 3] = 1.0  # … and e_3 → (1, 1, 1)
    key[dh:, 0] = 1.0  # head 1 maps every token to the same key direction or zero
    key[dh:, 1:4] = 1.0
    signed = geometry.key_cosine_of_embeddings(embeddings, key, H)
    # head 0: keys e0, e1, e2, (1,1,1)/√3: cosines 0 among the first three, 1/√3 with the fourth (6 of 12 ordered pairs)
    assert_book_close(signed[0], 6 * (1 / math.sqrt(3)) / 12, rtol=1e-12)
    assert_book_close(signed[1], 1.0)
    absolute = geometry.key_cosine_of_embeddings(embeddings, key, H, signed=False)
    assert_book_close(absolute[0], signed[0])
    assert_book_close(absolute[1], 1.0)
