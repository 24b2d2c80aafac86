"""Benchmark: the closed-form block-wise head engine vs plain autograd of the same head (sticky chain).

Prints milliseconds per training step (forward, gradients, SGD update; float32, T = 2000, the paper's
head 20 → 10/10/15 → 8) for both, their ratio, and the largest difference between the two loss
curves over 100 steps of the EM-like schedule. Both run in the same process, in alternating rounds,
so a busy machine slows both alike; the median round is reported. The result is written to
``src/attention_dynamics/data/sticky_chain_benchmark.json`` (chapter 5 reads it from there).

    python benchmarks/sticky_chain.py [--threads 2] [--rounds 7] [--steps-per-round 10]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

import numpy as np
import torch

from attention_dynamics import __version__
from attention_dynamics.claims import atomic_write_text
from attention_dynamics.training.head_engine import SingleHeadModule, autograd_head_loss
from attention_dynamics.paths import data_path
from attention_dynamics.training.schedules import make_backward, make_optimizer
from attention_dynamics.experiments.em_vs_sgd import initial_head
from attention_dynamics.tasks import sticky_chain
from attention_dynamics.training import fit

BENCHMARK_FILE = "sticky_chain_benchmark.json"


def _train(data, *, steps: int, engine: bool, schedule: str = "em_like") -> tuple[np.ndarray, float]:
    """Return (losses, seconds per step) of ``steps`` full-batch steps with the engine or with autograd."""
    model = SingleHeadModule(initial_head(42))
    how = {"backward": make_backward(schedule)} if engine else {"loss_fn": autograd_head_loss}
    start = time.perf_counter()
    history = fit(model, lambda step: (data.x, data.y), steps=steps, optimizer=make_optimizer(model, schedule), **how)
    return history.losses, (time.perf_counter() - start) / steps


def _cpu_model() -> str:
    """The CPU's model name (Linux's /proc/cpuinfo; empty where it is not available)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--steps-per-round", type=int, default=10)
    parser.add_argument("--agreement-steps", type=int, default=100)
    parser.add_argument("--output", default=str(data_path(BENCHMARK_FILE)))
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    data = sticky_chain.make_sticky_chain_data(42)  # T = 2000: 1999 positions

    _train(data, steps=2, engine=True)  # warm-up
    _train(data, steps=2, engine=False)
    engine_ms, autograd_ms = [], []
    for _ in range(args.rounds):
        engine_ms.append(1e3 * _train(data, steps=args.steps_per_round, engine=True)[1])
        autograd_ms.append(1e3 * _train(data, steps=args.steps_per_round, engine=False)[1])
    engine_losses, _ = _train(data, steps=args.agreement_steps, engine=True)
    autograd_losses, _ = _train(data, steps=args.agreement_steps, engine=False)

    result = {
        "engine_ms_per_step": float(np.median(engine_ms)),
        "autograd_ms_per_step": float(np.median(autograd_ms)),
        "speedup": float(np.median(autograd_ms) / np.median(engine_ms)),
        "engine_ms_rounds": [round(v, 2) for v in engine_ms],
        "autograd_ms_rounds": [round(v, 2) for v in autograd_ms],
        "max_abs_loss_difference": float(np.max(np.abs(engine_losses - autograd_losses))),
        "agreement_steps": args.agreement_steps,
        "settings": {"threads": args.threads, "dtype": "float32", "T": int(data.x.shape[0]) + 1,
                     "schedule": "em_like", "rounds": args.rounds, "steps_per_round": args.steps_per_round},
        "machine": {"cpu_count": os.cpu_count(), "load_average_1min": round(os.getloadavg()[0], 2),
                    "platform": platform.platform(terse=True), "processor": platform.processor(),
                    "cpu_model": _cpu_model()},
        "provenance": {"package_version": __version__, "torch": torch.__version__, "python": platform.python_version()},
    }
    print(f"engine   {result['engine_ms_per_step']:8.1f} ms/step")
    print(f"autograd {result['autograd_ms_per_step']:8.1f} ms/step")
    print(f"ratio    {result['speedup']:8.2f} x   (target >= 3)")
    print(f"max |loss difference| over {args.agreement_steps} steps: {result['max_abs_loss_difference']:.2e}")
    atomic_write_text(Path(args.output), json.dumps(result, indent=1) + "\n")
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
