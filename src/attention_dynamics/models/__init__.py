"""Models of the book (one module per family), all returning per-position logits ``(B, T, n_out)``.

- :mod:`~attention_dynamics.models.transformer` — the causal transformer whose attention exposes q, k, v, alpha and the
  per-head context through probes (for the diagnostics of chapter 8).
- :mod:`~attention_dynamics.models.mamba` — Mamba from ``mambapy``, and its selective scan written as routing weights (chapter 7).
- :mod:`~attention_dynamics.models.recurrent` — an LSTM sequence model (chapter 7).
- :mod:`~attention_dynamics.models.mlp` — the context-blind per-position MLP and the whole-window MLP (chapter 7).
- :mod:`~attention_dynamics.models.registry` — chapter 7's model families, one entry each (builder, widths, trainer
  defaults, label, colour, Paper I's report, verdict row); :mod:`~attention_dynamics.models.factory` builds any
  registered family at a matched parameter count.
"""

from .mamba import MambaSequenceModel
from .mlp import ContextBlindMLP, WindowMLP
from .recurrent import LSTMSequenceModel
from .transformer import CausalSelfAttention, CausalTransformer, Probe, TransformerBlock, count_parameters

__all__ = ["Probe", "CausalSelfAttention", "TransformerBlock", "CausalTransformer", "count_parameters",
           "MambaSequenceModel", "LSTMSequenceModel", "ContextBlindMLP", "WindowMLP"]
