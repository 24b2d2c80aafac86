"""Calibration metrics in bits against scipy and against exact identities."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy.stats import entropy as scipy_entropy

from attention_dynamics.book.nbcompare import assert_book_close
from attention_dynamics.science import calibration, stats
from attention_dynamics.tasks import bijection


def _random_distributions(shape, seed, zeros=False):
    g = torch.Generator().manual_seed(seed)
    p = torch.rand(*shape, generator=g, dtype=torch.float64) ** 3
    if zeros:
        p[..., 0] = 0.0  # some exactly-zero probabilities
    return p / p.sum(-1, keepdim=True)


@pytest.mark.parametrize("zeros", [False, True])
def test_entropy_and_kl_match_scipy(zeros):
    p = _random_distributions((6, 4, 7), 0, zeros)
    q = _random_distributions((6, 4, 7), 1)
    h = stats.entropy(p, unit="bits")
    kl = calibration.kl_divergence_bits(p, q.log())
    for idx in np.ndindex(6, 4):
        assert_book_close(float(h[idx]), scipy_entropy(p[idx].numpy(), base=2), rtol=0)
        assert_book_close(float(kl[idx]), scipy_entropy(p[idx].numpy(), q[idx].numpy(), base=2), rtol=0)


def test_kl_is_infinite_where_the_model_excludes_a_possible_outcome():
    p = torch.tensor([[0.5, 0.5]], dtype=torch.float64)
    log_q = torch.tensor([[0.0, -math.inf]], dtype=torch.float64)
    assert math.isinf(float(calibration.kl_divergence_bits(p, log_q)[0]))
    # …and finite (zero) where the posterior itself puts no mass on the excluded outcome
    assert float(calibration.kl_divergence_bits(torch.tensor([[1.0, 0.0]], dtype=torch.float64), log_q)[0]) == 0.0


def test_soft_cross_entropy_is_entropy_plus_kl():
    p = _random_distributions((5, 3, 4), 2)
    logits = torch.randn(5, 3, 4, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    ce = calibration.soft_cross_entropy_nats(logits, p)
    h_nats = stats.entropy(p, unit="bits").mean() * math.log(2)
    kl_nats = calibration.kl_divergence_bits(p, torch.log_softmax(logits, -1)).mean() * math.log(2)
    assert_book_close(float(ce), float(h_nats + kl_nats), rtol=0)
    # and equal to PyTorch's own soft-label cross-entropy
    torch_ce = torch.nn.functional.cross_entropy(logits.reshape(-1, 4), p.reshape(-1, 4))
    assert_book_close(float(ce), float(torch_ce), rtol=0)



def _per_sample_entropy_mae_bits(model_probs, bayes_probs) -> float:
    """The per-sample entropy error written out: mean over (B, T) of |H(model) − H(Bayes)| with scipy's entropy."""
    h_model = scipy_entropy(np.asarray(model_probs), base=2, axis=-1)
    h_bayes = scipy_entropy(np.asarray(bayes_probs), base=2, axis=-1)
    return float(np.abs(h_model - h_bayes).mean())


def _curve_entropy_mae_bits(model_probs, bayes_probs) -> float:
    """The curve entropy error written out: mean over T of |mean_B H(model) − mean_B H(Bayes)|."""
    h_model = scipy_entropy(np.asarray(model_probs), base=2, axis=-1)
    h_bayes = scipy_entropy(np.asarray(bayes_probs), base=2, axis=-1)
    return float(np.abs(h_model.mean(0) - h_bayes.mean(0)).mean())

def test_report_of_the_exact_posterior_is_zero_and_curve_never_exceeds_per_sample():
    p = _random_distributions((50, 8, 5), 4, zeros=True)
    exact = calibration.calibration_report(p, p.log())
    assert_book_close(exact.entropy_mae_bits, 0.0, rtol=0)
    assert_book_close(exact.kl_bits, 0.0, rtol=0)
    for seed in range(5):
        q = _random_distributions((50, 8, 5), 10 + seed)
        rep = calibration.calibration_report(p, q.log())
        assert rep.curve_mae_bits <= rep.entropy_mae_bits + 1e-12
        assert_book_close(rep.entropy_mae_bits, _per_sample_entropy_mae_bits(q, p), rtol=0)
        assert_book_close(rep.curve_mae_bits, _curve_entropy_mae_bits(q, p), rtol=0)
        assert rep.entropy_mae_by_position.shape == rep.kl_by_position.shape == (8,)
        assert_book_close(rep.kl_bits, rep.kl_by_position.mean(), rtol=0)


def test_uniform_predictor_on_bijection_reaches_the_context_blind_level():
    V, L = 10, 10
    batch = bijection.sample_bijection_batch(200, V, L, generator=torch.Generator().manual_seed(5))
    uniform = torch.full((200, L, V), -math.log(V), dtype=torch.float64)
    rep = calibration.calibration_report(batch.posterior, uniform)
    blind = bijection.context_blind_entropy_error_bits(V, L)
    assert_book_close(rep.entropy_mae_bits, blind, rtol=0)
    assert_book_close(rep.kl_bits, blind, rtol=0)
    assert_book_close(rep.bayes_entropy_curve, bijection.bayes_entropy_bits(V, L))
