"""Five model families with parameter counts matched to a target (chapter 7): :func:`build_matched_model`.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import torch.nn as nn

from ..core.settings import check_positive_int
from ..models import CausalTransformer, count_parameters
from ..models.mamba import (
    MambaSequenceModel,
)
from ..models.mlp import ContextBlindMLP, WindowMLP
from ..models.recurrent import LSTMSequenceModel

if TYPE_CHECKING:
    from ..tasks.wind_tunnels import WindTunnel

#: The five model families, from content routing to none at all.
FAMILIES = ("transformer", "mamba", "lstm", "mlp_window", "mlp_blind")
FAMILY_LABELS = {
    "transformer": "Transformer",
    "mamba": "Mamba",
    "lstm": "LSTM",
    "mlp_window": "MLP (whole window)",
    "mlp_blind": "MLP (context-blind)",
}



#: How each family's size is set by one "width" (everything else fixed), and the widths tried.
WIDTH_GRID = {
    "transformer": range(8, 1025, 4),  # d_model (4 heads, 2 layers, d_ff = 4 d_model)
    "mamba": range(8, 1025, 4),  # d_model (2 layers, d_state 16, expand 2)
    "lstm": range(8, 2049, 4),  # hidden size (1 layer, embedding = hidden size)
    "mlp_window": range(4, 16385, 4),  # hidden units (1 hidden layer, 16-dim embedding per slot)
    "mlp_blind": range(4, 16385, 4),  # hidden units (2 hidden layers, 64-dim embedding)
}


def build_model(family: str, task: WindTunnel, width: int) -> nn.Module:
    """Return a fresh model of ``family`` for ``task`` whose size is set by ``width`` (see :data:`WIDTH_GRID`)."""
    io = {"n_out": task.n_out, "vocab_size": task.vocab_size, "input_dim": task.input_dim}
    if family == "transformer":
        return CausalTransformer(**io, d_model=width, n_layers=2, n_heads=4, max_len=task.sequence_length)
    if family == "mamba":
        return MambaSequenceModel(**io, d_model=width, n_layers=2)
    if family == "lstm":
        return LSTMSequenceModel(**io, hidden_size=width)
    if family == "mlp_window":
        return WindowMLP(**io, window=task.sequence_length, d_embed=16, hidden=width, n_hidden_layers=1)
    if family == "mlp_blind":
        return ContextBlindMLP(**io, d_embed=64, hidden=width, n_hidden_layers=2)
    raise ValueError(f"unknown model family {family!r}; choose one of {', '.join(FAMILIES)}")


def matched_width(family: str, task: WindTunnel, target_params: int) -> int:
    """Return the width of :data:`WIDTH_GRID` whose model for ``task`` has the parameter count closest to the target.

    Counts grow with width, so a bisection finds the first width at or above the target; the
    answer is it or its predecessor, whichever is closer in ratio.
    """
    target_params = check_positive_int("target_params", target_params)
    if family not in WIDTH_GRID:
        raise ValueError(f"unknown model family {family!r}; choose one of {', '.join(FAMILIES)}")
    grid = WIDTH_GRID[family]

    def count(i: int) -> int:
        return count_parameters(build_model(family, task, grid[i]))

    lo, hi = 0, len(grid) - 1
    while lo < hi:  # first index whose count reaches the target (or the last index)
        mid = (lo + hi) // 2
        if count(mid) >= target_params:
            hi = mid
        else:
            lo = mid + 1
    candidates = [i for i in (lo - 1, lo) if i >= 0]
    best = min(candidates, key=lambda i: abs(math.log(count(i) / target_params)))
    return grid[best]


def build_matched_model(family: str, task: WindTunnel, target_params: int) -> nn.Module:
    """Return a fresh model of ``family`` for ``task`` with about ``target_params`` parameters."""
    return build_model(family, task, matched_width(family, task, target_params))
