"""Mamba (a selective state-space model) from ``mambapy``, and its selective scan written as routing weights.

The sequence model wraps ``mambapy.mamba.Mamba`` (pure PyTorch; its parallel scan runs on CPU):
an input embedding, the residual Mamba blocks, a final RMSNorm and a linear read-out, returning
per-position logits ``(B, T, n_out)`` like every model of the book.

The selective scan of one block, for channel c (one of the ``ED = expand · d_model`` inner channels)
and state dimension n, is ``h_i = exp(Δ_i A) ⊙ h_{i−1} + Δ_i B_i x_i`` and ``y_i = C_i · h_i + D x_i``.
Unrolled, it is a causal, input-dependent mixing of the inner inputs ``x_j`` — "attention" with
unnormalised, possibly signed weights (Ali, Zimerman & Wolf, 2024, "The hidden attention of Mamba"):

    y_i[c] = Σ_{j ≤ i} w_ij[c] x_j[c] + D[c] x_i[c],
    w_ij[c] = Δ_j[c] Σ_n C_i[n] B_j[n] exp(A[c, n] (S_i[c] − S_j[c])),   S_i[c] = Σ_{k ≤ i} Δ_k[c].

:func:`selective_scan_routing` computes these weights from a block's own parameters (Δ, A, B, C
come from the block's projections exactly as mambapy computes them); the tests check that they
reproduce mambapy's scan output. Chapter 7 differentiates the loss with respect to them.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F
from jaxtyping import Float, Int
from mambapy.mamba import Mamba, MambaBlock, MambaConfig, RMSNorm
from torch import Tensor

from ..core.settings import check_positive_ints
from ..core.shapes import shape_checked
from ._inputs import input_embedding

__all__ = [
    "MambaSequenceModel",
    "SelectiveScanRouting",
    "selective_scan_routing",
    "routed_scan_output",
    "block_output_from_routing",
    "forward_with_explicit_routing",
]


class MambaSequenceModel(nn.Module):
    """Mamba language/sequence model returning per-position logits ``(B, T, n_out)``.

    Inputs are token ids ``(B, T)`` (``vocab_size``) or features ``(B, T, input_dim)`` (``input_dim``).
    No positional encoding: the recurrence orders the sequence.
    """

    def __init__(
        self,
        *,
        n_out: int,
        vocab_size: int | None = None,
        input_dim: int | None = None,
        d_model: int = 64,
        n_layers: int = 2,
        d_state: int = 16,
        expand_factor: int = 2,
        d_conv: int = 4,
    ):
        super().__init__()
        check_positive_ints(n_out=n_out, d_model=d_model, n_layers=n_layers, d_state=d_state,
                       expand_factor=expand_factor, d_conv=d_conv)
        self.embed = input_embedding(vocab_size, input_dim, d_model)
        self.config = MambaConfig(d_model=d_model, n_layers=n_layers, d_state=d_state,
                                  expand_factor=expand_factor, d_conv=d_conv)
        self.backbone = Mamba(self.config)
        self.norm_final = RMSNorm(d_model)
        self.head = nn.Linear(d_model, n_out)

    def final_states(self, x: torch.Tensor) -> torch.Tensor:
        """Return the final-layer states the read-out sees, ``(B, T, d_model)`` (after the final RMSNorm)."""
        return self.norm_final(self.backbone(self.embed(x)))

    @shape_checked
    def forward(self, x: Int[Tensor, "B T"] | Float[Tensor, "B T F"]) -> Float[Tensor, "B T n_out"]:
        """Return logits ``(B, T, n_out)``."""
        return self.head(self.final_states(x))

    def blocks(self) -> list[MambaBlock]:
        """Return the Mamba block (the mixer) of every layer, first to last."""
        return [layer.mixer for layer in self.backbone.layers]


@dataclass
class SelectiveScanRouting:
    """One block's selective scan as routing weights, with what it routes.

    weights ``(B, ED, T, T)``: ``w[b, c, i, j]``, zero for j > i; inputs ``(B, T, ED)``: the inner
    inputs ``x_j`` being routed (after the causal convolution and SiLU); gate ``(B, T, ED)``: the
    pre-activation of the multiplicative branch ``z``; skip ``(ED,)``: the input-independent ``D``.
    """

    weights: torch.Tensor
    inputs: torch.Tensor
    gate: torch.Tensor
    skip: torch.Tensor


def selective_scan_routing(block: MambaBlock, x: torch.Tensor) -> SelectiveScanRouting:
    """Return the :class:`SelectiveScanRouting` of ``block`` on its input ``x`` ``(B, T, d_model)``.

    Δ, A, B and C come from the block's own projections exactly as ``MambaBlock.ssm`` computes
    them; the weights then follow from the unrolled recursion (module docstring). Memory is
    ``B · ED · T² · d_state`` floats: meant for analysis batches, not training.
    """
    if block.config.use_cuda or block.config.inner_layernorms:
        raise ValueError("only the plain PyTorch block (no CUDA kernel, no inner layer norms) is supported")
    T = x.shape[1]
    xz = block.in_proj(x)  # (B, T, 2·ED)
    inner, gate = xz.chunk(2, dim=-1)  # (B, T, ED) each
    inner = F.silu(block.conv1d(inner.transpose(1, 2))[:, :, :T].transpose(1, 2))  # (B, T, ED), causal conv
    cfg = block.config
    delta, B, C = torch.split(block.x_proj(inner), [cfg.dt_rank, cfg.d_state, cfg.d_state], dim=-1)
    delta = F.softplus(block.dt_proj(delta))  # (B, T, ED), Δ > 0
    A = -torch.exp(block.A_log.float())  # (ED, N), A < 0
    S = delta.cumsum(dim=1)  # (B, T, ED): S_i = Σ_{k≤i} Δ_k
    gap = S[:, :, None, :] - S[:, None, :, :]  # (B, Ti, Tj, ED): S_i − S_j (≥ 0 for j ≤ i)
    causal = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()  # (Ti, Tj)
    gap = torch.where(causal[None, :, :, None], gap, torch.zeros_like(gap))  # no exp overflow above the diagonal
    decay = torch.exp(gap[..., None] * A)  # (B, Ti, Tj, ED, N): exp(A (S_i − S_j))
    # w_ij[c] = Δ_j[c] Σ_n C_i[n] exp(A[c,n](S_i − S_j)[c]) B_j[n]
    weights = torch.einsum("bin,bijcn,bjn,bjc->bcij", C, decay, B, delta)  # (B, ED, Ti, Tj)
    weights = weights * causal  # exact zeros above the diagonal
    return SelectiveScanRouting(weights=weights, inputs=inner, gate=gate, skip=block.D.float())


def routed_scan_output(routing: SelectiveScanRouting) -> torch.Tensor:
    """Return the scan output ``y_i[c] = Σ_j w_ij[c] x_j[c] + D[c] x_i[c]``, shape ``(B, T, ED)``."""
    mixed = torch.einsum("bcij,bjc->bic", routing.weights, routing.inputs)  # (B, T, ED)
    return mixed + routing.skip * routing.inputs


def block_output_from_routing(block: MambaBlock, routing: SelectiveScanRouting) -> torch.Tensor:
    """Return the block's output ``(B, T, d_model)``: out_proj(y ⊙ SiLU(z)) with y from the routing weights."""
    return block.out_proj(routed_scan_output(routing) * F.silu(routing.gate))


def forward_with_explicit_routing(
    model: MambaSequenceModel, x: torch.Tensor, layer: int
) -> tuple[torch.Tensor, SelectiveScanRouting]:
    """Return ``(logits (B, T, n_out), routing)`` with layer ``layer``'s scan computed from its routing weights.

    Every other layer runs mambapy's own scan. ``routing.weights`` is part of the autograd graph, so
    ``torch.autograd.grad(loss, routing.weights)`` is ∂L/∂w_ij (the weights' only consumer is the mixing).
    """
    n_layers = len(model.backbone.layers)
    if not 0 <= layer < n_layers:
        raise ValueError(f"layer must be in 0..{n_layers - 1}, got {layer}")
    h = model.embed(x)  # (B, T, d_model)
    routing = None
    for idx, residual in enumerate(model.backbone.layers):
        if idx == layer:
            routing = selective_scan_routing(residual.mixer, residual.norm(h))
            h = h + block_output_from_routing(residual.mixer, routing)
        else:
            h = residual(h)
    return model.head(model.norm_final(h)), routing
