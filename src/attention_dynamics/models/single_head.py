"""The book's single attention head as an ``nn.Module`` (the one module every chapter trains it as), and the
paper's sticky-chain head: its shape and seeded initialisation (the paper's sticky-chain experiment; chapter 5), shared by chapters 2, 5 and 8."""

from __future__ import annotations

from typing import Any, Sequence

import torch
import torch.nn as nn
from jaxtyping import Float
from torch import Tensor

from ..core.seeding import stream, torch_generator
from ..core.shapes import shape_checked
from ..science.attention import PARAM_NAMES, SingleHeadParams, init_single_head, single_head_forward

__all__ = [
    "SingleHeadModule",
    "HEAD_SHAPE",
    "INIT_STD",
    "initial_head",
]


class SingleHeadModule(nn.Module):
    """The single head of :mod:`attention_dynamics.science.attention` with parameters ``W_Q, W_K, W_V, W_O`` (for
    :func:`attention_dynamics.training.fit`).

    ``forward(x)`` returns the logits ``(..., T, C)`` of the dense reference implementation (autograd works
    through it); the closed-form engine (:func:`attention_dynamics.training.head_engine.closed_form_backward`)
    never calls it.
    """

    def __init__(self, params: SingleHeadParams):
        super().__init__()
        for name in PARAM_NAMES:
            self.register_parameter(name, nn.Parameter(getattr(params, name).detach().clone()))

    def head_params(self, *, live: bool = False) -> SingleHeadParams:
        """Return the weights as :class:`~attention_dynamics.science.attention.SingleHeadParams`: detached (sharing
        storage, no gradient) or, with ``live=True``, the parameters themselves (gradients flow into the module)."""
        return SingleHeadParams(**{n: getattr(self, n) if live else getattr(self, n).detach() for n in PARAM_NAMES})

    @shape_checked
    def forward(self, x: Float[Tensor, "*batch T d_in"]) -> Float[Tensor, "*batch T C"]:
        """Return the logits ``(..., T, C)`` for inputs ``x`` ``(..., T, d_in)``."""
        return single_head_forward(x, self.head_params(live=True)).logits

    def param_groups(self, lr: float, value_lr_ratio: float = 1.0, *, frozen: Sequence[str] = ()) -> list[dict[str, Any]]:
        """Return optimiser groups: routing (W_Q, W_K) and readout (W_O) at ``lr``, values (W_V) at ``lr·ratio``.

        Matrices named in ``frozen`` get ``requires_grad = False`` and belong to no group.
        """
        if not lr > 0 or not value_lr_ratio > 0:
            raise ValueError(f"lr and value_lr_ratio must be positive, got {lr!r} and {value_lr_ratio!r}")
        unknown = set(frozen) - set(PARAM_NAMES)
        if unknown:
            raise ValueError(f"unknown matrices to freeze: {sorted(unknown)}; choose from W_Q, W_K, W_V, W_O")
        groups = [("routing", ["W_Q", "W_K"], lr), ("readout", ["W_O"], lr), ("values", ["W_V"], lr * value_lr_ratio)]
        out = []
        for name, members, group_lr in groups:
            live = [getattr(self, m) for m in members if m not in frozen]
            for m in members:
                getattr(self, m).requires_grad_(m not in frozen)
            if live:
                out.append({"params": live, "lr": group_lr, "name": name})
        return out


#: The paper's head: d_in 20 → d_k 10 (queries, keys), d_v 15 (values) → 8 classes.
HEAD_SHAPE = {"d_in": 20, "d_k": 10, "d_v": 15, "n_classes": 8}


INIT_STD = 0.1


def initial_head(seed: int, dtype: torch.dtype = torch.float32):
    """Return the head's initial weights for ``seed`` (N(0, 0.1²), drawn in the order W_Q, W_K, W_V, W_O)."""
    return init_single_head(**HEAD_SHAPE, std=INIT_STD, generator=torch_generator(stream(seed, "init")), dtype=dtype)
