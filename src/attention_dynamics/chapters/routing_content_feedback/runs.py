"""Chapter 3's runs: the full head and its two frozen variants on the recall task, and the measures read along them
(the correct source's advantage, the value-step ratios, the compatibility and advantage changes)."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np
import torch
import torch.nn.functional as F
from sklearn.decomposition import PCA

from ...science import dynamics
from ...science.dynamics import advantage_change_rate
from ...science.settling import first_true
from ...tasks.specialization import SpecializationBatch
from ...training import map_parallel
from ...training.recall_head import SpecializationRun, train_specialization_head
from .settings import ETAS, MILESTONES, VARIANTS, RoutingSettings

__all__ = [
    "correct_responsibilities",
    "run_settings",
    "train_variants",
    "advantage_curve",
    "first_step_reaching",
    "milestones",
    "moments",
    "value_step_ratios",
    "compatibility_changes",
    "advantage_change_errors",
    "milestone_indices",
    "prototype_trajectories",
    "advantage_change_along_training",
]


def correct_responsibilities(example: SpecializationBatch, index: int = 0) -> torch.Tensor:
    """Return the ``(T, T)`` ground-truth responsibilities of sequence ``index``: zero on the source rows, and on
    each query row a single 1 on the source whose tag it requests."""
    K, T = example.n_sources, example.n_sources + example.n_queries
    truth = torch.zeros(T, T)
    truth[K:] = example.responsibility[index]
    return truth


def run_settings(cfg: RoutingSettings, seed: int) -> dict[str, Any]:
    """Return the keyword arguments of :func:`train_specialization_head` shared by the chapter's runs (the settling
    window is five checkpoints)."""
    return dict(seed=seed, steps=cfg.steps, lr=cfg.lr, n_train=cfg.n_train, n_probe=cfg.n_probe,
                record_every=cfg.record_every, settle_window=5 * cfg.record_every)


def train_variants(common: Mapping[str, Any]) -> dict[str, SpecializationRun]:
    """Return one run per :data:`VARIANTS` (full head, values frozen, routing frozen), trained in parallel with the
    settings ``common``."""
    runs = dict(zip(VARIANTS, map_parallel(train_specialization_head,
                                           [dict(common, frozen=f) for f in VARIANTS.values()])))
    return runs


def advantage_curve(run: SpecializationRun, batch: SpecializationBatch) -> np.ndarray:
    """Return the correct source's advantage (:func:`dynamics.correct_source_advantage`) at every checkpoint."""
    return np.array([dynamics.correct_source_advantage(run.head_at(i), batch) for i in range(len(run.steps))])


def first_step_reaching(run: SpecializationRun, curve: np.ndarray, threshold: float) -> int | None:
    """Return the first checkpoint step at which ``curve`` is at least ``threshold``, or None if it never is."""
    i = first_true(np.asarray(curve) >= threshold)
    return None if i is None else int(run.steps[i])


def milestones(run: SpecializationRun) -> list[int]:
    """Return the checkpoint indices at which the E-step quality has covered each share of :data:`MILESTONES`."""
    return milestone_indices(run.correct_mass, MILESTONES)


def moments(run: SpecializationRun) -> dict[str, int]:
    """Return the checkpoint indices of initialisation, the middle of the routing transition and the end."""
    return {"initialisation": 0, "routing transition": milestones(run)[1], "end of training": len(run.steps) - 1}


def value_step_ratios(run: SpecializationRun, batch: SpecializationBatch, etas: Sequence[float] = ETAS):
    """Return ``(ratio_curves, bounds)``: per moment of :func:`moments`, the actual / predicted loss change of a
    value-only step for each of ``etas`` (:func:`dynamics.value_step_ratio_curve`) and the curvature bound λ."""
    ratio_curves, bounds = {}, {}
    for name, i in moments(run).items():
        head = run.head_at(i)
        ratio_curves[name] = dynamics.value_step_ratio_curve(head, batch, etas)
        bounds[name] = dynamics.value_step_curvature_bound(head, batch)
    return ratio_curves, bounds


def compatibility_changes(run: SpecializationRun, batch: SpecializationBatch, eta: float):
    """Return ``(changes, error_curve)``: :func:`dynamics.compatibility_change_after_value_step` at each moment of
    :func:`moments`, and its relative error at every checkpoint."""
    changes = {name: dynamics.compatibility_change_after_value_step(run.head_at(i), batch, eta)
               for name, i in moments(run).items()}
    curve = np.array([dynamics.compatibility_change_after_value_step(run.head_at(i), batch, eta).relative_error
                      for i in range(len(run.steps))])
    return changes, curve


def advantage_change_errors(run: SpecializationRun, batch: SpecializationBatch) -> tuple[list[float], list[float]]:
    """Return ``(errors, scales)`` per checkpoint: max |closed-form dA/dη − forward-mode autograd| and the largest
    |dA/dη| (:func:`dynamics.advantage_change_rate` against :func:`dynamics.advantage_change_autograd`)."""
    errors, scales = [], []
    for i in range(len(run.steps)):
        head = run.head_at(i)
        closed = dynamics.advantage_change_rate(head, batch).total
        exact = dynamics.advantage_change_autograd(head, batch)
        errors.append(float((closed - exact).abs().max()))
        scales.append(float(exact.abs().max()))
    return errors, scales


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
    final = run.label_prototypes[-1]  # (C, d_v)
    pca = PCA(n_components=n_components).fit(final)
    n_ckpt, C, d_v = run.label_prototypes.shape
    coords = pca.transform(run.label_prototypes.reshape(-1, d_v)).reshape(n_ckpt, C, n_components)
    return coords, pca.explained_variance_ratio_


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
