"""The one training loop of the book, and a runner for independent runs on both cores.

:func:`fit` drives any ``nn.Module`` with any ``torch.optim`` optimiser. How gradients are
obtained is a parameter: autograd by default, or a closed-form routine (the sticky-chain engine
fills ``.grad`` from the paper's laws). Learning-rate schedules such as the paper's "EM-like" one
(a larger step on the values) are optimiser parameter groups, not separate loops.
"""

from __future__ import annotations

import os
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from multiprocessing import get_context
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

import numpy as np
import torch
import torch.nn as nn
from tqdm.std import tqdm  # plain text bar: no widget warning inside notebooks

from ..core.settings import check_positive_int

__all__ = ["TrainHistory", "autograd_backward", "fit", "ResumePoint", "fit_resumable", "fast_training_path", "fast_adamw",
           "map_parallel", "usable_cpus", "cgroup_cpu_limit"]

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


@dataclass
class ResumePoint:
    """Where a long run keeps its state (:func:`fit_resumable`): the file ``path``, rewritten every ``every`` steps.

    ``record(step, model)``: a measurement taken at step 0 and at every save (kept in the history's
    ``records``; plain numbers only); ``log(message)``: progress, one line per save.
    """

    path: Path
    every: int
    record: Callable[[int, nn.Module], dict[str, float]] | None = None
    log: Callable[[str], None] | None = None


def _save_state(path: Path, state: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        torch.save(state, tmp)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def fit_resumable(model: nn.Module, batches: Callable[[int], Batch], *, steps: int, optimizer: torch.optim.Optimizer,
                  resume: ResumePoint, generator: torch.Generator,
                  scheduler: torch.optim.lr_scheduler.LRScheduler | None = None, **fit_kwargs: Any) -> TrainHistory:
    """Train like :func:`fit`, saving everything a run needs to continue to ``resume.path`` every ``resume.every`` steps.

    The state is the model's and the optimiser's, the scheduler's, the data ``generator``'s, the losses and
    the records so far; every record also carries ``cpu_seconds``, the process time the run has taken so far,
    counted across restarts. If the file exists (a run that stopped), training continues from it, and the result
    is the same, bit for bit, as that of a run that never stopped (tested). A file written by a run with a
    different number of steps is refused. ``batches(step)`` receives the step within the current block.
    """
    steps = check_positive_int("steps", steps)
    every = check_positive_int("every", resume.every)
    path = Path(resume.path)
    done, losses, records, spent = 0, [], [], 0.0
    if path.exists():
        state = torch.load(path, weights_only=True)
        if state["steps"] != steps:
            raise ValueError(f"{path} holds a run of {state['steps']} steps, not {steps}; delete it to start again")
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        if scheduler is not None:
            scheduler.load_state_dict(state["scheduler"])
        generator.set_state(state["generator"])
        done, losses, records, spent = state["done"], list(state["losses"]), list(state["records"]), state["cpu_seconds"]
        if resume.log:
            resume.log(f"resuming at step {done} of {steps} from {path}")

    started = time.process_time()

    def measure(step: int) -> None:
        if resume.record is not None:
            was_training = model.training
            model.eval()
            with torch.no_grad():
                rec = {k: float(v) for k, v in resume.record(step, model).items()}
            records.append({"step": step, **rec, "cpu_seconds": spent + time.process_time() - started})
            model.train(was_training)

    if done == 0 and not records:
        measure(0)
    while done < steps:
        n = min(every, steps - done)
        losses.extend(fit(model, batches, steps=n, optimizer=optimizer, scheduler=scheduler, **fit_kwargs).losses.tolist())
        done += n
        measure(done)
        _save_state(path, {"steps": steps, "done": done, "model": model.state_dict(), "optimizer": optimizer.state_dict(),
                           "scheduler": scheduler.state_dict() if scheduler is not None else None,
                           "generator": generator.get_state(), "losses": losses, "records": records,
                           "cpu_seconds": spent + time.process_time() - started})
        if resume.log:
            last = records[-1] if records else {}
            extra = ", ".join(f"{k} {v:.4g}" for k, v in last.items() if k not in ("step", "cpu_seconds"))
            resume.log(f"step {done}/{steps}: loss {np.mean(losses[-n:]):.5f}" + (f", {extra}" if extra else ""))
    return TrainHistory(losses=np.asarray(losses, dtype=float), records=records)


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


def cgroup_cpu_limit(cgroup_root: Path = Path("/sys/fs/cgroup"), proc_cgroup: Path = Path("/proc/self/cgroup")
                     ) -> float | None:
    """Return the CPU quota of this process's control group, in CPUs (quota / period), or None without one.

    cgroup v2: ``cpu.max`` ("max 100000" or "150000 100000") of the process's group and every group above
    it, the smallest quota winning; cgroup v1: ``cpu.cfs_quota_us`` / ``cpu.cfs_period_us`` of the
    ``cpu`` controller (a quota of -1 is none). A container (a Binder pod) sees its own quota this way,
    while ``os.cpu_count()`` reports the host's cores.
    """
    limits = []
    try:
        lines = proc_cgroup.read_text(encoding="utf-8").splitlines()
    except OSError:
        lines = []
    for line in lines:
        hierarchy, controllers, path = (line.split(":", 2) + ["", ""])[:3]
        rel = path.strip().lstrip("/")
        if hierarchy == "0" and controllers == "":  # cgroup v2: walk from the group up to the root
            group = cgroup_root / rel
            while True:
                try:
                    quota, period = (group / "cpu.max").read_text(encoding="utf-8").split()[:2]
                    if quota != "max":
                        limits.append(int(quota) / int(period))
                except (OSError, ValueError):
                    pass
                if group == cgroup_root or cgroup_root not in group.parents:
                    break
                group = group.parent
        elif "cpu" in controllers.split(","):  # cgroup v1: the cpu controller's mount; the first group found decides
            mounts = [cgroup_root / controllers, cgroup_root / "cpu", cgroup_root / "cpu,cpuacct"]
            for group in [g for mount in mounts for g in (mount / rel, mount)]:
                try:
                    quota = int((group / "cpu.cfs_quota_us").read_text(encoding="utf-8"))
                    period = int((group / "cpu.cfs_period_us").read_text(encoding="utf-8"))
                except (OSError, ValueError):
                    continue
                if quota > 0 and period > 0:
                    limits.append(quota / period)
                break
    return min(limits) if limits else None


def usable_cpus() -> int:
    """Return how many CPUs this process may use: its affinity mask, capped by its control group's CPU quota.

    A fractional quota rounds down (1.5 CPUs: one worker), never below 1.
    """
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        cpus = os.cpu_count() or 1
    quota = cgroup_cpu_limit()
    if quota is not None:
        cpus = min(cpus, int(quota))
    return max(1, cpus)


def _init_worker(threads: int) -> None:
    torch.set_num_threads(threads)


def map_parallel(fn: Callable[..., Any], jobs: Sequence[dict[str, Any]], *, processes: int | None = None) -> list[Any]:
    """Return ``[fn(**job) for job in jobs]``, computed in separate processes (one thread each).

    Independent runs (seeds × schedules) use every core this way: by default one process per CPU
    this process may use (:func:`usable_cpus`: affinity and the container's CPU quota, not the
    host's core count). ``fn`` must be importable (defined in the package). Results come back in
    the order of ``jobs``; each job must seed itself, so results do not depend on which process ran
    it. ``processes=1`` runs in-process.
    """
    processes = processes or min(len(jobs), usable_cpus())
    if processes <= 1 or len(jobs) <= 1:
        return [fn(**job) for job in jobs]
    with ProcessPoolExecutor(max_workers=processes, mp_context=get_context("spawn"),
                             initializer=_init_worker, initargs=(1,)) as pool:
        futures = [pool.submit(fn, **job) for job in jobs]
        return [f.result() for f in futures]
