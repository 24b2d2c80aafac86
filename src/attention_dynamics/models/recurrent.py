"""An LSTM sequence model: routing by the previous state only, never by content matched across positions.

An LSTM reads the sequence once, left to right; what it keeps is decided by gates computed from the
current input and its own previous state. It cannot look back at position j because position j's
content matches a query: everything it will ever use must already be in its fixed-size state.
Chapter 7 contrasts it with content-based routing (attention, Mamba's selective scan).
"""

from __future__ import annotations

import torch
import torch.nn as nn
from jaxtyping import Float, Int
from torch import Tensor

from ..core.settings import check_positive_ints
from ..core.shapes import shape_checked
from ._inputs import input_embedding

__all__ = ["LSTMSequenceModel"]


class LSTMSequenceModel(nn.Module):
    """Embedding → ``nn.LSTM`` → linear read-out, returning per-position logits ``(B, T, n_out)``.

    Inputs are token ids ``(B, T)`` (``vocab_size``) or features ``(B, T, input_dim)`` (``input_dim``).
    ``d_embed`` defaults to ``hidden_size``.
    """

    def __init__(
        self,
        *,
        n_out: int,
        vocab_size: int | None = None,
        input_dim: int | None = None,
        hidden_size: int = 128,
        n_layers: int = 1,
        d_embed: int | None = None,
    ):
        super().__init__()
        d_embed = d_embed or hidden_size
        check_positive_ints(n_out=n_out, hidden_size=hidden_size, n_layers=n_layers, d_embed=d_embed)
        self.embed = input_embedding(vocab_size, input_dim, d_embed)
        self.lstm = nn.LSTM(d_embed, hidden_size, num_layers=n_layers, batch_first=True)
        self.head = nn.Linear(hidden_size, n_out)

    def final_states(self, x: torch.Tensor) -> torch.Tensor:
        """Return the last layer's hidden states ``(B, T, hidden_size)``."""
        states, _ = self.lstm(self.embed(x))  # (B, T, hidden)
        return states

    @shape_checked
    def forward(self, x: Int[Tensor, "B T"] | Float[Tensor, "B T F"]) -> Float[Tensor, "B T n_out"]:
        """Return logits ``(B, T, n_out)``."""
        return self.head(self.final_states(x))
