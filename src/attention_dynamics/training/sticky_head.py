"""The paper's sticky-chain head trained with any schedule and any routing (the closed-form engine): one run, its
metrics, its held-out evaluation (chapter 5 trains it; chapters 3 and 7 train it too)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
import torch

from ..core.seeding import stream
from ..models.single_head import initial_head
from ..tasks import sticky_chain
from .head_engine import DEFAULT_QUERY_ROWS_PER_BLOCK, SingleHeadModule, head_metrics
from .loop import fit
from .schedules import Schedule, get_schedule, make_backward, make_optimizer

__all__ = [
    "STICKY_ROUTING",
    "RunResult",
    "value_prototypes",
    "between_symbol_share",
    "train_sticky_head",
    "heldout_datasets",
    "heldout_metrics",
]


#: The sticky head's routing: learned (the paper's), and the controls with routing removed or pinned.
STICKY_ROUTING = ("learned", "frozen", "uniform", "identity")


@dataclass
class RunResult:
    """One training run: the losses before every update (nats), metrics at the start and end, snapshots.

    ``losses`` ``(steps,)`` float64; ``initial``/``final`` are :func:`~attention_dynamics.training.head_engine.head_metrics` dicts (loss and
    entropy in nats); ``snapshot_steps`` ``(R,)`` and ``value_prototypes`` ``(R, n_symbols, d_v)`` hold
    the value of each symbol's mean input, mu_s W_V, at the recorded steps (empty when not recorded).
    """

    seed: int
    schedule: str
    kind: str
    steps: int
    losses: np.ndarray
    initial: dict[str, float]
    final: dict[str, float]
    snapshot_steps: np.ndarray
    value_prototypes: np.ndarray
    final_specialization: float
    heldout: dict[str, float] | None = None
    initial_specialization: float = math.nan
    heldout_curve: dict[str, list] | None = None

    def to_json(self, *, loss_stride: int = 1) -> dict[str, Any]:
        """Return a JSON-ready dict; losses are kept every ``loss_stride`` steps (plus the last)."""
        idx = np.unique(np.r_[np.arange(0, self.steps, loss_stride), self.steps - 1])
        return {
            "seed": self.seed, "schedule": self.schedule, "kind": self.kind, "steps": self.steps,
            "loss_steps": idx.tolist(), "losses": np.round(self.losses[idx], 7).tolist(),
            "initial": self.initial, "final": self.final, "final_specialization": self.final_specialization,
            "heldout": self.heldout, "heldout_curve": self.heldout_curve,
        }


def value_prototypes(mu: torch.Tensor, W_V: torch.Tensor) -> np.ndarray:
    """Return each symbol's value prototype mu_s W_V ``(n_symbols, d_v)`` (the value of a noiseless input)."""
    return (mu @ W_V.detach()).double().numpy()


def between_symbol_share(values: torch.Tensor | np.ndarray, labels: torch.Tensor | np.ndarray) -> float:
    """Return the share of the values' variance explained by their symbol (η², between / total, in [0, 1]).

    ``values`` ``(T, d_v)`` are the value vectors v_j, ``labels`` ``(T,)`` the symbol each input carries.
    """
    v = np.asarray(values, dtype=np.float64)
    lab = np.asarray(labels)
    centred = v - v.mean(axis=0)
    total = float((centred**2).sum())
    between = 0.0
    for s in np.unique(lab):
        group = centred[lab == s]
        between += len(group) * float((group.mean(axis=0) ** 2).sum())
    return between / total if total > 0 else 0.0


def train_sticky_head(
    seed: int,
    schedule: str | Schedule = "sgd",
    *,
    kind: str = "reference",
    steps: int = 1000,
    length: int = sticky_chain.SEQUENCE_LENGTH,
    snapshot_every: int | None = None,
    block_size: int = DEFAULT_QUERY_ROWS_PER_BLOCK,
    rho: float | None = None,
    heldout_sequences: int = 0,
    heldout_every: int | None = None,
    routing: str = "learned",
) -> RunResult:
    """Train the paper's head on the sticky chain of ``seed`` with ``schedule``; return a :class:`RunResult`.

    The data and the initial weights both come from ``seed`` (as in the reference script), so all
    schedules of one seed share both. ``rho`` overrides the M-step's target distance. With
    ``snapshot_every``, the value prototypes are recorded every that many steps and at the end.
    With ``heldout_sequences`` = n > 0, the trained head is also evaluated on n fresh sequences
    (:func:`heldout_metrics`), and with ``heldout_every`` its mean held-out loss and entropy are
    recorded every that many steps and at the end (``RunResult.heldout_curve``).

    ``routing`` (:data:`STICKY_ROUTING`): ``"learned"``, the paper's head; ``"frozen"``, W_Q and W_K kept at their
    initial values; ``"uniform"``, W_Q = W_K = 0 (every query attends uniformly to its past); ``"identity"``, the
    attention pinned to the identity, the chain's Bayes routing (each query reads its own input, which carries the
    current symbol). The controls keep the seed's data and initial weights, so a schedule's speed-up can be compared
    with routing learned and removed.
    """
    if routing not in STICKY_ROUTING:
        raise ValueError(f"routing must be one of {STICKY_ROUTING}, got {routing!r}")
    sched = get_schedule(schedule)
    if rho is not None:
        sched = sched.with_rho(rho)
    data = sticky_chain.make_sticky_chain_data(seed, kind=kind, length=length)
    heldout_data = heldout_datasets(seed, kind=kind, length=length, n_sequences=heldout_sequences)
    model = SingleHeadModule(initial_head(seed))
    if routing == "uniform":
        with torch.no_grad():
            model.W_Q.zero_()
            model.W_K.zero_()
    identity = routing == "identity"
    initial = head_metrics(data.x, model.head_params(), data.y, data.previous_symbols, identity_routing=identity)
    initial_specialization = between_symbol_share(data.x @ model.W_V.detach(), data.previous_symbols)
    snapshot_steps = set(range(0, steps, snapshot_every)) if snapshot_every else set()
    heldout_steps = set(range(0, steps, heldout_every)) if heldout_every and heldout_data else set()

    def measure(step: int, m: SingleHeadModule, loss: float) -> dict[str, Any] | None:
        out: dict[str, Any] = {}
        if step in snapshot_steps or (step == steps and snapshot_steps):
            out["prototypes"] = value_prototypes(data.mu, m.W_V)
        if step in heldout_steps or (step == steps and heldout_steps):
            rows = [head_metrics(d.x, m.head_params(), d.y, identity_routing=identity) for d in heldout_data]
            out["heldout_loss"] = float(np.mean([r["loss"] for r in rows]))
            out["heldout_entropy"] = float(np.mean([r["entropy"] for r in rows]))
        return out or None

    optimizer = make_optimizer(model, sched)
    if routing != "learned":  # the routing weights keep where they were set (SGD with a zero step)
        for group in optimizer.param_groups:
            if group["name"] == "query_key":
                group["lr"] = 0.0
    history = fit(
        model,
        lambda step: (data.x, data.y),
        steps=steps,
        optimizer=optimizer,
        backward=make_backward(sched, block_size=block_size, identity_routing=identity),
        callback=measure if (snapshot_steps or heldout_steps) else None,
        callback_steps=sorted(snapshot_steps | heldout_steps),
    )
    final = head_metrics(data.x, model.head_params(), data.y, data.previous_symbols, identity_routing=identity)
    heldout = heldout_metrics(model.head_params(), heldout_data, identity_routing=identity) if heldout_data else None
    values = data.x @ model.W_V.detach()  # (T−1, d_v)
    snaps = [r for r in history.records if "prototypes" in r]
    curve = [r for r in history.records if "heldout_loss" in r]
    return RunResult(
        seed=int(seed),
        schedule=sched.name,
        kind=kind,
        steps=int(steps),
        losses=history.losses,
        initial=initial,
        final=final,
        snapshot_steps=np.array([r["step"] for r in snaps], dtype=int),
        value_prototypes=np.stack([r["prototypes"] for r in snaps]) if snaps else np.empty((0,)),
        final_specialization=between_symbol_share(values, data.previous_symbols),
        heldout=heldout,
        initial_specialization=initial_specialization,
        heldout_curve={"steps": [r["step"] for r in curve], "loss": [r["heldout_loss"] for r in curve],
                       "entropy": [r["heldout_entropy"] for r in curve]} if curve else None,
    )


def heldout_datasets(
    seed: int, *, kind: str = "reference", length: int = sticky_chain.SEQUENCE_LENGTH, n_sequences: int = 10
) -> list[sticky_chain.StickyChainData]:
    """Return ``n_sequences`` fresh sequences for a run with ``seed`` (seeds seed + 10 000, seed + 10 001, …)."""
    return [sticky_chain.make_sticky_chain_data(stream(seed, "heldout", k), kind=kind, length=length)
            for k in range(n_sequences)]


def heldout_metrics(params, datasets: Sequence[sticky_chain.StickyChainData], *,
                    identity_routing: bool = False) -> dict[str, float]:
    """Return the head's loss and entropy (nats) and accuracy averaged over held-out ``datasets``
    (``identity_routing``: the head with its attention pinned to the identity).

    Also ``filtered_floor``: the mean cross-entropy of the exact Bayes filter on the same sequences
    (:func:`~attention_dynamics.tasks.sticky_chain.filtered_cross_entropy_nats`), and ``n_sequences``.
    """
    rows = []
    for data in datasets:
        m = head_metrics(data.x, params, data.y, identity_routing=identity_routing)
        m["filtered_floor"] = sticky_chain.filtered_cross_entropy_nats(data)
        rows.append(m)
    out = {key: float(np.mean([r[key] for r in rows])) for key in rows[0]}
    out["n_sequences"] = len(rows)
    return out
