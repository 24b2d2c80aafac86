"""Geometry of learned representations: Paper I's measurements, as general functions.

Key orthogonality against the isotropic baseline, PCA spectra and projections, rank correlation
with the posterior entropy, query–key alignment and attention entropy (per layer), and the
frame–precision measures (similarity of attention patterns across checkpoints, the step at which
a trajectory settles). Chapter 6 measures these on the wind-tunnel transformer; chapter 8's
diagnostics reuse them. Every function takes plain tensors or arrays, never a model.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from scipy.stats import spearmanr
from sklearn.decomposition import PCA

__all__ = [
    "mean_abs_cosine",
    "mean_abs_cosine_per_set",
    "isotropic_abs_cosine_baseline",
    "signed_mean_offdiagonal_cosine",
    "key_cosine_of_embeddings",
    "pca_spectrum",
    "pca_projection",
    "spearman_correlation",
    "relative_reduction",
    "query_key_alignment",
    "attention_pattern_similarity",
]


def mean_abs_cosine(vectors: torch.Tensor | np.ndarray) -> float:
    """Return the mean ``|cos|`` over all distinct pairs of rows of ``vectors`` ``(n, d)`` (0 = orthogonal).

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


def mean_abs_cosine_per_set(vectors: torch.Tensor) -> torch.Tensor:
    """Return the mean ``|cos|`` over distinct pairs within each set: ``vectors`` ``(..., n, d)`` → ``(...)``.

    The batched form of :func:`mean_abs_cosine` (e.g. the keys of every sequence and head at once).
    """
    v = torch.as_tensor(vectors).to(torch.float64)
    if v.ndim < 2 or v.shape[-2] < 2:
        raise ValueError(f"vectors must be (..., n >= 2, d), got {tuple(v.shape)}")
    if (v.norm(dim=-1) == 0).any():
        raise ValueError("a zero vector has no direction; remove it before measuring orthogonality")
    u = torch.nn.functional.normalize(v, dim=-1)
    cos = u @ u.transpose(-1, -2)  # (..., n, n)
    n = v.shape[-2]
    iu = torch.triu_indices(n, n, offset=1)
    return cos[..., iu[0], iu[1]].abs().mean(-1)


def isotropic_abs_cosine_baseline(d: int) -> float:
    """Return E|cos θ| between two independent isotropic random vectors in R^d (closed form).

    cos θ has density ∝ (1 − t²)^((d−3)/2) on [−1, 1], so
    E|cos θ| = Γ(d/2) / (√π · Γ((d+1)/2)) ≈ sqrt(2 / (π d)) for large d.
    """
    if not isinstance(d, (int, np.integer)) or d < 2:
        raise ValueError(f"d must be an integer >= 2, got {d!r}")
    return math.exp(math.lgamma(d / 2) - math.lgamma((d + 1) / 2)) / math.sqrt(math.pi)


def signed_mean_offdiagonal_cosine(vectors: torch.Tensor | np.ndarray) -> float:
    """Return the mean *signed* cosine over all ordered pairs i ≠ j of rows of ``vectors`` ``(n, d)``.

    The statistic of Paper I's key-orthogonality figure (the authors' ``qkv_analysis.py``, ``cmd_orthogonality``):
    positive and negative cosines cancel, so a set of random directions scores near 0 — unlike the mean
    ``|cos|`` of :func:`mean_abs_cosine`, whose floor is the isotropic baseline.
    """
    v = torch.as_tensor(np.asarray(vectors) if not torch.is_tensor(vectors) else vectors.detach(), dtype=torch.float64)
    if v.ndim != 2 or v.shape[0] < 2:
        raise ValueError(f"vectors must be (n >= 2, d), got {tuple(v.shape)}")
    if (v.norm(dim=1) == 0).any():
        raise ValueError("a zero vector has no direction; remove it before measuring orthogonality")
    u = torch.nn.functional.normalize(v, dim=1)
    cos = u @ u.T  # (n, n)
    off = ~torch.eye(len(u), dtype=torch.bool)
    return float(cos[off].mean())


def key_cosine_of_embeddings(embeddings: torch.Tensor, key_weight: torch.Tensor, n_heads: int, *,
                             signed: bool = True) -> np.ndarray:
    """Return Paper I's key orthogonality per head ``(H,)``: the mean off-diagonal cosine of ``W_K^h e_i``.

    ``embeddings`` ``(n, d)``: the token embeddings of the hypothesis tokens (no positions, no LayerNorm);
    ``key_weight`` ``(H · d_head, d)``: one layer's key projection, rows grouped by head. ``signed=True`` is the
    authors' statistic (:func:`signed_mean_offdiagonal_cosine`); ``signed=False`` the mean ``|cos|`` of the same keys.
    """
    e = torch.as_tensor(embeddings).detach().to(torch.float64)
    w = torch.as_tensor(key_weight).detach().to(torch.float64)
    if e.ndim != 2 or w.ndim != 2 or w.shape[1] != e.shape[1] or w.shape[0] % n_heads:
        raise ValueError(f"expected embeddings (n, d) and key weight (H·d_head, d), got {tuple(e.shape)}, {tuple(w.shape)}")
    per_head = w.view(n_heads, w.shape[0] // n_heads, w.shape[1])  # (H, d_head, d)
    keys = torch.einsum("hkd,nd->hnk", per_head, e)  # (H, n, d_head)
    measure = signed_mean_offdiagonal_cosine if signed else mean_abs_cosine
    return np.array([measure(keys[h]) for h in range(n_heads)])


def pca_spectrum(X: torch.Tensor | np.ndarray, n_components: int | None = None) -> np.ndarray:
    """Return the explained-variance ratios (descending, summing to ≤ 1) of the rows of ``X`` ``(n, d)``."""
    X = X.detach().cpu().numpy() if torch.is_tensor(X) else np.asarray(X)
    if X.ndim != 2 or X.shape[0] < 2:
        raise ValueError(f"X must be (n >= 2, d), got {X.shape}")
    pca = PCA(n_components=n_components or min(X.shape), svd_solver="full")
    pca.fit(X.astype(np.float64))
    return pca.explained_variance_ratio_


def pca_projection(X: torch.Tensor | np.ndarray, n_components: int = 2) -> tuple[np.ndarray, np.ndarray]:
    """Return ``(scores (n, n_components), explained-variance ratios (n_components,))`` of the rows of ``X``.

    Signs follow scikit-learn's deterministic convention (the largest loading of each component
    is positive), so the same data always gives the same picture.
    """
    X = X.detach().cpu().numpy() if torch.is_tensor(X) else np.asarray(X)
    if X.ndim != 2 or X.shape[0] < 2:
        raise ValueError(f"X must be (n >= 2, d), got {X.shape}")
    pca = PCA(n_components=n_components, svd_solver="full")
    scores = pca.fit_transform(X.astype(np.float64))
    return scores, pca.explained_variance_ratio_


def spearman_correlation(a, b) -> float:
    """Return Spearman's rank correlation between two 1-D samples (ties get average ranks)."""
    a, b = np.asarray(a, dtype=np.float64).ravel(), np.asarray(b, dtype=np.float64).ravel()
    if a.shape != b.shape or a.size < 3:
        raise ValueError(f"need two samples of the same length >= 3, got {a.size} and {b.size}")
    return float(spearmanr(a, b).statistic)


def relative_reduction(first: float, last: float) -> float:
    """Return (first − last) / first: the fraction by which a positive quantity falls (0.9 = 90 % lower)."""
    if not first > 0:
        raise ValueError(f"the first value must be positive, got {first}")
    return float((first - last) / first)


def query_key_alignment(queries: torch.Tensor, keys: torch.Tensor, alpha: torch.Tensor) -> tuple[float, float]:
    """Return ``(attended, visible)``: mean cos(q_i, k_j) weighted by alpha_ij, and by uniform weights on visible keys.

    ``queries`` ``(..., Tq, d)``, ``keys`` ``(..., Tk, d)``, ``alpha`` ``(..., Tq, Tk)`` (zero on
    masked keys; a key is visible where the causal mask allows it, j ≤ i). The gap between the
    two says how much more a query points at the keys it attends to than at the keys it could see.
    """
    q = torch.nn.functional.normalize(torch.as_tensor(queries).to(torch.float64), dim=-1)
    k = torch.nn.functional.normalize(torch.as_tensor(keys).to(torch.float64), dim=-1)
    a = torch.as_tensor(alpha).to(torch.float64)
    cos = q @ k.transpose(-1, -2)  # (..., Tq, Tk)
    Tq, Tk = cos.shape[-2:]
    visible = torch.ones(Tq, Tk, dtype=torch.bool).tril(diagonal=Tk - Tq).to(torch.float64)  # causal j ≤ i
    attended = (a * cos).sum(-1).mean()
    uniform = ((visible * cos).sum(-1) / visible.sum(-1)).mean()
    return float(attended), float(uniform)


def attention_pattern_similarity(alpha: torch.Tensor, reference: torch.Tensor) -> float:
    """Return 1 − mean total-variation distance between attention rows of ``alpha`` and ``reference``.

    Both ``(..., Tq, Tk)``. 1 means identical routing, 0 means disjoint supports; each row's TV
    distance is half the L1 distance between the two distributions over keys.
    """
    a, r = torch.as_tensor(alpha).to(torch.float64), torch.as_tensor(reference).to(torch.float64)
    if a.shape != r.shape:
        raise ValueError(f"attention patterns must have the same shape, got {tuple(a.shape)} and {tuple(r.shape)}")
    return float(1.0 - 0.5 * (a - r).abs().sum(-1).mean())


