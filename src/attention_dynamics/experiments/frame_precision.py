"""Frame versus precision, decided: a unit-free settling criterion and the freeze-the-frame intervention.

Chapter 4 asks whether the routing frame (the attention pattern, set by ``W_Q`` and ``W_K``) is in place
before the values finish refining. Two measurements answer it here:

- **Path settling** (:func:`path_settling_step`, :func:`settling_comparison`): each quantity's remaining
  path to its final state as a fraction of its whole path. The fraction has no unit, so one threshold
  serves the attention pattern and the values alike; it is read at a recording resolution finer than
  the differences it decides, and the order is stated only where a paired interval over seeds
  excludes zero.
- **Freezing the frame** (:func:`freeze_frame_experiment`): stop ``W_Q`` and ``W_K`` at step t and train
  everything else to the end. If the frame is in place at t, the final loss matches the unfrozen run's;
  :func:`freeze_frame_step` is the first t from which it does, within a margin stated against the
  untrained model's gap. Run on chapter 4's recall head and on chapter 6's bijection wind tunnel (all
  query/key weights, :func:`attention_dynamics.experiments.wind_tunnel.freeze_query_key`).

The wind-tunnel runs are heavy: ``python -m attention_dynamics.experiments.frame_precision`` computes them once
(resumable from a per-run cache) into ``data/frame_freeze.json``, which chapter 4 loads.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import scipy.stats

from ..paths import data_path
from ..seeding import stream
from ..settling import path_settling_step
from ..results import load_results, save_results

__all__ = [
    "settling_comparison",
    "plot_settling_comparison",
    "order_statistics",
    "head_freeze_run",
    "tunnel_freeze_run",
    "freeze_frame_experiment",
    "freeze_frame_step",
    "freeze_frame_summary",
    "plot_freeze_frame",
    "DATA_PATH",
    "HEAVY_SETTINGS",
    "load_freeze_results",
    "main",
]

DATA_PATH = data_path("frame_freeze.json")
BITS = 1.0 / math.log(2.0)


# ---------------------------------------------------------------------------------------------
# Path settling: a unit-free criterion
# ---------------------------------------------------------------------------------------------


def settling_comparison(runs: Sequence[Any], fractions: Sequence[float], *, confidence: float = 0.95) -> dict[str, Any]:
    """Return the paired frame-versus-values comparison of :func:`path_settling_step` over runs (seeds).

    ``runs`` are :class:`attention_dynamics.experiments.head_training.SpecializationRun` recorded with ``path_every``.
    For each fraction f: per-run settling steps ``frame`` and ``values``, the paired differences
    ``values − frame`` with their mean and a t interval at ``confidence``, and ``verdict``:
    ``"frame first"`` / ``"values first"`` where the interval excludes zero, ``"undecided"`` otherwise.
    ``resolution``: the recording interval (steps).
    """
    if len(runs) < 2:
        raise ValueError("need at least two runs for a paired interval")
    rows = []
    for f in fractions:
        frame = np.array([path_settling_step(r.path_steps, r.frame_path, f) for r in runs], dtype=float)
        values = np.array([path_settling_step(r.path_steps, r.value_path, f) for r in runs], dtype=float)
        d = values - frame
        n = len(d)
        half = float(scipy.stats.t.ppf(0.5 + confidence / 2, n - 1) * d.std(ddof=1) / math.sqrt(n))
        lo, hi = float(d.mean()) - half, float(d.mean()) + half
        verdict = "frame first" if lo > 0 else "values first" if hi < 0 else "undecided"
        rows.append({"fraction": float(f), "frame": frame.tolist(), "values": values.tolist(),
                     "mean_difference": float(d.mean()), "low": lo, "high": hi, "verdict": verdict,
                     "frame_first_share": float(np.mean(d > 0))})
    steps = np.asarray(runs[0].path_steps)
    return {"rows": rows, "resolution": int(steps[1] - steps[0]), "confidence": confidence, "n_runs": len(runs)}


def order_statistics(row: Mapping[str, Any], *, confidence: float = 0.95, n_boot: int = 2000,
                     seed: int = 0) -> dict[str, Any]:
    """Return, for one row of :func:`settling_comparison`, the share of seeds whose frame settles first and
    the median ratio t_P / t_F, each with an interval: Clopper–Pearson for the share, a percentile
    bootstrap over seeds (``n_boot`` resamples, generator seeded by ``seed``) for the median ratio.
    """
    frame, values = np.asarray(row["frame"], dtype=float), np.asarray(row["values"], dtype=float)
    n, k = len(frame), int(np.sum(frame < values))
    alpha = 1 - confidence
    lo = float(scipy.stats.beta.ppf(alpha / 2, k, n - k + 1)) if k > 0 else 0.0
    hi = float(scipy.stats.beta.ppf(1 - alpha / 2, k + 1, n - k)) if k < n else 1.0
    ratios = values / np.maximum(frame, 1.0)
    rng = np.random.default_rng(seed)
    boot = np.median(ratios[rng.integers(0, n, size=(n_boot, n))], axis=1)
    return {"frame_first_fraction": k / n, "fraction_interval": (lo, hi),
            "median_ratio": float(np.median(ratios)),
            "ratio_interval": (float(np.quantile(boot, alpha / 2)), float(np.quantile(boot, 1 - alpha / 2)))}


def plot_settling_comparison(comparison: Mapping[str, Any], *, ax=None):
    """Plot the paired difference t_P − t_F (mean and interval) against the remaining-path fraction."""
    from .. import plotting

    if ax is None:
        _, ax = plotting.new_figure(1, width=5.0, height=3.2)
    rows = comparison["rows"]
    f = np.array([r["fraction"] for r in rows])
    mean = np.array([r["mean_difference"] for r in rows])
    lo = np.array([r["low"] for r in rows])
    hi = np.array([r["high"] for r in rows])
    ax.errorbar(f, mean, yerr=[mean - lo, hi - mean], fmt="o-", color=plotting.PALETTE[0], capsize=3,
                label=f"mean over {comparison['n_runs']} seeds, {comparison['confidence']:.0%} interval")
    for r in rows:
        ax.scatter([r["fraction"]] * len(r["frame"]), np.subtract(r["values"], r["frame"]), s=8,
                   color=plotting.PALETTE[1], alpha=0.5, zorder=1)
    ax.axhline(0, color="grey", lw=1)
    ax.axhspan(-comparison["resolution"], comparison["resolution"], color="grey", alpha=0.15,
               label=f"± one recording interval ({comparison['resolution']} steps)")
    ax.set_xscale("log")
    ax.set(xlabel="remaining path as a fraction of the whole (threshold)",
           ylabel=r"$t_P - t_F$ (steps; > 0: frame first)", title="values' minus frame's settling step")
    ax.legend(fontsize=8, loc="best")
    return ax


# ---------------------------------------------------------------------------------------------
# Freezing the frame
# ---------------------------------------------------------------------------------------------


def head_freeze_run(seed: int, freeze_at: int | None, settings: Mapping[str, Any]) -> dict[str, float]:
    """Return the initial and final probe loss (nats) of chapter 4's head with W_Q, W_K frozen from ``freeze_at``.

    ``settings``: ``steps``, ``lr``, ``n_train``, ``n_probe`` of :func:`head_training.train_specialization_head`;
    ``freeze_at=None`` trains everything (the reference run).
    """
    from . import head_training

    steps = int(settings["steps"])
    run = head_training.train_specialization_head(seed, steps=steps, lr=settings["lr"], n_train=settings["n_train"],
                                             n_probe=settings["n_probe"], record_every=steps // 2,
                                             settle_window=steps // 2, freeze_routing_at=freeze_at)
    return {"initial": float(run.probe_loss[0]), "final": float(run.probe_loss[-1])}


def tunnel_freeze_run(seed: int, freeze_at: int | None, settings: Mapping[str, Any]) -> dict[str, float]:
    """Return the calibration (KL to the exact posterior, bits) of a bijection wind tunnel frozen from ``freeze_at``.

    ``settings``: :data:`attention_dynamics.experiments.wind_tunnel.SETTINGS` entries (the bijection ones) plus
    ``n_eval``. ``initial`` is the untrained model's KL on the same evaluation batch.
    """
    import torch

    from .. import calibration
    from . import wind_tunnel

    run = wind_tunnel.train_bijection(settings, seed=seed, checkpoints=False, freeze_routing_at=freeze_at)
    batch = wind_tunnel.bijection_batch_for_eval(settings, seed=seed, n=settings["n_eval"])

    def kl(model) -> float:
        with torch.no_grad():
            return float(calibration.calibration_report(batch.posterior, wind_tunnel.bijection_log_probs(model, batch)).kl_bits)

    torch.manual_seed(stream(seed, "init"))  # the run's own initialisation
    untrained = wind_tunnel.make_bijection_transformer(
        settings["V"], settings["L"], d_model=settings["bij_d_model"], n_layers=settings["bij_n_layers"],
        n_heads=settings["bij_n_heads"]).eval()
    return {"initial": kl(untrained), "final": kl(run.model()), "final_train_loss": float(np.mean(run.losses[-20:]))}


def freeze_frame_experiment(kind: str, settings: Mapping[str, Any], seeds: Sequence[int],
                            freeze_steps: Sequence[int], *, cache_dir: str | Path | None = None,
                            log=print) -> dict[str, Any]:
    """Return every (seed, freeze step) run of ``kind`` (``"head"`` or ``"tunnel"``) plus the unfrozen ones.

    With ``cache_dir``, each finished run is stored there and reused (the computation resumes).
    Result: ``kind``, ``settings``, ``seeds``, ``freeze_steps``, ``runs`` (a list of
    ``{"seed", "freeze_at" (None: unfrozen), "initial", "final", ...}``) and ``unit``.
    """
    run_one = {"head": head_freeze_run, "tunnel": tunnel_freeze_run}[kind]
    cache = Path(cache_dir) if cache_dir else None
    if cache:
        cache.mkdir(parents=True, exist_ok=True)
    tag = json.dumps(dict(settings), sort_keys=True, default=str)
    runs = []
    for seed in seeds:
        for t in [None, *freeze_steps]:
            key = f"{kind}-{hashlib.sha1(tag.encode()).hexdigest()[:10]}-{seed}-{t}.json"
            if cache and (cache / key).exists():
                rec = json.loads((cache / key).read_text())
            else:
                rec = {"seed": int(seed), "freeze_at": t, **run_one(seed, t, settings)}
                if cache:
                    (cache / key).write_text(json.dumps(rec))
            log(f"{kind} seed {seed} freeze {t}: {rec['final']:.4g}")
            runs.append(rec)
    return {"kind": kind, "settings": dict(settings), "seeds": [int(s) for s in seeds],
            "freeze_steps": [int(t) for t in freeze_steps],
            "unit": "nats (probe cross-entropy)" if kind == "head" else "bits (KL to the exact posterior)",
            "runs": runs}


def _table(result: Mapping[str, Any]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Return ``(freeze_steps, frozen (seeds, steps), unfrozen (seeds,), initial (seeds,))`` of a result."""
    seeds, steps = result["seeds"], result["freeze_steps"]
    by = {(r["seed"], r["freeze_at"]): r for r in result["runs"]}
    frozen = np.array([[by[(s, t)]["final"] for t in steps] for s in seeds])
    unfrozen = np.array([by[(s, None)]["final"] for s in seeds])
    initial = np.array([by[(s, None)]["initial"] for s in seeds])
    return np.array(steps), frozen, unfrozen, initial


def freeze_frame_step(result: Mapping[str, Any], margin_fraction: float = 0.01) -> int | None:
    """Return the earliest freeze step from which on every seed's frozen run ends within the margin.

    The margin, per seed, is ``margin_fraction`` of that seed's untrained gap (initial − final of the
    unfrozen run): a frozen run is "within" when its final value exceeds the unfrozen one's by at most
    that. The step must hold for every later freeze step too. None if no freeze step qualifies.
    """
    steps, frozen, unfrozen, initial = _table(result)
    margin = margin_fraction * (initial - unfrozen)  # (seeds,)
    ok = ((frozen - unfrozen[:, None]) <= margin[:, None]).all(axis=0)  # (steps,)
    for k in range(len(steps)):
        if ok[k:].all():
            return int(steps[k])
    return None


def freeze_frame_summary(result: Mapping[str, Any], margin_fraction: float = 0.01) -> dict[str, Any]:
    """Return the freeze curve's numbers: the cost of freezing at each step (mean, min, max over seeds).

    ``cost`` is the frozen run's final value minus the unfrozen one's (per seed), in bits;
    ``margin_bits`` the mean margin of :func:`freeze_frame_step`; ``unfrozen_sd_bits`` the seed-to-seed
    standard deviation of the unfrozen runs' final values; ``gap_bits`` the mean untrained gap.
    """
    steps, frozen, unfrozen, initial = _table(result)
    to_bits = BITS if result["kind"] == "head" else 1.0
    cost = (frozen - unfrozen[:, None]) * to_bits
    return {
        "steps": steps.tolist(),
        "cost_mean_bits": cost.mean(0).tolist(),
        "cost_min_bits": cost.min(0).tolist(),
        "cost_max_bits": cost.max(0).tolist(),
        "freeze_frame_step": freeze_frame_step(result, margin_fraction),
        "margin_fraction": margin_fraction,
        "margin_bits": float(margin_fraction * (initial - unfrozen).mean() * to_bits),
        "gap_bits": float((initial - unfrozen).mean() * to_bits),
        "unfrozen_final_bits": float(unfrozen.mean() * to_bits),
        "unfrozen_sd_bits": float(unfrozen.std(ddof=1) * to_bits) if len(unfrozen) > 1 else float("nan"),
        "n_seeds": len(unfrozen),
        "total_steps": int(result["settings"].get("steps", result["settings"].get("bij_steps", 0))),
    }


def plot_freeze_frame(results: Mapping[str, Mapping[str, Any]], margin_fraction: float = 0.01, *, axes=None):
    """Plot, per setting, the cost in bits of freezing W_Q, W_K at step t against t (seeds and mean)."""
    from .. import plotting

    if axes is None:
        _, axes = plotting.new_figure(len(results), width=4.2, height=3.2)
    axes = np.atleast_1d(axes)
    for ax, (title, result) in zip(axes, results.items()):
        s = freeze_frame_summary(result, margin_fraction)
        steps = np.maximum(np.array(s["steps"]), 1)
        _, frozen, unfrozen, _ = _table(result)
        to_bits = BITS if result["kind"] == "head" else 1.0
        for row, base in zip(frozen, unfrozen):
            ax.plot(steps, np.maximum((row - base) * to_bits, 1e-6), color=plotting.PALETTE[0], lw=0.8, alpha=0.4)
        ax.plot(steps, np.maximum(s["cost_mean_bits"], 1e-6), "o-", color=plotting.PALETTE[0], label="mean over seeds")
        ax.axhline(s["margin_bits"], color="black", ls="--", lw=1,
                   label=f"margin: {margin_fraction:.0%} of the untrained gap")
        if s["freeze_frame_step"] is not None:
            ax.axvline(max(s["freeze_frame_step"], 1), color=plotting.PALETTE[2], lw=1, label="frame in place")
        ax.set_xscale("symlog", linthresh=1)
        ax.set_yscale("log")
        ax.set(title=title, xlabel="step t at which W_Q, W_K are frozen",
               ylabel="final cost over the unfrozen run (bits)")
        ax.legend(fontsize=7, loc="upper right")
    return axes


# ---------------------------------------------------------------------------------------------
# The heavy computation: one entry point, one committed JSON
# ---------------------------------------------------------------------------------------------

#: What ``data/frame_freeze.json`` holds. The head: chapter 4's book settings. The tunnel: chapter 6's
#: book-scale bijection transformer (its model, batch and learning rate) for a quarter of its steps with a
#: proportionally shorter warm-up (2 shared cores: a reduced but stated budget).
HEAVY_SETTINGS: dict[str, dict[str, Any]] = {
    "head": {
        "settings": {"steps": 2000, "lr": 0.5, "n_train": 256, "n_probe": 256},
        "seeds": [0, 1, 2],
        "freeze_steps": [0, 25, 50, 100, 150, 200, 300, 400, 600, 1000],
    },
    "tunnel": {
        "settings": {"V": 10, "L": 10, "bij_d_model": 64, "bij_n_layers": 4, "bij_n_heads": 2, "bij_steps": 500,
                     "bij_batch": 64, "bij_lr": 1e-3, "bijection_target": "posterior", "warmup_steps": 50,
                     "n_checkpoints": 2, "n_eval": 1000},
        "seeds": [0, 1],
        "freeze_steps": [0, 50, 200],
    },
}


def compute(heavy: Mapping[str, Mapping[str, Any]] = HEAVY_SETTINGS, *, cache_dir: str | Path | None = None,
            kinds: Sequence[str] = ("head", "tunnel"), log=print) -> dict[str, Any]:
    """Return the freeze-the-frame results of every kind in ``heavy`` (see :func:`freeze_frame_experiment`)."""
    out: dict[str, Any] = {}
    for kind in kinds:
        h = heavy[kind]
        out[kind] = freeze_frame_experiment(kind, h["settings"], h["seeds"], h["freeze_steps"],
                                            cache_dir=cache_dir, log=log)
    return out


def load_freeze_results(path: str | Path = DATA_PATH) -> dict[str, Any]:
    """Return the committed freeze-the-frame results (:data:`DATA_PATH`), with the provenance they were saved with."""
    return load_results(path)


def main(argv: Sequence[str] | None = None) -> int:
    """Compute the freeze-the-frame results and write them as JSON with their provenance (``--out``, default :data:`DATA_PATH`)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(DATA_PATH))
    parser.add_argument("--cache", default="build/frame_freeze_cache", help="per-run cache (resumable)")
    parser.add_argument("--kinds", nargs="+", default=["head", "tunnel"])
    args = parser.parse_args(argv)
    results = compute(cache_dir=args.cache, kinds=args.kinds, log=lambda m: print(m, flush=True))
    save_results(results, args.out)
    print(f"wrote {args.out}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
