"""What a trainer does to a transformer's routing: the controls that remove or fix it, and the value-step factor.

A model's routing is every layer's query and key weights (the first two thirds of each fused ``qkv`` projection).
:data:`ROUTING_CONTROLS`: ``"learned"`` (trained as usual), ``"frozen"`` (kept at their initial values:
:func:`freeze_query_key`), ``"uniform"`` (set to zero and kept there, :func:`zero_query_key`: every head attends
uniformly to the positions it may see). :func:`scale_value_steps` multiplies the optimiser's step on every layer's
value projection (the paper's "EM-like" schedule).
"""

from __future__ import annotations

import torch

from ..models.transformer import CausalTransformer

__all__ = ["ROUTING_CONTROLS", "check_routing", "zero_query_key", "freeze_query_key", "scale_value_steps"]

#: How a run's routing (every layer's query and key weights) is treated: trained, kept at initialisation, or zero.
ROUTING_CONTROLS = ("learned", "frozen", "uniform")


def check_routing(routing: str, freeze_routing_at: int | None) -> None:
    """Raise ``ValueError`` unless ``routing`` is a known control and a freeze step goes with learned routing only."""
    if routing not in ROUTING_CONTROLS:
        raise ValueError(f"routing must be one of {ROUTING_CONTROLS}, got {routing!r}")
    if routing != "learned" and freeze_routing_at is not None:
        raise ValueError(f"freeze_routing_at applies to learned routing only, got routing={routing!r}")
    if freeze_routing_at is not None and (isinstance(freeze_routing_at, bool) or freeze_routing_at < 0):
        raise ValueError(f"freeze_routing_at must be a non-negative step, got {freeze_routing_at!r}")



def _query_key_rows(model: CausalTransformer) -> list[torch.Tensor]:
    """Return every layer's query and key rows of the fused ``qkv`` projection (weights and biases; views)."""
    return [t[: 2 * attn.qkv.weight.shape[1]] for attn in model.attention_modules()
            for t in (attn.qkv.weight, attn.qkv.bias) if t is not None]


def _value_rows(model: CausalTransformer) -> list[torch.Tensor]:
    """Return every layer's value rows of the fused ``qkv`` projection (weights and biases; views)."""
    return [t[2 * attn.qkv.weight.shape[1]:] for attn in model.attention_modules()
            for t in (attn.qkv.weight, attn.qkv.bias) if t is not None]


def zero_query_key(model: CausalTransformer) -> CausalTransformer:
    """Set every layer's query and key weights to zero (every score 0: uniform attention over the visible positions)."""
    with torch.no_grad():
        for rows in _query_key_rows(model):
            rows.zero_()
    return model


def scale_value_steps(model: CausalTransformer, optimizer: torch.optim.Optimizer, factor: float):
    """Make every optimiser step move the value projections ``factor`` times as far (their learning rate × factor).

    The value rows share one fused ``qkv`` weight with the queries and keys, so the step is rescaled after the
    optimiser has taken it: ``W_V ← W_V_before + factor · (W_V_after − W_V_before)``. For AdamW without weight decay
    (the tunnels' optimiser) that is exactly the step at ``factor`` times the learning rate. Returns the hook handles.
    """
    before: list[torch.Tensor] = []

    def pre(_opt, _args, _kwargs) -> None:
        before[:] = [r.detach().clone() for r in _value_rows(model)]

    def post(_opt, _args, _kwargs) -> None:
        with torch.no_grad():
            for r, b in zip(_value_rows(model), before):
                r.copy_(b + factor * (r - b))

    return optimizer.register_step_pre_hook(pre), optimizer.register_step_post_hook(post)


def freeze_query_key(model: CausalTransformer):
    """Return ``hold(take)``: ``hold(True)`` stores every layer's query and key weights, ``hold(False)`` restores them.

    Query and key are the first two thirds of each fused ``qkv`` projection (weights and bias).
    Restoring them before every forward pass keeps them exactly where they were stored while the
    optimiser moves everything else (AdamW's decay and moments of those rows have no effect).
    """
    held: list[torch.Tensor] = []

    def hold(take: bool) -> None:
        rows = _query_key_rows(model)
        with torch.no_grad():
            if take:
                held[:] = [r.clone() for r in rows]
            else:
                for r, h in zip(rows, held):
                    r.copy_(h)

    return hold
