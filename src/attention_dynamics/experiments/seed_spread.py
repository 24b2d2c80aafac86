"""Verdicts that one seed cannot decide: trained results as a mean over seeds with a 95% interval.

Three of Part III's trained results land so close to the threshold they are judged against that
their seed-to-seed spread (``book/claim_tolerances.json``, measured by ``ledger --measure-spread``)
reaches across it: the value manifold's PC1 share (Paper I: > 80 %), its rank correlation with the
posterior entropy, and Mamba's binding accuracy. A single seed's value then says nothing about the
paper's claim; a re-execution on another machine could even land on the other side.

For those, chapters 6 and 7 state the mean over :data:`SEEDS` with a Student-t 95 % interval,
computed here with the chapters' own training functions and settings (seed ``s`` trains exactly
the model the chapter trains with ``seed=s``), and decide the claim by the whole interval
(:func:`attention_dynamics.claims.claim_status`): pass if the interval clears the bound, fail if it
misses it entirely, *undecided* otherwise. Training five seeds of two models does not fit the
chapters' time budget, so the results are stored in ``data/seed_spread.json`` (with their settings
and the package version) and read by the chapters; ``python -m attention_dynamics.experiments.seed_spread``
regenerates them (a few minutes on 2 cores) and the tests regenerate them at the fast scale.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from ..paths import data_path
from ..results import load_results, save_results
from ..settings import chapter_settings, check_scale

__all__ = ["SEEDS", "SPREAD_FILE", "load", "seed_range", "t_interval", "bijection_geometry_seed", "binding_seed",
           "compute", "compute_longer_binding", "LONGER_FACTOR", "main"]

#: The seeds of the spread runs: the chapters' default seed 0 and four more.
SEEDS = (0, 1, 2, 3, 4)
#: A longer run, the evidence that decides a failing verdict, trains this many times as long.
LONGER_FACTOR = 4
#: The loss curve of a longer run is stored as this many block means.
CURVE_POINTS = 40
#: The committed results (``python -m attention_dynamics.experiments.seed_spread`` writes it).
SPREAD_FILE = "seed_spread.json"


def load() -> dict[str, Any]:
    """Return the committed spread results (``data/seed_spread.json``)."""
    return load_results(data_path(SPREAD_FILE))


def seed_range(spread: dict[str, Any], group: str, key: str) -> tuple[float, float]:
    """Return the smallest and largest per-seed value of ``key`` in run group ``group`` of ``spread``."""
    values = [float(run[key]) for run in spread["runs"][group]]
    return min(values), max(values)


def bijection_geometry_seed(scale: str, seed: int) -> dict[str, float]:
    """Train chapter 6's bijection transformer with ``seed``; return its value-manifold measures.

    The same settings, seed streams and probe batch as chapter 6 (``wind_tunnel``): the last layer's
    attention output at the key positions, PC1's share of variance and its Spearman ρ with the
    exact posterior entropy.
    """
    from . import wind_tunnel

    cfg = chapter_settings(wind_tunnel.SETTINGS, scale, device="cpu")
    run = wind_tunnel.train_bijection(cfg, seed=seed, checkpoints=False)
    geo = wind_tunnel.bijection_geometry(run.model(), wind_tunnel.bijection_probe_batch(cfg, seed=seed))
    return {"seed": seed, "value_pc1_ratio": float(geo.value_ratios[0]),
            "value_pc1_entropy_spearman": float(geo.value_pc1_entropy_spearman),
            "final_loss": float(np.mean(run.losses[-100:]))}


def binding_seed(scale: str, seed: int, family: str = "mamba", steps: int | None = None) -> dict[str, float]:
    """Train chapter 7's ``family`` model on the binding task with ``seed``; return its accuracy and loss trend.

    As chapter 7's :func:`architectures.compare_architectures` does for that cell of its grid: the
    same matched size, schedule, model seed and evaluation set. ``steps``: the training steps (default:
    the chapter's; a longer run stretches the same warm-up-and-cosine schedule over more steps).
    ``loss_before``/``loss_after``: the mean training loss over the second-to-last and the last 10 % of
    the steps (still falling or not). A run of other than the chapter's length also returns its step
    count, its loss curve as :data:`CURVE_POINTS` block means and its CPU time.
    """
    from . import architectures as arch

    cfg = chapter_settings(arch.SETTINGS, scale, device="cpu")
    tasks = arch.book_tasks(cfg)
    index = [t.name for t in tasks].index("binding")
    run = arch.train_and_evaluate(
        family=family, task=tasks[index], target_params=cfg.target_params, steps=cfg.steps if steps is None else steps,
        batch_size=cfg.batch_size, lr=cfg.lr, seed=seed, eval_sequences=cfg.eval_sequences,
        eval_seed=arch.evaluation_seed(seed, index))
    window = max(1, len(run.losses) // 10)
    result = {"seed": seed, "accuracy": float(run.metrics["accuracy"]),
              "loss_before": float(np.mean(run.losses[-2 * window:-window])),
              "loss_after": float(np.mean(run.losses[-window:]))}
    if steps is not None and steps != cfg.steps:
        blocks = np.array_split(np.asarray(run.losses, dtype=float), min(CURVE_POINTS, len(run.losses)))
        result.update(steps=int(run.steps), loss_curve=[float(b.mean()) for b in blocks],
                      cpu_seconds=float(run.cpu_seconds))
    return result


def _binding_seed_longer(scale: str, seed: int, family: str) -> dict[str, float]:
    from . import architectures as arch

    return binding_seed(scale, seed, family, steps=LONGER_FACTOR * arch.SETTINGS[scale]["steps"])


def compute_longer_binding(stored: dict[str, Any], families: Sequence[str] = ("mamba",), *,
                           processes: int | None = None, log=print) -> dict[str, Any]:
    """Return ``stored`` (the spread results) with the binding runs of ``families`` repeated
    :data:`LONGER_FACTOR` times as long.

    The evidence that decides a binding verdict (a fail at the chapter's budget is a finding only if a
    4× longer run does not change it, and a "does not realise" only if more training does not make the
    model realise it): the same seeds, model and evaluation set, the schedule stretched over
    ``LONGER_FACTOR`` × the chapter's steps; stored under ``runs["binding_<family>_longer"]`` with its
    interval ``intervals["binding_accuracy_<family>_longer"]``. A family without chapter-length spread
    runs gets those too (``runs["binding_<family>"]``); runs already stored are kept, not repeated.
    """
    from ..models.factory import FAMILIES
    from ..training import map_parallel
    from . import architectures as arch

    unknown = [f for f in families if f not in FAMILIES]
    if unknown:
        raise ValueError(f"unknown model families {unknown}; choose from {', '.join(FAMILIES)}")
    scale, seeds = stored["scale"], [int(s) for s in stored["seeds"]]
    steps = LONGER_FACTOR * arch.SETTINGS[scale]["steps"]
    runs, intervals = dict(stored["runs"]), dict(stored["intervals"])
    for family in families:
        if f"binding_{family}" not in runs:
            log(f"training {family} on binding ({arch.SETTINGS[scale]['steps']} steps), seeds {seeds} ...")
            runs[f"binding_{family}"] = map_parallel(
                binding_seed, [dict(scale=scale, seed=s, family=family) for s in seeds], processes=processes)
            intervals[f"binding_accuracy_{family}"] = t_interval([r["accuracy"] for r in runs[f"binding_{family}"]])
        if f"binding_{family}_longer" in runs:
            continue
        log(f"training {family} on binding {LONGER_FACTOR}× longer ({steps} steps), seeds {seeds} ...")
        longer = map_parallel(_binding_seed_longer, [dict(scale=scale, seed=s, family=family) for s in seeds],
                              processes=processes)
        for run in longer:
            log(f"{family}, seed {run['seed']}: accuracy {run['accuracy']:.3f} after {run['steps']} steps, "
                f"{run['cpu_seconds']:.0f} CPU-s")
        runs[f"binding_{family}_longer"] = longer
        intervals[f"binding_accuracy_{family}_longer"] = t_interval([r["accuracy"] for r in longer])
    longer_families = [f for f in FAMILIES if f"binding_{f}_longer" in runs]
    base = {k: v for k, v in stored["settings"]["binding"].items() if k != "family"}
    settings = {**stored["settings"], "binding_longer": {**base, "steps": steps, "families": longer_families}}
    earlier = stored.get("provenance_of_earlier_runs") or stored.get("provenance")
    return {**stored, "provenance_of_earlier_runs": earlier, "settings": settings, "runs": runs, "intervals": intervals}


def compute(scale: str = "book", seeds: Sequence[int] = SEEDS, *, processes: int | None = None) -> dict[str, Any]:
    """Return the per-seed results and the 95 % intervals of every spread measure (runs in parallel)."""
    from ..training import map_parallel
    from . import architectures as arch
    from . import wind_tunnel

    check_scale(scale)
    seeds = [int(s) for s in seeds]
    if len(seeds) < 2 or len(set(seeds)) != len(seeds) or min(seeds) < 0:
        raise ValueError(f"seeds must be at least two distinct non-negative integers, got {seeds}")
    jobs = [("geometry", dict(scale=scale, seed=s)) for s in seeds] + [("binding", dict(scale=scale, seed=s)) for s in seeds]
    functions = {"geometry": bijection_geometry_seed, "binding": binding_seed}
    # One function per pool: map_parallel takes one function, so run the two groups in turn.
    results = {name: map_parallel(functions[name], [job for kind, job in jobs if kind == name], processes=processes)
               for name in functions}
    geometry_runs, binding_runs = results["geometry"], results["binding"]
    return {
        "about": "Mean over seeds with a Student-t 95% interval of trained results whose seed spread reaches "
                 "their threshold; written by `python -m attention_dynamics.experiments.seed_spread`.",
        "scale": scale,
        "seeds": seeds,
        "settings": {"geometry": wind_tunnel.bijection_settings(wind_tunnel.SETTINGS[scale]),
                     "binding": {**arch.SETTINGS[scale], "family": "mamba"}},
        "runs": {"geometry": geometry_runs, "binding_mamba": binding_runs},
        "intervals": {
            "value_pc1_ratio": t_interval([r["value_pc1_ratio"] for r in geometry_runs]),
            "value_pc1_entropy_spearman": t_interval([r["value_pc1_entropy_spearman"] for r in geometry_runs]),
            "binding_accuracy_mamba": t_interval([r["accuracy"] for r in binding_runs]),
        },
    }


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: compute the spread runs and write them (default: the committed data file)."""
    parser = argparse.ArgumentParser(prog="python -m attention_dynamics.experiments.seed_spread", description=__doc__.split("\n")[0])
    parser.add_argument("--scale", default="book", choices=("fast", "book", "paper"))
    parser.add_argument("--seeds", type=int, nargs="+", default=list(SEEDS))
    parser.add_argument("--out", type=Path, default=None, help=f"output file (default: the package's data/{SPREAD_FILE})")
    parser.add_argument("--longer-binding", nargs="*", default=None, metavar="FAMILY",
                        help=f"add these families' binding runs {LONGER_FACTOR}x as long (default: mamba) to the "
                             "stored results, keeping the rest")
    args = parser.parse_args(argv)
    out = args.out or data_path(SPREAD_FILE)
    if args.longer_binding is not None:
        stored = load_results(out) if out.exists() else compute(args.scale, args.seeds)
        result = compute_longer_binding(stored, args.longer_binding or ("mamba",))
    else:
        result = compute(args.scale, args.seeds)
    path = save_results(result, out)
    for name, ci in result["intervals"].items():
        print(f"{name}: {ci['mean']:.4f} (95% interval {ci['low']:.4f} to {ci['high']:.4f}, n = {ci['n']})")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
