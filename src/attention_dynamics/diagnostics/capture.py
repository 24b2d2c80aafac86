"""Capturing a head's tensors (alpha, values, keys, queries, the upstream gradient u) with forward hooks.

Models of this package route their tensors through ``Probe`` children; models built from
``torch.nn.MultiheadAttention`` are read through a pre-hook asking for per-head weights; the book's bare
single head is read from :func:`~attention_dynamics.science.attention.single_head_forward`. Gradients come from
``torch.autograd.grad``: ``.grad`` of the parameters is never touched.
"""

from __future__ import annotations

import inspect
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Sequence

import torch
import torch.nn as nn
import torch.nn.functional as F

from ..models.transformer import Probe
from ..science.attention import SingleHeadParams, causal_mask, single_head_forward


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
    from ..models.transformer import CausalSelfAttention

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


def capture_single_head(
    x: torch.Tensor, params: SingleHeadParams, targets: torch.Tensor, *, causal: bool = True, reduction: str = "mean"
) -> tuple[HeadCapture, float]:
    """Return ``(the HeadCapture, the loss in nats)`` of the book's single head on inputs ``x`` ``(B, T, d_in)`` or ``(T, d_in)``.

    The tensors are those of :func:`attention_dynamics.science.attention.single_head_forward`, whose u and
    b are the closed forms of the paper's Section 2.
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
