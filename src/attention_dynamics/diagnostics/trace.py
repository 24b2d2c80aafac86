"""Diagnostics during training: :func:`traced_fit` records them along :func:`attention_dynamics.training.fit`,
with alarms a learning curve alone would miss.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np
import torch
import torch.nn as nn

from ..science.settling import first_true_for_good
from .report import AttentionDiagnostics, diagnose

#: A head's attention has collapsed when its normalized entropy falls below this value ...
COLLAPSE_ENTROPY = 0.1
#: ... or when more than this fraction of its keys is starved.
COLLAPSE_STARVED = 0.5


@dataclass
class DiagnosticsTrace:
    """Diagnostics recorded while a model trains (what :func:`traced_fit` returns).

    ``losses`` ``(steps,)``: the training loss before every update (nats). ``steps`` ``(n,)``: the
    steps at which the diagnostics were taken (after that many updates; the last is the end of
    training). ``metrics[n][h]``: the :meth:`AttentionDiagnostics.metrics` dict of head h at
    ``steps[n]`` (with the diagnostic batch's ``loss``). ``kept``: the full
    :class:`AttentionDiagnostics` at the steps asked for.
    """

    label: str
    losses: np.ndarray
    steps: np.ndarray
    metrics: list[list[dict[str, Any]]]
    kept: dict[int, AttentionDiagnostics]

    def metric(self, name: str, head: int = 0) -> np.ndarray:
        """Return metric ``name`` of head number ``head`` (in forward order) at every traced step ``(n,)``."""
        return np.array([m[head][name] for m in self.metrics], dtype=float)

    def at(self, step: int) -> AttentionDiagnostics:
        """Return the full diagnostics kept at ``step``."""
        if step not in self.kept:
            raise KeyError(f"no diagnostics kept at step {step}; kept: {sorted(self.kept)}")
        return self.kept[step]


def traced_fit(
    model: nn.Module,
    batches: Callable[[int], Any],
    *,
    steps: int,
    optimizer: torch.optim.Optimizer,
    diagnose_inputs: Any,
    diagnose_targets: torch.Tensor,
    track_steps: Sequence[int] = (),
    keep_steps: Sequence[int] = (),
    loss_fn: Callable[[nn.Module, Any], torch.Tensor] | None = None,
    backward: Callable[[nn.Module, Any], Any] | None = None,
    label: str = "",
    **diagnose_kwargs: Any,
) -> DiagnosticsTrace:
    """Train with :func:`attention_dynamics.training.fit` and return a :class:`DiagnosticsTrace`.

    :func:`diagnose` runs on ``(diagnose_inputs, diagnose_targets)`` at every step of
    ``track_steps`` ∪ ``keep_steps`` and at the end (step ``steps``); the full diagnostics are kept
    at ``keep_steps`` (the end is kept when ``steps`` is in ``keep_steps``). ``loss_fn``/``backward``
    and ``optimizer`` go to ``fit``; ``diagnose_kwargs`` (labels, thresholds) to :func:`diagnose`.
    """
    from ..training import fit

    keep = set(int(s) for s in keep_steps)

    def callback(step: int, m: nn.Module, _loss: float) -> dict[str, Any]:
        diag = diagnose(m, diagnose_inputs, diagnose_targets, **diagnose_kwargs)
        rows = [{**row, "loss": diag.loss} for row in diag.metrics()]
        return {"metrics": rows, "diagnostics": diag if step in keep else None}

    history = fit(model, batches, steps=steps, optimizer=optimizer, loss_fn=loss_fn, backward=backward,
                  callback=callback, callback_steps=sorted(set(track_steps) | keep))
    records = history.records
    return DiagnosticsTrace(
        label=label,
        losses=history.losses,
        steps=np.array([r["step"] for r in records], dtype=int),
        metrics=[r["metrics"] for r in records],
        kept={r["step"]: r["diagnostics"] for r in records if r["diagnostics"] is not None},
    )



def collapse_alarm(
    trace: DiagnosticsTrace, *, entropy_below: float = COLLAPSE_ENTROPY, starved_above: float = COLLAPSE_STARVED
) -> int | None:
    """Return the first traced step at which some head's attention has collapsed, or None.

    Collapsed: normalized attention entropy below ``entropy_below`` or a starved fraction above
    ``starved_above``. Then the routing gradient (gated by alpha) vanishes on most keys: routing
    is frozen, whatever the loss says.
    """
    for step, heads in zip(trace.steps, trace.metrics):
        if any(h["normalized_attention_entropy"] < entropy_below or h["starved_fraction"] > starved_above for h in heads):
            return int(step)
    return None


def loss_falls_behind(losses: Sequence[float], reference_losses: Sequence[float]) -> int | None:
    """Return the first step from which ``losses`` stay above ``reference_losses`` to the end, or None.

    The step at which a learning curve alone would tell that a run is worse than the reference
    (None if it is not behind at the last step).
    """
    a, b = np.asarray(losses, dtype=float), np.asarray(reference_losses, dtype=float)
    if a.shape != b.shape:
        raise ValueError(f"the curves have different lengths ({a.shape} vs {b.shape})")
    return first_true_for_good(a > b)
