"""Two models that "MLP" can mean, which land orders of magnitude apart on the wind tunnels.

- :class:`ContextBlindMLP` applies the same MLP to every position separately: at position t it
  sees the input at t and nothing else. It can only learn the best *context-blind* predictor, whose
  error chapter 6 computes exactly. Paper I's "MLP" numbers sit at that level.
- :class:`WindowMLP` sees the whole causal window: at position t, the last ``window`` inputs
  (left-padded with a learned pad vector) concatenated into one long vector. No routing at all —
  every slot has its own fixed weights — yet a sum over slots is linear, so it can *accumulate*.

Both return per-position logits ``(B, T, n_out)``, like every model of the book.
"""

from __future__ import annotations

import torch
import torch.nn as nn
from jaxtyping import Float, Int
from torch import Tensor

from ..core.settings import check_positive_ints
from ..core.shapes import shape_checked
from ._inputs import input_embedding

__all__ = ["ContextBlindMLP", "WindowMLP", "mlp_stack"]


def mlp_stack(d_in: int, hidden: int, n_hidden_layers: int, d_out: int) -> nn.Sequential:
    """Return Linear–GELU layers ``d_in → hidden (× n_hidden_layers) → d_out``."""
    check_positive_ints(d_in=d_in, hidden=hidden, n_hidden_layers=n_hidden_layers, d_out=d_out)
    layers: list[nn.Module] = []
    width = d_in
    for _ in range(n_hidden_layers):
        layers += [nn.Linear(width, hidden), nn.GELU()]
        width = hidden
    layers.append(nn.Linear(width, d_out))
    return nn.Sequential(*layers)


class ContextBlindMLP(nn.Module):
    """Per-position MLP: logits at t depend on the input at t only, ``(B, T, n_out)``."""

    def __init__(
        self,
        *,
        n_out: int,
        vocab_size: int | None = None,
        input_dim: int | None = None,
        d_embed: int = 64,
        hidden: int = 256,
        n_hidden_layers: int = 2,
    ):
        super().__init__()
        self.embed = input_embedding(vocab_size, input_dim, d_embed)
        self.mlp = mlp_stack(d_embed, hidden, n_hidden_layers, n_out)

    @shape_checked
    def forward(self, x: Int[Tensor, "B T"] | Float[Tensor, "B T F"]) -> Float[Tensor, "B T n_out"]:
        """Return logits ``(B, T, n_out)``."""
        return self.mlp(self.embed(x))


class WindowMLP(nn.Module):
    """MLP on the flattened causal window: logits at t depend on inputs t − window + 1 .. t, ``(B, T, n_out)``.

    With ``window`` ≥ the sequence length it sees the whole prefix. Slot s of the window always
    holds the input s steps back, so relative position is built in.
    """

    def __init__(
        self,
        *,
        n_out: int,
        window: int,
        vocab_size: int | None = None,
        input_dim: int | None = None,
        d_embed: int = 16,
        hidden: int = 128,
        n_hidden_layers: int = 1,
    ):
        super().__init__()
        check_positive_ints(window=window, d_embed=d_embed)
        self.window = window
        self.embed = input_embedding(vocab_size, input_dim, d_embed)
        self.pad = nn.Parameter(torch.zeros(d_embed))
        self.mlp = mlp_stack(window * d_embed, hidden, n_hidden_layers, n_out)

    def windows(self, x: torch.Tensor) -> torch.Tensor:
        """Return the flattened causal windows ``(B, T, window · d_embed)`` (oldest slot first)."""
        e = self.embed(x)  # (B, T, d_embed)
        B, T, d = e.shape
        pad = self.pad.expand(B, self.window - 1, d)  # (B, window − 1, d)
        padded = torch.cat([pad, e], dim=1)  # (B, T + window − 1, d)
        win = padded.unfold(1, self.window, 1)  # (B, T, d, window): positions t .. t + window − 1 of padded
        return win.transpose(-1, -2).reshape(B, T, self.window * d)  # (B, T, window · d)

    @shape_checked
    def forward(self, x: Int[Tensor, "B T"] | Float[Tensor, "B T F"]) -> Float[Tensor, "B T n_out"]:
        """Return logits ``(B, T, n_out)``."""
        return self.mlp(self.windows(x))
