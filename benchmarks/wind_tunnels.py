"""Benchmark: training steps of every model chapters 6 and 7 train, eager against the opt-in fast path.

For each model at the sizes of a scale (read from the package's settings: ``training.wind_tunnels``'s
tunnels for chapter 6, chapter 7's ``SETTINGS``), it times the training step the chapter runs
(``training.fit``: zero_grad, forward, loss, backward, clip at 1, AdamW, warm-up + cosine schedule)
in variants:

- ``eager``      — exactly what the chapter does (chapter 6's transformers already use fused attention);
- ``fused``      — fused attention and fused AdamW only (``fast_training_path(compile=False)``), no compilation;
- ``fast``       — :func:`attention_dynamics.training.fast_training_path` (fused scaled-dot-product
  attention, ``torch.compile``) with :func:`~attention_dynamics.training.fast_adamw` (fused AdamW);
- ``seq_scan``   — Mamba only: mambapy's sequential scan instead of its default parallel scan (``pscan``).

Timing: variants alternate in rounds inside one process (order rotated each round), many rounds, the
median ms/step reported, so load from other processes hits every variant alike; one thread (the
layout the chapters use: one process per core, one thread each). Batches are drawn once, before timing,
and reused, so sampling is not timed. Agreement: every variant trains a copy of the same initial model on
the same batches; the largest loss difference to eager over ``--agreement-steps`` steps is printed, and
the fast variant is run twice to show whether it is deterministic run to run (difference 0 means
bitwise identical). Memory: the process's peak resident set (the kernel's high-water mark, reset before
each model) while its variants train, and the increase over the resident set before.

    python benchmarks/wind_tunnels.py [--scale book] [--rounds 10] [--steps-per-round 4]
    python benchmarks/wind_tunnels.py --scale paper      # memory of a paper-scale step (eager and fused by default)

The figures are written to ``build/benchmarks/wind_tunnel_benchmark_<scale>.json``.
"""

from __future__ import annotations

import argparse
import copy
import gc
import json
import os
import platform
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch
import torch.nn.functional as F

from attention_dynamics import __version__
from attention_dynamics.chapters.architectures.runs import book_tasks
from attention_dynamics.chapters.architectures.settings import SETTINGS as ARCHITECTURES
from attention_dynamics.core.paths import BUILD_DIR
from attention_dynamics.core.seeding import torch_generator
from attention_dynamics.ledger.claims import atomic_write_text
from attention_dynamics.models import count_parameters
from attention_dynamics.models.factory import FAMILIES, matched_width
from attention_dynamics.science import calibration
from attention_dynamics.tasks import bijection
from attention_dynamics.tasks.wind_tunnels import TASKS, task_loss
from attention_dynamics.training import fast_adamw, fast_training_path, fit, wind_tunnels
from attention_dynamics.training.families import _seeded_model as seeded_model
from attention_dynamics.training.schedules import warmup_cosine

sys.path.insert(0, str(Path(__file__).parent))
from sticky_chain import cpu_model  # noqa: E402  (the same machine record as the engine's benchmark)

VARIANTS = ("eager", "fused", "fast", "seq_scan")


@dataclass
class Case:
    """One model as a chapter trains it: builder (seeded), batches, loss, optimiser settings."""

    name: str
    family: str
    build: Callable[[], torch.nn.Module]
    batches: list
    loss_fn: Callable
    lr: float
    adamw: dict


def _status_kib(field: str) -> int:
    with open("/proc/self/status", encoding="utf-8") as fh:
        return next(int(line.split()[1]) for line in fh if line.startswith(field + ":"))


def _reset_peak() -> int:
    with open("/proc/self/clear_refs", "w", encoding="utf-8") as fh:
        fh.write("5")
    return _status_kib("VmRSS")


def chapter6_cases(scale: str, n_batches: int) -> list[Case]:
    b, h = wind_tunnels.BIJECTION_TUNNELS[scale], wind_tunnels.HMM_TUNNELS[scale]
    gen = torch_generator(1)
    V, L = b.V, b.L

    def build_bij():
        torch.manual_seed(0)
        m = b.model()
        for a in m.attention_modules():
            a.fused = True  # as train_bijection does
        return m

    def bij_loss(m, batch):
        logits = m(batch.tokens)[:, 0::2]
        if b.target == "posterior":
            return calibration.soft_cross_entropy_nats(logits, batch.posterior.to(logits.dtype))
        return F.cross_entropy(logits.reshape(-1, V), batch.targets.reshape(-1))

    def build_hmm():
        torch.manual_seed(0)
        m = h.model()
        for a in m.attention_modules():
            a.fused = True  # as train_hmm does
        return m

    def hmm_loss(m, batch):
        logits = m(batch.inputs)
        return calibration.soft_cross_entropy_nats(logits, batch.posterior.to(logits.dtype))

    adamw = {"betas": (0.9, 0.98), "weight_decay": 0.0}
    return [
        Case("ch6 bijection transformer", "transformer", build_bij,
             [bijection.sample_bijection_batch(b.batch, V, L, generator=gen) for _ in range(n_batches)],
             bij_loss, b.lr, adamw),
        Case("ch6 HMM transformer (ALiBi)", "transformer", build_hmm,
             [wind_tunnels._hmm_batch(h, h.batch, h.length, gen) for _ in range(n_batches)],
             hmm_loss, h.lr, adamw),
    ]


def chapter7_cases(scale: str, n_batches: int, families, tasks) -> list[Case]:
    cfg = ARCHITECTURES[scale]
    cases = []
    for task in book_tasks(cfg):
        if task.name not in tasks:
            continue
        gen = torch_generator(1)
        batches = [task.sample(cfg.batch_size, generator=gen) for _ in range(n_batches)]
        for family in families:
            width = matched_width(family, task, cfg.target_params)
            cases.append(Case(f"ch7 {task.name} {family}", family,
                              lambda f=family, t=task, w=width: seeded_model(f, t, w, 0),
                              batches, task_loss, cfg.lr, {"weight_decay": 0.01}))
    return cases


class _Runner:
    """One variant of one case: its model, optimiser and schedule, trained a few steps at a time."""

    def __init__(self, case: Case, variant: str, initial_state: dict, total_steps: int):
        torch.manual_seed(0)
        self.model = case.build()
        self.model.load_state_dict(initial_state)
        if variant == "seq_scan":
            self.model.config.pscan = False  # mambapy's sequential scan (the blocks share the config)
        if variant in ("fast", "fused"):
            fast_training_path(self.model, compile=variant == "fast")
            self.opt = fast_adamw(self.model.parameters(), lr=case.lr, **case.adamw)
        else:
            self.opt = torch.optim.AdamW(self.model.parameters(), lr=case.lr, **case.adamw)
        self.sched = warmup_cosine(self.opt, total_steps, max(1, total_steps // 20))
        self.case, self.cursor = case, 0

    def steps(self, n: int) -> tuple[np.ndarray, float]:
        batches = self.case.batches
        start, self.cursor = self.cursor, self.cursor + n
        t0 = time.perf_counter()
        h = fit(self.model, lambda step: batches[(start + step) % len(batches)], steps=n, optimizer=self.opt,
                loss_fn=self.case.loss_fn, scheduler=self.sched, grad_clip=1.0)
        return h.losses, (time.perf_counter() - t0) / n


def run_case(case: Case, variants, *, rounds: int, steps_per_round: int, agreement_steps: int) -> dict[str, Any]:
    torch.manual_seed(0)
    initial = copy.deepcopy(case.build().state_dict())
    variants = [v for v in variants if v != "seq_scan" or case.family == "mamba"]
    rss_before = _reset_peak()
    # agreement and determinism: fresh copies of the same initial model on the same batches
    curves, first_step_s = {}, {}
    for v in variants:
        r = _Runner(case, v, initial, agreement_steps)
        t0 = time.perf_counter()
        r.steps(1)
        first_step_s[v] = time.perf_counter() - t0  # includes torch.compile for "fast"
        r2 = _Runner(case, v, initial, agreement_steps)
        curves[v] = r2.steps(agreement_steps)[0]
    repeat = {v: _Runner(case, v, initial, agreement_steps).steps(agreement_steps)[0] for v in variants if v != "eager"}
    # timing: interleaved rounds
    runners = {v: _Runner(case, v, initial, rounds * steps_per_round + 2) for v in variants}
    for r in runners.values():
        r.steps(2)  # warm-up (compiled graphs are cached from the agreement runs)
    ms = {v: [] for v in variants}
    for k in range(rounds):
        order = variants[k % len(variants):] + variants[: k % len(variants)]
        for v in order:
            ms[v].append(1e3 * runners[v].steps(steps_per_round)[1])
    peak = _status_kib("VmHWM")
    med = {v: float(np.median(x)) for v, x in ms.items()}
    out = {
        "case": case.name, "family": case.family, "parameters": count_parameters(runners["eager"].model),
        "ms_per_step": med,
        "ms_rounds": {v: [round(t, 2) for t in x] for v, x in ms.items()},
        "speedup_vs_eager": {v: med["eager"] / med[v] for v in variants if v != "eager"},
        "max_abs_loss_difference_vs_eager": {v: float(np.max(np.abs(curves[v] - curves["eager"])))
                                             for v in variants if v != "eager"},
        "max_abs_loss_difference_run_to_run": {v: float(np.max(np.abs(repeat[v] - curves[v]))) for v in repeat},
        "first_step_seconds": first_step_s,
        "peak_rss_mb": round(peak / 1024, 1),
        "peak_increase_mb": round((peak - rss_before) / 1024, 1),
    }
    del runners
    gc.collect()
    return out


def _write(out: Path, args, variants, results, load, rounds, spr, agreement) -> None:
    result = {
        "scale": args.scale, "variants": variants, "cases": results,
        "largest_peak_rss_mb": max(r["peak_rss_mb"] for r in results),
        "settings": {"threads": args.threads, "rounds": rounds, "steps_per_round": spr,
                     "agreement_steps": agreement, "interleaved": True, "dtype": "float32"},
        "machine": {"cpu_count": os.cpu_count(), "load_average_1min": load,
                    "platform": platform.platform(terse=True), "cpu_model": cpu_model()},
        "provenance": {"package_version": __version__, "torch": torch.__version__, "python": platform.python_version()},
    }
    atomic_write_text(out, json.dumps(result, indent=1) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale", choices=("fast", "book", "paper"), default="book")
    parser.add_argument("--rounds", type=int, default=None)
    parser.add_argument("--steps-per-round", type=int, default=None)
    parser.add_argument("--agreement-steps", type=int, default=None)
    parser.add_argument("--variants", nargs="+", choices=VARIANTS, default=None)
    parser.add_argument("--families", nargs="+", choices=FAMILIES, default=list(FAMILIES))
    parser.add_argument("--tasks", nargs="+", choices=TASKS, default=list(TASKS),
                        help="chapter 7's tasks to include")
    parser.add_argument("--no-chapter6", action="store_true")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--output", default=None)
    args = parser.parse_args()
    paper = args.scale == "paper"
    rounds = args.rounds or (2 if paper else 10)
    spr = args.steps_per_round or (1 if paper else 4)
    agreement = args.agreement_steps or (2 if paper else 20)
    variants = list(args.variants or (["eager", "fused"] if paper else VARIANTS))
    if "eager" not in variants:
        variants.insert(0, "eager")
    torch.set_num_threads(args.threads)

    cases = [] if args.no_chapter6 else chapter6_cases(args.scale, 8)
    cases += chapter7_cases(args.scale, 8, args.families, args.tasks)
    load = round(os.getloadavg()[0], 2)
    print(f"machine: {cpu_model()} ({os.cpu_count()} cores, load {load}); torch {torch.__version__}; "
          f"{args.threads} thread(s); scale {args.scale}")
    print(f"interleaved: {rounds} rounds x {spr} steps per variant, variants alternating (order rotated), medians; "
          f"agreement over {agreement} steps from the same initial weights and batches")
    out = Path(args.output or BUILD_DIR / "benchmarks" / f"wind_tunnel_benchmark_{args.scale}.json")
    results: list[dict[str, Any]] = []
    for case in cases:
        r = run_case(case, variants, rounds=rounds, steps_per_round=spr, agreement_steps=agreement)
        results.append(r)
        line = f"{r['case']:34s} {r['parameters']:>9,d} params  eager {r['ms_per_step']['eager']:8.2f} ms"
        for v in variants[1:]:
            if v in r["ms_per_step"]:
                line += (f" | {v} {r['ms_per_step'][v]:8.2f} ms ({r['speedup_vs_eager'][v]:.2f}x, "
                         f"|dloss| {r['max_abs_loss_difference_vs_eager'][v]:.1e}, "
                         f"rerun {r['max_abs_loss_difference_run_to_run'][v]:.0e})")
        line += f" | peak RSS {r['peak_rss_mb']:.0f} MB"
        print(line, flush=True)
        _write(out, args, variants, results, load, rounds, spr, agreement)  # kept case by case
    peak = max(r["peak_rss_mb"] for r in results)
    print(f"largest peak resident set: {peak:.0f} MB ({'within' if peak <= 4096 else 'ABOVE'} 4 GB)")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
