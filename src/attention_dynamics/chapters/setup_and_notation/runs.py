"""Chapter 1's computation: the worked example's head and its three exactness checks."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ...science import attention
from ...science.attention import HeadForward, SingleHeadParams
from .settings import SetupSettings

__all__ = ["WorkedExample", "worked_example", "TENSORS", "tensor_shapes", "exactness_errors"]


@dataclass
class WorkedExample:
    """The example's inputs ``x`` ``(T, d_in)``, targets ``y`` ``(T,)``, head ``params`` and forward pass ``fwd``."""

    x: torch.Tensor
    y: torch.Tensor
    params: SingleHeadParams
    fwd: HeadForward


def worked_example(cfg: SetupSettings, generator: torch.Generator) -> WorkedExample:
    """Return the worked example: weights from N(0, 1), inputs from N(0, 1), uniform targets, float64 (in that
    order from ``generator``), and the head's forward pass with every intermediate tensor."""
    params = attention.init_single_head(cfg.d_in, cfg.d_k, cfg.d_v, cfg.n_classes, std=1.0, generator=generator,
                                        dtype=torch.float64)
    x = torch.randn(cfg.T, cfg.d_in, generator=generator, dtype=torch.float64)  # (T, d_in)
    y = torch.randint(0, cfg.n_classes, (cfg.T,), generator=generator)  # (T,)
    return WorkedExample(x, y, params, attention.single_head_forward(x, params, y))


#: The forward pass's tensors in the order the page names them: (attribute of the forward pass, reader's label).
TENSORS = (
    ("q", "queries q"), ("k", "keys k"), ("v", "values v"), ("scores", "scores s"), ("alpha", "attention α"),
    ("g", "context vectors g"), ("logits", "logits z"), ("p", "predictions p"), ("u", "error signals u"),
    ("b", "compatibilities b"),
)


def tensor_shapes(ex: WorkedExample) -> dict[str, str]:
    """Return ``{reader's label: "rows × columns"}`` for every tensor of the example's forward pass (:data:`TENSORS`)."""
    return {label: " × ".join(map(str, getattr(ex.fwd, name).shape)) for name, label in TENSORS}


def exactness_errors(ex: WorkedExample) -> dict[str, float]:
    """Return the largest absolute differences of the example's identities: the head's context against PyTorch's fused
    attention (``forward``), the closed-form error signal against autograd (``upstream``),
    ``Σ_j α_ij b_ij = u_i·g_i`` (``identity``), and each attention row's sum against one (``row_sum``)."""
    fwd = ex.fwd
    return {
        "forward": (fwd.g - attention.sdpa_context(ex.x, ex.params)).abs().max().item(),
        "upstream": (fwd.u - attention.autograd_upstream_gradient(ex.x, ex.params, ex.y)).abs().max().item(),
        "identity": ((fwd.alpha * fwd.b).sum(-1) - (fwd.u * fwd.g).sum(-1)).abs().max().item(),
        "row_sum": (fwd.alpha.sum(-1) - 1).abs().max().item(),
    }
