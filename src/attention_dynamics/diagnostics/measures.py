"""Measurements on one attention head: plain functions usable on any tensors (entropy, soft counts,
starved keys, key orthogonality, value spectrum, label-level specialization), and the result types
they fill.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from threadpoolctl import threadpool_limits

from ..science.geometry import isotropic_abs_cosine_baseline, mean_abs_cosine, pca_spectrum
from ..science.gradients import advantage_routing_gradient, compatibility

if TYPE_CHECKING:
    from .capture import HeadCapture
    from .report import HeadDiagnostics

#: A key is *starved* when the attention mass it receives is below this fraction of the mass it
#: would receive if every query attended uniformly to the keys it can see.
DEFAULT_STARVED_THRESHOLD = 0.01
#: Rows used for key orthogonality and value PCA (evenly spaced subsample of batch × positions).
DEFAULT_MAX_ROWS = 1024



@dataclass
class HeadMetrics:
    """Scalar diagnostics of one head (one row of :meth:`AttentionDiagnostics.summary`).

    Entropies are in nats; gradient norms in nats per unit activation (of the loss as given).
    """

    layer: int
    head: int
    module: str
    #: Mean over queries of the attention entropy H(alpha_i), nats.
    attention_entropy_nats: float
    #: Mean over queries (with ≥ 2 visible keys) of H(alpha_i) / log(number of visible keys): 1 uniform, 0 one-hot.
    normalized_attention_entropy: float
    #: Mean over queries of max_j alpha_ij.
    mean_max_attention: float
    #: Frobenius norm of the routing gradient ∂L/∂S = alpha ⊙ (B − E_alpha[b]) over the batch.
    routing_gradient_norm: float
    #: Frobenius norm of the value gradient ∂L/∂V = alphaᵀ U over the batch.
    value_gradient_norm: float
    #: Fraction of visible (sequence, key) slots that are starved (see :func:`starved_keys`).
    starved_fraction: float
    #: Mean |cos| between key vectors (NaN when keys are not available).
    key_mean_abs_cosine: float
    #: E|cos| between isotropic random vectors of the key dimension (the random baseline).
    key_random_baseline: float
    #: Fraction of the value vectors' variance on their first principal component.
    value_pc1_fraction: float
    #: Participation ratio 1 / Σ r_k² of the value PCA spectrum (effective number of dimensions).
    value_effective_dimension: float
    #: Largest |Σ_j ∂L/∂s_ij| over queries (the routing law moves mass, so this is 0 up to rounding).
    max_abs_routing_row_sum: float

    @property
    def key_orthogonality_ratio(self) -> float:
        """Return mean |cos| of the keys divided by its random baseline (0 orthogonal, 1 random-like)."""
        return self.key_mean_abs_cosine / self.key_random_baseline

    def as_dict(self) -> dict[str, Any]:
        """Return the metrics as a plain dict (with the orthogonality ratio)."""
        d = {k: getattr(self, k) for k in self.__dataclass_fields__}
        d["key_orthogonality_ratio"] = self.key_orthogonality_ratio
        return d


@dataclass
class SpecializationSummary:
    """Which values serve which queries, and how exclusively, for one head (labels group positions).

    ``routing_matrix[a, c]`` is the mean over queries of group ``a`` of the attention mass they put
    on keys of group ``c`` (rows sum to 1). Under the joint distribution
    ``P(a, c) ∝ Σ_{i ∈ a} Σ_{j ∈ c} alpha_ij`` (every query weighs 1), ``mutual_information_nats``
    is I(query group; key group) — 0 when routing ignores the groups — and
    ``normalized_mutual_information`` divides it by min(H(query group), H(key group)) (1 = each
    query group reads one key group only and vice versa). The ``chance_`` fields are the same
    measures under uniform attention over the visible keys. ``key_exclusivity[c] = max_a P(a | c)``:
    how exclusively the values of group c serve a single query group.
    """

    head: str
    query_groups: np.ndarray
    key_groups: np.ndarray
    routing_matrix: np.ndarray
    #: The routing matrix under uniform attention over the visible keys (the chance level).
    chance_routing_matrix: np.ndarray
    #: ``[a, c]``: mean over queries of group a of Σ_{j ∈ c} alpha_ij (E_alpha[b] − b_ij) — the rate (per unit
    #: learning rate on the scores) at which gradient descent moves group-a queries' attention toward
    #: group-c keys; rows sum to 0 (nats per unit score).
    advantage_by_label: np.ndarray
    mutual_information_nats: float
    #: I(query group; key group) under uniform attention over the visible keys, nats.
    chance_mutual_information_nats: float
    normalized_mutual_information: float
    key_exclusivity: np.ndarray
    #: For each key group, the query group it serves most.
    key_serves: np.ndarray

    @property
    def diagonal_mass(self) -> float:
        """Return the mean attention mass on keys of the query's own group (groups matched by label)."""
        return self._diagonal(self.routing_matrix)

    @property
    def chance_diagonal_mass(self) -> float:
        """Return :attr:`SpecializationSummary.diagonal_mass` under uniform attention over the visible keys (the chance level)."""
        return self._diagonal(self.chance_routing_matrix)

    def _diagonal(self, matrix: np.ndarray) -> float:
        common = np.intersect1d(self.query_groups, self.key_groups)
        if common.size == 0:
            return float("nan")
        rows = np.searchsorted(self.query_groups, common)
        cols = np.searchsorted(self.key_groups, common)
        return float(matrix[rows, cols].mean())


@dataclass
class RoutingStability:
    """How much a head's routing and values changed between two checkpoints (same batch).

    ``attention_tv``: mean over queries of the total-variation distance ½ Σ_j |alpha_ij − alpha'_ij|
    (0 same routing, 1 disjoint). ``top_key_agreement``: fraction of queries whose most-attended key
    is unchanged. ``value_relative_change``: ‖V' − V‖_F / ‖V‖_F. Routing that has settled while the
    values keep moving is the paper's frame–precision dissociation.
    """

    head: str
    attention_tv: float
    top_key_agreement: float
    value_relative_change: float



def soft_counts(alpha: torch.Tensor) -> torch.Tensor:
    """Return the soft counts N_j = Σ_i alpha_ij (attention mass each key receives), shape ``(..., Tk)``."""
    return alpha.sum(-2)


def uniform_soft_counts(visible: torch.Tensor) -> torch.Tensor:
    """Return the soft counts each key would receive if every query attended uniformly to the keys it sees.

    ``visible`` ``(..., Tq, Tk)`` boolean; result ``(..., Tk)``. Queries that see no key add nothing.
    """
    vis = visible.to(torch.float64)
    n_visible = vis.sum(-1, keepdim=True).clamp_min(1.0)  # (..., Tq, 1)
    return (vis / n_visible).sum(-2)


def starved_keys(
    alpha: torch.Tensor, visible: torch.Tensor | None = None, *, threshold: float = DEFAULT_STARVED_THRESHOLD
) -> torch.Tensor:
    """Return a boolean mask ``(..., Tk)`` of starved keys: visible, but attended to below ``threshold`` × uniform.

    Key j is starved when its soft count N_j = Σ_i alpha_ij is below ``threshold`` times the count
    it would get under uniform attention over the visible keys (:func:`uniform_soft_counts`).
    Since the routing gradient of column j is gated by alpha_ij and the value gradient is
    Σ_i alpha_ij u_i, a starved key's score and value receive almost no gradient: it has dropped
    out of training. Keys that no query may see are never reported. ``visible`` defaults to
    every key visible to every query.
    """
    if not 0 < threshold < 1:
        raise ValueError(f"threshold must be in (0, 1), got {threshold!r}")
    if visible is None:
        visible = torch.ones_like(alpha, dtype=torch.bool)
    expected = uniform_soft_counts(visible)  # (..., Tk)
    received = alpha.sum(-2, dtype=torch.float64)
    return (expected > 0) & (received < threshold * expected)


def _rows(x: torch.Tensor, max_rows: int | None) -> torch.Tensor:
    """Return ``x`` flattened to ``(n, d)`` without zero rows, evenly subsampled to at most ``max_rows``."""
    flat = x.reshape(-1, x.shape[-1]).to(torch.float64)
    flat = flat[flat.norm(dim=1) > 0]
    if max_rows is not None and flat.shape[0] > max_rows:
        idx = torch.linspace(0, flat.shape[0] - 1, max_rows).round().long()
        flat = flat[idx]
    return flat


def key_orthogonality(
    keys: torch.Tensor, labels: torch.Tensor | None = None, *, max_rows: int | None = DEFAULT_MAX_ROWS
) -> tuple[float, float]:
    """Return ``(mean |cos| between keys, the same for isotropic random vectors of that dimension)``.

    ``keys`` ``(..., d_k)``. With ``labels`` (same leading shape as ``keys``), the keys are first
    averaged per label, so the measurement is between one key per hypothesis (Paper I's
    reading); without, between the key vectors of all positions (evenly subsampled to
    ``max_rows``). Uses :func:`attention_dynamics.science.geometry.mean_abs_cosine` and
    :func:`~attention_dynamics.science.geometry.isotropic_abs_cosine_baseline`.
    """
    d_k = keys.shape[-1]
    if labels is not None:
        if labels.shape != keys.shape[:-1]:
            raise ValueError(f"labels must have shape {tuple(keys.shape[:-1])}, got {tuple(labels.shape)}")
        flat, lab = keys.reshape(-1, d_k).to(torch.float64), labels.reshape(-1)
        rows = torch.stack([flat[lab == c].mean(0) for c in torch.unique(lab)])
        rows = rows[rows.norm(dim=1) > 0]
    else:
        rows = _rows(keys, max_rows)
    if rows.shape[0] < 2:
        return float("nan"), isotropic_abs_cosine_baseline(d_k) if d_k >= 2 else float("nan")
    baseline = isotropic_abs_cosine_baseline(d_k) if d_k >= 2 else 1.0
    return mean_abs_cosine(rows), baseline


def value_spectrum(values: torch.Tensor, *, max_rows: int | None = DEFAULT_MAX_ROWS) -> np.ndarray:
    """Return the PCA explained-variance ratios of the value vectors ``(..., d_v)`` (descending).

    Uses :func:`attention_dynamics.science.geometry.pca_spectrum` on all positions of the batch (evenly
    subsampled to ``max_rows``).
    """
    rows = _rows(values, max_rows)
    if rows.shape[0] < 2:
        return np.full(values.shape[-1], np.nan)
    with threadpool_limits(1):  # a small SVD: extra BLAS threads only contend with the training runs
        return pca_spectrum(rows)


def _label_routing(alpha: torch.Tensor, ql: torch.Tensor, kl: torch.Tensor, q_groups, k_groups):
    """Return ``(routing matrix (Gq, Gk), joint distribution P (Gq, Gk))`` of attention by label (internal)."""
    k_onehot = (kl.unsqueeze(-1) == k_groups).to(torch.float64)  # (B, Tk, Gk)
    mass = alpha @ k_onehot  # (B, Tq, Gk): each query's attention mass per key group
    joint = torch.stack([mass[ql == a].sum(0) for a in q_groups])  # (Gq, Gk)
    n_queries = torch.stack([(ql == a).sum() for a in q_groups]).to(torch.float64)
    return (joint / n_queries[:, None]).numpy(), (joint / joint.sum()).numpy()


def _mutual_information(P: np.ndarray) -> tuple[float, float, float]:
    """Return ``(I(A; C), H(A), H(C))`` in nats for a joint distribution ``P`` (internal)."""
    pa, pc = P.sum(1, keepdims=True), P.sum(0, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        mi = float(np.sum(np.where(P > 0, P * np.log(P / (pa * pc)), 0.0)))
        h_a = float(-np.sum(np.where(pa > 0, pa * np.log(pa), 0.0)))
        h_c = float(-np.sum(np.where(pc > 0, pc * np.log(pc), 0.0)))
    return max(mi, 0.0), h_a, h_c


def specialization(
    capture: "HeadCapture | HeadDiagnostics",
    query_labels: torch.Tensor,
    key_labels: torch.Tensor,
) -> SpecializationSummary:
    """Return the :class:`SpecializationSummary` of a head, grouping queries and keys by labels.

    ``query_labels`` ``(B, Tq)`` and ``key_labels`` ``(B, Tk)`` integer labels (e.g. the symbol a
    position carries). Queries whose label is negative are ignored (e.g. ``-100`` padding). The
    same measures under uniform attention over the visible keys are the chance level (label
    frequencies differ between sequences and prefixes, so chance is not zero).
    """
    cap = getattr(capture, "capture", capture)  # a HeadDiagnostics holds its HeadCapture
    alpha = cap.alpha.to(torch.float64)  # (B, Tq, Tk)
    ql = torch.as_tensor(query_labels).reshape(alpha.shape[:2]).long()
    kl = torch.as_tensor(key_labels).reshape(alpha.shape[0], alpha.shape[2]).long()
    q_groups = torch.unique(ql[ql >= 0])
    k_groups = torch.unique(kl)
    if len(q_groups) == 0:
        raise ValueError("no query has a non-negative label")
    routing_matrix, P = _label_routing(alpha, ql, kl, q_groups, k_groups)
    advantage = -advantage_routing_gradient(cap.alpha, compatibility(cap.u, cap.values)).to(torch.float64)
    advantage_by_label, _ = _label_routing(advantage, ql, kl, q_groups, k_groups)
    vis = cap.visible.to(torch.float64)
    uniform = vis / vis.sum(-1, keepdim=True).clamp_min(1.0)  # (B, Tq, Tk)
    chance_matrix, P_chance = _label_routing(uniform, ql, kl, q_groups, k_groups)
    mi, h_a, h_c = _mutual_information(P)
    mi_chance, _, _ = _mutual_information(P_chance)
    denom = min(h_a, h_c)
    with np.errstate(divide="ignore", invalid="ignore"):
        p_a_given_c = np.nan_to_num(P / P.sum(0, keepdims=True))
    return SpecializationSummary(
        head=cap.name,
        query_groups=q_groups.numpy(),
        key_groups=k_groups.numpy(),
        routing_matrix=routing_matrix,
        chance_routing_matrix=chance_matrix,
        advantage_by_label=advantage_by_label,
        mutual_information_nats=mi,
        chance_mutual_information_nats=mi_chance,
        normalized_mutual_information=mi / denom if denom > 0 else float("nan"),
        key_exclusivity=p_a_given_c.max(0),
        key_serves=q_groups.numpy()[p_a_given_c.argmax(0)],
    )
