"""HMM filtering: the forward filter against brute force over hidden paths and against hmmlearn."""

from __future__ import annotations

import itertools
import warnings

import numpy as np
import pytest
import torch

from attention_dynamics.book.nbcompare import assert_book_close, book_close
from attention_dynamics.tasks import hmm


def brute_force_filter(transition: np.ndarray, emission: np.ndarray, obs: list[int]) -> np.ndarray:
    """Return p(s_t | o_0..o_t) ``(K, S)`` by summing the joint over every hidden path (uniform start)."""
    S = transition.shape[0]
    out = np.zeros((len(obs), S))
    for t in range(len(obs)):
        for path in itertools.product(range(S), repeat=t + 1):
            joint = 1.0 / S
            for r, s in enumerate(path):
                if r > 0:
                    joint *= transition[path[r - 1], s]
                joint *= emission[s, obs[r]]
            out[t, path[-1]] += joint
        out[t] /= out[t].sum()
    return out


@pytest.mark.parametrize("S,O,K", [(2, 3, 6), (3, 2, 5), (5, 5, 4)])
def test_forward_filter_matches_enumeration_over_hidden_paths(S, O, K):
    batch = hmm.sample_hmm_batch(4, K, n_states=S, n_symbols=O, generator=torch.Generator().manual_seed(S + O + K))
    for b in range(len(batch)):
        expected = brute_force_filter(batch.transition[b].numpy(), batch.emission[b].numpy(), batch.observations[b].tolist())
        assert_book_close(batch.posterior[b].numpy(), expected, rtol=0, atol=1e-10)


@pytest.mark.parametrize("grid", [None, 0.01])
def test_forward_filter_matches_hmmlearn_on_every_prefix(grid):
    CategoricalHMM = pytest.importorskip("hmmlearn.hmm").CategoricalHMM
    S, O, K = 5, 5, 30
    batch = hmm.sample_hmm_batch(5, K, n_states=S, n_symbols=O, grid=grid, generator=torch.Generator().manual_seed(3))
    for b in range(len(batch)):
        model = CategoricalHMM(n_components=S, n_features=O, init_params="", params="")
        model.startprob_ = np.full(S, 1.0 / S)
        model.transmat_ = batch.transition[b].numpy()
        model.emissionprob_ = batch.emission[b].numpy()
        obs = batch.observations[b].numpy().reshape(-1, 1)
        for t in range(K):
            # the smoothed posterior at the last step of a prefix is the filtering posterior
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                smoothed = model.predict_proba(obs[: t + 1])
            assert_book_close(batch.posterior[b, t].numpy(), smoothed[-1], rtol=0, atol=1e-10)


def test_parameters_are_floored_row_stochastic_and_on_the_grid():
    g = torch.Generator().manual_seed(4)
    T, E = hmm.sample_hmm_parameters(2000, generator=g)
    for M in (T, E):
        assert_book_close(M.sum(-1), torch.ones(M.shape[:-1], dtype=torch.float64), rtol=0)
        # floored at 0.05 then renormalised by a row sum ≤ 1 + 5 · 0.05
        assert float(M.min()) >= 0.05 / 1.25 - 1e-12
    Tg, Eg = hmm.sample_hmm_parameters(2000, grid=0.01, generator=g)
    for M in (Tg, Eg):
        hundredths = M * 100
        assert_book_close(hundredths, hundredths.round(), rtol=0, atol=1e-9)
        assert_book_close(M.sum(-1), torch.ones(M.shape[:-1], dtype=torch.float64), rtol=0)
        assert float(M.min()) > 0


def test_dirichlet_rows_have_the_right_moments_without_floor():
    """Dirichlet(1) on 5 categories: mean 1/5, variance (1/5)(4/5)/6 per entry."""
    T, _ = hmm.sample_hmm_parameters(20_000, floor=0.0, generator=torch.Generator().manual_seed(5))
    entries = T.reshape(-1, 5)
    assert_book_close(entries.mean(0), 0.2, rtol=0, atol=0.003)
    assert_book_close(entries.var(0).numpy(), 0.2 * 0.8 / 6, rtol=0.03)


def test_sequences_follow_the_chain():
    """Empirical transition and emission frequencies of one fixed HMM match its matrices."""
    g = torch.Generator().manual_seed(6)
    T, E = hmm.sample_hmm_parameters(1, n_states=3, n_symbols=4, generator=g)
    n = 4000
    states, obs = hmm.sample_hmm_sequences(T.expand(n, 3, 3), E.expand(n, 3, 4), 6, generator=g)
    first = torch.bincount(states[:, 0], minlength=3) / n
    assert_book_close(first, 1 / 3, rtol=0, atol=0.03)  # uniform initial state
    pairs = torch.zeros(3, 3)
    pairs.index_put_((states[:, :-1].reshape(-1), states[:, 1:].reshape(-1)), torch.ones(n * 5), accumulate=True)
    assert_book_close(pairs / pairs.sum(1, keepdim=True), T[0], rtol=0, atol=0.03)
    emitted = torch.zeros(3, 4)
    emitted.index_put_((states.reshape(-1), obs.reshape(-1)), torch.ones(n * 6), accumulate=True)
    assert_book_close(emitted / emitted.sum(1, keepdim=True), E[0], rtol=0, atol=0.03)


def test_input_features_carry_observation_and_both_matrices():
    batch = hmm.sample_hmm_batch(3, 7, generator=torch.Generator().manual_seed(7))
    x = batch.inputs
    assert x.shape == (3, 7, hmm.hmm_input_dim(5, 5)) == (3, 7, 55)
    assert torch.equal(x[..., :5].argmax(-1), batch.observations)
    assert_book_close(x[:, 3, 5:30].double().reshape(3, 5, 5), batch.transition, rtol=0, atol=1e-7)
    assert_book_close(x[:, 6, 30:].double().reshape(3, 5, 5), batch.emission, rtol=0, atol=1e-7)


def test_invalid_arguments_are_rejected():
    with pytest.raises(ValueError):
        hmm.sample_hmm_parameters(0)
    with pytest.raises(ValueError):
        hmm.sample_hmm_parameters(3, floor=0.5)
    with pytest.raises(ValueError):
        hmm.sample_hmm_parameters(3, grid=0.03)


def test_context_blind_posterior_equals_enumeration_over_hidden_paths():
    """q_t(s) ∝ p(s_t = s) p(o_t | s), with p(s_t) summed over every hidden path of length t."""
    import itertools

    from attention_dynamics.tasks.hmm import context_blind_posterior

    g = torch.Generator().manual_seed(3)
    S, O, K, n = 3, 2, 4, 2
    T = torch.rand(n, S, S, generator=g, dtype=torch.float64)
    T = T / T.sum(-1, keepdim=True)
    E = torch.rand(n, S, O, generator=g, dtype=torch.float64)
    E = E / E.sum(-1, keepdim=True)
    obs = torch.randint(0, O, (n, K), generator=g)
    got = context_blind_posterior(T, E, obs)
    for b in range(n):
        for t in range(K):
            marginal = torch.zeros(S, dtype=torch.float64)
            for path in itertools.product(range(S), repeat=t + 1):
                p = 1.0 / S
                for a, c in zip(path, path[1:]):
                    p *= float(T[b, a, c])
                marginal[path[-1]] += p
            joint = marginal * E[b, :, obs[b, t]]
            assert_book_close(got[b, t], joint / joint.sum(), rtol=1e-12)
    # it ignores every earlier observation: changing o_0 leaves q_t (t ≥ 1) as it is
    other = obs.clone()
    other[:, 0] = 1 - other[:, 0]
    assert torch.equal(context_blind_posterior(T, E, other)[:, 1:], got[:, 1:])


@pytest.mark.parametrize("mix", [0.0, 0.3, 0.7])
def test_sticky_parameters_are_the_stated_mix_of_the_same_draws_with_the_identity(mix):
    """T = (1 − m)·T_random + m·I from the same random draws; rows still sum to one; emissions unchanged."""
    base_T, base_E = hmm.sample_hmm_parameters(50, generator=torch.Generator().manual_seed(7))
    T, E = hmm.sample_hmm_parameters(50, self_transition=mix, generator=torch.Generator().manual_seed(7))
    assert_book_close(T.sum(-1).numpy(), 1.0, rtol=0)
    assert_book_close(T.numpy(), ((1 - mix) * base_T + mix * torch.eye(5, dtype=torch.float64)).numpy(), rtol=0)
    assert torch.equal(E, base_E)
    diag = torch.diagonal(T, dim1=-2, dim2=-1)
    assert bool((diag >= mix).all()) and bool((T >= 0).all())


def test_sticky_batch_filter_matches_enumeration_over_hidden_paths():
    batch = hmm.sample_hmm_batch(4, 5, n_states=3, n_symbols=2, self_transition=0.7,
                                 generator=torch.Generator().manual_seed(11))
    assert bool((torch.diagonal(batch.transition, dim1=-2, dim2=-1) >= 0.7).all())
    for b in range(len(batch)):
        expected = brute_force_filter(batch.transition[b].numpy(), batch.emission[b].numpy(), batch.observations[b].tolist())
        assert_book_close(batch.posterior[b].numpy(), expected, rtol=0, atol=1e-10)


def test_sticky_chains_stay_put_as_often_as_their_diagonal_says():
    """The sampled sequences follow the sticky chain: empirical self-transition rate = mean diagonal."""
    batch = hmm.sample_hmm_batch(4000, 6, self_transition=0.7, generator=torch.Generator().manual_seed(5))
    stays = (batch.states[:, 1:] == batch.states[:, :-1]).double()
    expected = torch.diagonal(batch.transition, dim1=-2, dim2=-1).gather(1, batch.states[:, :-1])
    assert abs(float(stays.mean() - expected.mean())) < 4 * float(stays.std()) / np.sqrt(stays.numel())


@pytest.mark.parametrize("mix", [-0.1, 1.0])
def test_self_transition_outside_zero_one_is_rejected(mix):
    with pytest.raises(ValueError, match="self_transition"):
        hmm.sample_hmm_parameters(3, self_transition=mix)


def brute_force_window_posterior(transition: np.ndarray, emission: np.ndarray, obs: list[int], window: int) -> np.ndarray:
    """Return p(s_t | o_{t-k+1..t}) ``(K, S)`` by summing the joint of every hidden path from step 0 (uniform start).

    Every path s_0..s_t is enumerated and only the observations inside the window are scored, so the prior of
    the window's first state is the chain's own marginal, not a formula for it.
    """
    S = transition.shape[0]
    out = np.zeros((len(obs), S))
    for t in range(len(obs)):
        first = max(0, t - window + 1)
        for path in itertools.product(range(S), repeat=t + 1):
            joint = 1.0 / S
            for r, s in enumerate(path):
                if r > 0:
                    joint *= transition[path[r - 1], s]
                if r >= first:
                    joint *= emission[s, obs[r]]
            out[t, path[-1]] += joint
        out[t] /= out[t].sum()
    return out


@pytest.mark.parametrize("window", [1, 2, 3, 5])
def test_window_posterior_matches_enumeration_over_hidden_paths(window):
    S, O, K = 3, 3, 6
    batch = hmm.sample_hmm_batch(3, K, n_states=S, n_symbols=O, self_transition=0.5,
                                 generator=torch.Generator().manual_seed(window))
    got = hmm.window_posterior(batch.transition, batch.emission, batch.observations, window)
    enumerated = hmm.window_posterior_by_path_enumeration(batch.transition, batch.emission, batch.observations, window)
    for b in range(len(batch)):
        expected = brute_force_window_posterior(batch.transition[b].numpy(), batch.emission[b].numpy(),
                                                batch.observations[b].tolist(), window)
        assert_book_close(got[b].numpy(), expected, rtol=0)
        assert_book_close(enumerated[b].numpy(), expected, rtol=0)


def test_window_posterior_is_the_forward_filter_once_the_window_covers_the_prefix():
    batch = hmm.sample_hmm_batch(20, 12, generator=torch.Generator().manual_seed(8))
    T, E, obs = batch.transition, batch.emission, batch.observations
    for window in (12, 13, 40):
        assert_book_close(hmm.window_posterior(T, E, obs, window), batch.posterior, rtol=0)
    for window in (2, 5):  # a shorter window is the filter exactly at the steps t < window
        got = hmm.window_posterior(T, E, obs, window)
        assert_book_close(got[:, :window], batch.posterior[:, :window], rtol=0)
        assert float((got[:, window:] - batch.posterior[:, window:]).abs().max()) > 1e-3


def test_one_step_window_is_the_context_blind_posterior_and_windows_approach_the_filter():
    batch = hmm.sample_hmm_batch(500, 10, self_transition=0.7, generator=torch.Generator().manual_seed(9))
    T, E, obs = batch.transition, batch.emission, batch.observations
    assert torch.equal(hmm.window_posterior(T, E, obs, 1), hmm.context_blind_posterior(T, E, obs))

    def kl(q):  # mean KL(filter ‖ q), nats
        p = batch.posterior
        return float((p * (p.log() - q.log())).sum(-1).mean())

    levels = [kl(hmm.window_posterior(T, E, obs, k)) for k in range(1, 11)]
    # more memory never hurts on average (each window's information contains the shorter one's)
    assert all(a >= b - 1e-12 for a, b in zip(levels, levels[1:]))
    assert levels[0] > 10 * levels[5] and levels[-1] < 1e-12


def test_window_posterior_rejects_bad_arguments():
    batch = hmm.sample_hmm_batch(2, 4, generator=torch.Generator().manual_seed(1))
    with pytest.raises(ValueError, match="window"):
        hmm.window_posterior(batch.transition, batch.emission, batch.observations, 0)
    with pytest.raises(ValueError, match="expected"):
        hmm.window_posterior(batch.transition[0], batch.emission, batch.observations, 2)
    with pytest.raises(ValueError, match="too many"):
        hmm.window_posterior_by_path_enumeration(batch.transition, batch.emission,
                                                 torch.zeros(2, 20, dtype=torch.long), 20)


@pytest.mark.parametrize("share", [0.0, 0.4, 0.8])
def test_weak_emissions_are_the_stated_mix_of_the_same_draws_with_the_uniform_row(share):
    base_T, base_E = hmm.sample_hmm_parameters(40, generator=torch.Generator().manual_seed(2))
    T, E = hmm.sample_hmm_parameters(40, emission_uniform_share=share, generator=torch.Generator().manual_seed(2))
    assert torch.equal(T, base_T)
    assert_book_close(E.numpy(), ((1 - share) * base_E + share / 5).numpy(), rtol=0)
    assert_book_close(E.sum(-1).numpy(), 1.0, rtol=0)
    with pytest.raises(ValueError, match="emission_uniform_share"):
        hmm.sample_hmm_parameters(3, emission_uniform_share=1.0)


def test_round_to_grid_puts_mixed_rows_back_on_the_grid():
    T, _ = hmm.sample_hmm_parameters(300, grid=0.01, self_transition=0.7, generator=torch.Generator().manual_seed(3))
    assert not book_close(T * 100, (T * 100).round()).all()  # 0.3·grid + 0.7·I leaves the grid
    R = hmm.round_to_grid(T, 0.01)
    assert_book_close(R * 100, (R * 100).round(), rtol=0, atol=1e-9)
    assert_book_close(R.sum(-1), torch.ones(R.shape[:-1], dtype=torch.float64), rtol=0)
    # each entry moves by at most half a grid step, the largest also takes the residual (at most S · 0.005)
    assert float((R - T).abs().max()) <= 0.03 + 1e-12 and float(R.min()) >= 0.01 - 1e-12


def test_header_tokens_write_paper_is_format_and_decode_to_the_matrices():
    batch = hmm.sample_hmm_batch(4, 6, grid=0.01, generator=torch.Generator().manual_seed(12))
    S, O, K = 5, 5, 6
    tokens = hmm.hmm_header_tokens(batch.transition, batch.emission, batch.observations)
    assert tokens.shape == (4, hmm.hmm_header_length(S, O, K)) == (4, 3 + 25 + 25 + 12)
    assert int(tokens.max()) < hmm.hmm_header_vocab_size(O) and int(tokens.min()) >= 0
    trans, emit, sep, obs_marker = 101, 102, 103, 104  # after the 101 probability tokens 0.00 .. 1.00
    assert (tokens[:, 0] == trans).all() and (tokens[:, 26] == emit).all() and (tokens[:, 52] == sep).all()
    assert_book_close(tokens[:, 1:26].double() / 100, batch.transition.reshape(4, 25), rtol=0)
    assert_book_close(tokens[:, 27:52].double() / 100, batch.emission.reshape(4, 25), rtol=0)
    assert (tokens[:, 53::2] == obs_marker).all()
    positions = hmm.hmm_header_observation_positions(S, O, K)
    assert torch.equal(tokens[:, positions] - obs_marker - 1, batch.observations)
    off_grid = hmm.sample_hmm_batch(2, 3, generator=torch.Generator().manual_seed(1))
    with pytest.raises(ValueError, match="grid"):
        hmm.hmm_header_tokens(off_grid.transition, off_grid.emission, off_grid.observations)


def test_first_step_features_carry_the_matrices_at_t0_only():
    batch = hmm.sample_hmm_batch(3, 5, generator=torch.Generator().manual_seed(13))
    x = hmm.hmm_first_step_features(batch.transition, batch.emission, batch.observations)
    assert torch.equal(x[:, 0], batch.inputs[:, 0])
    assert torch.equal(x[:, 1:, :5], batch.inputs[:, 1:, :5])  # every observation is still there
    assert float(x[:, 1:, 5:].abs().max()) == 0.0
