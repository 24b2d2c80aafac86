"""State clusters (diagnostics.state_clusters): purity against sklearn's contingency matrix, separated clusters."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from sklearn.metrics.cluster import contingency_matrix

from attention_dynamics.book.nbcompare import assert_book_close
from attention_dynamics.diagnostics import state_clusters


def test_cluster_purity_against_sklearns_contingency_matrix():
    rng = np.random.default_rng(0)
    clusters, labels = rng.integers(0, 5, 300), rng.integers(0, 4, 300)
    expected = contingency_matrix(labels, clusters).max(axis=0).sum() / 300
    assert_book_close(state_clusters.cluster_purity(clusters, labels), expected)
    assert state_clusters.cluster_purity(labels, labels) == 1.0
    with pytest.raises(ValueError):
        state_clusters.cluster_purity(clusters[:3], labels)


def test_state_clustering_finds_separated_clusters_and_chance_is_low():
    rng = np.random.default_rng(1)
    labels = rng.integers(0, 5, 500)
    centres = rng.normal(size=(5, 8)) * 10
    states = torch.as_tensor(centres[labels] + rng.normal(size=(500, 8)))
    posterior = torch.as_tensor(np.eye(5)[labels] * 0.8 + 0.04)
    result = state_clusters.state_clustering(states, posterior, seed=0)
    assert result.purity == 1.0 and result.posterior_purity == 1.0
    assert result.chance < 0.4
    assert result.coords.shape == (500, 2)
