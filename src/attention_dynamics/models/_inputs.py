"""The input layer every sequence model of the book shares: token ids or feature vectors in, vectors out."""

from __future__ import annotations

import torch.nn as nn

from ..core.settings import check_positive_ints

__all__ = ["input_embedding"]


def input_embedding(vocab_size: int | None, input_dim: int | None, width: int) -> nn.Module:
    """Return ``nn.Embedding(vocab_size, width)`` for token ids or ``nn.Linear(input_dim, width)`` for features.

    Exactly one of ``vocab_size`` (inputs ``(B, T)`` int64) and ``input_dim`` (inputs ``(B, T, input_dim)``)
    must be given.
    """
    if (vocab_size is None) == (input_dim is None):
        raise ValueError("give exactly one of vocab_size (token inputs) or input_dim (vector inputs)")
    if vocab_size is not None:
        check_positive_ints(vocab_size=vocab_size, width=width)
        return nn.Embedding(vocab_size, width)
    check_positive_ints(input_dim=input_dim, width=width)
    return nn.Linear(input_dim, width)
