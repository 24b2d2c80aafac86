"""The single head trained on content-addressed recall, with every measurement along the way (chapters 2–4).

The recall task (:mod:`attention_dynamics.tasks.specialization`) has a known right answer for every query, so
the head's routing (the E-step) and its values (the M-step) can each be measured against the truth while it
trains (:mod:`attention_dynamics.science.dynamics`); :class:`SpecializationRun` holds the curves and the recorded paths
from which the settling steps of the frame and the values are read.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np
import torch

from ..core.seeding import stream, torch_generator
from ..core.settings import check_positive_int
from ..models.single_head import SingleHeadModule
from ..science.attention import SingleHeadParams, init_single_head
from ..science.dynamics import (
    attention_distance,
    attention_on_correct_source,
    attention_on_sources,
    responsibility_purity,
    specialization_matrix,
    value_distance,
    value_precision_nats,
    value_prototype_alignment,
)
from ..science.recall_head import query_forward, query_loss
from ..science.settling import quiescence_step, settle_step
from ..tasks import specialization as task
from ..tasks.specialization import SpecializationBatch
from .loop import fit

__all__ = [
    "SpecializationRun",
    "RECALL_TASK_SIZES",
    "train_specialization_head",
]


@dataclass
class SpecializationRun:
    """What :func:`train_specialization_head` returns (plain NumPy, picklable for ``map_parallel``).

    Curves are indexed by ``steps`` (the checkpoints, every ``record_every`` steps and the end);
    ``train_loss`` by every step. Losses in nats. On the fixed probe set:
    ``frame_change[t]`` is the mean total-variation distance between the query attention rows at
    checkpoint t and ``settle_window`` steps later (fraction of attention mass moved);
    ``value_change[t]`` the RMS change of the sources' value vectors over the same window,
    relative to their RMS norm at its end; ``frame_distance`` / ``value_distance`` the same
    distances from the final state (for the alternative settling criterion).
    ``attention_snapshots`` ``(n_ckpt, n_show, T, T)`` for the first probe sequences,
    ``label_prototypes`` ``(n_ckpt, C, d_v)`` the rows of W_V on the label block (each label's
    contribution to a value), ``specialization`` ``(n_ckpt, n_tags, n_tags)``,
    ``param_history`` name → ``(n_ckpt, *shape)`` the head at every checkpoint;
    ``shown_sequences`` the inputs and ground truth of the probe sequences in the snapshots
    (``x``, ``correct_source``, ``requests``, ``source_tags``, ``source_labels``, ``targets``).
    With ``path_every``: ``path_steps`` (every ``path_every`` steps and the end) and the distance each
    quantity moves between consecutive ones, ``frame_path`` (mean total variation of the query
    attention rows) and ``value_path`` (RMS distance of the sources' values); see
    :func:`path_settling_step`.
    """

    settings: dict[str, Any]
    steps: np.ndarray
    train_loss: np.ndarray
    probe_loss: np.ndarray
    correct_mass: np.ndarray
    source_mass: np.ndarray
    alignment: np.ndarray
    precision_nats: np.ndarray
    purity: np.ndarray
    frame_change: np.ndarray
    value_change: np.ndarray
    frame_distance: np.ndarray
    value_distance: np.ndarray
    attention_snapshots: np.ndarray
    label_prototypes: np.ndarray
    specialization: np.ndarray
    param_history: dict[str, np.ndarray] = field(default_factory=dict)
    shown_sequences: dict[str, np.ndarray] = field(default_factory=dict)
    path_steps: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=int))
    frame_path: np.ndarray = field(default_factory=lambda: np.empty(0))
    value_path: np.ndarray = field(default_factory=lambda: np.empty(0))

    @property
    def change_steps(self) -> np.ndarray:
        """Return the checkpoint steps at which ``frame_change`` / ``value_change`` windows start."""
        return self.steps[: len(self.frame_change)]

    def settling_steps(self, threshold: float = 0.01) -> tuple[tuple[int, bool], tuple[int, bool]]:
        """Return ``((frame_step, settled), (value_step, settled))`` by the rate criterion (:func:`quiescence_step`)."""
        return (quiescence_step(self.change_steps, self.frame_change, threshold),
                quiescence_step(self.change_steps, self.value_change, threshold))

    def settling_steps_by_distance(self, tolerance: float = 0.1) -> tuple[int, int]:
        """Return ``(frame_step, value_step)`` by the distance-to-final criterion (:func:`~attention_dynamics.science.settling.settle_step`)."""
        return (settle_step(self.steps, self.frame_distance, fraction=tolerance),
                settle_step(self.steps, self.value_distance, fraction=tolerance))

    def head_at(self, index: int = -1, dtype: torch.dtype = torch.float64) -> SingleHeadParams:
        """Return the head's parameters at checkpoint ``index`` (default: the end of training)."""
        return SingleHeadParams(**{k: torch.as_tensor(v[index], dtype=dtype) for k, v in self.param_history.items()})


#: The content-addressed recall task's sizes the book trains on (sources, queries, tags, labels: chapters 3 and 4),
#: the arguments of :func:`~attention_dynamics.tasks.specialization.sample_specialization_batch`.
RECALL_TASK_SIZES = {"n_sources": 4, "n_queries": 4, "n_tags": 8, "n_labels": 8}


def train_specialization_head(
    seed: int,
    *,
    steps: int = 2000,
    lr: float = 0.5,
    value_lr_ratio: float = 1.0,
    frozen: Sequence[str] = (),
    n_train: int = 256,
    n_probe: int = 256,
    record_every: int = 20,
    settle_window: int = 100,
    d_k: int = 8,
    d_v: int = 8,
    init_std: float = 0.1,
    n_show: int = 2,
    data_seed: int | None = None,
    task_sizes: dict[str, int] | None = None,
    path_every: int | None = None,
    freeze_routing_at: int | None = None,
    zero_routing: bool = False,
) -> SpecializationRun:
    """Return a :class:`SpecializationRun`: full-batch gradient descent on the recall task, measured.

    The head (init N(0, init_std²), seeded by ``seed``) is trained by plain SGD on a fixed training
    set of ``n_train`` sequences; routing (W_Q, W_K) and readout (W_O) use ``lr``, the values
    (W_V) ``lr · value_lr_ratio``; matrices named in ``frozen`` keep their initial values (for
    ablations). Every ``record_every`` steps the E-step, M-step and specialization measures are
    taken on a fixed probe set of ``n_probe`` sequences. ``data_seed`` (default: ``seed``) draws
    the data, so runs can share a task and differ only in initialisation. ``path_every``: also record
    the frame and the values every that many steps (cheap; for :func:`path_settling_step`).
    ``freeze_routing_at`` = t: W_Q and W_K stop training from step t on (the frame frozen), the rest
    trains on. ``zero_routing``: W_Q and W_K start at zero (with ``frozen=("W_Q", "W_K")``: uniform attention
    throughout, the no-routing control).
    """
    steps = check_positive_int("steps", steps)
    record_every = check_positive_int("record_every", record_every)
    settle_window = check_positive_int("settle_window", settle_window)
    if steps % record_every or settle_window % record_every:
        raise ValueError(f"steps ({steps}) and settle_window ({settle_window}) must be multiples of record_every ({record_every})")
    if settle_window >= steps:
        raise ValueError(f"settle_window ({settle_window}) must be shorter than the run ({steps} steps)")
    sizes = {**RECALL_TASK_SIZES, **(task_sizes or {})}
    data_gen = torch_generator(stream(seed, "data") if data_seed is None else data_seed)
    train = task.sample_specialization_batch(n_train, generator=data_gen, **sizes)
    probe = task.sample_specialization_batch(n_probe, generator=data_gen, **sizes)
    d_in = task.input_dim(sizes["n_tags"], sizes["n_labels"])
    init = init_single_head(d_in, d_k, d_v, sizes["n_labels"], std=init_std, generator=torch_generator(stream(seed, "init")))
    model = SingleHeadModule(init)
    if zero_routing:
        with torch.no_grad():
            model.W_Q.zero_()
            model.W_K.zero_()
    optimizer = torch.optim.SGD(model.param_groups(lr, value_lr_ratio, frozen=frozen), lr=lr)
    K = sizes["n_sources"]
    label_rows = slice(2 * sizes["n_tags"], 2 * sizes["n_tags"] + sizes["n_labels"])

    alphas: list[torch.Tensor] = []
    values: list[torch.Tensor] = []
    snapshots: list[dict[str, np.ndarray]] = []

    path_at = set(range(0, steps, path_every)) | {steps} if path_every else set()
    path: list[tuple[int, torch.Tensor, torch.Tensor]] = []

    def batches(step: int) -> SpecializationBatch:
        if freeze_routing_at is not None and step == freeze_routing_at:
            model.W_Q.requires_grad_(False)
            model.W_K.requires_grad_(False)
        return train

    def measure(step: int, module: SingleHeadModule, loss: float) -> dict[str, Any] | None:
        if step in path_at:
            with torch.no_grad():
                fwd = query_forward(module.head_params(live=True), probe)
                path.append((step, fwd.alpha[:, K:].clone(), fwd.v[:, :K].clone()))
        if step % record_every and step != steps:
            return None
        with torch.no_grad():
            p = module.head_params(live=True)
            fwd = query_forward(p, probe)
            alphas.append(fwd.alpha[:, K:].clone())  # (n_probe, Q, T)
            values.append(fwd.v[:, :K].clone())  # (n_probe, K, d_v)
            snapshots.append({k: v.detach().numpy().copy() for k, v in p.as_dict().items()})
            return {
                "probe_loss": float(fwd.loss),
                "correct_mass": attention_on_correct_source(fwd.alpha, probe),
                "source_mass": attention_on_sources(fwd.alpha, probe),
                "alignment": value_prototype_alignment(fwd.v, p.W_O, probe),
                "precision_nats": value_precision_nats(fwd.v, p.W_O, probe),
                "purity": responsibility_purity(fwd.alpha, probe),
                "snapshot": fwd.alpha[:n_show].numpy().copy(),
                "prototypes": p.W_V[label_rows].numpy().copy(),
                "specialization": specialization_matrix(fwd.alpha, probe),
            }

    history = fit(model, batches, steps=steps, optimizer=optimizer,
                  loss_fn=lambda module, batch: query_loss(module.head_params(live=True), batch),
                  callback=measure, callback_steps=set(range(0, steps, record_every)) | path_at)
    recs = history.records

    def col(name: str) -> np.ndarray:
        return np.array([r[name] for r in recs])

    lag = settle_window // record_every  # checkpoints per window
    frame_change = np.array([attention_distance(a, b) for a, b in zip(alphas[:-lag], alphas[lag:])])
    value_change = np.array([value_distance(a, b) / value_distance(b, torch.zeros_like(b))
                             for a, b in zip(values[:-lag], values[lag:])])
    settings = dict(seed=seed, steps=steps, lr=lr, value_lr_ratio=value_lr_ratio, frozen=list(frozen),
                    n_train=n_train, n_probe=n_probe, record_every=record_every, settle_window=settle_window,
                    d_k=d_k, d_v=d_v, init_std=init_std,
                    data_seed=stream(seed, "data") if data_seed is None else data_seed, path_every=path_every,
                    freeze_routing_at=freeze_routing_at, zero_routing=zero_routing, **sizes)
    return SpecializationRun(
        settings=settings,
        steps=col("step"),
        train_loss=history.losses,
        probe_loss=col("probe_loss"),
        correct_mass=col("correct_mass"),
        source_mass=col("source_mass"),
        alignment=col("alignment"),
        precision_nats=col("precision_nats"),
        purity=col("purity"),
        frame_change=frame_change,
        value_change=value_change,
        frame_distance=np.array([attention_distance(a, alphas[-1]) for a in alphas]),
        value_distance=np.array([value_distance(v, values[-1]) for v in values]),
        attention_snapshots=np.stack([r["snapshot"] for r in recs]),
        label_prototypes=np.stack([r["prototypes"] for r in recs]),
        specialization=np.stack([r["specialization"] for r in recs]),
        param_history={k: np.stack([s[k] for s in snapshots]) for k in snapshots[0]},
        shown_sequences={name: getattr(probe, name)[:n_show].numpy().copy() for name in
                         ("x", "correct_source", "requests", "source_tags", "source_labels", "targets")},
        path_steps=np.array([t for t, _, _ in path], dtype=int),
        frame_path=np.array([attention_distance(a, b) for (_, a, _), (_, b, _) in zip(path[:-1], path[1:])]),
        value_path=np.array([value_distance(a, b) for (_, _, a), (_, _, b) in zip(path[:-1], path[1:])]),
    )
