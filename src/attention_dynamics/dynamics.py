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
) -> SpecializationRun:
    """Return a :class:`SpecializationRun`: full-batch gradient descent on the recall task, measured.

    The head (init N(0, init_std²), seeded by ``seed``) is trained by plain SGD on a fixed training
    set of ``n_train`` sequences; routing (W_Q, W_K) and readout (W_O) use ``lr``, the values
    (W_V) ``lr · value_lr_ratio``; matrices named in ``frozen`` keep their initial values (for
    ablations). Every ``record_every`` steps the E-step, M-step and specialization measures are
    taken on a fixed probe set of ``n_probe`` sequences. ``data_seed`` (default: ``seed``) draws
    the data, so runs can share a task and differ only in initialisation.
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

    def measure(step: int, module: TrainableSingleHead, loss: float) -> dict[str, Any]:
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

    history = fit(model, lambda step: train, steps=steps, optimizer=optimizer,
                  loss_fn=lambda module, batch: task.query_loss(module.params, batch),
                  callback=measure, callback_steps=range(0, steps, record_every))
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
                    data_seed=seed if data_seed is None else data_seed, **sizes)
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
