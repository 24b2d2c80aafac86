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
    "pca_spectrum",
    "pca_projection",
    "spearman_correlation",
    "attention_entropy_bits",
    "relative_reduction",
    "query_key_alignment",
    "attention_pattern_similarity",
    "settle_step",
    "stays_above_step",
    "late_change",
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


def attention_entropy_bits(alpha: torch.Tensor) -> torch.Tensor:
    """Return the entropy in bits of every attention row: ``alpha`` ``(..., Tq, Tk)`` → ``(..., Tq)``.

    Masked keys carry weight exactly 0 and contribute nothing (0 log 0 = 0); a query that can see
    n keys has entropy between 0 (one-hot) and log2 n (uniform).
    """
    a = torch.as_tensor(alpha).to(torch.float64)
    return torch.special.entr(a).sum(-1) / math.log(2.0)


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


def settle_step(steps, values, *, fraction: float = 0.1, log: bool = False) -> int:
    """Return the first step after which a trajectory stays within ``fraction`` of its total change from its end.

    With values m(s) at increasing ``steps``, final value m_F and first value m_0, this is the
    smallest s* such that ``|m(s) − m_F| ≤ fraction · |m_0 − m_F|`` for every s ≥ s* (90 % of the way
    and staying there, for the default 0.1). ``log=True`` measures the change in log10 m (for
    errors that fall by orders of magnitude; values must then be positive).
    """
    s = np.asarray(steps)
    m = np.asarray(values, dtype=np.float64)
    if s.ndim != 1 or m.shape != s.shape or s.size < 2 or np.any(np.diff(s) <= 0):
        raise ValueError("steps must be increasing and values must have one entry per step (at least two)")
    if not 0 < fraction < 1:
        raise ValueError(f"fraction must be in (0, 1), got {fraction}")
    if log:
        if np.any(m <= 0):
            raise ValueError("log=True needs positive values")
        m = np.log10(m)
    band = fraction * abs(m[0] - m[-1])
    outside = np.nonzero(np.abs(m - m[-1]) > band)[0]
    return int(s[0] if outside.size == 0 else s[min(outside[-1] + 1, s.size - 1)])


def stays_above_step(steps, values, threshold: float) -> int | None:
    """Return the first step from which ``values`` stay ≥ ``threshold`` to the end (None if the last is below).

    An absolute counterpart of :func:`settle_step`, for a quantity with a natural scale, such as the
    similarity of attention patterns (0.95 = at most 5 % of the attention mass routed differently).
    """
    s = np.asarray(steps)
    m = np.asarray(values, dtype=np.float64)
    if s.ndim != 1 or m.shape != s.shape or s.size < 1 or np.any(np.diff(s) <= 0):
        raise ValueError("steps must be increasing and values must have one entry per step")
    below = np.nonzero(m < threshold)[0]
    if below.size == 0:
        return int(s[0])
    if below[-1] == s.size - 1:
        return None
    return int(s[below[-1] + 1])


def late_change(steps, values, *, last: float = 0.2) -> float:
    """Return how much a trajectory still moves over the last ``last`` fraction of training: max − min there.

    The values m(s) at increasing ``steps`` are taken at every step s ≥ (1 − last) · s_final (the
    final one included). A metric has *plateaued* at a stated amount δ when this is below δ. Under a
    learning rate that decays to zero the late steps move little by construction, so a plateau says
    that this schedule is done, not that a longer one would end at the same value.
    """
    s = np.asarray(steps, dtype=np.float64)
    m = np.asarray(values, dtype=np.float64)
    if s.ndim != 1 or m.shape != s.shape or s.size < 2 or np.any(np.diff(s) <= 0):
        raise ValueError("steps must be increasing and values must have one entry per step (at least two)")
    if not 0 < last < 1:
        raise ValueError(f"last must be in (0, 1), got {last}")
    late = m[s >= (1.0 - last) * s[-1]]
    return float(late.max() - late.min())
