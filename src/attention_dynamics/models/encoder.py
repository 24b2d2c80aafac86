"""A causal transformer built from ``torch.nn.TransformerEncoder`` only: a model that knows nothing of this package.
"""

from __future__ import annotations

import torch
import torch.nn as nn
from jaxtyping import Float, Int
from torch import Tensor

from ..core.shapes import shape_checked


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

    @shape_checked
    def forward(self, tokens: Int[Tensor, "B T"]) -> Float[Tensor, "B T n_out"]:
        """Return the logits ``(B, T, n_out)`` for token ids ``(B, T)``."""
        T = tokens.shape[1]
        h = self.embed(tokens) + self.pos[:T]  # (B, T, d_model)
        mask = nn.Transformer.generate_square_subsequent_mask(T, device=tokens.device, dtype=h.dtype)
        return self.readout(self.encoder(h, mask=mask, is_causal=True))
