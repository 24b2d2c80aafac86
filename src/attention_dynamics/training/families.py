"""Any model family trained and evaluated on any wind tunnel (chapter 7, and every stored run built on it).

The registered parameter-matched families (:mod:`attention_dynamics.models.registry`, built by
:mod:`attention_dynamics.models.factory`) meet the tunnels behind one
interface (:mod:`attention_dynamics.tasks.wind_tunnels`): :func:`train_and_evaluate` trains one family on one task
from fresh batches with the book's one loop (:func:`~attention_dynamics.training.fit`) and measures it against the
exact posterior on a held-out set; :func:`compare_architectures` runs the grid of families × tasks on every core
the process may use. Calibration errors in bits, accuracies as fractions, losses in nats.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import torch
import torch.nn as nn

from ..core.seeding import stream, torch_generator
from ..core.settings import check_positive_int
from ..models import count_parameters
from ..models.factory import build_model, matched_width
from ..models.registry import family as family_entry, family_names
from ..science import calibration, stats
from ..tasks.wind_tunnels import TaskBatch, WindTunnel, prediction_logits, task_loss
from .loop import fast_adamw, fit, map_parallel
from .routing import check_routing, freeze_query_key, zero_query_key
from .schedules import warmup_cosine

__all__ = [
    "initial_model",
    "RunResult",
    "evaluation_seed",
    "evaluation_batch",
    "evaluation_report",
    "evaluate",
    "train_and_evaluate",
    "compare_architectures",
    "MEASURED_CURVE_POINTS",
    "curve_blocks",
    "train_and_measure",
]


@dataclass
class RunResult:
    """What one training run returns (plain data, so it crosses process boundaries).

    ``metrics``: ``entropy_mae_bits``, ``curve_mae_bits``, ``kl_bits`` (against the exact posterior)
    and ``accuracy`` (top-1 against the sampled answer; ``nan`` for the HMM), on the evaluation set.
    ``losses``: the training loss (nats) at every step. ``state_dict``: the trained weights when kept.
    ``cpu_seconds``: CPU time of the run's process (for budgeting; machine-dependent, never shown in the book).
    ``kl_by_position``: KL(posterior ‖ model) in bits at each prediction position ``(P,)``, averaged over sequences.
    """

    family: str
    task: WindTunnel
    seed: int
    width: int
    n_params: int
    steps: int
    metrics: dict[str, float]
    losses: np.ndarray
    state_dict: dict[str, torch.Tensor] | None = None
    cpu_seconds: float = float("nan")
    kl_by_position: np.ndarray | None = None

    def initial_model(self) -> nn.Module:
        """Return the model as it was before training (the same seeded initialisation), in eval mode."""
        return _seeded_model(self.family, self.task, self.width, self.seed).eval()

    def model(self) -> nn.Module:
        """Return the trained model rebuilt from ``state_dict`` (in eval mode)."""
        if self.state_dict is None:
            raise ValueError("this run did not keep its weights (keep_state=False)")
        model = build_model(self.family, self.task, self.width)
        model.load_state_dict(self.state_dict)
        return model.eval()


def _seeded_model(family: str, task: WindTunnel, width: int, seed: int) -> nn.Module:
    torch.manual_seed(seed)  # model initialisation (mambapy also draws its Δ initialisation from the global RNG)
    return build_model(family, task, width)


def initial_model(family: str, task: WindTunnel, target_params: int, seed: int) -> nn.Module:
    """Return the untrained, parameter-matched model a run of ``family`` on ``task`` with ``seed`` starts from."""
    return _seeded_model(family, task, matched_width(family, task, target_params), seed)


def evaluation_seed(seed: int, task_index: int) -> int:
    """Return the seed of the evaluation set of the ``task_index``-th task of a comparison started from ``seed``."""
    return stream(seed, "heldout", task_index)


def evaluation_batch(task: WindTunnel, n_sequences: int, eval_seed: int) -> TaskBatch:
    """Return the evaluation set of ``task``: ``n_sequences`` drawn with their own seed (the same for every model)."""
    return task.sample(n_sequences, generator=torch_generator(eval_seed))


@torch.no_grad()
def evaluation_report(model: nn.Module, batch: TaskBatch, *, chunk: int = 256) -> tuple[dict[str, float], calibration.CalibrationReport]:
    """Return ``(metrics, calibration report)`` of the model on ``batch`` (metrics as in :class:`RunResult`)."""
    model.eval()
    device = next(model.parameters()).device
    log_probs = torch.cat([
        torch.log_softmax(prediction_logits(model, _to(_slice(batch, i, i + chunk), device)).double(), dim=-1).cpu()
        for i in range(0, len(batch), chunk)
    ])  # (B, P, C)
    report = calibration.calibration_report(batch.posterior, log_probs)
    metrics = report.as_dict()
    if batch.targets is not None:
        metrics["accuracy"] = float((log_probs.argmax(-1) == batch.targets).double().mean())
    else:
        metrics["accuracy"] = float("nan")
    return metrics, report


def evaluate(model: nn.Module, batch: TaskBatch, *, chunk: int = 256) -> dict[str, float]:
    """Return the model's calibration (bits) and accuracy on ``batch`` (see :class:`RunResult`)."""
    return evaluation_report(model, batch, chunk=chunk)[0]


def _to(batch: TaskBatch, device: torch.device | str) -> TaskBatch:
    return TaskBatch(inputs=batch.inputs.to(device), positions=batch.positions.to(device),
                     targets=None if batch.targets is None else batch.targets.to(device),
                     posterior=batch.posterior.to(device), extra=batch.extra)


def _slice(batch: TaskBatch, start: int, stop: int) -> TaskBatch:
    return TaskBatch(inputs=batch.inputs[start:stop], positions=batch.positions,
                     targets=None if batch.targets is None else batch.targets[start:stop],
                     posterior=batch.posterior[start:stop],
                     extra={k: v[start:stop] for k, v in batch.extra.items()})


def train_and_evaluate(
    *,
    family: str,
    task: WindTunnel,
    target_params: int,
    steps: int,
    batch_size: int,
    lr: float,
    seed: int,
    eval_sequences: int,
    eval_seed: int,
    warmup_fraction: float = 0.05,
    keep_state: bool = False,
    device: str = "cpu",
    routing: str = "learned",
) -> RunResult:
    """Train one parameter-matched model on one task from fresh batches; return its :class:`RunResult`.

    AdamW (weight decay 0.01) with linear warm-up and cosine decay of ``lr``, gradient clipping at 1,
    one fresh batch of ``batch_size`` sequences per step (drawn on the CPU, then moved to ``device``);
    everything seeded by ``seed``. The model is evaluated on the task's evaluation set
    (``eval_sequences`` drawn with ``eval_seed``). ``routing``: a control of
    :data:`~attention_dynamics.training.routing.ROUTING_CONTROLS` for a family with attention (its query and key
    weights kept at initialisation, or at zero: uniform attention).
    """
    steps = check_positive_int("steps", steps)
    check_routing(routing, None)
    started = time.process_time()
    width = matched_width(family, task, target_params)
    model = _seeded_model(family, task, width, seed).to(device)
    hold = None
    if routing != "learned":
        if not hasattr(model, "attention_modules"):
            raise ValueError(f"the {family} family has no attention routing to remove (routing={routing!r})")
        if routing == "uniform":
            zero_query_key(model)
        hold = freeze_query_key(model)
        hold(True)
    data = torch_generator(stream(seed, "data"))
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    schedule = warmup_cosine(optimizer, steps, max(1, int(warmup_fraction * steps)))

    def batches(step: int) -> TaskBatch:
        if hold is not None:
            hold(False)  # the routing rows back where they were held (the optimiser moved them)
        return _to(task.sample(batch_size, generator=data), device)

    history = fit(model, batches, steps=steps, optimizer=optimizer, loss_fn=task_loss, scheduler=schedule,
                  grad_clip=1.0)
    if hold is not None:
        hold(False)
    metrics, report = evaluation_report(model, evaluation_batch(task, eval_sequences, eval_seed))
    state = {k: v.detach().cpu().clone() for k, v in model.state_dict().items()} if keep_state else None
    return RunResult(family=family, task=task, seed=seed, width=width, n_params=count_parameters(model),
                     steps=steps, metrics=metrics, losses=history.losses, state_dict=state,
                     cpu_seconds=time.process_time() - started, kl_by_position=report.kl_by_position)


def compare_architectures(
    tasks: Sequence[WindTunnel],
    *,
    families: Sequence[str] | None = None,
    target_params: int,
    steps: Mapping[str, int] | int,
    batch_size: int,
    lr: float,
    seed: int,
    eval_sequences: int,
    keep_state: Callable[[str, str], bool] = lambda family, task: False,
    processes: int | None = None,
    device: str = "cpu",
) -> dict[tuple[str, str], RunResult]:
    """Return ``{(family, task name): RunResult}`` for every family × task, run in parallel on all cores.

    ``families``: default every registered family (:func:`~attention_dynamics.models.registry.family_names`). ``steps``
    may differ per family (a mapping family → steps). Every run of a task is evaluated on
    the same evaluation set; every model starts from ``seed``. On a GPU the runs go one after another.
    """
    jobs, keys = [], []
    families = family_names() if families is None else families
    for t_index, task in enumerate(tasks):
        for family in families:
            n_steps = steps[family] if isinstance(steps, Mapping) else steps
            jobs.append(dict(family=family, task=task, target_params=target_params, steps=n_steps,
                             batch_size=batch_size, lr=lr, seed=seed, eval_sequences=eval_sequences,
                             eval_seed=evaluation_seed(seed, t_index), keep_state=keep_state(family, task.name),
                             device=str(device)))
            keys.append((family, task.name))
    # Longest jobs first, so the two cores finish together.
    order = sorted(range(len(jobs)), key=lambda i: -_job_cost(jobs[i]))
    if torch.device(device).type != "cpu":
        processes = 1
    results = map_parallel(train_and_evaluate, [jobs[i] for i in order], processes=processes)
    by_key = {keys[i]: r for i, r in zip(order, results)}
    return {k: by_key[k] for k in keys}


def _job_cost(job: dict[str, Any]) -> float:
    return family_entry(job["family"]).step_cost * job["steps"] * job["task"].sequence_length


#: :func:`train_and_measure` stores its training curves as the mean over this many equal blocks of steps.
MEASURED_CURVE_POINTS = 100


def curve_blocks(curve: Sequence[float], n: int = MEASURED_CURVE_POINTS) -> list[float]:
    """Return ``curve`` averaged over ``n`` equal blocks of steps (fewer if it is shorter)."""
    curve = np.asarray(curve, dtype=float)
    return [float(block.mean()) for block in np.array_split(curve, min(n, len(curve)))]


def train_and_measure(family: str, task: Any, *, target_params: int, steps: int, batch_size: int, lr: float, seed: int,
                      eval_batch: TaskBatch, fused_adamw: bool = False, fused_attention: bool = False,
                      warmup_fraction: float = 0.05) -> dict[str, Any]:
    """Train one parameter-matched model of ``family`` on ``task``; return its measurements as plain data.

    :func:`train_and_evaluate`'s training (the same matched sizes, initialisation, data stream, AdamW with weight
    decay 0.01, warm-up and cosine decay, clipping), recording the exact KL on each step's fresh batch (the plateau
    evidence of a verdict). ``task``: a :class:`~attention_dynamics.tasks.wind_tunnels.WindTunnel` or any object with
    ``sample(n, generator=)`` returning a :class:`TaskBatch` and the sizes
    :func:`~attention_dynamics.models.factory.build_model` reads (``n_out``, ``vocab_size``, ``input_dim``,
    ``sequence_length``), such as :class:`~attention_dynamics.tasks.wind_tunnels.FormattedHMMTunnel`.
    ``fused_adamw``: AdamW's fused kernel (:func:`~attention_dynamics.training.fast_adamw`, the same update);
    ``fused_attention``: a transformer's attention on PyTorch's fused kernel (the same function as the explicit
    path, tested).

    Returns ``metrics`` (``kl_bits``, ``entropy_mae_bits``, ``curve_mae_bits`` on ``eval_batch``), ``kl_by_position``,
    ``kl_curve_bits`` (the exact KL on each step's fresh batch — loss minus the batch's posterior entropy, bits — over
    :data:`MEASURED_CURVE_POINTS` blocks), ``loss_curve_nats``, sizes and ``cpu_seconds``.
    """
    steps = check_positive_int("steps", steps)
    started = time.process_time()
    width = matched_width(family, task, target_params)
    torch.manual_seed(seed)  # as train_and_evaluate: model initialisation (mambapy draws its step sizes from the global RNG)
    model = build_model(family, task, width)
    if fused_attention and hasattr(model, "attention_modules"):
        for attn in model.attention_modules():
            attn.fused = True
    data = torch_generator(stream(seed, "data"))
    entropy_nats: list[float] = []

    def batches(step: int) -> TaskBatch:
        b = task.sample(batch_size, generator=data)
        entropy_nats.append(float(stats.entropy(b.posterior, unit="nats").mean()))  # the batch's loss floor
        return b

    make = fast_adamw if fused_adamw else torch.optim.AdamW
    optimizer = make(model.parameters(), lr=lr, weight_decay=0.01)
    schedule = warmup_cosine(optimizer, steps, max(1, int(warmup_fraction * steps)))
    history = fit(model, batches, steps=steps, optimizer=optimizer, loss_fn=task_loss, scheduler=schedule, grad_clip=1.0)
    metrics, report = evaluation_report(model, eval_batch)
    kl_curve = (history.losses - np.asarray(entropy_nats)) / calibration.LN2
    return {"family": family, "seed": int(seed), "steps": steps, "width": int(width),
            "n_params": int(count_parameters(model)), "lr": lr, "batch_size": batch_size, "fused_adamw": fused_adamw,
            "fused_attention": bool(fused_attention and hasattr(model, "attention_modules")),
            "metrics": {k: float(v) for k, v in metrics.items() if np.isfinite(v)},
            "kl_by_position": [float(v) for v in report.kl_by_position],
            "kl_curve_bits": curve_blocks(kl_curve), "loss_curve_nats": curve_blocks(history.losses),
            "cpu_seconds": float(time.process_time() - started)}
