"""Benchmark: the closed-form block-wise head engine, plain autograd of the same head, and the authors' protocol.

Prints milliseconds per training step (forward, gradients, SGD update; float32, T = 2000, the paper's
head 20 → 10/10/15 → 8, the EM-like schedule) for three ways of training the same head, in ONE run:

- ``engine``   — :func:`attention_dynamics.training.head_engine.closed_form_head_pass` through ``training.fit``;
- ``autograd`` — the dense head of :mod:`attention_dynamics.science.attention` differentiated by autograd;
- ``protocol`` — a re-implementation, for timing only, of the authors' Paper II script
  (``experiments/paper2_gradient/em_vs_sgd_multiseed.py`` in github.com/vishalmisra/bayesian-wind-tunnel) as
  the paper's sticky Markov-chain experiment describes it: an ``nn.Module`` head whose forward builds the
  ``T × T`` causal mask, computes the dense attention and the mean cross-entropy, ``loss.backward()``, an SGD step with the EM-like parameter
  groups, and per step the logging the script's outputs need (the loss as a Python float and a copy of
  the value vectors for the PCA trajectories of the values). Not the authors' code: their script was
  timed on this machine class at 62 ms/step (issue text); this re-implementation shows the same order.

The three alternate in rounds inside one process (engine, autograd, protocol, engine, …), so load from
other processes slows all three alike; medians over the rounds are reported, with the ratios
autograd/engine and protocol/engine. Peak memory is measured per side in a fresh subprocess (the
increase of the peak resident set over the process's state after imports and data). The largest
difference between the engine's loss curve and autograd's and the dense closed form's (the laws on
the whole matrix, :func:`attention_dynamics.science.gradients.single_head_parameter_gradients`) over 100 steps
is printed too. ``--profile`` adds torch.profiler's table of the engine's operators.

The result is written to ``build/benchmarks/sticky_chain_benchmark.json``; ``--promote`` also copies it to the
package's ``data/`` folder, from which chapter 5 reads the timing it shows (with its machine and load; never a claim).

    python benchmarks/sticky_chain.py [--threads 1] [--rounds 15] [--steps-per-round 5]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from attention_dynamics import __version__
from attention_dynamics.core.paths import BUILD_DIR, data_path
from attention_dynamics.ledger.claims import atomic_write_text
from attention_dynamics.models.single_head import initial_head
from attention_dynamics.science.gradients import single_head_parameter_gradients
from attention_dynamics.tasks import sticky_chain
from attention_dynamics.training import fit
from attention_dynamics.training.head_engine import SingleHeadModule, autograd_head_loss, closed_form_head_pass
from attention_dynamics.training.schedules import make_backward, make_optimizer

BENCHMARK_FILE = "sticky_chain_benchmark.json"
SIDES = ("engine", "autograd", "protocol")


class _ProtocolHead(nn.Module):
    """The head as the authors' script would hold it: four parameters, a dense forward with its own mask."""

    def __init__(self, seed: int):
        super().__init__()
        p = initial_head(seed)
        self.W_Q, self.W_K, self.W_V, self.W_O = (nn.Parameter(t.clone()) for t in (p.W_Q, p.W_K, p.W_V, p.W_O))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        T = x.shape[0]
        q, k, v = x @ self.W_Q, x @ self.W_K, x @ self.W_V
        scores = (q @ k.T) / math.sqrt(q.shape[-1])
        mask = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)  # built every step, as a script does
        attn = torch.softmax(scores.masked_fill(mask, float("-inf")), dim=-1)
        return (attn @ v) @ self.W_O


def _protocol_run(data, steps: int, seed: int = 42) -> tuple[np.ndarray, float]:
    """The timing re-implementation of the authors' per-step loop (module docstring); returns (losses, s/step)."""
    model = _ProtocolHead(seed)
    opt = torch.optim.SGD([{"params": [model.W_Q, model.W_K, model.W_O], "lr": 0.01},
                           {"params": [model.W_V], "lr": 0.1}])
    losses, value_trajectory = [], []
    start = time.perf_counter()
    for _ in range(steps):
        opt.zero_grad()
        loss = F.cross_entropy(model(data.x), data.y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
        value_trajectory.append((data.x @ model.W_V).detach().clone())  # values for the PCA trajectories
    return np.array(losses), (time.perf_counter() - start) / steps


def _fit_run(data, steps: int, side: str, seed: int = 42) -> tuple[np.ndarray, float]:
    """``steps`` full-batch EM-like steps of ``training.fit`` with the engine, autograd or the dense laws."""
    model = SingleHeadModule(initial_head(seed))
    if side == "engine":
        how = {"backward": make_backward("em_like")}
    elif side == "autograd":
        how = {"loss_fn": autograd_head_loss}
    else:  # "dense": the plain closed form on the whole matrix
        def dense(m, batch):
            loss, grads = single_head_parameter_gradients(batch[0], m.head_params(), batch[1])
            for name, grad in grads.items():
                getattr(m, name).grad = grad
            return loss
        how = {"backward": dense}
    start = time.perf_counter()
    history = fit(model, lambda step: (data.x, data.y), steps=steps, optimizer=make_optimizer(model, "em_like"), **how)
    return history.losses, (time.perf_counter() - start) / steps


def _run(side: str, data, steps: int) -> tuple[np.ndarray, float]:
    return _protocol_run(data, steps) if side == "protocol" else _fit_run(data, steps, side)


def _peak_memory_mb(side: str, threads: int, steps: int = 3) -> float:
    """Peak resident-set increase (MB) of ``steps`` steps of ``side``, measured in a fresh process."""
    out = subprocess.run([sys.executable, __file__, "--memory-of", side, "--threads", str(threads),
                          "--steps-per-round", str(steps)], capture_output=True, text=True, check=True)
    return float(out.stdout.strip().splitlines()[-1])


def _status_kib(field: str) -> int:
    with open("/proc/self/status", encoding="utf-8") as fh:
        return next(int(line.split()[1]) for line in fh if line.startswith(field + ":"))


def peak_memory_increase_mb(fn) -> float:
    """Run ``fn()``; return the peak resident set during it minus the resident set before (MB; Linux).

    The kernel's high-water mark is reset first (``/proc/self/clear_refs``), so the import's peak does
    not hide the run's.
    """
    with open("/proc/self/clear_refs", "w", encoding="utf-8") as fh:
        fh.write("5")
    before = _status_kib("VmRSS")
    fn()
    return (_status_kib("VmHWM") - before) / 1024


def _memory_child(side: str, steps: int) -> None:
    data = sticky_chain.make_sticky_chain_data(42)
    _run(side, data, 1)  # libraries' lazy set-up is not the step's memory
    print(peak_memory_increase_mb(lambda: _run(side, data, steps)))


def _engine_profile(data, passes: int = 5) -> list[dict]:
    """torch.profiler's self-CPU share of the engine's operators over ``passes`` passes (one thread's view)."""
    from torch.profiler import ProfilerActivity, profile

    params = initial_head(42)
    closed_form_head_pass(data.x, params, data.y)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(passes):
            closed_form_head_pass(data.x, params, data.y, workers=1)
    events = sorted(prof.key_averages(), key=lambda e: -e.self_cpu_time_total)
    total = sum(e.self_cpu_time_total for e in events)
    return [{"op": e.key, "self_cpu_share": round(e.self_cpu_time_total / total, 3), "calls_per_pass": e.count // passes}
            for e in events[:8]]


def cpu_model() -> str:
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
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--steps-per-round", type=int, default=5)
    parser.add_argument("--agreement-steps", type=int, default=100)
    parser.add_argument("--profile", action="store_true", help="print and store the engine's operator profile")
    parser.add_argument("--memory-of", choices=SIDES, help=argparse.SUPPRESS)  # the peak-memory child process
    parser.add_argument("--output", default=str(BUILD_DIR / "benchmarks" / BENCHMARK_FILE))
    parser.add_argument("--promote", action="store_true",
                        help="also copy the result into the package's data folder (what chapter 5 shows)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    if args.memory_of:
        _memory_child(args.memory_of, args.steps_per_round)
        return
    data = sticky_chain.make_sticky_chain_data(42)  # T = 2000: 1999 positions

    for side in SIDES:  # warm-up
        _run(side, data, 2)
    ms: dict[str, list[float]] = {side: [] for side in SIDES}
    for r in range(args.rounds):  # interleaved: each round runs all three, in a rotating order
        for side in SIDES[r % 3:] + SIDES[: r % 3]:
            ms[side].append(1e3 * _run(side, data, args.steps_per_round)[1])
    med = {side: float(np.median(v)) for side, v in ms.items()}
    curves = {side: _run(side, data, args.agreement_steps)[0] for side in ("engine", "autograd", "dense")}
    curves["protocol"] = _run("protocol", data, args.agreement_steps)[0]
    peak = {side: round(_peak_memory_mb(side, args.threads), 1) for side in SIDES}

    result = {
        "engine_ms_per_step": med["engine"],
        "autograd_ms_per_step": med["autograd"],
        "protocol_ms_per_step": med["protocol"],
        "speedup": med["autograd"] / med["engine"],
        "speedup_vs_protocol": med["protocol"] / med["engine"],
        "engine_ms_rounds": [round(v, 2) for v in ms["engine"]],
        "autograd_ms_rounds": [round(v, 2) for v in ms["autograd"]],
        "protocol_ms_rounds": [round(v, 2) for v in ms["protocol"]],
        "max_abs_loss_difference": float(np.max(np.abs(curves["engine"] - curves["autograd"]))),
        "max_abs_loss_difference_dense_laws": float(np.max(np.abs(curves["engine"] - curves["dense"]))),
        "max_abs_loss_difference_protocol": float(np.max(np.abs(curves["engine"] - curves["protocol"]))),
        "agreement_steps": args.agreement_steps,
        "peak_memory_mb": peak,
        "settings": {"threads": args.threads, "dtype": "float32", "T": int(data.x.shape[0]) + 1,
                     "schedule": "em_like", "rounds": args.rounds, "steps_per_round": args.steps_per_round,
                     "interleaved": True},
        "machine": {"cpu_count": os.cpu_count(), "load_average_1min": round(os.getloadavg()[0], 2),
                    "platform": platform.platform(terse=True), "processor": platform.processor(),
                    "cpu_model": cpu_model()},
        "provenance": {"package_version": __version__, "torch": torch.__version__, "python": platform.python_version()},
    }
    if args.profile:
        result["engine_profile"] = _engine_profile(data)
    print(f"machine: {result['machine']['cpu_model']} ({os.cpu_count()} cores, load {result['machine']['load_average_1min']}), "
          f"{args.threads} thread(s), T = {result['settings']['T']}, float32")
    print(f"interleaved: {args.rounds} rounds x {args.steps_per_round} steps, the three sides alternating; medians")
    for side in SIDES:
        print(f"{side:9s}{med[side]:8.2f} ms/step   peak memory +{peak[side]:7.1f} MB")
    print(f"autograd / engine  {result['speedup']:6.2f} x   (target >= 5)")
    print(f"protocol / engine  {result['speedup_vs_protocol']:6.2f} x   (target >= 8)")
    print(f"max |loss difference| over {args.agreement_steps} steps: engine vs autograd "
          f"{result['max_abs_loss_difference']:.1e}, vs dense laws {result['max_abs_loss_difference_dense_laws']:.1e}, "
          f"vs protocol {result['max_abs_loss_difference_protocol']:.1e}")
    for row in result.get("engine_profile", []):
        print(f"  profile {row['op']:24s} {100 * row['self_cpu_share']:5.1f}%  {row['calls_per_pass']} calls/pass")
    atomic_write_text(Path(args.output), json.dumps(result, indent=1) + "\n")
    print(f"wrote {args.output}")
    if args.promote:
        atomic_write_text(data_path(BENCHMARK_FILE), json.dumps(result, indent=1) + "\n")
        print(f"promoted it to {data_path(BENCHMARK_FILE)}")


if __name__ == "__main__":
    main()
