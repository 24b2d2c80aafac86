"""Models of the book (one module per family), all returning per-position logits ``(B, T, n_out)``.

- :mod:`.transformer` — the causal transformer whose attention exposes q, k, v, alpha and the
  per-head context through probes (for the diagnostics of chapter 8).
"""

from .transformer import CausalSelfAttention, CausalTransformer, Probe, TransformerBlock, count_parameters

__all__ = ["Probe", "CausalSelfAttention", "TransformerBlock", "CausalTransformer", "count_parameters"]
