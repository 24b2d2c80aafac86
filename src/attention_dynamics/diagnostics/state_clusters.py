"""Do a model's final-layer states cluster by the hidden state it should track? Cluster purity against its chance level.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

import numpy as np
import torch
import torch.nn as nn

from ..models import CausalTransformer


def cluster_purity(clusters: np.ndarray, labels: np.ndarray) -> float:
    """Return the purity Σ_k max_c |cluster k ∩ class c| / n of a clustering against labels (1 = every cluster pure)."""
    clusters, labels = np.asarray(clusters), np.asarray(labels)
    if clusters.shape != labels.shape or clusters.ndim != 1 or clusters.size == 0:
        raise ValueError("clusters and labels must be matching non-empty 1-D arrays")
    _, c_idx = np.unique(clusters, return_inverse=True)
    _, l_idx = np.unique(labels, return_inverse=True)
    table = np.zeros((c_idx.max() + 1, l_idx.max() + 1), dtype=np.int64)
    np.add.at(table, (c_idx, l_idx), 1)
    return float(table.max(axis=1).sum() / clusters.size)


def chance_purity(clusters: np.ndarray, labels: np.ndarray, *, n_permutations: int = 20, seed: int = 0) -> float:
    """Return the mean purity of the same clusters against randomly permuted labels (what purity means by chance)."""
    rng = np.random.default_rng(seed)
    labels = np.asarray(labels)
    return float(np.mean([cluster_purity(clusters, rng.permutation(labels)) for _ in range(n_permutations)]))


@dataclass
class StateClustering:
    """k-means of final-layer states against the most probable hidden state.

    purity of the states' clusters; chance: the same clusters against permuted labels; posterior_purity:
    k-means of the exact posterior vectors themselves (what clustering by belief can reach);
    coords ``(n, 2)``: the states' first two principal components; labels ``(n,)``: the most probable
    state; clusters ``(n,)``: the k-means cluster of each state. With ``groups`` (e.g. the current
    observation of each state): centred_purity, the purity against the most probable state of k-means
    run after subtracting each group's mean state, and between_group_variance, the fraction of the
    states' total variance that lies between group means (what the grouping explains).
    other_purities: the purity of the same clusters against other labellings (``other_labels``, e.g. the
    current observation).
    """

    purity: float
    chance: float
    posterior_purity: float
    coords: np.ndarray
    labels: np.ndarray
    clusters: np.ndarray
    explained_variance: np.ndarray
    centred_purity: float = float("nan")
    between_group_variance: float = float("nan")
    other_purities: dict[str, float] = field(default_factory=dict)
    other_labels: dict[str, np.ndarray] = field(default_factory=dict)


@torch.no_grad()
def final_layer_states(model: nn.Module, inputs: torch.Tensor) -> torch.Tensor:
    """Return the states the read-out of ``model`` sees, ``(B, T, width)``: after the final norm (Mamba,
    transformer) or the last LSTM layer."""
    model.eval()
    if hasattr(model, "final_states"):
        return model.final_states(inputs)
    if isinstance(model, CausalTransformer):
        captured = []
        handle = model.ln_final.register_forward_hook(lambda mod, args, out: captured.append(out))
        try:
            model(inputs)
        finally:
            handle.remove()
        return captured[0]
    raise ValueError(f"no final-layer states defined for {type(model).__name__}")


def state_clustering(states: torch.Tensor, posterior: torch.Tensor, *, n_clusters: int = 5, seed: int = 0,
                     groups: np.ndarray | None = None, other_labels: Mapping[str, np.ndarray] | None = None) -> StateClustering:
    """Return the :class:`StateClustering` of ``states`` ``(n, d)`` against ``posterior`` ``(n, S)`` (scikit-learn k-means).

    ``groups`` ``(n,)`` (optional): a labelling whose part of the geometry should be removed before
    clustering again — in HMM filtering the current observation, which a state also encodes and which
    can dominate it. ``other_labels``: further labellings ``(n,)`` to score the same clusters against.
    """
    from sklearn.cluster import KMeans
    from sklearn.decomposition import PCA

    X = states.detach().to(torch.float64).numpy()
    P = posterior.detach().to(torch.float64).numpy()
    if X.ndim != 2 or P.ndim != 2 or X.shape[0] != P.shape[0]:
        raise ValueError(f"states (n, d) and posterior (n, S) must have the same n, got {X.shape} and {P.shape}")
    labels = P.argmax(-1)
    clusters = KMeans(n_clusters=n_clusters, n_init=10, random_state=seed).fit_predict(X)
    posterior_clusters = KMeans(n_clusters=n_clusters, n_init=10, random_state=seed).fit_predict(P)
    pca = PCA(n_components=2, svd_solver="full").fit(X)
    centred_purity = between = float("nan")
    if groups is not None:
        groups = np.asarray(groups)
        _, g_idx = np.unique(groups, return_inverse=True)
        means = np.zeros((g_idx.max() + 1, X.shape[1]))
        np.add.at(means, g_idx, X)
        means /= np.bincount(g_idx)[:, None]
        centred = X - means[g_idx]
        centred_clusters = KMeans(n_clusters=n_clusters, n_init=10, random_state=seed).fit_predict(centred)
        centred_purity = cluster_purity(centred_clusters, labels)
        total = ((X - X.mean(0)) ** 2).sum()
        between = float(1.0 - (centred ** 2).sum() / total) if total > 0 else float("nan")
    return StateClustering(
        purity=cluster_purity(clusters, labels),
        chance=chance_purity(clusters, labels, seed=seed),
        posterior_purity=cluster_purity(posterior_clusters, labels),
        coords=pca.transform(X),
        labels=labels,
        clusters=clusters,
        explained_variance=pca.explained_variance_ratio_,
        centred_purity=centred_purity,
        between_group_variance=between,
        other_purities={name: cluster_purity(clusters, np.asarray(lab)) for name, lab in (other_labels or {}).items()},
        other_labels={name: np.asarray(lab) for name, lab in (other_labels or {}).items()},
    )
