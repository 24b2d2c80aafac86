"""A softmax-normalised content router with a choice of score function: the routing law beyond dot-product attention.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn as nn


@dataclass
class RouterForward:
    """Intermediates of :class:`ContentRouter`: scores, alpha ``(B, T, T)``; values, context ``(B, T, d_v)``; logits ``(B, T, C)``."""

    scores: torch.Tensor
    alpha: torch.Tensor
    values: torch.Tensor
    context: torch.Tensor
    logits: torch.Tensor


SCORE_FUNCTIONS = ("mlp", "bilinear", "distance")


class ContentRouter(nn.Module):
    """Softmax-normalised causal routing whose logits are a differentiable function of the content.

    ``score_function``: ``"mlp"`` — s_ij = MLP([x_i, x_j, x_i ⊙ x_j]) (nothing like a dot product);
    ``"bilinear"`` — s_ij = (W_Q x_i)·(W_K x_j)/sqrt(d) (attention); ``"distance"`` —
    s_ij = −‖W_Q x_i − W_K x_j‖². Then alpha = softmax over j ≤ i, g_i = Σ_j alpha_ij v_j, logits = W_O g_i.
    """

    def __init__(self, d_in: int, *, d_hidden: int = 16, d_v: int = 8, n_classes: int = 5, score_function: str = "mlp"):
        super().__init__()
        if score_function not in SCORE_FUNCTIONS:
            raise ValueError(f"score_function must be one of {', '.join(SCORE_FUNCTIONS)}, got {score_function!r}")
        self.score_function = score_function
        if score_function == "mlp":
            self.score_net = nn.Sequential(nn.Linear(3 * d_in, d_hidden), nn.Tanh(), nn.Linear(d_hidden, 1))
        else:
            self.W_Q = nn.Linear(d_in, d_hidden, bias=False)
            self.W_K = nn.Linear(d_in, d_hidden, bias=False)
        self.W_V = nn.Linear(d_in, d_v, bias=False)
        self.W_O = nn.Linear(d_v, n_classes, bias=False)

    def scores(self, x: torch.Tensor) -> torch.Tensor:
        """Return the routing logits s_ij ``(B, T, T)`` (before the causal mask)."""
        B, T, d = x.shape
        if self.score_function == "mlp":
            xi = x[:, :, None, :].expand(B, T, T, d)  # (B, Ti, Tj, d)
            xj = x[:, None, :, :].expand(B, T, T, d)
            return self.score_net(torch.cat([xi, xj, xi * xj], dim=-1)).squeeze(-1)  # (B, T, T)
        q, k = self.W_Q(x), self.W_K(x)  # (B, T, d_hidden)
        if self.score_function == "bilinear":
            return q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
        return -(q[:, :, None, :] - k[:, None, :, :]).square().sum(-1)

    def forward(self, x: torch.Tensor) -> RouterForward:
        """Return every intermediate (:class:`RouterForward`) for inputs ``x`` ``(B, T, d_in)``."""
        T = x.shape[1]
        mask = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
        scores = self.scores(x).masked_fill(~mask, float("-inf"))  # (B, T, T)
        alpha = torch.softmax(scores, dim=-1)
        values = self.W_V(x)  # (B, T, d_v)
        context = alpha @ values  # (B, T, d_v)
        return RouterForward(scores=scores, alpha=alpha, values=values, context=context, logits=self.W_O(context))
