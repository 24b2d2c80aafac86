"""The sticky Markov chain: transition matrices, stationary law, Bayes floors and data, checked independently."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch

from attention_dynamics.book.nbcompare import assert_book_close
from attention_dynamics.tasks import sticky_chain as sc


def _script_reference_matrix(n: int = 8, self_prob: float = 0.3) -> torch.Tensor:
    """The reference script's construction, transcribed loop by loop (float32, as the script runs)."""
    P = torch.zeros(n, n)
    for i in range(n):
        for j in range(n):
            P[i, j] = self_prob if i == j else 1.0 / min(abs(i - j), n - abs(i - j))
        P[i, :] = P[i, :] / P[i, :].sum() * (1 - self_prob) + (torch.arange(n) == i).float() * self_prob
        P[i, :] = P[i, :] / P[i, :].sum()
    return P


@pytest.mark.parametrize("kind", sc.CHAIN_KINDS)
@pytest.mark.parametrize("n", [3, 8, 11])
def test_rows_sum_to_one_and_entries_are_probabilities(kind, n):
    P = sc.transition_matrix(kind, n_symbols=n)
    assert P.shape == (n, n)
    assert (P > 0).all()
    assert_book_close(P.sum(1), torch.ones(n, dtype=torch.float64), rtol=0)


def test_nominal_chain_has_the_papers_words():
    """Diagonal exactly 0.3; the off-diagonal entries share 0.7 in proportion to 1/d."""
    P = sc.transition_matrix("nominal").numpy()
    d = sc.circular_distance(8)
    assert_book_close(np.diag(P), 0.3, rtol=0)
    for i in range(8):
        off = [j for j in range(8) if j != i]
        weights = 1.0 / d[i, off]
        assert_book_close(P[i, off], 0.7 * weights / weights.sum(), rtol=1e-14)


def test_reference_chain_is_the_scripts_matrix_bit_for_bit():
    assert torch.equal(sc.transition_matrix("reference", dtype=torch.float32), _script_reference_matrix())


def test_reference_effective_self_probability_closed_form():
    """Row weights 0.3 and 1/d are normalised, scaled by 0.7 and 0.3 is added: P_ii = 0.3 + 0.7·0.3/(0.3 + Σ 1/d)."""
    inverse_distance_sum = 2 * (1 + 1 / 2 + 1 / 3) + 1 / 4
    expected = 0.3 + 0.7 * 0.3 / (0.3 + inverse_distance_sum)
    assert_book_close(sc.effective_self_prob(sc.transition_matrix("reference")), expected, rtol=0)
    assert_book_close(sc.effective_self_prob(sc.transition_matrix("nominal")), 0.3, rtol=0)


def test_circular_distance():
    d = sc.circular_distance(8)
    assert d[0].tolist() == [0, 1, 2, 3, 4, 3, 2, 1]
    assert (d == d.T).all()
    with pytest.raises(ValueError):
        sc.circular_distance(1)


@pytest.mark.parametrize("kind", sc.CHAIN_KINDS)
def test_stationary_distribution_against_power_iteration(kind):
    P = sc.transition_matrix(kind).numpy()
    pi = sc.stationary_distribution(P)
    power = np.full(8, 1 / 8) @ np.linalg.matrix_power(P, 200)
    assert_book_close(pi, power)
    assert_book_close(pi @ P, pi)
    assert_book_close(pi, 1 / 8)  # circulant: doubly stochastic, uniform law


def test_stationary_distribution_of_an_asymmetric_chain():
    rng = np.random.default_rng(3)
    P = rng.dirichlet(np.ones(5), size=5)
    pi = sc.stationary_distribution(P)
    assert_book_close(pi, np.full(5, 0.2) @ np.linalg.matrix_power(P, 500))


def _numpy_chain(P: np.ndarray, length: int, seed: int) -> np.ndarray:
    """An independent sampler (NumPy inverse-CDF draws) for Monte Carlo checks."""
    rng = np.random.default_rng(seed)
    cdf = np.cumsum(P, axis=1)
    u = rng.random(length)
    s = np.empty(length, dtype=np.int64)
    s[0] = rng.integers(P.shape[0])
    for t in range(1, length):
        s[t] = min(np.searchsorted(cdf[s[t - 1]], u[t], side="right"), P.shape[0] - 1)
    return s


@pytest.mark.slow
@pytest.mark.parametrize("kind", sc.CHAIN_KINDS)
def test_bayes_floor_against_monte_carlo_conditional_entropy(kind):
    """H_min (closed form, mean row entropy) vs the plug-in conditional entropy of a 300 000-step chain."""
    P = sc.transition_matrix(kind).numpy()
    symbols = _numpy_chain(P, 300_000, seed=11)
    mc = sc.empirical_conditional_entropy_nats(symbols)
    assert_book_close(mc, sc.bayes_floor_nats(P), rtol=0, atol=0.006)  # MC s.e. ≈ 0.0015 nats
    assert_book_close(sc.entropy_rate_nats(P), sc.bayes_floor_nats(P), rtol=0)  # circulant: rows alike


@pytest.mark.slow
def test_entropy_rate_is_stationary_weighted_where_rows_differ():
    """For an asymmetric chain the entropy rate (not the unweighted row mean) is what a long chain shows."""
    P = np.array([[0.98, 0.01, 0.01], [0.3, 0.4, 0.3], [0.45, 0.1, 0.45]])
    symbols = _numpy_chain(P, 300_000, seed=5)
    mc = sc.empirical_conditional_entropy_nats(symbols)
    assert_book_close(mc, sc.entropy_rate_nats(P), rtol=0, atol=0.01)
    assert abs(sc.entropy_rate_nats(P) - sc.bayes_floor_nats(P)) > 0.2


def test_bits_are_nats_over_ln2():
    P = sc.transition_matrix("reference")
    assert_book_close(sc.bayes_floor_bits(P), sc.bayes_floor_nats(P) / math.log(2), rtol=1e-15)
    uniform = np.full((8, 8), 1 / 8)
    assert_book_close(sc.bayes_floor_nats(uniform), math.log(8), rtol=1e-15)
    assert_book_close(sc.bayes_floor_bits(uniform), 3.0, rtol=1e-15)


def test_data_follow_the_reference_scripts_random_draws():
    """The script seeds the global generator and draws start, one multinomial per step, then noise."""
    seed = 2024
    P = _script_reference_matrix()
    torch.manual_seed(0)
    mu = torch.randn(8, 20)
    torch.manual_seed(seed)
    seq = [torch.randint(8, (1,)).item()]
    for _ in range(299):
        seq.append(torch.multinomial(P[seq[-1]], 1).item())
    seq = torch.tensor(seq)
    x = mu[seq[:-1]] + torch.randn(299, 20)
    data = sc.make_sticky_chain_data(seed, length=300)
    assert torch.equal(data.x, x)
    assert torch.equal(data.y, seq[1:])
    assert torch.equal(data.previous_symbols, seq[:-1])
    assert torch.equal(data.mu, mu)


def test_inputs_are_the_previous_symbols_mean_plus_unit_noise():
    data = sc.make_sticky_chain_data(7, kind="nominal")
    assert data.x.shape == (1999, 20) and data.y.shape == (1999,)
    noise = data.x - data.mu[data.previous_symbols]
    assert abs(float(noise.mean())) < 0.01
    assert_book_close(float(noise.std()), 1.0, rtol=0, atol=0.01)
    assert torch.equal(data.y[:-1], data.previous_symbols[1:])


def test_invalid_arguments_raise():
    with pytest.raises(ValueError, match="chain kind"):
        sc.transition_matrix("sticky")
    with pytest.raises(ValueError, match="length"):
        sc.make_sticky_chain_data(0, length=1)


def _brute_force_predictive(x, mu, P, noise_std):
    """p(y_t | x_≤t) by summing over every hidden path y_0..y_{t−1} (tiny problems only)."""
    n = P.shape[0]
    out = []
    for t in range(x.shape[0]):
        pred = np.zeros(n)
        for path in itertools.product(range(n), repeat=t + 1):  # y_0 .. y_t−1... states emitting x_0..x_t
            w = 1.0 / n
            for s, state in enumerate(path):
                if s > 0:
                    w *= P[path[s - 1], state]
                w *= math.exp(-0.5 * float(((x[s] - mu[state]) ** 2).sum()) / noise_std**2)
            pred += w * P[path[-1]]
        out.append(pred / pred.sum())
    return np.array(out)


def test_filtered_floor_against_brute_force_enumeration():
    P = sc.transition_matrix("reference", n_symbols=3).numpy()
    mu = torch.tensor([[0.0, 0.0], [1.0, 0.0], [0.0, 1.2]])
    g = torch.Generator().manual_seed(0)
    symbols = sc.sample_chain(torch.as_tensor(P), 6, g)
    x = mu[symbols[:-1]] + 0.8 * torch.randn(5, 2, generator=g)
    data = sc.StickyChainData(x=x, y=symbols[1:], symbols=symbols, P=torch.as_tensor(P), mu=mu, kind="reference", seed=0)
    pred = _brute_force_predictive(x.double().numpy(), mu.double().numpy(), P, 0.8)
    expected = -np.mean(np.log(pred[np.arange(5), data.y.numpy()]))
    assert_book_close(sc.filtered_cross_entropy_nats(data, noise_std=0.8), expected, rtol=1e-12)


def test_filtered_floor_with_vanishing_noise_is_the_chains_log_loss():
    data = sc.make_sticky_chain_data(3, length=400, noise_std=1e-3)
    P = data.P.numpy()
    expected = -np.mean(np.log(P[data.previous_symbols.numpy(), data.y.numpy()]))
    assert_book_close(sc.filtered_cross_entropy_nats(data, noise_std=1e-3), expected, rtol=0, atol=1e-9)


def test_monte_carlo_entropy_rate_brackets_the_closed_form():
    P = sc.transition_matrix("nominal")
    mc = sc.monte_carlo_entropy_rate(P, 100_000, seed=4)
    assert 0 < mc["standard_error"] < 0.01
    assert abs(mc["estimate"] - sc.entropy_rate_nats(P)) < 5 * mc["standard_error"]


def test_share_of_the_way_from_ln8_to_hmin_and_its_phrase():
    hmin = 1.8
    assert_book_close(sc.UNIFORM_LOSS_NATS, math.log(8))
    assert sc.share_of_way(math.log(8), hmin) == 0.0
    assert_book_close(sc.share_of_way(hmin, hmin), 1.0)
    assert_book_close(sc.share_of_way((math.log(8) + hmin) / 2, hmin), 0.5)
    # the default H_min is the reference chain's
    reference = sc.bayes_floor_nats(sc.transition_matrix("reference"))
    assert_book_close(sc.share_of_way(reference), 1.0)
    assert sc.position_phrase(sc.share_of_way((math.log(8) + hmin) / 2 + 1e-9, hmin)).startswith("still")
    assert sc.position_phrase(0.59).startswith("more than halfway")
