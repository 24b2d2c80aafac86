"""Diagnostics of attention training: compatibility and advantage matrices for any model (PAPER.md §3, item 8).

The paper proposes two matrices as practical diagnostics. For every head, with upstream gradient
``u_i = ∂L/∂g_i`` at the head's context vector and values ``v_j``:

- the **compatibility matrix** ``B = U Vᵀ`` (``b_ij = u_i · v_j``), which says how the value at key
  ``j`` would move query ``i``'s loss, and
- the **advantage matrix**, the attention-gated deviation of ``b_ij`` from its attention-weighted
  mean ``E_{alpha_i}[b] = Σ_j alpha_ij b_ij``. The paper writes ``alpha ⊙ (B − E_alpha[b])``, which is
  exactly the gradient ∂L/∂S of the loss with respect to the scores (the boxed routing law). The
  book's sign convention calls ``E_alpha[b] − b_ij`` the *advantage* (positive = gradient descent
  moves attention toward key j), so :attr:`HeadDiagnostics.advantage_matrix` is
  ``alpha ⊙ (E_alpha[b] − B) = −∂L/∂S``; :attr:`HeadDiagnostics.routing_gradient` is the paper's
  ``alpha ⊙ (B − E_alpha[b]) = ∂L/∂S``. Both come from :mod:`attention_dynamics.gradients`.

How the tensors are captured (forward hooks only; the model is not modified):

- models of this package (:class:`~attention_dynamics.models.transformer.CausalTransformer`, or any module whose
  attention routes its tensors through :class:`~attention_dynamics.models.transformer.Probe` children named
  ``attn_weights``, ``values``, ``context`` and optionally ``queries``, ``keys``): a forward hook on
  each probe reads the tensor; u is the autograd gradient of the loss with respect to the
  ``context`` probe's output.
- models built from :class:`torch.nn.MultiheadAttention` (including
  :class:`torch.nn.TransformerEncoderLayer` / ``TransformerDecoderLayer``): a forward pre-hook asks
  the module for per-head weights (``need_weights=True, average_attn_weights=False``); the
  per-head values, keys and queries are recomputed from the module's input projection; u is the
  gradient of the loss with respect to the module's output, mapped back through ``out_proj``
  (``u_concat = ∂L/∂out · W_out``) and split into heads. A post-hook hands the caller exactly the
  output it asked for.
- the book's bare single head (:class:`~attention_dynamics.attention.SingleHeadParams`):
  :func:`diagnose_single_head` reads the tensors of
  :func:`~attention_dynamics.attention.single_head_forward`.

Gradients are taken with ``torch.autograd.grad``, so ``.grad`` of the parameters is never touched;
the model runs in ``eval`` mode during the capture (dropout off) and its mode is restored after.

Units: u is the gradient of the loss as given (by default the cross-entropy in nats, **averaged**
over positions), so B, the advantage matrix and every gradient norm are in nats per unit of the
relevant activation and scale as 1 / (number of positions).
"""

from __future__ import annotations

import inspect
import math
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Sequence

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from threadpoolctl import threadpool_limits

from . import plotting
from .attention import SingleHeadParams, causal_mask, single_head_forward
from .geometry import isotropic_abs_cosine_baseline, mean_abs_cosine, pca_spectrum
from .gradients import (
    advantage_routing_gradient,
    compatibility,
    expected_compatibility,
    key_gradient,
    query_gradient,
    responsibility_weighted_value_gradient,
)
from .models.transformer import Probe

__all__ = [
    "HeadCapture",
    "HeadMetrics",
    "HeadDiagnostics",
    "AttentionDiagnostics",
    "SpecializationSummary",
    "RoutingStability",
    "default_loss",
    "capture_attention",
    "capture_single_head",
    "AutogradCheck",
    "verify_against_autograd",
    "diagnose",
    "diagnose_single_head",
    "attention_entropy",
    "soft_counts",
    "uniform_soft_counts",
    "starved_keys",
    "key_orthogonality",
    "value_spectrum",
    "specialization",
    "routing_stability",
    "DiagnosticsTrace",
    "traced_fit",
    "sticky_chain_trace",
    "wind_tunnel_trace",
    "EXPERIMENTS",
    "run_experiment",
    "collapse_alarm",
    "loss_falls_behind",
    "TorchCausalEncoder",
    "bijection_training_targets",
    "train_torch_encoder_on_bijection",
    "plot_head",
    "plot_overview",
    "plot_routing_matrix",
]

#: A key is *starved* when the attention mass it receives is below this fraction of the mass it
#: would receive if every query attended uniformly to the keys it can see.
DEFAULT_STARVED_THRESHOLD = 0.01
#: Rows used for key orthogonality and value PCA (evenly spaced subsample of batch × positions).
DEFAULT_MAX_ROWS = 1024


# --------------------------------------------------------------------------------------------
# What a capture holds
# --------------------------------------------------------------------------------------------


@dataclass
class HeadCapture:
    """The tensors of one attention head on one batch, detached and on the CPU.

    Shapes (B sequences, Tq queries, Tk keys): ``alpha`` ``(B, Tq, Tk)`` (query i, key j);
    ``values`` ``(B, Tk, d_v)``; ``u`` = ∂L/∂g ``(B, Tq, d_v)``; ``context`` g ``(B, Tq, d_v)``;
    ``keys`` ``(B, Tk, d_k)`` and ``queries`` ``(B, Tq, d_k)`` when available; ``visible``
    ``(B, Tq, Tk)`` boolean, True where query i may attend to key j (the mask, not the weights).
    """

    layer: int
    head: int
    module: str
    alpha: torch.Tensor
    values: torch.Tensor
    u: torch.Tensor
    visible: torch.Tensor
    context: torch.Tensor | None = None
    keys: torch.Tensor | None = None
    queries: torch.Tensor | None = None

    def __post_init__(self) -> None:
        B, Tq, Tk = self.alpha.shape
        if self.values.shape[:2] != (B, Tk):
            raise ValueError(f"values must be ({B}, {Tk}, d_v), got {tuple(self.values.shape)}")
        if self.u.shape != (B, Tq, self.values.shape[-1]):
            raise ValueError(f"u must be ({B}, {Tq}, {self.values.shape[-1]}), got {tuple(self.u.shape)}")
        if self.visible.shape != self.alpha.shape:
            raise ValueError(f"visible must have alpha's shape {tuple(self.alpha.shape)}, got {tuple(self.visible.shape)}")

    @property
    def name(self) -> str:
        """Return ``"L{layer}H{head}"``, the head's short name in summaries and figures."""
        return f"L{self.layer}H{self.head}"


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


# --------------------------------------------------------------------------------------------
# Measurements on one head (plain functions, usable on any tensors)
# --------------------------------------------------------------------------------------------


def attention_entropy(alpha: torch.Tensor) -> torch.Tensor:
    """Return the entropy of every attention row, in nats, shape ``alpha.shape[:-1]`` (0 log 0 = 0)."""
    return torch.special.entr(alpha).sum(-1, dtype=torch.float64)


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
    ``max_rows``). Uses :func:`attention_dynamics.geometry.mean_abs_cosine` and
    :func:`~attention_dynamics.geometry.isotropic_abs_cosine_baseline`.
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

    Uses :func:`attention_dynamics.geometry.pca_spectrum` on all positions of the batch (evenly
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
    cap = capture.capture if isinstance(capture, HeadDiagnostics) else capture
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


# --------------------------------------------------------------------------------------------
# Diagnostics of one head and of a whole model
# --------------------------------------------------------------------------------------------


class HeadDiagnostics:
    """The diagnostics of one head: the paper's matrices (computed on demand) and scalar metrics.

    Matrices are recomputed from the capture when asked for (they are ``(B, Tq, Tk)`` each), from
    the laws in :mod:`attention_dynamics.gradients`.
    """

    def __init__(self, capture: HeadCapture, *, starved_threshold: float = DEFAULT_STARVED_THRESHOLD,
                 orthogonality_labels: torch.Tensor | None = None, max_rows: int | None = DEFAULT_MAX_ROWS):
        self.capture = capture
        self.starved_threshold = starved_threshold
        alpha, vis = capture.alpha, capture.visible
        entropy = attention_entropy(alpha)  # (B, Tq)
        n_visible = vis.sum(-1)  # (B, Tq)
        many = n_visible >= 2
        norm_entropy = (entropy[many] / n_visible[many].to(torch.float64).log()).mean() if many.any() else torch.tensor(float("nan"))
        routing = advantage_routing_gradient(alpha, compatibility(capture.u, capture.values))  # (B, Tq, Tk)
        value_grad = self.value_gradient
        if capture.keys is not None:
            cos, base = key_orthogonality(capture.keys, orthogonality_labels, max_rows=max_rows)
        else:
            cos, base = float("nan"), float("nan")
        spectrum = value_spectrum(capture.values, max_rows=max_rows)
        self.value_pca_spectrum: np.ndarray = spectrum
        self.metrics = HeadMetrics(
            layer=capture.layer,
            head=capture.head,
            module=capture.module,
            attention_entropy_nats=float(entropy.mean()),
            normalized_attention_entropy=float(norm_entropy),
            mean_max_attention=float(alpha.max(-1).values.to(torch.float64).mean()),
            routing_gradient_norm=float(torch.linalg.vector_norm(routing, dtype=torch.float64)),
            value_gradient_norm=float(value_grad.to(torch.float64).norm()),
            starved_fraction=float(self.starved.sum() / (uniform_soft_counts(vis) > 0).sum().clamp_min(1)),
            key_mean_abs_cosine=cos,
            key_random_baseline=base,
            value_pc1_fraction=float(spectrum[0]),
            value_effective_dimension=float(1.0 / np.sum(spectrum**2)) if np.isfinite(spectrum).all() else float("nan"),
            max_abs_routing_row_sum=float(routing.sum(-1, dtype=torch.float64).abs().max()),
        )

    @property
    def name(self) -> str:
        """Return ``"L{layer}H{head}"``."""
        return self.capture.name

    @property
    def alpha(self) -> torch.Tensor:
        """Return the attention weights alpha ``(B, Tq, Tk)``."""
        return self.capture.alpha

    @property
    def compatibility(self) -> torch.Tensor:
        """Return the compatibility matrix B = U Vᵀ, ``b_ij = u_i · v_j`` ``(B, Tq, Tk)`` (nats per unit)."""
        return compatibility(self.capture.u, self.capture.values)

    @property
    def expected_compatibility(self) -> torch.Tensor:
        """Return E_{alpha_i}[b] = Σ_j alpha_ij b_ij (= u_i · g_i), shape ``(B, Tq, 1)``."""
        return expected_compatibility(self.capture.alpha, self.compatibility)

    @property
    def routing_gradient(self) -> torch.Tensor:
        """Return the paper's advantage matrix alpha ⊙ (B − E_alpha[b]) = ∂L/∂S ``(B, Tq, Tk)`` (boxed routing law)."""
        return advantage_routing_gradient(self.capture.alpha, self.compatibility)

    @property
    def advantage_matrix(self) -> torch.Tensor:
        """Return alpha ⊙ (E_alpha[b] − B) = −∂L/∂S ``(B, Tq, Tk)``: positive where descent raises alpha_ij.

        This is the paper's advantage matrix in the book's sign convention (advantage =
        E_alpha[b] − b_ij); it is also the score change of one gradient step per unit learning rate.
        """
        return -self.routing_gradient

    @property
    def value_gradient(self) -> torch.Tensor:
        """Return ∂L/∂v_j = Σ_i alpha_ij u_i ``(B, Tk, d_v)`` (the responsibility-weighted value law)."""
        return responsibility_weighted_value_gradient(self.capture.alpha, self.capture.u)

    @property
    def soft_counts(self) -> torch.Tensor:
        """Return N_j = Σ_i alpha_ij ``(B, Tk)``, the attention mass (responsibility) each key receives."""
        return soft_counts(self.capture.alpha)

    @property
    def starved(self) -> torch.Tensor:
        """Return the boolean mask ``(B, Tk)`` of starved keys (see :func:`starved_keys`)."""
        return starved_keys(self.capture.alpha, self.capture.visible, threshold=self.starved_threshold)

    def __repr__(self) -> str:
        m = self.metrics
        return (f"HeadDiagnostics({self.name}, H/logn={m.normalized_attention_entropy:.3f}, "
                f"starved={m.starved_fraction:.3f}, |dL/dS|={m.routing_gradient_norm:.3g})")


@dataclass
class AttentionDiagnostics:
    """Diagnostics of every head of a model on one batch: the result object of :func:`diagnose`.

    ``heads`` in forward order (layer, then head); ``loss`` the loss of the batch (nats).
    ``specializations`` holds one :class:`SpecializationSummary` per head when labels were given.
    """

    heads: list[HeadDiagnostics]
    loss: float
    specializations: list[SpecializationSummary] = field(default_factory=list)

    def head(self, layer: int = 0, head: int = 0) -> HeadDiagnostics:
        """Return the diagnostics of head ``head`` of layer ``layer``."""
        for h in self.heads:
            if h.capture.layer == layer and h.capture.head == head:
                return h
        raise KeyError(f"no head L{layer}H{head}; the model has {', '.join(h.name for h in self.heads)}")

    @property
    def n_layers(self) -> int:
        """Return the number of attention layers (attention-module calls) captured."""
        return len({h.capture.layer for h in self.heads})

    def metrics(self) -> list[dict[str, Any]]:
        """Return one dict of :class:`HeadMetrics` per head (ready for ``pandas.DataFrame``)."""
        out = []
        for i, h in enumerate(self.heads):
            d = h.metrics.as_dict()
            if self.specializations:
                s = self.specializations[i]
                d["specialization_mi_nats"] = s.mutual_information_nats
                d["specialization_chance_mi_nats"] = s.chance_mutual_information_nats
                d["specialization_nmi"] = s.normalized_mutual_information
                d["specialization_diagonal_mass"] = s.diagonal_mass
            out.append(d)
        return out

    def summary(self) -> str:
        """Return a plain-text table of every head's diagnostics, with a legend."""
        header = (f"{'head':<6} {'H/log n':>7} {'max a':>6} {'|dL/dS|':>9} {'|dL/dV|':>9} "
                  f"{'starved':>7} {'k |cos|':>7} {'random':>6} {'v PC1':>6} {'v dim':>5}")
        if self.specializations:
            header += f" {'MI nats':>7} {'chance':>6}"
        lines = [f"Attention diagnostics: {len(self.heads)} head(s) in {self.n_layers} layer(s), "
                 f"loss {self.loss:.4f} nats", header, "-" * len(header)]
        for i, h in enumerate(self.heads):
            m = h.metrics
            row = (f"{h.name:<6} {m.normalized_attention_entropy:>7.3f} {m.mean_max_attention:>6.3f} "
                   f"{m.routing_gradient_norm:>9.2e} {m.value_gradient_norm:>9.2e} {m.starved_fraction:>7.1%} "
                   f"{m.key_mean_abs_cosine:>7.3f} {m.key_random_baseline:>6.3f} {m.value_pc1_fraction:>6.1%} "
                   f"{m.value_effective_dimension:>5.2f}")
            if self.specializations:
                s = self.specializations[i]
                row += f" {s.mutual_information_nats:>7.3f} {s.chance_mutual_information_nats:>6.3f}"
            lines.append(row)
        legend = [
            "H/log n   attention entropy over its maximum (1 uniform, 0 one-hot); max a: mean top weight",
            "|dL/dS|   norm of the routing gradient alpha*(B - E[b]) (the advantage matrix, nats)",
            "|dL/dV|   norm of the value gradient alpha^T U (nats)",
            f"starved   keys receiving < {self.heads[0].starved_threshold:g} x their uniform-attention mass",
            "k |cos|   mean |cos| between keys; random: the same for isotropic random vectors",
            "v PC1     variance share of the values' first principal component; v dim: participation ratio",
        ]
        if self.specializations:
            legend.append("MI nats   I(query label; key label) under attention; chance: under uniform attention")
        return "\n".join(lines + [""] + legend)

    def __repr__(self) -> str:
        return self.summary()

    def plot_head(self, layer: int = 0, head: int = 0, **kwargs):
        """Draw one head's attention, compatibility and advantage matrices; see :func:`plot_head`."""
        return plot_head(self.head(layer, head), **kwargs)

    def plot_overview(self, **kwargs):
        """Draw per-head bar charts of the scalar diagnostics; see :func:`plot_overview`."""
        return plot_overview(self, **kwargs)


# --------------------------------------------------------------------------------------------
# Capturing tensors with hooks
# --------------------------------------------------------------------------------------------


def default_loss(outputs: torch.Tensor | tuple, targets: torch.Tensor) -> torch.Tensor:
    """Return the mean cross-entropy (nats) of logits ``(..., C)`` against class indices ``(...)`` or probabilities ``(..., C)``.

    Positions whose class index is ``-100`` are ignored (PyTorch's ``ignore_index``). A model that
    returns a tuple is read at its first element.
    """
    logits = outputs[0] if isinstance(outputs, (tuple, list)) else outputs
    C = logits.shape[-1]
    if targets.is_floating_point():  # soft targets (probabilities over classes)
        return F.cross_entropy(logits.reshape(-1, C), targets.reshape(-1, C))
    return F.cross_entropy(logits.reshape(-1, C), targets.reshape(-1), ignore_index=-100)


@dataclass
class _Record:
    """What the hooks of one attention-module call collect (internal)."""

    module: str
    kind: str  # "probe" or "mha"
    tensors: dict[str, torch.Tensor] = field(default_factory=dict)
    grad_of: torch.Tensor | None = None  # the tensor whose gradient gives u
    out_weight: torch.Tensor | None = None  # MHA: out_proj.weight (E, E)
    n_heads: int = 1
    causal: bool | None = None
    visible: torch.Tensor | None = None
    mod: nn.Module | None = None  # the attention module itself (for the autograd check)


def _probed_modules(model: nn.Module) -> list[tuple[str, nn.Module]]:
    return [
        (name, m) for name, m in model.named_modules()
        if all(isinstance(getattr(m, p, None), Probe) for p in ("attn_weights", "values", "context"))
    ]


def _mha_modules(model: nn.Module) -> list[tuple[str, nn.MultiheadAttention]]:
    return [(name, m) for name, m in model.named_modules() if isinstance(m, nn.MultiheadAttention)]


_MHA_SIGNATURE = inspect.signature(nn.MultiheadAttention.forward)


#: An additive float mask entry at or below this value hides the key (exp(−10⁴) underflows to 0):
#: it covers −inf and the large negative constants (``torch.finfo(dtype).min``) some code uses.
MASKED_SCORE = -1e4


def _mha_visibility(bound: dict[str, Any], B: int, H: int, Tq: int, Tk: int) -> torch.Tensor:
    """Return ``(B, H, Tq, Tk)`` True where the masks passed to a MultiheadAttention call allow attention.

    Boolean masks are True where attention is *not* allowed (PyTorch's convention); additive float
    masks hide a key where they are at or below :data:`MASKED_SCORE`. A finite bias above it
    (a soft penalty) leaves the key visible, so a key it suppresses counts as starved, not masked.
    """
    visible = torch.ones(B, H, Tq, Tk, dtype=torch.bool)
    attn_mask, kpm = bound.get("attn_mask"), bound.get("key_padding_mask")
    if attn_mask is not None:
        m = attn_mask.detach().cpu()
        allowed = ~m if m.dtype == torch.bool else m > MASKED_SCORE
        allowed = allowed.reshape(-1, H, Tq, Tk) if allowed.dim() == 3 else allowed.reshape(1, 1, Tq, Tk)
        visible &= allowed
    if kpm is not None:
        m = kpm.detach().cpu().reshape(B, Tk)
        allowed = ~m if m.dtype == torch.bool else m > MASKED_SCORE
        visible &= allowed[:, None, None, :]
    return visible


@contextmanager
def _attention_hooks(model: nn.Module) -> Iterator[list[_Record]]:
    """Register capture hooks on every attention module of ``model``; yield the list they fill; remove them."""
    records: list[_Record] = []
    handles: list[Any] = []
    restore: list[Callable[[], None]] = []

    for name, mod in _probed_modules(model):
        if getattr(mod, "fused", False):  # the fused kernel bypasses the probes: use the explicit path
            mod.fused = False
            restore.append(lambda mod=mod: setattr(mod, "fused", True))
        current: dict[str, _Record] = {}

        def start(_module, _args, name=name, mod=mod, current=current):
            rec = _Record(module=name, kind="probe", causal=True if _is_causal_module(mod) else None, mod=mod)
            records.append(rec)
            current["rec"] = rec

        handles.append(mod.register_forward_pre_hook(start))
        for probe in ("queries", "keys", "values", "attn_weights", "context"):
            p = getattr(mod, probe, None)
            if not isinstance(p, Probe):
                continue

            def read(_module, _args, output, probe=probe, current=current):
                rec = current["rec"]
                rec.tensors[probe] = output
                if probe == "context":
                    rec.grad_of = output

            handles.append(p.register_forward_hook(read))

    for name, mod in _mha_modules(model):
        if mod.bias_k is not None or mod.add_zero_attn:
            raise NotImplementedError(f"{name}: MultiheadAttention with bias_k/bias_v or add_zero_attn is not supported "
                                      "(its attention has an extra key that carries no position)")
        asked: dict[str, Any] = {}

        def pre(module, args, kwargs, name=name, asked=asked):
            bound = _MHA_SIGNATURE.bind(module, *args, **kwargs)
            bound.apply_defaults()
            call = dict(bound.arguments)
            call.pop("self")
            asked.update(need_weights=call["need_weights"], average=call["average_attn_weights"])
            if call["is_causal"] and call["attn_mask"] is None:  # weights need an explicit mask
                Tq = call["query"].shape[0 if (call["query"].dim() == 2 or not module.batch_first) else 1]
                call["attn_mask"] = ~causal_mask(Tq, call["query"].device)
            call["need_weights"], call["average_attn_weights"] = True, False
            rec = _Record(module=name, kind="mha", n_heads=module.num_heads, mod=module)
            rec.tensors["_call"] = dict(call)  # type: ignore[assignment]
            records.append(rec)
            asked["rec"] = rec
            q, k, v = call.pop("query"), call.pop("key"), call.pop("value")
            return (q, k, v), call

        def post(module, args, kwargs, output, asked=asked):
            rec: _Record = asked["rec"]
            attn_output, weights = output
            _read_mha(module, rec, weights)
            rec.grad_of = attn_output
            if not asked["need_weights"]:
                return attn_output, None
            if asked["average"]:
                return attn_output, weights.mean(dim=-3)
            return output

        handles.append(mod.register_forward_pre_hook(pre, with_kwargs=True))
        handles.append(mod.register_forward_hook(post, with_kwargs=True))
    try:
        yield records
    finally:
        for h in handles:
            h.remove()
        for undo in restore:
            undo()


def _is_causal_module(mod: nn.Module) -> bool:
    from .models.transformer import CausalSelfAttention

    return isinstance(mod, CausalSelfAttention) or bool(getattr(mod, "causal", False))


def _read_mha(module: nn.MultiheadAttention, rec: _Record, weights: torch.Tensor) -> None:
    """Recompute per-head q, k, v of a MultiheadAttention call from its input projection (internal)."""
    call = rec.tensors["_call"]  # type: ignore[assignment]
    E, H = module.embed_dim, module.num_heads
    d_head = E // H
    batched = call["query"].dim() == 3

    def batch_first(t: torch.Tensor) -> torch.Tensor:
        if not batched:
            return t.unsqueeze(0)
        return t if module.batch_first else t.transpose(0, 1)

    if module._qkv_same_embed_dim:
        W_q, W_k, W_v = module.in_proj_weight.chunk(3)
    else:
        W_q, W_k, W_v = module.q_proj_weight, module.k_proj_weight, module.v_proj_weight
    b_q = b_k = b_v = None
    if module.in_proj_bias is not None:
        b_q, b_k, b_v = module.in_proj_bias.chunk(3)
    with torch.no_grad():
        q = F.linear(batch_first(call["query"]), W_q, b_q)  # (B, Tq, E)
        k = F.linear(batch_first(call["key"]), W_k, b_k)  # (B, Tk, E)
        v = F.linear(batch_first(call["value"]), W_v, b_v)  # (B, Tk, E)
    B, Tq, Tk = q.shape[0], q.shape[1], k.shape[1]
    # (B, T, E) -> (B, H, T, d_head)
    rec.tensors["queries"] = q.view(B, Tq, H, d_head).transpose(1, 2)
    rec.tensors["keys"] = k.view(B, Tk, H, d_head).transpose(1, 2)
    rec.tensors["values"] = v.view(B, Tk, H, d_head).transpose(1, 2)
    rec.tensors["attn_weights"] = weights.detach().reshape(B, H, Tq, Tk)
    rec.out_weight = module.out_proj.weight.detach()
    rec.visible = _mha_visibility(call, B, H, Tq, Tk)
    rec.tensors["_batched"] = batched  # type: ignore[assignment]
    rec.tensors["_batch_first"] = module.batch_first  # type: ignore[assignment]


def _as_bhtd(t: torch.Tensor) -> torch.Tensor:
    """Return a probe tensor as ``(B, H, T, ·)``: leading dims (B, H), (B,) or none are accepted."""
    if t.dim() == 2:
        return t[None, None]
    if t.dim() == 3:
        return t[:, None]
    if t.dim() == 4:
        return t
    raise ValueError(f"probe tensors must have 2 to 4 dimensions, got shape {tuple(t.shape)}")


def _cpu(t: torch.Tensor | None) -> torch.Tensor | None:
    return None if t is None else t.detach().cpu()


def _captures_from_records(records: list[_Record], grads: Sequence[torch.Tensor | None]) -> list[HeadCapture]:
    captures: list[HeadCapture] = []
    seen: dict[str, int] = {}
    for layer, (rec, grad) in enumerate(zip(records, grads)):
        seen[rec.module] = seen.get(rec.module, 0) + 1
        name = rec.module if seen[rec.module] == 1 else f"{rec.module}[call {seen[rec.module]}]"
        if rec.kind == "probe":
            alpha = _as_bhtd(rec.tensors["attn_weights"].detach())
            values = _as_bhtd(rec.tensors["values"].detach())
            context = _as_bhtd(rec.tensors["context"].detach())
            u = torch.zeros_like(context) if grad is None else _as_bhtd(grad.detach())
            keys = _as_bhtd(rec.tensors["keys"].detach()) if "keys" in rec.tensors else None
            queries = _as_bhtd(rec.tensors["queries"].detach()) if "queries" in rec.tensors else None
            Tq, Tk = alpha.shape[-2:]
            causal = rec.causal
            if causal is None:  # generic probed module: causal if no query ever sees a later key
                causal = Tq == Tk and bool((alpha.triu(1) == 0).all())
            visible = (causal_mask(Tq) if causal else torch.ones(Tq, Tk, dtype=torch.bool)).expand(alpha.shape)
        else:
            H = rec.n_heads
            alpha = rec.tensors["attn_weights"]  # (B, H, Tq, Tk)
            values, keys, queries = rec.tensors["values"], rec.tensors["keys"], rec.tensors["queries"]
            B, _, Tq, Tk = alpha.shape
            out = rec.grad_of
            if grad is None:
                grad = torch.zeros_like(out)
            grad = grad.detach()
            if not rec.tensors["_batched"]:
                grad = grad.unsqueeze(0)
            elif not rec.tensors["_batch_first"]:
                grad = grad.transpose(0, 1)
            u_concat = grad @ rec.out_weight  # (B, Tq, E): ∂L/∂(concatenated head contexts)
            u = u_concat.view(B, Tq, H, -1).transpose(1, 2)  # (B, H, Tq, d_head)
            context = alpha @ values  # (B, H, Tq, d_head)
            visible = rec.visible.expand(alpha.shape)
        for h in range(alpha.shape[1]):
            captures.append(HeadCapture(
                layer=layer, head=h, module=name,
                alpha=_cpu(alpha[:, h]), values=_cpu(values[:, h]), u=_cpu(u[:, h]),
                visible=_cpu(visible[:, h]).contiguous(), context=_cpu(context[:, h]),
                keys=_cpu(keys[:, h]) if keys is not None else None,
                queries=_cpu(queries[:, h]) if queries is not None else None,
            ))
    return captures


def _run_with_hooks(model: nn.Module, inputs: Any, targets: torch.Tensor,
                    loss_fn: Callable[[Any, torch.Tensor], torch.Tensor] | None,
                    extra: Callable[[list[_Record]], list[torch.Tensor]] | None = None):
    """Run ``model`` once with the capture hooks; return ``(records, grads for u, extra grads, loss)`` (internal)."""
    loss_fn = loss_fn or default_loss
    if not _probed_modules(model) and not _mha_modules(model):
        raise ValueError("the model has no attention module the diagnostics can read: expected modules with "
                         "attention_dynamics Probe children (attn_weights, values, context) or torch.nn.MultiheadAttention")
    was_training = {m: m.training for m in model.modules()}
    model.eval()
    try:
        with torch.enable_grad(), _attention_hooks(model) as records:
            outputs = model(*inputs) if isinstance(inputs, tuple) else model(inputs)
            loss = loss_fn(outputs, targets)
            if not records:
                raise ValueError("the forward pass called no attention module")
            wanted = [r.grad_of for r in records]
            if any(t is None or not t.requires_grad for t in wanted):
                raise ValueError("the attention outputs do not require grad, so u = ∂L/∂g cannot be computed; "
                                 "enable requires_grad on the model's parameters")
            more = extra(records) if extra is not None else []
            grads = torch.autograd.grad(loss, wanted + more, allow_unused=True)
    finally:
        for m, flag in was_training.items():
            m.train(flag)
    return records, grads[: len(wanted)], grads[len(wanted):], float(loss.detach())


def capture_attention(
    model: nn.Module,
    inputs: Any,
    targets: torch.Tensor,
    *,
    loss_fn: Callable[[Any, torch.Tensor], torch.Tensor] | None = None,
) -> tuple[list[HeadCapture], float]:
    """Return ``(one HeadCapture per head, the batch's loss in nats)`` by running ``model`` once with hooks.

    ``inputs`` is passed to ``model`` as is (a tuple is unpacked as positional arguments);
    ``loss_fn(outputs, targets)`` defaults to :func:`default_loss` (mean cross-entropy). Works on
    modules with the package's probes and on ``torch.nn.MultiheadAttention`` modules (see the module
    docstring); the model is run in eval mode with gradients enabled, ``.grad`` is not touched, and
    every hook is removed afterwards.
    """
    records, grads, _, loss = _run_with_hooks(model, inputs, targets, loss_fn)
    return _captures_from_records(records, grads), loss


@dataclass
class AutogradCheck:
    """How far the laws applied to the captured tensors are from autograd's own gradients.

    ``max_abs_error``: the largest absolute difference over every compared entry;
    ``max_abs_gradient``: the largest absolute autograd gradient (the scale to judge the error by);
    ``compared``: what was compared.
    """

    max_abs_error: float
    max_abs_gradient: float
    compared: str

    @property
    def relative_error(self) -> float:
        """Return ``max_abs_error / max_abs_gradient`` (0 when every gradient is 0)."""
        return self.max_abs_error / self.max_abs_gradient if self.max_abs_gradient > 0 else 0.0


def verify_against_autograd(
    model: Any,
    inputs: Any,
    targets: torch.Tensor,
    *,
    loss_fn: Callable[[Any, torch.Tensor], torch.Tensor] | None = None,
) -> AutogradCheck:
    """Return an :class:`AutogradCheck` of the diagnostics of ``model`` against autograd (use it on your own model).

    The captured alpha, values, keys, queries and u are pushed through the paper's laws
    (:mod:`attention_dynamics.gradients`) and compared with gradients autograd computes in the
    same forward pass:

    - ``torch.nn.MultiheadAttention``: the query, key and value laws, chained through the input
      projection, against autograd's gradient of ``in_proj_weight`` (or ``q/k/v_proj_weight``);
    - modules with probes: the value law and the query law (scores scaled by 1/sqrt(d_k)) against
      autograd's gradients at the ``values`` and ``queries`` probes;
    - the book's single head: the advantage matrix against −∂L/∂S by autograd.

    An error at rounding level (relative ~1e-6 in float32, ~1e-14 in float64) means the capture
    read the right tensors.
    """
    params = _single_head_params(model)
    if params is not None:
        p = params.clone().requires_grad_()
        with torch.enable_grad():
            fwd = single_head_forward(inputs, p, targets)
            fwd.scores.retain_grad()
            fwd.loss.backward()
        expected = -torch.nan_to_num(fwd.scores.grad.detach())
        got = diagnose_single_head(inputs, params, targets).heads[0].advantage_matrix
        got = got.reshape(expected.shape)
        return AutogradCheck(float((got - expected).abs().max()), float(expected.abs().max()),
                             "advantage matrix vs −∂L/∂S (autograd)")

    def extra(records: list[_Record]) -> list[torch.Tensor]:
        out: list[torch.Tensor] = []
        for rec in records:
            if rec.kind == "probe":
                out += [rec.tensors["values"]] + ([rec.tensors["queries"]] if "queries" in rec.tensors else [])
        for mod in dict.fromkeys(r.mod for r in records if r.kind == "mha"):
            out += ([mod.in_proj_weight] if mod._qkv_same_embed_dim
                    else [mod.q_proj_weight, mod.k_proj_weight, mod.v_proj_weight])
        return out

    records, grads, extra_grads, _ = _run_with_hooks(model, inputs, targets, loss_fn, extra)
    captures = _captures_from_records(records, grads)
    by_layer: dict[int, list[HeadCapture]] = {}
    for c in captures:
        by_layer.setdefault(c.layer, []).append(c)
    errors, scales, compared = [0.0], [0.0], set()
    it = iter(extra_grads)
    law_weight_grads: dict[nn.Module, list[torch.Tensor]] = {}
    for layer, rec in enumerate(records):
        heads = by_layer[layer]
        if rec.kind == "probe":
            got_v = torch.stack([responsibility_weighted_value_gradient(c.alpha, c.u) for c in heads], 1)
            auto_v = _as_bhtd(next(it).detach().cpu())
            pairs = [(got_v, auto_v)]
            if "queries" in rec.tensors:
                got_q = torch.stack([query_gradient(c.alpha, compatibility(c.u, c.values), c.keys,
                                                    1 / math.sqrt(c.keys.shape[-1])) for c in heads], 1)
                pairs.append((got_q, _as_bhtd(next(it).detach().cpu())))
            for got, auto in pairs:
                errors.append(float((got - auto.to(got.dtype)).abs().max()))
                scales.append(float(auto.abs().max()))
            compared.add("value and query laws vs autograd at the probes")
        else:
            law_weight_grads.setdefault(rec.mod, []).append(_mha_projection_gradient(rec, heads))
    for mod, per_call in law_weight_grads.items():
        law = torch.stack(per_call).sum(0)  # (3E, E_in): every call of the module adds up
        if mod._qkv_same_embed_dim:
            auto = next(it).detach().cpu()
        else:
            auto = torch.cat([next(it).detach().cpu() for _ in range(3)])
        errors.append(float((law - auto.to(law.dtype)).abs().max()))
        scales.append(float(auto.abs().max()))
        compared.add("query, key and value laws through the input projection vs autograd")
    return AutogradCheck(max(errors), max(scales), "; ".join(sorted(compared)))


def _mha_projection_gradient(rec: _Record, heads: list[HeadCapture]) -> torch.Tensor:
    """Return the laws' gradient of a MultiheadAttention call's input projection, stacked (W_q; W_k; W_v) (internal)."""
    call = rec.tensors["_call"]  # type: ignore[assignment]
    mod = rec.mod
    batched = call["query"].dim() == 3

    def batch_first(t: torch.Tensor) -> torch.Tensor:
        t = t.detach().cpu()
        if not batched:
            return t.unsqueeze(0)
        return t if mod.batch_first else t.transpose(0, 1)

    scale = 1 / math.sqrt(heads[0].keys.shape[-1])
    grad_q = torch.stack([query_gradient(c.alpha, compatibility(c.u, c.values), c.keys, scale) for c in heads], 2)
    grad_k = torch.stack([key_gradient(c.alpha, compatibility(c.u, c.values), c.queries, scale) for c in heads], 2)
    grad_v = torch.stack([responsibility_weighted_value_gradient(c.alpha, c.u) for c in heads], 2)
    # (B, T, H, d_head) -> (B, T, E), then Σ_{b,t} gradᵀ input
    out = []
    for g, inp in ((grad_q, call["query"]), (grad_k, call["key"]), (grad_v, call["value"])):
        x = batch_first(inp)
        out.append(torch.einsum("bte,btd->ed", g.reshape(*g.shape[:2], -1), x.to(g.dtype)))
    return torch.cat(out)


def capture_single_head(
    x: torch.Tensor, params: SingleHeadParams, targets: torch.Tensor, *, causal: bool = True, reduction: str = "mean"
) -> tuple[HeadCapture, float]:
    """Return ``(the HeadCapture, the loss in nats)`` of the book's single head on inputs ``x`` ``(B, T, d_in)`` or ``(T, d_in)``.

    The tensors are those of :func:`attention_dynamics.attention.single_head_forward`, whose u and
    b are the closed forms of PAPER.md §2.
    """
    with torch.no_grad():
        fwd = single_head_forward(x, params, targets, causal=causal, reduction=reduction)
    lead = (1,) if x.dim() == 2 else ()

    def batched(t: torch.Tensor) -> torch.Tensor:
        return t.reshape(*lead, *t.shape) if lead else t.reshape(-1, *t.shape[-2:])

    alpha = batched(fwd.alpha)  # (B, T, T)
    T = alpha.shape[-1]
    visible = (causal_mask(T) if causal else torch.ones(T, T, dtype=torch.bool)).expand(alpha.shape).contiguous()
    cap = HeadCapture(layer=0, head=0, module="single_head", alpha=_cpu(alpha), values=_cpu(batched(fwd.v)),
                      u=_cpu(batched(fwd.u)), visible=visible, context=_cpu(batched(fwd.g)),
                      keys=_cpu(batched(fwd.k)), queries=_cpu(batched(fwd.q)))
    return cap, float(fwd.loss)


def _labels_per_head(labels: Any, captures: list[HeadCapture]) -> list[torch.Tensor | None]:
    """Broadcast labels to every head: one tensor for all heads, or a dict {layer: tensor} (internal)."""
    if labels is None:
        return [None] * len(captures)
    if isinstance(labels, dict):
        return [None if labels.get(c.layer) is None else torch.as_tensor(labels[c.layer]) for c in captures]
    t = torch.as_tensor(labels)
    return [t] * len(captures)


def _diagnostics_from_captures(
    captures: list[HeadCapture], loss: float, *, query_labels: Any, key_labels: Any, orthogonality_labels: Any,
    starved_threshold: float, max_rows: int | None,
) -> AttentionDiagnostics:
    klabels = _labels_per_head(key_labels, captures)
    qlabels = _labels_per_head(query_labels, captures)
    olabels = _labels_per_head(orthogonality_labels, captures)
    heads, specs = [], []
    for cap, kl, ql, ol in zip(captures, klabels, qlabels, olabels):
        ol_shaped = None if ol is None else ol.reshape(cap.alpha.shape[0], cap.alpha.shape[2])
        heads.append(HeadDiagnostics(cap, starved_threshold=starved_threshold, orthogonality_labels=ol_shaped,
                                     max_rows=max_rows))
        if kl is not None and ql is not None:
            specs.append(specialization(cap, ql, kl))
    return AttentionDiagnostics(heads=heads, loss=loss, specializations=specs if len(specs) == len(heads) else [])


def diagnose(
    model: nn.Module,
    inputs: Any,
    targets: torch.Tensor,
    *,
    loss_fn: Callable[[Any, torch.Tensor], torch.Tensor] | None = None,
    query_labels: Any = None,
    key_labels: Any = None,
    orthogonality_labels: Any = None,
    starved_threshold: float = DEFAULT_STARVED_THRESHOLD,
    max_rows: int | None = DEFAULT_MAX_ROWS,
) -> AttentionDiagnostics:
    """Return the :class:`AttentionDiagnostics` of every head of ``model`` on a batch with targets.

    ``model``: a package model (probes), any model built from ``torch.nn.MultiheadAttention``, or
    the book's single head (a :class:`~attention_dynamics.attention.SingleHeadParams`, or a module
    whose ``head_params()`` or ``params()`` returns one; then ``inputs`` is ``x`` ``(T, d_in)`` or
    ``(B, T, d_in)`` and the loss is the head's mean cross-entropy, see :func:`diagnose_single_head`).
    ``inputs`` go to ``model`` unchanged (a tuple is unpacked as positional arguments); ``targets``
    and ``loss_fn(outputs, targets)`` define the loss
    (default: mean cross-entropy, :func:`default_loss`). With integer ``query_labels`` ``(B, Tq)``
    and ``key_labels`` ``(B, Tk)`` (e.g. the symbol each position carries) a
    :class:`SpecializationSummary` is computed per head. With ``orthogonality_labels`` ``(B, Tk)``,
    key orthogonality is measured between the per-label mean keys (one key per hypothesis)
    instead of between the keys of all positions. Labels may be a dict ``{layer: labels}`` when
    layers differ. ``starved_threshold``: see :func:`starved_keys`. ``max_rows``: rows used for
    orthogonality and PCA.

    Example::

        layer = torch.nn.TransformerEncoderLayer(32, 4, batch_first=True, dropout=0.0)
        model = torch.nn.Sequential(torch.nn.Embedding(10, 32), layer, torch.nn.Linear(32, 10))
        diag = diagnose(model, tokens, targets)
        print(diag.summary()); diag.plot_head(0, 0)
    """
    params = _single_head_params(model)
    if params is not None:  # the book's single head as a module: read its closed-form forward pass
        if loss_fn is not None:
            raise ValueError("a single-head module is diagnosed with its own mean cross-entropy; loss_fn is not used")
        return diagnose_single_head(inputs, params, targets, query_labels=query_labels, key_labels=key_labels,
                                    orthogonality_labels=orthogonality_labels,
                                    starved_threshold=starved_threshold, max_rows=max_rows)
    captures, loss = capture_attention(model, inputs, targets, loss_fn=loss_fn)
    return _diagnostics_from_captures(captures, loss, query_labels=query_labels, key_labels=key_labels,
                                      orthogonality_labels=orthogonality_labels,
                                      starved_threshold=starved_threshold, max_rows=max_rows)


def _single_head_params(model: Any) -> SingleHeadParams | None:
    """Return the weights of a single-head model (a ``SingleHeadParams``, or a module exposing them), else None."""
    if isinstance(model, SingleHeadParams):
        return model
    if isinstance(model, nn.Module) and (_probed_modules(model) or _mha_modules(model)):
        return None
    for name in ("head_params", "params"):  # a method on some modules, a property on others
        params = getattr(model, name, None)
        if callable(params) and not isinstance(params, SingleHeadParams):
            try:
                params = params()
            except TypeError:
                continue
        if isinstance(params, SingleHeadParams):
            return SingleHeadParams(**{n: t.detach() for n, t in params.as_dict().items()})
    return None


def diagnose_single_head(
    x: torch.Tensor,
    params: SingleHeadParams,
    targets: torch.Tensor,
    *,
    causal: bool = True,
    query_labels: Any = None,
    key_labels: Any = None,
    orthogonality_labels: Any = None,
    starved_threshold: float = DEFAULT_STARVED_THRESHOLD,
    max_rows: int | None = DEFAULT_MAX_ROWS,
) -> AttentionDiagnostics:
    """Return the :class:`AttentionDiagnostics` of the book's single head (:class:`SingleHeadParams`) on ``x``.

    The same result object as :func:`diagnose`, read from the closed-form forward pass instead of
    hooks; the arguments after ``targets`` are those of :func:`diagnose`.
    """
    cap, loss = capture_single_head(x, params, targets, causal=causal)
    return _diagnostics_from_captures([cap], loss, query_labels=query_labels, key_labels=key_labels,
                                      orthogonality_labels=orthogonality_labels,
                                      starved_threshold=starved_threshold, max_rows=max_rows)


def routing_stability(before: AttentionDiagnostics, after: AttentionDiagnostics) -> list[RoutingStability]:
    """Return, per head, how much routing and values changed between two checkpoints' diagnostics.

    Both must be diagnostics of the same model architecture on the same batch (see
    :class:`RoutingStability` for the three measures).
    """
    if len(before.heads) != len(after.heads):
        raise ValueError(f"the checkpoints have {len(before.heads)} and {len(after.heads)} heads; compare the same model")
    out = []
    for h0, h1 in zip(before.heads, after.heads):
        a0, a1 = h0.alpha.to(torch.float64), h1.alpha.to(torch.float64)
        if a0.shape != a1.shape:
            raise ValueError(f"{h0.name}: attention shapes differ ({tuple(a0.shape)} vs {tuple(a1.shape)}); use the same batch")
        tv = 0.5 * (a0 - a1).abs().sum(-1)  # (B, Tq)
        agree = (a0.argmax(-1) == a1.argmax(-1)).to(torch.float64)
        v0, v1 = h0.capture.values.to(torch.float64), h1.capture.values.to(torch.float64)
        out.append(RoutingStability(
            head=h0.name,
            attention_tv=float(tv.mean()),
            top_key_agreement=float(agree.mean()),
            value_relative_change=float((v1 - v0).norm() / v0.norm().clamp_min(1e-300)),
        ))
    return out


# --------------------------------------------------------------------------------------------
# Diagnostics during training
# --------------------------------------------------------------------------------------------

#: A head's attention has collapsed when its normalized entropy falls below this value ...
COLLAPSE_ENTROPY = 0.1
#: ... or when more than this fraction of its keys is starved.
COLLAPSE_STARVED = 0.5


@dataclass
class DiagnosticsTrace:
    """Diagnostics recorded while a model trains (what :func:`traced_fit` returns).

    ``losses`` ``(steps,)``: the training loss before every update (nats). ``steps`` ``(n,)``: the
    steps at which the diagnostics were taken (after that many updates; the last is the end of
    training). ``metrics[n][h]``: the :meth:`AttentionDiagnostics.metrics` dict of head h at
    ``steps[n]`` (with the diagnostic batch's ``loss``). ``kept``: the full
    :class:`AttentionDiagnostics` at the steps asked for.
    """

    label: str
    losses: np.ndarray
    steps: np.ndarray
    metrics: list[list[dict[str, Any]]]
    kept: dict[int, AttentionDiagnostics]

    def metric(self, name: str, head: int = 0) -> np.ndarray:
        """Return metric ``name`` of head number ``head`` (in forward order) at every traced step ``(n,)``."""
        return np.array([m[head][name] for m in self.metrics], dtype=float)

    def at(self, step: int) -> AttentionDiagnostics:
        """Return the full diagnostics kept at ``step``."""
        if step not in self.kept:
            raise KeyError(f"no diagnostics kept at step {step}; kept: {sorted(self.kept)}")
        return self.kept[step]


def traced_fit(
    model: nn.Module,
    batches: Callable[[int], Any],
    *,
    steps: int,
    optimizer: torch.optim.Optimizer,
    diagnose_inputs: Any,
    diagnose_targets: torch.Tensor,
    track_steps: Sequence[int] = (),
    keep_steps: Sequence[int] = (),
    loss_fn: Callable[[nn.Module, Any], torch.Tensor] | None = None,
    backward: Callable[[nn.Module, Any], Any] | None = None,
    label: str = "",
    **diagnose_kwargs: Any,
) -> DiagnosticsTrace:
    """Train with :func:`attention_dynamics.training.fit` and return a :class:`DiagnosticsTrace`.

    :func:`diagnose` runs on ``(diagnose_inputs, diagnose_targets)`` at every step of
    ``track_steps`` ∪ ``keep_steps`` and at the end (step ``steps``); the full diagnostics are kept
    at ``keep_steps`` (the end is kept when ``steps`` is in ``keep_steps``). ``loss_fn``/``backward``
    and ``optimizer`` go to ``fit``; ``diagnose_kwargs`` (labels, thresholds) to :func:`diagnose`.
    """
    from .training import fit

    keep = set(int(s) for s in keep_steps)

    def callback(step: int, m: nn.Module, _loss: float) -> dict[str, Any]:
        diag = diagnose(m, diagnose_inputs, diagnose_targets, **diagnose_kwargs)
        rows = [{**row, "loss": diag.loss} for row in diag.metrics()]
        return {"metrics": rows, "diagnostics": diag if step in keep else None}

    history = fit(model, batches, steps=steps, optimizer=optimizer, loss_fn=loss_fn, backward=backward,
                  callback=callback, callback_steps=sorted(set(track_steps) | keep))
    records = history.records
    return DiagnosticsTrace(
        label=label,
        losses=history.losses,
        steps=np.array([r["step"] for r in records], dtype=int),
        metrics=[r["metrics"] for r in records],
        kept={r["step"]: r["diagnostics"] for r in records if r["diagnostics"] is not None},
    )


def sticky_chain_trace(
    schedule: Any = "sgd",
    *,
    seed: int = 42,
    steps: int = 1000,
    track_steps: Sequence[int] = (),
    keep_steps: Sequence[int] = (),
    kind: str = "reference",
    label: str | None = None,
) -> DiagnosticsTrace:
    """Return the :class:`DiagnosticsTrace` of the paper's sticky-chain head trained with ``schedule``.

    The run is chapter 5's (:mod:`attention_dynamics.sticky_experiment`): data and initial weights
    from ``seed``, full batch, the closed-form engine, a schedule of
    :mod:`attention_dynamics.schedules` (a name or a ``Schedule``). The diagnostics run on the
    training sequence, with queries and keys labelled by the symbol their input carries
    (y_{t−1}), so the specialization summary says which symbol's values serve which symbol's
    queries. Importable, so that :func:`attention_dynamics.training.map_parallel` can run several.
    """
    from .head_engine import SingleHeadModule
    from .schedules import get_schedule, make_backward, make_optimizer
    from .sticky_experiment import initial_head
    from .tasks import sticky_chain

    sched = get_schedule(schedule)
    data = sticky_chain.make_sticky_chain_data(seed, kind=kind)
    model = SingleHeadModule(initial_head(seed))
    symbols = data.previous_symbols
    return traced_fit(
        model, lambda step: (data.x, data.y), steps=steps, optimizer=make_optimizer(model, sched),
        backward=make_backward(sched), diagnose_inputs=data.x, diagnose_targets=data.y,
        track_steps=track_steps, keep_steps=keep_steps, label=label or sched.label,
        query_labels=symbols, key_labels=symbols, orthogonality_labels=symbols,
    )


def wind_tunnel_trace(scale: str = "book", *, seed: int = 0, keep_steps: Sequence[int] | None = None) -> DiagnosticsTrace:
    """Return the :class:`DiagnosticsTrace` of chapter 6's bijection transformer, diagnosed at its checkpoints.

    The model, settings and training are chapter 6's (:func:`attention_dynamics.wind_tunnel.train_bijection`
    at ``scale`` with ``seed``); every checkpoint is diagnosed on chapter 6's probe batch with the
    soft-target cross-entropy at the key positions. Queries and keys are labelled by token type
    (0 key token, 1 value token) and key orthogonality is measured between the mean keys of the
    tokens. ``keep_steps`` defaults to the first, middle and last checkpoints.
    """
    from . import calibration, wind_tunnel

    settings = wind_tunnel.SETTINGS[scale]
    run = wind_tunnel.train_bijection(settings, seed=seed, checkpoints=True)
    probe = wind_tunnel.bijection_probe_batch(settings, seed=seed)
    token_type = (probe.tokens >= settings["V"]).long()  # (B, T): 0 key token, 1 value token

    def loss_fn(logits: torch.Tensor, posterior: torch.Tensor) -> torch.Tensor:
        return calibration.soft_cross_entropy_nats(logits[:, 0::2], posterior.to(logits.dtype))  # key positions

    steps = sorted(run.checkpoints)
    keep = set(keep_steps) if keep_steps is not None else {steps[0], steps[len(steps) // 2], steps[-1]}
    metrics, kept = [], {}
    for step in steps:
        diag = diagnose(run.model(step), probe.tokens, probe.posterior, loss_fn=loss_fn, query_labels=token_type,
                        key_labels=token_type, orthogonality_labels=probe.tokens)
        metrics.append([{**row, "loss": diag.loss} for row in diag.metrics()])
        if step in keep:
            kept[step] = diag
    return DiagnosticsTrace(label="chapter 6's bijection transformer", losses=run.losses,
                            steps=np.array(steps, dtype=int), metrics=metrics, kept=kept)


#: The runs :func:`run_experiment` knows by name.
EXPERIMENTS = ("sticky_chain", "wind_tunnel", "torch_encoder")


def run_experiment(kind: str, **kwargs: Any) -> Any:
    """Return the result of one of chapter 8's runs by name (so one ``map_parallel`` call can mix them).

    ``"sticky_chain"`` → :func:`sticky_chain_trace`, ``"wind_tunnel"`` → :func:`wind_tunnel_trace`,
    ``"torch_encoder"`` → :func:`train_torch_encoder_on_bijection`; ``kwargs`` go to that function.
    """
    runners = {"sticky_chain": sticky_chain_trace, "wind_tunnel": wind_tunnel_trace,
               "torch_encoder": train_torch_encoder_on_bijection}
    if kind not in runners:
        raise ValueError(f"unknown experiment {kind!r}; choose one of {', '.join(EXPERIMENTS)}")
    return runners[kind](**kwargs)


def collapse_alarm(
    trace: DiagnosticsTrace, *, entropy_below: float = COLLAPSE_ENTROPY, starved_above: float = COLLAPSE_STARVED
) -> int | None:
    """Return the first traced step at which some head's attention has collapsed, or None.

    Collapsed: normalized attention entropy below ``entropy_below`` or a starved fraction above
    ``starved_above``. Then the routing gradient (gated by alpha) vanishes on most keys: routing
    is frozen, whatever the loss says.
    """
    for step, heads in zip(trace.steps, trace.metrics):
        if any(h["normalized_attention_entropy"] < entropy_below or h["starved_fraction"] > starved_above for h in heads):
            return int(step)
    return None


def loss_falls_behind(losses: Sequence[float], reference_losses: Sequence[float]) -> int | None:
    """Return the first step from which ``losses`` stay above ``reference_losses`` to the end, or None.

    The step at which a learning curve alone would tell that a run is worse than the reference
    (None if it is not behind at the last step).
    """
    a, b = np.asarray(losses, dtype=float), np.asarray(reference_losses, dtype=float)
    if a.shape != b.shape:
        raise ValueError(f"the curves have different lengths ({a.shape} vs {b.shape})")
    behind = a > b
    if not behind[-1]:
        return None
    not_behind = np.flatnonzero(~behind)
    return int(not_behind[-1] + 1) if not_behind.size else 0


# --------------------------------------------------------------------------------------------
# A plain PyTorch model to try the tool on
# --------------------------------------------------------------------------------------------


class TorchCausalEncoder(nn.Module):
    """A causal transformer built from ``torch.nn.TransformerEncoder`` only (no probes): logits ``(B, T, n_out)``.

    Token and learned position embeddings, ``n_layers`` pre-LayerNorm ``nn.TransformerEncoderLayer``
    with a causal mask, a linear readout. Chapter 8 uses it to show :func:`diagnose` on a model
    that knows nothing of this package.
    """

    def __init__(self, vocab_size: int, n_out: int, *, d_model: int = 64, n_heads: int = 4, n_layers: int = 2,
                 max_len: int = 64, dropout: float = 0.0):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, d_model)
        self.pos = nn.Parameter(torch.randn(max_len, d_model) * 0.02)
        layer = nn.TransformerEncoderLayer(d_model, n_heads, dim_feedforward=4 * d_model, dropout=dropout,
                                           batch_first=True, norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, n_layers, enable_nested_tensor=False)
        self.readout = nn.Linear(d_model, n_out)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """Return the logits ``(B, T, n_out)`` for token ids ``(B, T)``."""
        T = tokens.shape[1]
        h = self.embed(tokens) + self.pos[:T]  # (B, T, d_model)
        mask = nn.Transformer.generate_square_subsequent_mask(T, device=tokens.device, dtype=h.dtype)
        return self.readout(self.encoder(h, mask=mask, is_causal=True))


def bijection_training_targets(tokens: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Return per-token targets ``(B, 2L−1)``: pi(key) at key positions, −100 (ignored) at value positions."""
    full = torch.full(tokens.shape, -100, dtype=torch.long)
    full[:, 0::2] = targets
    return full


def train_torch_encoder_on_bijection(
    *, V: int = 8, L: int = 8, steps: int = 300, batch_size: int = 64, seed: int = 0, lr: float = 3e-3,
    d_model: int = 64, n_heads: int = 4, n_layers: int = 2, track_steps: Sequence[int] = (),
    keep_steps: Sequence[int] = (), eval_size: int = 256,
) -> tuple[TorchCausalEncoder, DiagnosticsTrace, tuple[torch.Tensor, torch.Tensor]]:
    """Train a :class:`TorchCausalEncoder` on bijection elimination; return ``(model, trace, (tokens, targets))``.

    Fresh sequences every step (:mod:`attention_dynamics.tasks.bijection`), AdamW, mean
    cross-entropy at the key positions. The diagnostics run on a fixed evaluation batch of
    ``eval_size`` sequences (returned); queries and keys are labelled by token type (0 key token,
    1 value token) for the specialization summary, and key orthogonality is measured between the
    mean keys of the 2V tokens.
    """
    from .tasks import bijection

    gen = torch.Generator().manual_seed(int(seed))
    torch.manual_seed(int(seed))
    model = TorchCausalEncoder(bijection.vocab_size(V), V, d_model=d_model, n_heads=n_heads, n_layers=n_layers,
                               max_len=bijection.sequence_length(L))
    evaluation = bijection.sample_bijection_batch(eval_size, V, L, generator=torch.Generator().manual_seed(int(seed) + 1))
    eval_targets = bijection_training_targets(evaluation.tokens, evaluation.targets)

    def batches(step: int) -> tuple[torch.Tensor, torch.Tensor]:
        b = bijection.sample_bijection_batch(batch_size, V, L, generator=gen)
        return b.tokens, bijection_training_targets(b.tokens, b.targets)

    def loss_fn(m: nn.Module, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        return default_loss(m(batch[0]), batch[1])

    token_type = (evaluation.tokens >= V).long()  # 0 key token, 1 value token
    trace = traced_fit(model, batches, steps=steps, optimizer=torch.optim.AdamW(model.parameters(), lr=lr),
                       loss_fn=loss_fn, diagnose_inputs=evaluation.tokens, diagnose_targets=eval_targets,
                       track_steps=track_steps, keep_steps=keep_steps, label="nn.TransformerEncoder",
                       query_labels=token_type, key_labels=token_type, orthogonality_labels=evaluation.tokens)
    return model, trace, (evaluation.tokens, eval_targets)


# --------------------------------------------------------------------------------------------
# Figures
# --------------------------------------------------------------------------------------------


def plot_head(
    head: HeadDiagnostics,
    *,
    batch_index: int = 0,
    queries: slice | None = None,
    keys: slice | None = None,
    axes=None,
    title: str | None = None,
):
    """Draw attention alpha, compatibility B and the advantage matrix alpha ⊙ (E_alpha[b] − B) of one head; return the figure.

    ``queries``/``keys`` select a window of positions (large T is unreadable in full); masked
    entries are blank. The advantage panel uses the book's sign: red (positive) = gradient descent
    moves attention toward that key.
    """
    cap = head.capture
    q = queries or slice(None)
    k = keys or slice(None)
    vis = cap.visible[batch_index][q, k].numpy()
    alpha = cap.alpha[batch_index][q, k].numpy()
    b = head.compatibility[batch_index][q, k].numpy()
    adv = head.advantage_matrix[batch_index][q, k].numpy()
    if axes is None:
        fig, axes = plotting.new_figure(3, width=3.5, height=3.1)
    else:
        fig = axes[0].figure
    q0 = q.start or 0
    k0 = k.start or 0
    extent_note = f" (from {q0}, {k0})" if (q0 or k0) else ""
    labels = dict(xlabel=f"key position j{'' if not k0 else f' − {k0}'}", ylabel=f"query position i{'' if not q0 else f' − {q0}'}")
    plotting.plot_matrix(axes[0], alpha, mask=vis, title=r"attention $\alpha_{ij}$", cbar_label="weight", **labels)
    plotting.plot_matrix(axes[1], b, mask=vis, diverging=True, title=r"compatibility $b_{ij}=u_i\cdot v_j$",
                         cbar_label="nats per unit value", **labels)
    plotting.plot_matrix(axes[2], adv, mask=vis, diverging=True,
                         title=r"advantage $\alpha_{ij}(\mathbb{E}_\alpha[b]-b_{ij})$",
                         cbar_label="−∂L/∂s (nats per unit score)", **labels)
    fig.suptitle(title or f"{head.name} ({cap.module}){extent_note}")
    return fig


def plot_overview(diagnostics: AttentionDiagnostics | Sequence[AttentionDiagnostics], *, labels: Sequence[str] | None = None, axes=None):
    """Draw per-head bars of normalized attention entropy, starved keys, key |cos| / baseline and value PC1; return the figure.

    Pass several diagnostics (e.g. checkpoints or runs) with ``labels`` to compare them side by side.
    """
    diags = [diagnostics] if isinstance(diagnostics, AttentionDiagnostics) else list(diagnostics)
    labels = list(labels or [f"run {i}" for i in range(len(diags))])
    panels = [
        ("normalized_attention_entropy", "attention entropy / max", "H(α)/log n (1 = uniform)"),
        ("starved_fraction", "starved keys", "fraction of keys"),
        ("key_orthogonality_ratio", "key |cos| vs random", "mean |cos| / random baseline"),
        ("value_pc1_fraction", "value PC1", "fraction of variance"),
    ]
    if axes is None:
        fig, axes = plotting.new_figure(len(panels), width=2.9, height=2.8)
    else:
        fig = axes[0].figure
    names = [h.name for h in diags[0].heads]
    x = np.arange(len(names))
    width = 0.8 / len(diags)
    for ax, (key, title, ylabel) in zip(axes, panels):
        for r, (d, lab) in enumerate(zip(diags, labels)):
            vals = [m[key] for m in d.metrics()]
            ax.bar(x + (r - (len(diags) - 1) / 2) * width, vals, width, label=lab, color=plotting.PALETTE[r % len(plotting.PALETTE)])
        ax.set_xticks(x, names, rotation=90 if len(names) > 4 else 0)
        ax.set_title(title)
        ax.set_ylabel(ylabel)
        ax.set_xlabel("head")
        if key == "key_orthogonality_ratio":
            ax.axhline(1.0, color="#555555", lw=1, ls="--")
    if len(diags) > 1:
        axes[0].legend()
    return fig


def plot_routing_matrix(summary: SpecializationSummary, *, ax=None, query_name: str = "query label",
                        key_name: str = "key label", title: str | None = None, kind: str = "attention",
                        vmax: float | None = None):
    """Draw a :class:`SpecializationSummary` as a label-by-label heat map on ``ax``; return the image.

    ``kind``: ``"attention"`` the routing matrix (mean attention mass per label pair);
    ``"excess"`` the routing matrix minus its chance level (uniform attention), diverging colours;
    ``"advantage"`` :attr:`SpecializationSummary.advantage_by_label` (red = gradient descent moves
    attention toward that key label). ``vmax`` fixes the colour limit (to compare panels).
    """
    if ax is None:
        _, ax = plotting.new_figure(1, width=3.8, height=3.3)
    choices = {
        "attention": (summary.routing_matrix, "who reads whom", "attention mass", False),
        "excess": (summary.routing_matrix - summary.chance_routing_matrix, "attention in excess of chance",
                   "attention mass − chance", True),
        "advantage": (summary.advantage_by_label, "advantage by label", "−∂L/∂s summed (nats)", True),
    }
    if kind not in choices:
        raise ValueError(f"kind must be one of {', '.join(choices)}, got {kind!r}")
    matrix, default_title, cbar_label, diverging = choices[kind]
    im = plotting.plot_matrix(ax, matrix, title=title or f"{summary.head}: {default_title}", xlabel=key_name,
                              ylabel=query_name, cbar_label=cbar_label, diverging=diverging, vmax=vmax)
    ax.set_xticks(range(len(summary.key_groups)), [str(g) for g in summary.key_groups])
    ax.set_yticks(range(len(summary.query_groups)), [str(g) for g in summary.query_groups])
    return im
