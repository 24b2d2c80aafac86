"""Models of the book: a small causal transformer whose attention exposes every intermediate.

The attention is written out (nanoGPT-style) next to the fused kernel: the explicit path routes
q, k, v, the attention weights alpha and the per-head context g through :class:`Probe` modules,
so forward/backward hooks (``attention_dynamics.diagnostics``) can read alpha, v and
u = ∂L/∂g for every layer and head without changing the model.
"""

from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from jaxtyping import Float, Int
from torch import Tensor

from ..core.shapes import shape_checked

__all__ = [
    "Probe",
    "CausalSelfAttention",
    "TransformerBlock",
    "CausalTransformer",
    "count_parameters",
    "probe_activations",
]

POSITIONAL_ENCODINGS = ("learned", "sinusoidal", "alibi", "none")


class Probe(nn.Identity):
    """Identity layer that marks a tensor for hooks (its output is the tensor unchanged)."""


class CausalSelfAttention(nn.Module):
    """Multi-head causal self-attention with probes on q, k, v, alpha and the per-head context g.

    Probe shapes: ``queries``/``keys`` ``(B, H, T, d_head)``, ``values`` ``(B, H, T, d_head)``,
    ``attn_weights`` ``(B, H, T, T)`` (query i, key j), ``context`` ``(B, H, T, d_head)``.
    """

    def __init__(self, d_model: int, n_heads: int, *, bias: bool = False, alibi: bool = False):
        super().__init__()
        if d_model % n_heads:
            raise ValueError(f"d_model ({d_model}) must be divisible by n_heads ({n_heads})")
        self.n_heads = n_heads
        self.d_head = d_model // n_heads
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=bias)
        self.out = nn.Linear(d_model, d_model, bias=bias)
        self.queries, self.keys, self.values = Probe(), Probe(), Probe()
        self.attn_weights, self.context = Probe(), Probe()
        #: Use PyTorch's fused kernel (no alpha materialised, probes on alpha/context bypassed).
        self.fused = False
        self.alibi = alibi
        if alibi:  # ALiBi (Press et al., 2022): head h adds −m_h (i − j) to its scores, m_h = 2^(−8h/H)
            slopes = 2.0 ** (-8.0 * torch.arange(1, n_heads + 1, dtype=torch.float32) / n_heads)
            self.register_buffer("alibi_slopes", slopes, persistent=False)  # (H,)

    def score_bias(self, T: int, device: torch.device) -> torch.Tensor | None:
        """Return the additive score bias ``(H, T, T)`` of ALiBi, −m_h (i − j), or None without ALiBi."""
        if not self.alibi:
            return None
        pos = torch.arange(T, device=device, dtype=torch.float32)
        distance = (pos[:, None] - pos[None, :]).clamp_min(0)  # (T, T), i − j for keys j ≤ i
        return -self.alibi_slopes.to(device)[:, None, None] * distance  # (H, T, T)

    @shape_checked
    def forward(self, x: Float[Tensor, "B T D"]) -> Float[Tensor, "B T D"]:
        """Return the attention output ``(B, T, d_model)`` for inputs ``x`` ``(B, T, d_model)``."""
        B, T, D = x.shape
        q, k, v = self.qkv(x).split(D, dim=-1)  # each (B, T, D)
        # (B, T, D) -> (B, H, T, d_head)
        q, k, v = (t.view(B, T, self.n_heads, self.d_head).transpose(1, 2) for t in (q, k, v))
        bias = self.score_bias(T, x.device)  # (H, T, T) or None
        mask = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
        if self.fused and bias is None:
            g = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # (B, H, T, d_head)
        elif self.fused:
            g = F.scaled_dot_product_attention(q, k, v, attn_mask=bias.masked_fill(~mask, float("-inf")).to(q.dtype))
        else:
            q, k, v = self.queries(q), self.keys(k), self.values(v)
            scores = (q @ k.transpose(-1, -2)) / math.sqrt(self.d_head)  # (B, H, T, T)
            if bias is not None:
                scores = scores + bias
            alpha = self.attn_weights(torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1))
            g = self.context(alpha @ v)  # (B, H, T, d_head)
        return self.out(g.transpose(1, 2).reshape(B, T, D))


class TransformerBlock(nn.Module):
    """Pre-LayerNorm block: x + attn(LN(x)), then x + MLP(LN(x))."""

    def __init__(self, d_model: int, n_heads: int, d_ff: int, *, alibi: bool = False):
        super().__init__()
        self.ln_attn = nn.LayerNorm(d_model)
        self.attn = CausalSelfAttention(d_model, n_heads, alibi=alibi)
        self.ln_mlp = nn.LayerNorm(d_model)
        self.mlp = nn.Sequential(nn.Linear(d_model, d_ff), nn.GELU(), nn.Linear(d_ff, d_model))

    @shape_checked
    def forward(self, x: Float[Tensor, "B T D"]) -> Float[Tensor, "B T D"]:
        """Return the block's output ``(B, T, d_model)``."""
        x = x + self.attn(self.ln_attn(x))
        return x + self.mlp(self.ln_mlp(x))


class CausalTransformer(nn.Module):
    """Decoder-only transformer returning per-position logits ``(B, T, n_out)``.

    Inputs are token ids ``(B, T)`` when ``vocab_size`` is given, or feature vectors
    ``(B, T, input_dim)`` when ``input_dim`` is given (exactly one of the two).
    ``positional``: ``"learned"`` (up to ``max_len``), ``"sinusoidal"`` (any length), ``"alibi"``
    (no embedding; every head biases its scores by −m_h (i − j), a recency prior that extends to any
    length) or ``"none"`` (the causal mask alone tells positions apart).
    """

    def __init__(
        self,
        *,
        n_out: int,
        vocab_size: int | None = None,
        input_dim: int | None = None,
        d_model: int = 64,
        n_layers: int = 2,
        n_heads: int = 4,
        d_ff: int | None = None,
        max_len: int = 256,
        positional: str = "learned",
    ):
        super().__init__()
        if (vocab_size is None) == (input_dim is None):
            raise ValueError("give exactly one of vocab_size (token inputs) or input_dim (vector inputs)")
        if positional not in POSITIONAL_ENCODINGS:
            raise ValueError(f"positional must be one of {', '.join(map(repr, POSITIONAL_ENCODINGS))}, got {positional!r}")
        for name, val in (("n_out", n_out), ("d_model", d_model), ("n_layers", n_layers), ("n_heads", n_heads), ("max_len", max_len)):
            if not isinstance(val, int) or val < 1:
                raise ValueError(f"{name} must be a positive integer, got {val!r}")
        self.embed = nn.Embedding(vocab_size, d_model) if vocab_size is not None else nn.Linear(input_dim, d_model)
        self.positional = positional
        self.max_len = max_len
        if positional == "learned":
            self.pos = nn.Parameter(torch.zeros(max_len, d_model))
        elif positional == "sinusoidal":
            self.register_buffer("pos", _sinusoidal(max_len, d_model), persistent=False)
        alibi = positional == "alibi"
        self.blocks = nn.ModuleList(
            TransformerBlock(d_model, n_heads, d_ff or 4 * d_model, alibi=alibi) for _ in range(n_layers)
        )
        self.ln_final = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, n_out)
        self.apply(_init_weights)
        if positional == "learned":
            nn.init.normal_(self.pos, std=0.02)

    @shape_checked
    def forward(self, x: Int[Tensor, "B T"] | Float[Tensor, "B T F"]) -> Float[Tensor, "B T n_out"]:
        """Return logits ``(B, T, n_out)``."""
        h = self.embed(x)  # (B, T, d_model)
        T = h.shape[1]
        if self.positional in ("learned", "sinusoidal"):
            if T > self.max_len and self.positional == "learned":
                raise ValueError(f"sequence length {T} exceeds max_len {self.max_len} of learned positions")
            pos = self.pos if T <= self.pos.shape[0] else _sinusoidal(T, h.shape[-1]).to(h)
            h = h + pos[:T]
        for block in self.blocks:
            h = block(h)
        return self.head(self.ln_final(h))

    def attention_modules(self) -> list[CausalSelfAttention]:
        """Return the attention module of every layer, first to last."""
        return [b.attn for b in self.blocks]


PROBE_NAMES = ("queries", "keys", "values", "attn_weights", "context")


@torch.no_grad()
def probe_activations(model: CausalTransformer, x: torch.Tensor) -> tuple[torch.Tensor, list[dict[str, torch.Tensor]]]:
    """Return ``(logits, layers)``: the model's output and, per layer, every probed tensor (detached).

    ``layers[l]`` holds ``queries``, ``keys``, ``values``, ``context`` ``(B, H, T, d_head)``,
    ``attn_weights`` ``(B, H, T, T)`` and ``residual`` ``(B, T, d_model)``, the residual stream
    entering layer l; ``layers[-1]["residual_out"]`` is the stream after the last layer (what the
    read-out sees before its LayerNorm). Runs in eval mode on the explicit attention path (the fused
    kernel bypasses the probes) and restores both afterwards.
    """
    attn = model.attention_modules()
    layers: list[dict[str, torch.Tensor]] = [{} for _ in attn]
    handles, fused, training = [], [a.fused for a in attn], model.training
    for l, (block, a) in enumerate(zip(model.blocks, attn)):
        a.fused = False
        for name in PROBE_NAMES:
            handles.append(getattr(a, name).register_forward_hook(
                lambda _m, _i, out, l=l, name=name: layers[l].__setitem__(name, out.detach())))
        handles.append(block.register_forward_pre_hook(
            lambda _m, args, l=l: layers[l].__setitem__("residual", args[0].detach())))
    handles.append(model.blocks[-1].register_forward_hook(
        lambda _m, _i, out: layers[-1].__setitem__("residual_out", out.detach())))
    model.eval()
    try:
        logits = model(x)
    finally:
        for h in handles:
            h.remove()
        for a, f in zip(attn, fused):
            a.fused = f
        model.train(training)
    return logits, layers


def count_parameters(model: nn.Module) -> int:
    """Return the number of trainable parameters."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def _init_weights(module: nn.Module) -> None:
    if isinstance(module, (nn.Linear, nn.Embedding)):
        nn.init.normal_(module.weight, std=0.02)
        if getattr(module, "bias", None) is not None:
            nn.init.zeros_(module.bias)


def _sinusoidal(length: int, dim: int) -> torch.Tensor:
    pos = torch.arange(length, dtype=torch.float32).unsqueeze(1)
    freq = torch.exp(torch.arange(0, dim, 2, dtype=torch.float32) * (-math.log(10000.0) / dim))
    pe = torch.zeros(length, dim)
    pe[:, 0::2] = torch.sin(pos * freq)
    pe[:, 1::2] = torch.cos(pos * freq[: dim // 2])
    return pe
