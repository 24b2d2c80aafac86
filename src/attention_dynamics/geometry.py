"""Geometry of learned representations: key orthogonality, PCA spectra (Paper I's measurements).

Chapter 6 measures these on the wind-tunnel transformer; chapter 8's diagnostics reuse them.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from sklearn.decomposition import PCA

__all__ = ["mean_abs_cosine", "isotropic_abs_cosine_baseline", "pca_spectrum"]


def mean_abs_cosine(vectors: torch.Tensor | np.ndarray) -> float:
    """Return the mean |cos| over all distinct pairs of rows of ``vectors`` ``(n, d)`` (0 = orthogonal).

    Rows with zero norm are rejected (their direction is undefined).
    """
    v = torch.as_tensor(np.asarray(vectors) if not torch.is_tensor(vectors) else vectors, dtype=torch.float64)
    if v.ndim != 2 or v.shape[0] < 2:
        raise ValueError(f"vectors must be (n >= 2, d), got {tuple(v.shape)}")
    norms = v.norm(dim=1)
    if (norms == 0).any():
        raise ValueError("a zero vector has no direction; remove it before measuring orthogonality")
    u = v / norms[:, None]
    cos = u @ u.T  # (n, n)
    iu = torch.triu_indices(len(u), len(u), offset=1)
    return float(cos[iu[0], iu[1]].abs().mean())


def isotropic_abs_cosine_baseline(d: int) -> float:
    """Return E|cos θ| between two independent isotropic random vectors in R^d (closed form).

    cos θ has density ∝ (1 − t²)^((d−3)/2) on [−1, 1], so
    E|cos θ| = Γ(d/2) / (√π · Γ((d+1)/2)) ≈ sqrt(2 / (π d)) for large d.
    """
    if not isinstance(d, (int, np.integer)) or d < 2:
        raise ValueError(f"d must be an integer >= 2, got {d!r}")
    return math.exp(math.lgamma(d / 2) - math.lgamma((d + 1) / 2)) / math.sqrt(math.pi)


def pca_spectrum(X: torch.Tensor | np.ndarray, n_components: int | None = None) -> np.ndarray:
    """Return the explained-variance ratios (descending, summing to ≤ 1) of the rows of ``X`` ``(n, d)``."""
    X = X.detach().cpu().numpy() if torch.is_tensor(X) else np.asarray(X)
    if X.ndim != 2 or X.shape[0] < 2:
        raise ValueError(f"X must be (n >= 2, d), got {X.shape}")
    pca = PCA(n_components=n_components or min(X.shape), svd_solver="full")
    pca.fit(X.astype(np.float64))
    return pca.explained_variance_ratio_
