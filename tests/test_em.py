"""EM for a Gaussian mixture, gradient ascent on its log-likelihood, and the Xu & Jordan bridge."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import torch
from hypothesis import given, settings, strategies as st
from sklearn.exceptions import ConvergenceWarning
from sklearn.mixture import GaussianMixture as SklearnMixture

from attention_dynamics.book.nbcompare import assert_book_close
from attention_dynamics.science import em


@pytest.fixture(autouse=True)
def _one_thread():
    """Tiny tensors: extra threads only add overhead (conftest restores the thread count)."""
    torch.set_num_threads(1)


def _mixture(seed=0, K=3, d=2, sigma=0.8, spread=3.0):
    g = torch.Generator().manual_seed(seed)
    means = spread * torch.randn(K, d, generator=g, dtype=torch.float64)
    weights = torch.softmax(torch.randn(K, generator=g, dtype=torch.float64), 0)
    return em.GaussianMixture(means=means, sigma=sigma, weights=weights), g


def _sklearn_model(mixture):
    """A fitted-looking sklearn spherical mixture with our parameters (for predict_proba)."""
    model = SklearnMixture(n_components=mixture.means.shape[0], covariance_type="spherical")
    model.weights_ = mixture.weights.numpy()
    model.means_ = mixture.means.numpy()
    model.covariances_ = np.full(mixture.means.shape[0], mixture.sigma ** 2)
    model.precisions_cholesky_ = 1.0 / np.sqrt(model.covariances_)
    model.precisions_ = 1.0 / model.covariances_
    return model


def test_responsibilities_match_scikit_learn():
    mixture, g = _mixture(1)
    x, _ = em.sample_gaussian_mixture(200, mixture, generator=g)
    assert_book_close(em.responsibilities(x, mixture).numpy(),
                      _sklearn_model(mixture).predict_proba(x.numpy()), rtol=0, atol=1e-10)
    ll = float(em.log_likelihood(x, mixture))
    assert_book_close(ll, _sklearn_model(mixture).score(x.numpy()) * len(x), rtol=1e-10)


def test_em_mean_step_matches_one_scikit_learn_iteration():
    """sklearn's first M-step from our parameters gives the same means (its variances also move; means do not depend on them)."""
    mixture, g = _mixture(2)
    x, _ = em.sample_gaussian_mixture(300, mixture, generator=g)
    model = SklearnMixture(n_components=3, covariance_type="spherical", max_iter=1, tol=0.0,
                           weights_init=mixture.weights.numpy(), means_init=mixture.means.numpy(),
                           precisions_init=np.full(3, 1.0 / mixture.sigma ** 2), reg_covar=0.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model.fit(x.numpy())
    assert_book_close(em.em_mean_step(x, mixture).numpy(), model.means_, rtol=1e-9, atol=1e-9)


def test_mean_gradient_matches_autograd():
    mixture, g = _mixture(3, K=4, d=3)
    x, _ = em.sample_gaussian_mixture(100, mixture, generator=g)
    means = mixture.means.clone().requires_grad_(True)
    (grad,) = torch.autograd.grad(em.log_likelihood(x, mixture.with_means(means)), means)
    assert_book_close(em.mean_gradient(x, mixture), grad, rtol=0, atol=1e-10)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), K=st.integers(1, 5), d=st.integers(1, 4),
       sigma=st.floats(0.3, 3.0), n=st.integers(5, 80))
def test_xu_jordan_identity_em_step_is_a_preconditioned_gradient_step(seed, K, d, sigma, n):
    mixture, g = _mixture(seed, K=K, d=d, sigma=sigma, spread=1.5)
    x, _ = em.sample_gaussian_mixture(n, mixture, generator=g)
    counts = em.soft_counts(em.responsibilities(x, mixture))
    if counts.min() < 1e-6:  # a component nobody belongs to has no M-step (N_k = 0)
        return
    scale = float(x.abs().max()) + float(mixture.means.abs().max())
    assert em.xu_jordan_max_abs_error(x, mixture) <= 1e-9 * max(scale, 1.0) * (1 + float(1 / counts.min()))


def test_a_shared_preconditioner_breaks_the_bridge():
    """Per-component sigma²/N_k matters: one shared step size sigma²/mean(N_k) is not an EM step."""
    mixture, g = _mixture(4)
    x, _ = em.sample_gaussian_mixture(100, mixture, generator=g)
    grad = em.mean_gradient(x, mixture)
    counts = em.soft_counts(em.responsibilities(x, mixture))
    bridged = em.preconditioned_gradient_step(mixture, grad, counts)
    shared = mixture.means + grad * mixture.sigma ** 2 / counts.mean()
    assert (em.em_mean_step(x, mixture) - bridged).abs().max() < 1e-10
    assert (em.em_mean_step(x, mixture) - shared).abs().max() > 1e-3


def test_responsibilities_are_a_softmax_attention():
    mixture, g = _mixture(5, K=4, d=3)
    x, _ = em.sample_gaussian_mixture(50, mixture, generator=g)
    assert_book_close(em.responsibilities_as_attention(x, mixture), em.responsibilities(x, mixture), rtol=0)


def test_em_never_decreases_the_likelihood_and_equals_unit_preconditioned_ascent():
    mixture, g = _mixture(6)
    x, _ = em.sample_gaussian_mixture(200, mixture, generator=g)
    start = mixture.with_means(mixture.means + torch.randn(3, 2, generator=g, dtype=torch.float64))
    lls = em.run_em(x, start, 30)
    assert np.all(np.diff(lls) >= -1e-12)  # EM's monotone-improvement guarantee
    assert_book_close(em.run_gradient_ascent(x, start, 30, 1.0, preconditioned=True), lls, rtol=0, atol=1e-10)
    plain = em.run_gradient_ascent(x, start, 30, 1e-3)
    assert plain[-1] > plain[0]


def test_validation():
    with pytest.raises(ValueError, match="sigma"):
        em.GaussianMixture(means=torch.zeros(2, 2), sigma=0.0, weights=torch.tensor([0.5, 0.5]))
    with pytest.raises(ValueError, match="sum to 1"):
        em.GaussianMixture(means=torch.zeros(2, 2), sigma=1.0, weights=torch.tensor([0.5, 0.6]))
    with pytest.raises(ValueError, match="weights must be"):
        em.GaussianMixture(means=torch.zeros(2, 2), sigma=1.0, weights=torch.tensor([1.0]))
    mixture, _ = _mixture(0)
    with pytest.raises(ValueError, match="lr"):
        em.run_gradient_ascent(torch.zeros(3, 2, dtype=torch.float64), mixture, 2, 0.0)
    assert math.isfinite(float(em.log_likelihood(torch.zeros(3, 2, dtype=torch.float64), mixture)))
