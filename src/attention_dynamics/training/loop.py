"""The one training loop of the book, and a runner for independent runs on both cores.

:func:`fit` drives any ``nn.Module`` with any ``torch.optim`` optimiser. How gradients are
obtained is a parameter: autograd by default, or a closed-form routine (the sticky-chain engine
fills ``.grad`` from the paper's laws). Learning-rate schedules such as the paper's "EM-like" one
(a larger step on the values) are optimiser parameter groups, not separate loops.
"""

from __future__ import annotations

import os
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from multiprocessing import get_context
from typing import Any, Callable, Iterable, Sequence

import numpy as np
import torch
import torch.nn as nn
from tqdm.std import tqdm  # plain text bar: no widget warning inside notebooks

from ..settings import check_positive_int

__all__ = ["TrainHistory", "autograd_backward", "fit", "fast_training_path", "fast_adamw", "map_parallel"]

Batch = Any
BackwardFn = Callable[[nn.Module, Batch], torch.Tensor | float]


@dataclass
class TrainHistory:
    """What :func:`fit` returns: the loss before every update and the callback's records."""

    losses: np.ndarray
    records: list[dict[str, Any]] = field(default_factory=list)

    @property
    def final_loss(self) -> float:
        """Return the loss at the last step."""
        return float(self.losses[-1])


def autograd_backward(loss_fn: Callable[[nn.Module, Batch], torch.Tensor]) -> BackwardFn:
    """Return a backward routine that computes ``loss_fn(model, batch)`` and calls ``.backward()``."""

    def backward(model: nn.Module, batch: Batch) -> torch.Tensor:
        loss = loss_fn(model, batch)
        loss.backward()
        return loss

    return backward


def fit(
    model: nn.Module,
    batches: Callable[[int], Batch],
    *,
    steps: int,
    optimizer: torch.optim.Optimizer,
    loss_fn: Callable[[nn.Module, Batch], torch.Tensor] | None = None,
    backward: BackwardFn | None = None,
    scheduler: torch.optim.lr_scheduler.LRScheduler | None = None,
    grad_clip: float | None = None,
    callback: Callable[[int, nn.Module, float], dict[str, Any] | None] | None = None,
    callback_steps: Iterable[int] | None = None,
    progress: bool = False,
    desc: str | None = None,
) -> TrainHistory:
    """Train ``model`` for ``steps`` updates and return its :class:`TrainHistory`.

    ``batches(step)`` returns the batch of a step (the same full batch every step, or fresh
    samples). Gradients come from ``backward(model, batch)`` (which must fill ``.grad`` and
    return the loss) or, if only ``loss_fn`` is given, from autograd. ``callback(step, model,
    loss)`` runs *before* the update of each step in ``callback_steps`` (default: none) and after
    the last update with ``step == steps``; what it returns is kept in ``records``.
    """
    steps = check_positive_int("steps", steps)
    if (loss_fn is None) == (backward is None):
        raise ValueError("give exactly one of loss_fn (autograd) or backward (custom gradients)")
    backward = backward or autograd_backward(loss_fn)
    at = set(callback_steps or ())
    losses = np.empty(steps)
    records: list[dict[str, Any]] = []
    model.train()
    for step in tqdm(range(steps), desc=desc, disable=not progress, leave=False):
        batch = batches(step)
        optimizer.zero_grad(set_to_none=True)
        loss = backward(model, batch)
        loss_value = float(loss.detach()) if torch.is_tensor(loss) else float(loss)
        if not np.isfinite(loss_value):
            raise FloatingPointError(f"loss became {loss_value} at step {step}; lower the learning rate")
        losses[step] = loss_value
        if callback is not None and step in at:
            rec = callback(step, model, loss_value)
            if rec is not None:
                records.append({"step": step, **rec})
        if grad_clip is not None:
            nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
        optimizer.step()
        if scheduler is not None:
            scheduler.step()
    if callback is not None:
        rec = callback(steps, model, float("nan"))
        if rec is not None:
            records.append({"step": steps, **rec})
    return TrainHistory(losses=losses, records=records)


def fast_training_path(model: nn.Module, *, compile: bool = True, fused_attention: bool = True) -> nn.Module:
    """Prepare ``model`` for faster training, in place, and return it (opt-in; no chapter uses it by default).

    - ``fused_attention``: every :class:`~attention_dynamics.models.transformer.CausalSelfAttention`
      uses PyTorch's fused scaled-dot-product attention (the same function as the explicit path, tested;
      probes on the attention weights bypass it, see :func:`~attention_dynamics.models.transformer.probe_activations`);
    - ``compile``: ``model.compile()`` (TorchInductor; the module keeps its own ``state_dict`` keys).
      The first steps pay the compilation (tens of seconds on a small CPU).

    Losses agree with the eager model's within float tolerance and are reproducible run to run on one
    machine (``benchmarks/wind_tunnels.py`` measures both); use with :func:`fast_adamw`.
    """
    from ..models.transformer import CausalSelfAttention  # models do not import training

    if fused_attention:
        for m in model.modules():
            if isinstance(m, CausalSelfAttention):
                m.fused = True
    if compile:
        model.compile()
    return model


def fast_adamw(params: Iterable[torch.nn.Parameter], **kwargs: Any) -> torch.optim.AdamW:
    """Return ``torch.optim.AdamW(params, **kwargs)`` with its fused kernel (one pass over all tensors per step)."""
    return torch.optim.AdamW(params, fused=True, **kwargs)


def _init_worker(threads: int) -> None:
    torch.set_num_threads(threads)


def map_parallel(fn: Callable[..., Any], jobs: Sequence[dict[str, Any]], *, processes: int | None = None) -> list[Any]:
    """Return ``[fn(**job) for job in jobs]``, computed in separate processes (one thread each).

    Independent runs (seeds × schedules) use every core this way. ``fn`` must be importable
    (defined in the package). Results come back in the order of ``jobs``; each job must seed
    itself, so results do not depend on which process ran it. ``processes=1`` runs in-process.
    """
    processes = processes or min(len(jobs), os.cpu_count() or 1)
    if processes <= 1 or len(jobs) <= 1:
        return [fn(**job) for job in jobs]
    with ProcessPoolExecutor(max_workers=processes, mp_context=get_context("spawn"),
                             initializer=_init_worker, initargs=(1,)) as pool:
        futures = [pool.submit(fn, **job) for job in jobs]
        return [f.result() for f in futures]
