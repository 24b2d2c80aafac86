"""The diagnostics of one head and of a whole model (:func:`diagnose`): compatibility and advantage
matrices with their summary metrics, and how routing changed between two points of training.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
import torch
import torch.nn as nn

from ..science import stats
from ..science.attention import SingleHeadParams, single_head_forward
from ..science.gradients import (
    advantage_routing_gradient,
    compatibility,
    expected_compatibility,
    key_gradient,
    query_gradient,
    responsibility_weighted_value_gradient,
)
from .capture import (
    HeadCapture,
    _as_bhtd,
    _captures_from_records,
    _labels_per_head,
    _mha_modules,
    _probed_modules,
    _Record,
    _run_with_hooks,
    capture_attention,
    capture_single_head,
)
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


class HeadDiagnostics:
    """The diagnostics of one head: the paper's matrices (computed on demand) and scalar metrics.

    Matrices are recomputed from the capture when asked for (they are ``(B, Tq, Tk)`` each), from
    the laws in :mod:`attention_dynamics.science.gradients`.
    """

    def __init__(self, capture: HeadCapture, *, starved_threshold: float = DEFAULT_STARVED_THRESHOLD,
                 orthogonality_labels: torch.Tensor | None = None, max_rows: int | None = DEFAULT_MAX_ROWS):
        self.capture = capture
        self.starved_threshold = starved_threshold
        alpha, vis = capture.alpha, capture.visible
        entropy = stats.entropy(alpha)  # (B, Tq), nats
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
        from .figures import plot_head

        return plot_head(self.head(layer, head), **kwargs)

    def plot_overview(self, **kwargs):
        """Draw per-head bar charts of the scalar diagnostics; see :func:`plot_overview`."""
        from .figures import plot_overview

        return plot_overview(self, **kwargs)




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
    the book's single head (a :class:`~attention_dynamics.science.attention.SingleHeadParams`, or a module
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
    head_params = getattr(model, "head_params", None)  # the book's SingleHeadModule, or any module like it
    params = head_params() if callable(head_params) else None
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
    (:mod:`attention_dynamics.science.gradients`) and compared with gradients autograd computes in the
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
