"""Diagnostics of attention training: compatibility and advantage matrices for any model (chapter 8).

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
  ``alpha ⊙ (B − E_alpha[b]) = ∂L/∂S``. Both come from :mod:`attention_dynamics.science.gradients`.

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
- the book's bare single head (:class:`~attention_dynamics.science.attention.SingleHeadParams`):
  :func:`diagnose_single_head` reads the tensors of
  :func:`~attention_dynamics.science.attention.single_head_forward`.

Gradients are taken with ``torch.autograd.grad``, so ``.grad`` of the parameters is never touched;
the model runs in ``eval`` mode during the capture (dropout off) and its mode is restored after.

Units: u is the gradient of the loss as given (by default the cross-entropy in nats, **averaged**
over positions), so B, the advantage matrix and every gradient norm are in nats per unit of the
relevant activation and scale as 1 / (number of positions).

The package's layers: :mod:`~attention_dynamics.diagnostics.measures` (plain functions on tensors), :mod:`~attention_dynamics.diagnostics.capture` (hooks),
:mod:`~attention_dynamics.diagnostics.report` (:func:`diagnose`), :mod:`~attention_dynamics.diagnostics.trace` (during training) and :mod:`~attention_dynamics.diagnostics.figures`. It imports no
experiment: the book's own traced runs are in :mod:`attention_dynamics.chapters.diagnostics.runs`.
"""

from __future__ import annotations

from .capture import (
    HeadCapture,
    capture_attention,
    capture_single_head,
    default_loss,
)
from .figures import plot_head, plot_overview, plot_routing_matrix
from .measures import (
    DEFAULT_MAX_ROWS,
    DEFAULT_STARVED_THRESHOLD,
    HeadMetrics,
    RoutingStability,
    SpecializationSummary,
    key_orthogonality,
    soft_counts,
    specialization,
    starved_keys,
    uniform_soft_counts,
    value_spectrum,
)
from .report import (
    AttentionDiagnostics,
    AutogradCheck,
    HeadDiagnostics,
    diagnose,
    diagnose_single_head,
    routing_stability,
    verify_against_autograd,
)
from .trace import COLLAPSE_ENTROPY, COLLAPSE_STARVED, DiagnosticsTrace, collapse_alarm, loss_falls_behind, traced_fit

__all__ = [
    "HeadCapture", "HeadMetrics", "HeadDiagnostics", "AttentionDiagnostics", "SpecializationSummary",
    "RoutingStability", "default_loss", "capture_attention", "capture_single_head", "AutogradCheck",
    "verify_against_autograd", "diagnose", "diagnose_single_head", "soft_counts",
    "uniform_soft_counts", "starved_keys", "key_orthogonality", "value_spectrum", "specialization",
    "routing_stability", "DiagnosticsTrace", "traced_fit", "collapse_alarm", "loss_falls_behind",
    "plot_head", "plot_overview", "plot_routing_matrix", "DEFAULT_MAX_ROWS", "DEFAULT_STARVED_THRESHOLD",
    "COLLAPSE_ENTROPY", "COLLAPSE_STARVED",
]
