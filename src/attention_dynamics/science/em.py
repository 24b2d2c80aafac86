"""Classical EM for a Gaussian mixture, next to gradient ascent on its log-likelihood (chapter 4).

The mixture has ``K`` components with means ``mu_k ∈ R^d``, a shared isotropic variance
``sigma²`` and weights ``pi_k``, all known except the means. For data ``x_1..x_N``:

- the **E-step** computes responsibilities ``r_nk = p(z_n = k | x_n)``, a softmax over k of
  ``log pi_k − ||x_n − mu_k||² / (2 sigma²)`` — a softmax attention of query ``x_n`` over the
  "keys" ``mu_k`` (:func:`responsibilities_as_attention`);
- the **M-step** sets each mean to the responsibility-weighted average of the data,
  ``mu_k ← Σ_n r_nk x_n / N_k`` with soft count ``N_k = Σ_n r_nk``;
- the gradient of the log-likelihood is ``∂ℓ/∂mu_k = Σ_n r_nk (x_n − mu_k) / sigma²``.

Hence (Xu & Jordan 1996) **an EM step on a mean is a gradient step preconditioned by
sigma²/N_k**: ``mu_k + (sigma²/N_k) ∂ℓ/∂mu_k = Σ_n r_nk x_n / N_k``. In the attention head the
same two moves appear with alpha as responsibilities and the values as prototypes: the value law
``Δv_j = −eta Σ_i alpha_ij u_i`` is the gradient step, and a value learning rate ``∝ 1/N_j`` turns
it into a closed-form, M-step-like update.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

__all__ = [
    "GaussianMixture",
    "sample_gaussian_mixture",
    "log_likelihood",
    "responsibilities",
    "responsibilities_as_attention",
    "soft_counts",
    "mean_gradient",
    "em_mean_step",
    "preconditioned_gradient_step",
    "xu_jordan_max_abs_error",
    "run_em",
    "run_gradient_ascent",
]


@dataclass
class GaussianMixture:
    """A mixture with means ``(K, d)``, shared isotropic standard deviation ``sigma`` and weights ``(K,)``."""

    means: torch.Tensor
    sigma: float
    weights: torch.Tensor

    def __post_init__(self) -> None:
        if self.means.ndim != 2:
            raise ValueError(f"means must be (K, d), got {tuple(self.means.shape)}")
        if self.weights.shape != (self.means.shape[0],):
            raise ValueError(f"weights must be ({self.means.shape[0]},), got {tuple(self.weights.shape)}")
        if not self.sigma > 0:
            raise ValueError(f"sigma must be positive, got {self.sigma!r}")
        if (self.weights < 0).any() or not math.isclose(float(self.weights.sum()), 1.0, rel_tol=1e-9):
            raise ValueError("weights must be non-negative and sum to 1")

    def with_means(self, means: torch.Tensor) -> "GaussianMixture":
        """Return the same mixture with other means."""
        return GaussianMixture(means=means, sigma=self.sigma, weights=self.weights)


def sample_gaussian_mixture(
    n: int, mixture: GaussianMixture, *, generator: torch.Generator | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Return ``(x, z)``: ``n`` points ``(n, d)`` drawn from the mixture and their components ``(n,)``."""
    if n < 1:
        raise ValueError(f"n must be positive, got {n}")
    z = torch.multinomial(mixture.weights.double(), n, replacement=True, generator=generator)
    noise = torch.randn(n, mixture.means.shape[1], generator=generator, dtype=mixture.means.dtype)
    return mixture.means[z] + mixture.sigma * noise, z


def _component_log_joint(x: torch.Tensor, mixture: GaussianMixture) -> torch.Tensor:
    """Return ``log pi_k + log N(x_n; mu_k, sigma² I)``, shape ``(n, K)``."""
    d = x.shape[-1]
    sq = torch.cdist(x, mixture.means) ** 2  # (n, K)
    log_norm = -0.5 * d * math.log(2 * math.pi * mixture.sigma ** 2)
    return torch.log(mixture.weights).to(x.dtype) + log_norm - sq / (2 * mixture.sigma ** 2)


def log_likelihood(x: torch.Tensor, mixture: GaussianMixture) -> torch.Tensor:
    """Return the total log-likelihood ``ℓ = Σ_n log Σ_k pi_k N(x_n; mu_k, sigma² I)`` in nats (a scalar)."""
    return torch.logsumexp(_component_log_joint(x, mixture), dim=-1).sum()


def responsibilities(x: torch.Tensor, mixture: GaussianMixture) -> torch.Tensor:
    """Return the E-step responsibilities ``r_nk = p(z_n = k | x_n)``, shape ``(n, K)`` (rows sum to 1)."""
    return torch.softmax(_component_log_joint(x, mixture), dim=-1)


def responsibilities_as_attention(x: torch.Tensor, mixture: GaussianMixture) -> torch.Tensor:
    """Return the responsibilities computed as softmax attention, shape ``(n, K)``.

    Query ``x_n``, keys ``mu_k``, scale ``1/sigma²`` and a per-key bias
    ``log pi_k − ||mu_k||²/(2 sigma²)``: ``softmax_k(x_n·mu_k / sigma² + bias_k)``. The term
    ``−||x_n||²/(2 sigma²)`` is the same for every k and cancels in the softmax.
    """
    scores = x @ mixture.means.transpose(0, 1) / mixture.sigma ** 2  # (n, K)
    bias = torch.log(mixture.weights).to(x.dtype) - (mixture.means ** 2).sum(-1) / (2 * mixture.sigma ** 2)
    return torch.softmax(scores + bias, dim=-1)


def soft_counts(resp: torch.Tensor) -> torch.Tensor:
    """Return the soft counts ``N_k = Σ_n r_nk``, shape ``(K,)``."""
    return resp.sum(0)


def mean_gradient(x: torch.Tensor, mixture: GaussianMixture) -> torch.Tensor:
    """Return ``∂ℓ/∂mu_k = Σ_n r_nk (x_n − mu_k) / sigma²`` in closed form, shape ``(K, d)``."""
    r = responsibilities(x, mixture)  # (n, K)
    return (r.transpose(0, 1) @ x - soft_counts(r).unsqueeze(-1) * mixture.means) / mixture.sigma ** 2


def em_mean_step(x: torch.Tensor, mixture: GaussianMixture) -> torch.Tensor:
    """Return the M-step means ``Σ_n r_nk x_n / N_k`` after an E-step at the current means, shape ``(K, d)``."""
    r = responsibilities(x, mixture)  # (n, K)
    return (r.transpose(0, 1) @ x) / soft_counts(r).unsqueeze(-1)


def preconditioned_gradient_step(
    mixture: GaussianMixture, gradient: torch.Tensor, counts: torch.Tensor, step: float = 1.0
) -> torch.Tensor:
    """Return ``mu_k + step · (sigma² / N_k) · gradient_k``, shape ``(K, d)`` (step 1: the EM step)."""
    return mixture.means + step * (mixture.sigma ** 2 / counts).unsqueeze(-1) * gradient


def xu_jordan_max_abs_error(x: torch.Tensor, mixture: GaussianMixture) -> float:
    """Return ``max |EM step − (mu + sigma²/N_k · ∂ℓ/∂mu)|`` over all mean coordinates (units of x).

    The gradient comes from autograd on :func:`log_likelihood` (independent of the closed form
    and of the EM code); the identity of Xu & Jordan (1996) makes this zero up to rounding.
    """
    means = mixture.means.detach().clone().requires_grad_(True)
    (grad,) = torch.autograd.grad(log_likelihood(x, mixture.with_means(means)), means)
    counts = soft_counts(responsibilities(x, mixture))
    bridged = preconditioned_gradient_step(mixture, grad, counts)
    return float((em_mean_step(x, mixture) - bridged).abs().max())


def run_em(x: torch.Tensor, mixture: GaussianMixture, iterations: int) -> np.ndarray:
    """Return the mean log-likelihood per point (nats) before each of ``iterations`` EM steps and after the last."""
    lls = [float(log_likelihood(x, mixture)) / len(x)]
    for _ in range(iterations):
        mixture = mixture.with_means(em_mean_step(x, mixture))
        lls.append(float(log_likelihood(x, mixture)) / len(x))
    return np.array(lls)


def run_gradient_ascent(
    x: torch.Tensor, mixture: GaussianMixture, iterations: int, lr: float, *, preconditioned: bool = False
) -> np.ndarray:
    """Return the mean log-likelihood per point (nats) along gradient ascent on the means.

    Plain: ``mu ← mu + lr ∂ℓ/∂mu``. Preconditioned: ``mu ← mu + lr (sigma²/N_k) ∂ℓ/∂mu``, which
    at ``lr = 1`` is exactly EM.
    """
    if not lr > 0:
        raise ValueError(f"lr must be positive, got {lr!r}")
    lls = [float(log_likelihood(x, mixture)) / len(x)]
    for _ in range(iterations):
        grad = mean_gradient(x, mixture)
        if preconditioned:
            means = preconditioned_gradient_step(mixture, grad, soft_counts(responsibilities(x, mixture)), lr)
        else:
            means = mixture.means + lr * grad
        mixture = mixture.with_means(means)
        lls.append(float(log_likelihood(x, mixture)) / len(x))
    return np.array(lls)
