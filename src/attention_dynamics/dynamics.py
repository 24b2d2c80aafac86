"""The routing–content feedback loop and the two-timescale EM view, measured (PAPER.md §3, items 4–5).

Three groups of tools, used by chapters 3 and 4 on the content-addressed recall task
(:mod:`attention_dynamics.tasks.specialization`):

- **First-order predictions** of the paper. A step of size ``eta`` on the value vectors alone,
  ``Δv_j = −eta Σ_i alpha_ij u_i``, changes the loss by ``−eta Σ_j ||Σ_i alpha_ij u_i||²`` to first
  order (:func:`value_step_loss_change`) and changes the compatibilities by
  ``Δb_ij = −eta Σ_i' alpha_i'j u_i·u_i'`` when the error signal ``u`` is held fixed
  (:func:`compatibility_change_after_value_step`).
- **E-step and M-step quality** against the task's ground truth: the attention mass on the
  correct source (:func:`attention_on_correct_source`), the alignment of each value with its
  ideal prototype (:func:`value_prototype_alignment`), the value's own precision
  (:func:`value_precision_nats`) and which values serve which queries
  (:func:`specialization_matrix`, :func:`responsibility_purity`).
- **Settling times**: when the routing frame (the attention pattern) and the values stop moving
  (:func:`quiescence_step`, and the alternative :func:`settling_step`), measured along a
  training run (:func:`train_specialization_head`).

Conventions: the loss is the mean cross-entropy over query positions (nats); ``u = ∂L/∂g``
includes the ``1/N`` of the mean; a value step acts on the value *vectors* ``v_j`` of a batch
(the paper's free prototypes), not on ``W_V``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from .attention import SingleHeadParams, init_single_head
from .gradients import advantage, compatibility, responsibility_weighted_value_gradient
from .seeding import torch_generator
from .settings import check_positive_int
from .tasks import specialization as task
from .tasks.specialization import SpecializationBatch
from .training import fit

__all__ = [
    "TrainableSingleHead",
    "value_step_loss_change",
    "value_step_curvature_bound",
    "value_step_ratio_curve",
    "CompatibilityChange",
    "compatibility_change_after_value_step",
    "attention_on_correct_source",
    "attention_on_sources",
    "correct_source_advantage",
    "ideal_prototypes",
    "value_prototype_alignment",
    "value_precision_nats",
    "specialization_matrix",
    "responsibility_purity",
    "attention_distance",
    "value_distance",
    "settling_step",
    "quiescence_step",
    "SpecializationRun",
    "train_specialization_head",
    "frame_precision_summary",
    "milestone_indices",
    "prototype_trajectories",
]


# ---------------------------------------------------------------------------------------------
# The head as a module (what training.fit drives)
# ---------------------------------------------------------------------------------------------


class TrainableSingleHead(nn.Module):
    """The single head of :mod:`attention_dynamics.attention` with its four matrices as ``nn.Parameter`` s."""

    def __init__(self, params: SingleHeadParams):
        super().__init__()
        for name, tensor in params.as_dict().items():
            setattr(self, name, nn.Parameter(tensor.detach().clone()))

    @property
    def params(self) -> SingleHeadParams:
        """Return the live parameters as :class:`SingleHeadParams` (gradients flow into the module)."""
        return SingleHeadParams(W_Q=self.W_Q, W_K=self.W_K, W_V=self.W_V, W_O=self.W_O)

    def param_groups(self, lr: float, value_lr_ratio: float = 1.0, *, frozen: Sequence[str] = ()) -> list[dict[str, Any]]:
        """Return optimiser groups: routing (W_Q, W_K) and readout (W_O) at ``lr``, values (W_V) at ``lr·ratio``.

        Matrices named in ``frozen`` get ``requires_grad = False`` and belong to no group.
        """
        if not lr > 0 or not value_lr_ratio > 0:
            raise ValueError(f"lr and value_lr_ratio must be positive, got {lr!r} and {value_lr_ratio!r}")
        unknown = set(frozen) - {"W_Q", "W_K", "W_V", "W_O"}
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


# ---------------------------------------------------------------------------------------------
# First-order predictions (PAPER.md §3, item 4)
# ---------------------------------------------------------------------------------------------


def _query_loss_from_values(alpha: torch.Tensor, v: torch.Tensor, W_O: torch.Tensor,
                            batch: SpecializationBatch) -> torch.Tensor:
    """Return the mean query cross-entropy (nats) when the values are ``v`` ``(B, T, d_v)`` and alpha is fixed."""
    K = batch.n_sources
    return task.query_cross_entropy((alpha[:, K:] @ v) @ W_O, batch)  # logits (B, Q, C)


def value_step_loss_change(
    params: SingleHeadParams, batch: SpecializationBatch, etas: Sequence[float] | np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Return ``(actual, predicted)`` loss changes in nats, ``(len(etas),)`` each, of a value-only step.

    The step moves every value vector of the batch by ``Δv_j = −eta Σ_i alpha_ij u_i`` (the
    responsibility-weighted value law), with W_Q, W_K, W_O and hence alpha unchanged. The paper's
    first-order prediction is ``ΔL ≈ −eta Σ_j ||Σ_i alpha_ij u_i||²`` (summed over the batch).
    Work in float64 to see the ratio approach 1 at small ``eta``.
    """
    with torch.no_grad():
        fwd = task.query_forward(params, batch)
        grad_v = responsibility_weighted_value_gradient(fwd.alpha, fwd.u)  # (B, T, d_v)
        squared_norm = float((grad_v ** 2).sum())
        base = float(fwd.loss)
        actual = np.array([
            float(_query_loss_from_values(fwd.alpha, fwd.v - eta * grad_v, params.W_O, batch)) - base
            for eta in np.asarray(etas, dtype=float)
        ])
    predicted = -np.asarray(etas, dtype=float) * squared_norm
    return actual, predicted


def value_step_curvature_bound(params: SingleHeadParams, batch: SpecializationBatch) -> float:
    """Return λ, an upper bound on the loss Hessian with respect to the values (nats per unit² of v).

    The query loss is a mean over ``N = B·Q`` cross-entropies of logits that are linear in the
    values, ``z_i = W_Oᵀ Σ_j alpha_ij v_j``; the softmax Jacobian ``diag(p) − p pᵀ`` has spectral
    norm ≤ 1/2. Hence the Hessian is ≼ ``||W_O||₂² max_b ||A_b||₂² / (2N)`` everywhere, with
    ``A_b`` the ``(Q, T)`` query attention of sequence b. Because the loss is convex in the
    values, Taylor's theorem with this bound gives ``0 ≤ 1 − actual/predicted ≤ eta λ / 2`` for
    the value-only step of :func:`value_step_loss_change`: an a-priori tolerance for the ratio.
    """
    with torch.no_grad():
        fwd = task.query_forward(params, batch)
        K = batch.n_sources
        attention_norm = torch.linalg.matrix_norm(fwd.alpha[:, K:], ord=2).max()  # max_b ||A_b||₂
        readout_norm = torch.linalg.matrix_norm(params.W_O, ord=2)
        n = batch.targets.numel()
    return float(readout_norm ** 2 * attention_norm ** 2 / (2 * n))


def value_step_ratio_curve(
    params: SingleHeadParams, batch: SpecializationBatch, etas: Sequence[float] | np.ndarray
) -> np.ndarray:
    """Return ``actual / predicted`` loss change of the value-only step for each ``eta`` (→ 1 as eta → 0)."""
    actual, predicted = value_step_loss_change(params, batch, etas)
    return actual / predicted


@dataclass
class CompatibilityChange:
    """How the compatibilities ``b_ij`` of the query rows change after one value-only step.

    actual ``(B, Q, T)``: ``u'_i·v'_j − u_i·v_j`` with u recomputed after the step;
    predicted ``(B, Q, T)``: the paper's ``−eta Σ_i' alpha_i'j u_i·u_i'`` (u held fixed);
    error_signal_part ``(B, Q, T)``: ``(u'_i − u_i)·v'_j``, the part of the change the prediction
    leaves out (the readout's response to the step); mask ``(Q, T)``: True where key j ≤ query i.
    """

    eta: float
    actual: torch.Tensor
    predicted: torch.Tensor
    error_signal_part: torch.Tensor
    mask: torch.Tensor

    @property
    def relative_error(self) -> float:
        """Return ``||actual − predicted||_F / ||actual||_F`` over the unmasked entries."""
        m = self.mask.expand_as(self.actual)
        diff = (self.actual - self.predicted)[m]
        return float(diff.norm() / self.actual[m].norm())

    @property
    def frozen_error_signal_residual(self) -> float:
        """Return ``||actual − error_signal_part − predicted||_F / ||predicted||_F`` (rounding only: u fixed is exact)."""
        m = self.mask.expand_as(self.actual)
        diff = (self.actual - self.error_signal_part - self.predicted)[m]
        return float(diff.norm() / self.predicted[m].norm())


def compatibility_change_after_value_step(
    params: SingleHeadParams, batch: SpecializationBatch, eta: float
) -> CompatibilityChange:
    """Return the :class:`CompatibilityChange` of the query rows after a value-only step of size ``eta``."""
    with torch.no_grad():
        fwd = task.query_forward(params, batch)
        K = batch.n_sources
        grad_v = responsibility_weighted_value_gradient(fwd.alpha, fwd.u)  # (B, T, d_v)
        v_new = fwd.v - eta * grad_v  # (B, T, d_v)
        # Prediction: Δb_ij = u_i·Δv_j = −eta Σ_i' alpha_i'j u_i·u_i'  = −eta (u uᵀ alpha)_ij
        predicted = -eta * (fwd.u @ fwd.u.transpose(-1, -2) @ fwd.alpha)  # (B, T, T)
        # Actual: the error signal responds to the new values (p changes), so recompute
        # u' = ∂L/∂g' at g' = alpha v' (by autograd, independently of the closed form).
        with torch.enable_grad():
            g_new = (fwd.alpha @ v_new).requires_grad_(True)  # (B, T, d_v)
            loss_new = task.query_cross_entropy(g_new[:, K:] @ params.W_O, batch)  # logits (B, Q, C)
            (u_new,) = torch.autograd.grad(loss_new, g_new)  # (B, T, d_v), zero on source rows
        b_new = compatibility(u_new, v_new)
        actual = b_new - fwd.b
        error_signal_part = compatibility(u_new - fwd.u, v_new)
        T = batch.x.shape[1]
        mask = torch.ones(T, T, dtype=torch.bool).tril()[K:]  # (Q, T)
    return CompatibilityChange(eta=float(eta), actual=actual[:, K:], predicted=predicted[:, K:],
                               error_signal_part=error_signal_part[:, K:], mask=mask)


# ---------------------------------------------------------------------------------------------
# E-step and M-step quality against the ground truth (PAPER.md §3, item 5)
# ---------------------------------------------------------------------------------------------


def attention_on_correct_source(alpha: torch.Tensor, batch: SpecializationBatch) -> float:
    """Return the mean attention weight that queries put on the source holding their answer (E-step quality, 0..1)."""
    K = batch.n_sources
    return float(alpha[:, K:].gather(2, batch.correct_source.unsqueeze(-1)).mean())


def attention_on_sources(alpha: torch.Tensor, batch: SpecializationBatch) -> float:
    """Return the mean attention weight that queries put on source positions at all (0..1)."""
    K = batch.n_sources
    return float(alpha[:, K:, :K].sum(-1).mean())


def correct_source_advantage(params: SingleHeadParams, batch: SpecializationBatch) -> float:
    """Return the mean advantage ``E_alpha[b] − b_ij`` of the correct source j for its query, per query.

    Multiplied by the number of queries ``N = B·Q`` so that it does not shrink with the batch
    (``u`` carries the 1/N of the mean loss). Positive: gradient descent moves attention toward
    the correct source (the sign convention of :func:`attention_dynamics.gradients.advantage`).
    """
    with torch.no_grad():
        fwd = task.query_forward(params, batch)
        K = batch.n_sources
        adv = advantage(fwd.alpha, fwd.b)[:, K:]  # (B, Q, T)
        at_source = adv.gather(2, batch.correct_source.unsqueeze(-1))  # (B, Q, 1)
    return float(at_source.mean()) * batch.targets.numel()


def ideal_prototypes(W_O: torch.Tensor) -> torch.Tensor:
    """Return the ideal value prototype of each label, ``W_O (e_y − 1/C)``, shape ``(C, d_v)``.

    It is the direction in value space that raises ``log p(y)`` fastest from an uninformative
    value (the gradient of ``log softmax(W_Oᵀ v)_y`` at uniform ``p``), and hence the direction in
    which the responsibility-weighted value law pulls a value whose queries all want label ``y``.
    """
    C = W_O.shape[1]
    centred = torch.eye(C, dtype=W_O.dtype, device=W_O.device) - 1.0 / C  # (C, C), row y = e_y − 1/C
    return centred @ W_O.transpose(0, 1)  # (C, d_v)


def value_prototype_alignment(v: torch.Tensor, W_O: torch.Tensor, batch: SpecializationBatch) -> float:
    """Return the mean cosine between each source's value and its label's ideal prototype (M-step direction, −1..1)."""
    K = batch.n_sources
    protos = ideal_prototypes(W_O)[batch.source_labels]  # (B, K, d_v)
    return float(F.cosine_similarity(v[:, :K], protos, dim=-1).mean())


def value_precision_nats(v: torch.Tensor, W_O: torch.Tensor, batch: SpecializationBatch) -> float:
    """Return the mean cross-entropy (nats) of each source's value read out alone against its own label.

    This is the loss the head would have under perfect routing (the M-step objective at the
    ideal E-step): it falls as values become precise prototypes of their labels.
    """
    K = batch.n_sources
    logits = v[:, :K] @ W_O  # (B, K, C)
    return float(F.cross_entropy(logits.reshape(-1, logits.shape[-1]), batch.source_labels.reshape(-1)))


def specialization_matrix(alpha: torch.Tensor, batch: SpecializationBatch) -> np.ndarray:
    """Return ``S`` ``(n_tags, n_tags)``: mean attention from queries requesting tag r to the source with tag c.

    Rows are requests, columns source tags; a specialised head has ``S`` close to the identity
    (each value serves exactly the queries that ask for it). Pairs never seen are NaN.
    """
    K, n = batch.n_sources, batch.n_tags
    a = alpha[:, K:, :K].detach().double()  # (B, Q, K)
    req = F.one_hot(batch.requests, n).double()  # (B, Q, n)
    tag = F.one_hot(batch.source_tags, n).double()  # (B, K, n)
    mass = torch.einsum("bqr,bqk,bkc->rc", req, a, tag)  # total attention request r → tag c
    count = torch.einsum("bqr,bkc->rc", req, tag)  # number of (query, source) pairs
    return (mass / count).numpy()  # NaN where count = 0


def responsibility_purity(alpha: torch.Tensor, batch: SpecializationBatch) -> float:
    """Return the fraction of each source's soft count ``N_j = Σ_i alpha_ij`` that comes from its own queries.

    Averaged over sources that some query asks for; 1 = every value serves only the queries whose
    answer it holds, ``1/K`` or less = no specialization.
    """
    K = batch.n_sources
    a = alpha[:, K:, :K]  # (B, Q, K)
    truth = batch.responsibility[:, :, :K]  # (B, Q, K)
    soft_count = a.sum(1)  # (B, K)
    own = (a * truth).sum(1)  # (B, K)
    asked = truth.sum(1) > 0  # (B, K)
    return float((own[asked] / soft_count[asked]).mean())


# ---------------------------------------------------------------------------------------------
# Settling times (frame vs precision)
# ---------------------------------------------------------------------------------------------


def attention_distance(alpha_a: torch.Tensor, alpha_b: torch.Tensor) -> float:
    """Return the mean total-variation distance between two attention patterns' rows (0..1)."""
    return float(0.5 * (alpha_a - alpha_b).abs().sum(-1).mean())


def value_distance(v_a: torch.Tensor, v_b: torch.Tensor) -> float:
    """Return the root-mean-square Euclidean distance between two sets of value vectors (units of v)."""
    return float(((v_a - v_b) ** 2).sum(-1).mean().sqrt())


def settling_step(steps: np.ndarray, distance_to_final: np.ndarray, tolerance: float = 0.1) -> int:
    """Return the first step after which ``distance_to_final`` stays within ``tolerance`` of its start.

    ``distance_to_final[t]`` is a quantity's distance from its state at the end of training;
    the quantity has *settled* at the first checkpoint from which on every later checkpoint is
    within ``tolerance × distance_to_final[0]`` of the end (it has covered ``1 − tolerance`` of its
    way for good). Returns ``steps[-1]`` if it never settles before the end.
    """
    steps = np.asarray(steps)
    d = np.asarray(distance_to_final, dtype=float)
    if steps.shape != d.shape or d.ndim != 1 or d.size == 0:
        raise ValueError(f"steps and distance_to_final must be 1-d of equal length, got {steps.shape} and {d.shape}")
    if not 0 < tolerance < 1:
        raise ValueError(f"tolerance must be in (0, 1), got {tolerance!r}")
    if d[0] == 0:
        return int(steps[0])
    outside = np.flatnonzero(d > tolerance * d[0])
    if outside.size == 0:
        return int(steps[0])
    last_outside = outside[-1]
    return int(steps[min(last_outside + 1, len(steps) - 1)])


# ---------------------------------------------------------------------------------------------
# One training run with every measurement
# ---------------------------------------------------------------------------------------------


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
        """Return ``(frame_step, value_step)`` by the distance-to-final criterion (:func:`settling_step`)."""
        return (settling_step(self.steps, self.frame_distance, tolerance),
                settling_step(self.steps, self.value_distance, tolerance))

    def head_at(self, index: int = -1, dtype: torch.dtype = torch.float64) -> SingleHeadParams:
        """Return the head's parameters at checkpoint ``index`` (default: the end of training)."""
        return SingleHeadParams(**{k: torch.as_tensor(v[index], dtype=dtype) for k, v in self.param_history.items()})


TASK_DEFAULTS = {"n_sources": 4, "n_queries": 4, "n_tags": 8, "n_labels": 8}


def quiescence_step(steps: np.ndarray, change: np.ndarray, threshold: float) -> tuple[int, bool]:
    """Return ``(step, settled)``: the first step from which every later windowed change is ≤ ``threshold``.

    ``change[t]`` is how much a quantity moves in a fixed window starting at ``steps[t]``. If
    even the last window moves more than ``threshold`` the quantity has not settled by the end
    of the run: the result is ``(steps[-1] + window, False)`` with window = ``steps[1] − steps[0]``
    (a lower bound on the true settling step, i.e. a censored time).
    """
    steps = np.asarray(steps)
    change = np.asarray(change, dtype=float)
    if steps.shape != change.shape or change.ndim != 1 or change.size == 0:
        raise ValueError(f"steps and change must be 1-d of equal length, got {steps.shape} and {change.shape}")
    if not threshold > 0:
        raise ValueError(f"threshold must be positive, got {threshold!r}")
    above = np.flatnonzero(change > threshold)
    if above.size == 0:
        return int(steps[0]), True
    if above[-1] == len(steps) - 1:
        spacing = int(steps[1] - steps[0]) if len(steps) > 1 else 0
        return int(steps[-1]) + spacing, False
    return int(steps[above[-1] + 1]), True


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
    trains on.
    """
    steps = check_positive_int("steps", steps)
    record_every = check_positive_int("record_every", record_every)
    settle_window = check_positive_int("settle_window", settle_window)
    if steps % record_every or settle_window % record_every:
        raise ValueError(f"steps ({steps}) and settle_window ({settle_window}) must be multiples of record_every ({record_every})")
    if settle_window >= steps:
        raise ValueError(f"settle_window ({settle_window}) must be shorter than the run ({steps} steps)")
    sizes = {**TASK_DEFAULTS, **(task_sizes or {})}
    data_gen = torch_generator(seed if data_seed is None else data_seed)
    train = task.sample_specialization_batch(n_train, generator=data_gen, **sizes)
    probe = task.sample_specialization_batch(n_probe, generator=data_gen, **sizes)
    d_in = task.input_dim(sizes["n_tags"], sizes["n_labels"])
    init = init_single_head(d_in, d_k, d_v, sizes["n_labels"], std=init_std, generator=torch_generator(seed))
    model = TrainableSingleHead(init)
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

    def measure(step: int, module: TrainableSingleHead, loss: float) -> dict[str, Any] | None:
        if step in path_at:
            with torch.no_grad():
                fwd = task.query_forward(module.params, probe)
                path.append((step, fwd.alpha[:, K:].clone(), fwd.v[:, :K].clone()))
        if step % record_every and step != steps:
            return None
        with torch.no_grad():
            p = module.params
            fwd = task.query_forward(p, probe)
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
                  loss_fn=lambda module, batch: task.query_loss(module.params, batch),
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
                    data_seed=seed if data_seed is None else data_seed, path_every=path_every,
                    freeze_routing_at=freeze_routing_at, **sizes)
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


def frame_precision_summary(runs: Sequence[SpecializationRun], threshold: float = 0.01) -> dict[str, Any]:
    """Return per-run settling steps (rate criterion) and their summary over runs (seeds).

    Keys: ``frame_steps``, ``value_steps`` (arrays; a run that has not settled counts as the
    end of its run, a lower bound), ``unsettled`` (number of such censored times),
    ``frame_first_fraction`` (fraction of runs whose frame settles strictly before their
    values), ``time_ratios`` (value step / frame step per run) and ``median_time_ratio``.
    """
    if not runs:
        raise ValueError("need at least one run")
    pairs = [r.settling_steps(threshold) for r in runs]
    frame = np.array([f for (f, _), _ in pairs], dtype=float)
    value = np.array([v for _, (v, _) in pairs], dtype=float)
    unsettled = sum((not fs) + (not vs) for (_, fs), (_, vs) in pairs)
    ratios = value / np.maximum(frame, 1.0)
    return {
        "frame_steps": frame,
        "value_steps": value,
        "unsettled": int(unsettled),
        "frame_first_fraction": float(np.mean(frame < value)),
        "time_ratios": ratios,
        "median_time_ratio": float(np.median(ratios)),
    }


def milestone_indices(curve: np.ndarray, fractions: Sequence[float]) -> list[int]:
    """Return, for each fraction f, the first index at which ``curve`` has covered f of its rise from start to end."""
    curve = np.asarray(curve, dtype=float)
    start, end = curve[0], curve[-1]
    if end == start:
        return [0 for _ in fractions]
    progress = (curve - start) / (end - start)
    return [int(np.argmax(progress >= f)) for f in fractions]


def prototype_trajectories(run: SpecializationRun, n_components: int = 2) -> tuple[np.ndarray, np.ndarray]:
    """Return ``(coords, explained)``: the label prototypes projected on their principal components.

    ``coords`` ``(n_ckpt, C, n_components)`` are the rows of W_V on the label block at every
    checkpoint, projected on the principal axes fitted to the final prototypes (so the end state
    is shown in its own best 2-d view); ``explained`` ``(n_components,)`` the fraction of the
    final prototypes' variance each axis carries.
    """
    from sklearn.decomposition import PCA

    final = run.label_prototypes[-1]  # (C, d_v)
    pca = PCA(n_components=n_components).fit(final)
    n_ckpt, C, d_v = run.label_prototypes.shape
    coords = pca.transform(run.label_prototypes.reshape(-1, d_v)).reshape(n_ckpt, C, n_components)
    return coords, pca.explained_variance_ratio_


# ---------------------------------------------------------------------------------------------
# The rich-get-richer threshold: how a value step changes the advantage (issue 16, item 2)
# ---------------------------------------------------------------------------------------------


@dataclass
class AdvantageChange:
    """The first-order change of the query rows' advantages under the value-only step (rates d/deta).

    The step moves every value by ``Δv_j = eta w_j`` with ``w_j = −Σ_i' alpha_i'j u_i'`` (the value
    law), the attention held (scores do not move). The advantage ``A_ij = Σ_j' alpha_ij' b_ij' − b_ij``
    (:func:`attention_dynamics.gradients.advantage`; positive: the score rises) then changes at the rate
    ``dA_ij/deta = self_term + cross_term + response_term``, all ``(B, Q, T)`` over the query rows:

    - ``self_term = |u_i|² (alpha_ij − Σ_j' alpha_ij'²)``: query i's own pull on the values. Alone, it
      makes A_ij grow exactly when alpha_ij exceeds Σ_j' alpha_ij'² (rich get richer);
    - ``cross_term = c_ij − Σ_j' alpha_ij' c_ij'`` with ``c_ij = Σ_{i'≠i} alpha_i'j u_i·u_i'``: the pull
      of the other queries that share the values;
    - ``response_term = du_i·(g_i − v_j)``: the error signal's own change, ``du_i = H_i dg_i`` with
      ``dg_i = Σ_j alpha_ij w_j`` and ``H_i = W_O (diag p_i − p_i p_iᵀ) W_Oᵀ / N`` (the readout's
      response to the moved values; the paper's u-fixed picture leaves it out).

    ``threshold = alpha_ij − Σ_j' alpha_ij'²``; ``mask`` ``(Q, T)``: True where key j ≤ query i.
    """

    alpha: torch.Tensor
    advantage: torch.Tensor
    self_term: torch.Tensor
    cross_term: torch.Tensor
    response_term: torch.Tensor
    threshold: torch.Tensor
    mask: torch.Tensor

    @property
    def total(self) -> torch.Tensor:
        """Return the whole first-order rate ``dA_ij/deta`` ``(B, Q, T)``."""
        return self.self_term + self.cross_term + self.response_term


def _centred_rows(c: torch.Tensor, alpha: torch.Tensor) -> torch.Tensor:
    """Return ``c_ij − Σ_j' alpha_ij' c_ij'`` (zero where alpha is 0)."""
    out = c - (alpha * c).sum(-1, keepdim=True)
    return torch.where(alpha > 0, out, torch.zeros((), dtype=c.dtype))


def advantage_change_rate(params: SingleHeadParams, batch: SpecializationBatch) -> AdvantageChange:
    """Return the :class:`AdvantageChange` of the value-only step on ``batch`` (closed form; use float64)."""
    with torch.no_grad():
        fwd = task.query_forward(params, batch)
        K = batch.n_sources
        alpha, u, v = fwd.alpha, fwd.u, fwd.v  # (B, T, T), (B, T, d_v) with u = 0 on sources
        w = -responsibility_weighted_value_gradient(alpha, u)  # (B, T, d_v): dv_j/deta
        uu = u @ u.transpose(-1, -2)  # (B, T, T): u_i·u_i'
        a_q = alpha[:, K:]  # (B, Q, T)
        u_sq = (u[:, K:] ** 2).sum(-1, keepdim=True)  # (B, Q, 1)
        purity = (a_q ** 2).sum(-1, keepdim=True)  # Σ_j' alpha_ij'²
        threshold = torch.where(a_q > 0, a_q - purity, torch.zeros((), dtype=a_q.dtype))
        self_term = u_sq * threshold
        c_all = (uu @ alpha)[:, K:]  # Σ_i' (u_i·u_i') alpha_i'j, every i' (u = 0 on sources)
        cross = c_all - u_sq * a_q  # leave out i' = i
        cross_term = _centred_rows(cross, a_q)
        dg = (a_q @ w)  # (B, Q, d_v)
        p = fwd.p[:, K:]  # (B, Q, C)
        dz = dg @ params.W_O  # (B, Q, C)
        dp = p * dz - p * (p * dz).sum(-1, keepdim=True)
        du = dp @ params.W_O.transpose(0, 1) / batch.targets.numel()  # (B, Q, d_v)
        r = du @ v.transpose(-1, -2)  # (B, Q, T): du_i·v_j
        response_term = -_centred_rows(r, a_q)  # du_i·(g_i − v_j)
        A = advantage(a_q, compatibility(u[:, K:], v))
    T = batch.x.shape[1]
    return AdvantageChange(alpha=a_q, advantage=A, self_term=self_term, cross_term=cross_term,
                           response_term=response_term, threshold=threshold,
                           mask=torch.ones(T, T, dtype=torch.bool).tril()[K:])


def advantage_after_value_step(params: SingleHeadParams, batch: SpecializationBatch, eta: float) -> torch.Tensor:
    """Return the query rows' advantages ``(B, Q, T)`` after a real value-only step of size ``eta``.

    Independent of :func:`advantage_change_rate`: the error signal after the step is recomputed by
    autograd of the query loss with respect to the mixtures g (attention held).
    """
    with torch.no_grad():
        fwd = task.query_forward(params, batch)
        K = batch.n_sources
        v_new = fwd.v - eta * responsibility_weighted_value_gradient(fwd.alpha, fwd.u)
    with torch.enable_grad():
        g_new = (fwd.alpha @ v_new).requires_grad_(True)
        loss = task.query_cross_entropy(g_new[:, K:] @ params.W_O, batch)
        (u_new,) = torch.autograd.grad(loss, g_new)
    return advantage(fwd.alpha[:, K:], compatibility(u_new[:, K:], v_new)).detach()


def advantage_change_autograd(params: SingleHeadParams, batch: SpecializationBatch) -> torch.Tensor:
    """Return ``dA_ij/deta`` at eta = 0 ``(B, Q, T)`` by forward-mode autograd through a real value step.

    The error signal is the autograd gradient of the query loss with respect to the mixtures, so this
    shares nothing with the closed form of :func:`advantage_change_rate` but the forward pass.
    """
    from torch.func import grad, jvp

    with torch.no_grad():
        fwd = task.query_forward(params, batch)
        K = batch.n_sources
        alpha = fwd.alpha
        w = -responsibility_weighted_value_gradient(alpha, fwd.u)
        v0 = fwd.v

    def loss_of_g(g: torch.Tensor) -> torch.Tensor:
        return task.query_cross_entropy(g[:, K:] @ params.W_O, batch)

    def adv(eta: torch.Tensor) -> torch.Tensor:
        v = v0 + eta * w
        u = grad(loss_of_g)(alpha @ v)
        return advantage(alpha[:, K:], compatibility(u[:, K:], v))

    zero = torch.zeros((), dtype=v0.dtype)
    return jvp(adv, (zero,), (torch.ones((), dtype=v0.dtype),))[1].detach()


def advantage_change_along_training(run: "SpecializationRun", batch: SpecializationBatch) -> dict[str, np.ndarray]:
    """Return, at every checkpoint of ``run``, which attended keys gain advantage under a value step.

    Keys (arrays over checkpoints, fractions of attended (query, key) pairs): ``gain_correct``
    / ``gain_other_source`` / ``gain_query_key``: the share whose total first-order change
    ``dA/deta`` is positive, for the key holding the answer, the other sources and earlier queries;
    ``rule_agreement``: the share whose total change has the sign of ``alpha_ij − Σ alpha_ij'²`` (the
    rich-get-richer rule); ``correct_rich``: the share of correct-source pairs above that threshold;
    ``self_share``: ``Σ|self_term| / (Σ|self| + Σ|cross| + Σ|response|)``. ``steps``: the checkpoints.
    """
    K = batch.n_sources
    correct = F.one_hot(batch.correct_source, batch.x.shape[1]).bool()  # (B, Q, T)
    is_source = torch.zeros(batch.x.shape[1], dtype=torch.bool)
    is_source[:K] = True
    out: dict[str, list[float]] = {k: [] for k in ("gain_correct", "gain_other_source", "gain_query_key",
                                                   "rule_agreement", "correct_rich", "self_share")}
    for index in range(len(run.steps)):
        ch = advantage_change_rate(run.head_at(index), batch)
        attended = (ch.alpha > 0) & ((ch.alpha > 0).sum(-1, keepdim=True) >= 2)
        gain = ch.total > 0
        other = attended & is_source & ~correct
        queries = attended & ~is_source
        out["gain_correct"].append(float(gain[attended & correct].double().mean()))
        out["gain_other_source"].append(float(gain[other].double().mean()))
        out["gain_query_key"].append(float(gain[queries].double().mean()) if queries.any() else float("nan"))
        decided = attended & (ch.total != 0) & (ch.threshold != 0)
        out["rule_agreement"].append(float((torch.sign(ch.total[decided]) == torch.sign(ch.threshold[decided]))
                                           .double().mean()))
        out["correct_rich"].append(float((ch.threshold[attended & correct] > 0).double().mean()))
        parts = [t[attended].abs().sum() for t in (ch.self_term, ch.cross_term, ch.response_term)]
        out["self_share"].append(float(parts[0] / sum(parts)))
    return {"steps": np.asarray(run.steps), **{k: np.array(v) for k, v in out.items()}}


def plot_advantage_change(trace: dict[str, np.ndarray], *, axes=None):
    """Plot :func:`advantage_change_along_training`: who gains advantage, and how often the rule predicts it."""
    from . import plotting

    if axes is None:
        _, axes = plotting.new_figure(2, width=4.4, height=3.2)
    steps = trace["steps"]
    ax = axes[0]
    for key, label, colour in (("gain_correct", "the source holding the answer", 0),
                               ("gain_other_source", "the other sources", 1),
                               ("gain_query_key", "earlier queries", 2)):
        ax.plot(steps, trace[key], color=plotting.PALETTE[colour], label=label)
    ax.set(title="keys gaining advantage under a value step", xlabel="training step",
           ylabel="share of attended pairs with dA/dη > 0", ylim=(-0.02, 1.02))
    ax.legend(loc="best", fontsize=8)
    ax = axes[1]
    ax.plot(steps, trace["rule_agreement"], color=plotting.PALETTE[3],
            label=r"sign of dA/dη = sign of $\alpha_{ij} - \sum_{j'} \alpha_{ij'}^2$")
    ax.plot(steps, trace["correct_rich"], color=plotting.PALETTE[0], ls="--",
            label="answer's source above the threshold")
    ax.plot(steps, trace["self_share"], color=plotting.PALETTE[4], ls=":", label="self term's share of |dA/dη|")
    ax.axhline(0.5, color="grey", lw=0.8)
    ax.set(title="the rich-get-richer rule", xlabel="training step", ylabel="fraction", ylim=(-0.02, 1.02))
    ax.legend(loc="best", fontsize=8)
    return axes


# ---------------------------------------------------------------------------------------------
# The free-activation picture along training of the sticky-chain head (issue 16, item 1)
# ---------------------------------------------------------------------------------------------


def weight_step_along_training(
    seed: int = 42, *, schedule: str = "sgd", steps: int = 1000, every: int = 100, eta: float = 0.01,
    length: int = 2000,
) -> dict[str, Any]:
    """Return how far the free-activation laws are from a real weight step, along training of the sticky head.

    The paper's sticky-chain head (chapter 5; :func:`attention_dynamics.experiments.em_vs_sgd.train_sticky_head`'s
    data, initialisation and ``schedule``) is trained for ``steps`` steps; every ``every`` steps and at
    the end, :func:`attention_dynamics.gradients.weight_step_check` takes one step of size ``eta`` on
    its weights (float64) and returns the share of attended pairs whose attention moves with the sign of
    their advantage (``sign_agreement``) and the cosine of the law's Δv with the actual one
    (``value_cosine``). The same is measured on a reference input set where the two value pictures
    coincide: ``d_in`` orthonormal inputs (``ref_*``; labels: the sequence's first ``d_in`` targets).
    Returns lists keyed ``steps``, ``loss``, ``sign_agreement``, ``value_cosine``,
    ``ref_sign_agreement``, ``ref_value_cosine``, and ``settings``.
    """
    from .experiments import em_vs_sgd as sticky
    from .gradients import weight_step_check
    from .training.head_engine import SingleHeadModule
    from .training.schedules import get_schedule, make_backward, make_optimizer
    from .tasks import sticky_chain

    sched = get_schedule(schedule)
    data = sticky_chain.make_sticky_chain_data(seed, length=length)
    model = SingleHeadModule(sticky.initial_head(seed))
    d_in = data.x.shape[-1]
    basis = torch.linalg.qr(torch.randn(d_in, d_in, generator=torch_generator(seed), dtype=torch.float64))[0]
    ref_y = data.y[:d_in]

    def measure(step: int, m: SingleHeadModule, loss: float) -> dict[str, Any]:
        params = m.head_params()
        real = weight_step_check(data.x, params, data.y, eta=eta)
        ref = weight_step_check(basis, params, ref_y, eta=eta)
        return {"sign_agreement": real["sign_agreement"], "value_cosine": real["value_cosine"],
                "ref_sign_agreement": ref["sign_agreement"], "ref_value_cosine": ref["value_cosine"]}

    history = fit(model, lambda step: (data.x, data.y), steps=steps, optimizer=make_optimizer(model, sched),
                  backward=make_backward(sched), callback=measure, callback_steps=range(0, steps, every))
    recs = history.records
    losses = list(history.losses)
    out: dict[str, Any] = {"steps": [r["step"] for r in recs],
                           "loss": [losses[min(r["step"], steps - 1)] for r in recs]}
    for key in ("sign_agreement", "value_cosine", "ref_sign_agreement", "ref_value_cosine"):
        out[key] = [r[key] for r in recs]
    out["settings"] = dict(seed=seed, schedule=sched.name, steps=steps, every=every, eta=eta, length=length)
    return out


def plot_weight_step_along_training(traces: dict[str, dict[str, Any]], *, axes=None):
    """Plot :func:`weight_step_along_training` traces (one per schedule): sign agreement and value cosine."""
    from . import plotting

    if axes is None:
        _, axes = plotting.new_figure(2, width=4.2, height=3.1)
    for n, (name, tr) in enumerate(traces.items()):
        colour = plotting.PALETTE[n]
        axes[0].plot(tr["steps"], tr["sign_agreement"], color=colour, marker="o", ms=3, label=f"{name}: sticky chain")
        axes[0].plot(tr["steps"], tr["ref_sign_agreement"], color=colour, ls="--", label=f"{name}: orthonormal inputs")
        axes[1].plot(tr["steps"], tr["value_cosine"], color=colour, marker="o", ms=3, label=f"{name}: sticky chain")
        axes[1].plot(tr["steps"], tr["ref_value_cosine"], color=colour, ls="--", label=f"{name}: orthonormal inputs")
    axes[0].axhline(0.5, color="grey", lw=0.8)
    axes[0].set(title="attention moves with the advantage", xlabel="training step",
                ylabel="share of attended pairs", ylim=(0.3, 1.02))
    axes[1].set(title="value step: law vs real", xlabel="training step", ylabel="cos(law Δv, actual Δv)",
                ylim=(-0.05, 1.05))
    axes[0].legend(fontsize=7, loc="lower right")
    return axes
