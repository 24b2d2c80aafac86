"""Chapter 7's stored result ``binding_seed_spread``: binding accuracy over five seeds, at the chapter's budget and
four times as long.

Mamba's binding accuracy varies across seeds more than its distance to the 90 % threshold, so one seed decides
nothing: the chapter states it as a mean over :data:`SEEDS` with a Student-t 95 % interval, computed here with the
chapter's own model, settings and evaluation set (seed ``s`` trains exactly the model the chapter trains with
``seed=s``). A fail at the chapter's budget is a finding only if a run four times as long does not change it, and a
"does not realise" only if more training does not make the model realise it: Mamba and the LSTM are also trained
:data:`LONGER_FACTOR` times as long (the same seeds, model and evaluation set, the warm-up-and-cosine schedule
stretched). Computed by ``python -m attention_dynamics compute binding_seed_spread`` into
``data/binding_seed_spread.json``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from ...ledger.results import Job, StoredResult, check_seeds, save_results, t_intervals
from ...models.registry import family as family_entry
from ...training.families import evaluation_seed, train_and_evaluate
from .runs import book_tasks
from .settings import SETTINGS

__all__ = ["SEEDS", "BINDING_SPREAD_FAMILIES", "LONGER_FACTOR", "CURVE_POINTS", "SPREAD_FILE", "binding_seed",
           "BINDING_SEED_SPREAD"]

#: The seeds of the spread runs: the chapter's default seed 0 and four more.
SEEDS = (0, 1, 2, 3, 4)
#: The families whose binding is stated over seeds and at a longer run.
BINDING_SPREAD_FAMILIES = ("mamba", "lstm")
#: A longer run, the evidence that decides a failing verdict, trains this many times as long.
LONGER_FACTOR = 4
#: The loss curve of a longer run is stored as this many block means.
CURVE_POINTS = 40
#: The committed results.
SPREAD_FILE = "binding_seed_spread.json"


def binding_seed(scale: str, seed: int, family: str = "mamba", steps: int | None = None) -> dict[str, Any]:
    """Train chapter 7's ``family`` model on the binding task with ``seed``; return its accuracy and loss trend.

    As chapter 7's grid does for that cell: the same matched size, schedule, model seed and evaluation set.
    ``steps``: the training steps (default: the chapter's; a longer run stretches the same warm-up-and-cosine
    schedule over more steps). ``loss_before``/``loss_after``: the mean training loss over the second-to-last and
    the last 10 % of the steps (still falling or not). A run of other than the chapter's length also returns its
    step count, its loss curve as :data:`CURVE_POINTS` block means and its CPU time.
    """
    cfg = BINDING_SEED_SPREAD.spec(scale)
    tasks = book_tasks(cfg)
    index = [t.name for t in tasks].index("binding")
    run = train_and_evaluate(
        family=family, task=tasks[index], target_params=cfg.target_params, steps=cfg.steps if steps is None else steps,
        batch_size=cfg.batch_size, lr=cfg.lr, seed=seed, eval_sequences=cfg.eval_sequences,
        eval_seed=evaluation_seed(seed, index))
    window = max(1, len(run.losses) // 10)
    result = {"seed": seed, "accuracy": float(run.metrics["accuracy"]),
              "loss_before": float(np.mean(run.losses[-2 * window:-window])),
              "loss_after": float(np.mean(run.losses[-window:]))}
    if steps is not None and steps != cfg.steps:
        blocks = np.array_split(np.asarray(run.losses, dtype=float), min(CURVE_POINTS, len(run.losses)))
        result.update(steps=int(run.steps), loss_curve=[float(b.mean()) for b in blocks],
                      cpu_seconds=float(run.cpu_seconds))
    return result


def binding_seed_spread_jobs(scale: str, seeds: Sequence[int] | None = None) -> list[Job]:
    """Return, for each family and seed, the chapter-length run and the run :data:`LONGER_FACTOR` times as long."""
    seeds = check_seeds(seeds, SEEDS)
    steps = BINDING_SEED_SPREAD.spec(scale).steps
    jobs = []
    for family in BINDING_SPREAD_FAMILIES:
        cost = steps * family_entry(family).step_cost
        for s in seeds:
            jobs.append(Job(f"{family}-seed{s}", binding_seed, {"scale": scale, "seed": s, "family": family},
                            cost=cost))
            jobs.append(Job(f"{family}-longer-seed{s}", binding_seed,
                            {"scale": scale, "seed": s, "family": family, "steps": LONGER_FACTOR * steps},
                            cost=LONGER_FACTOR * cost))
    return jobs


def assemble_binding_seed_spread(scale: str, outputs: Mapping[str, Any], folder: Path) -> None:
    """Write ``binding_seed_spread.json``: the runs of each family at both lengths, and their intervals."""
    cfg = BINDING_SEED_SPREAD.spec(scale)
    runs: dict[str, list] = {}
    for family in BINDING_SPREAD_FAMILIES:
        for tag, suffix in (("", ""), ("-longer", "_longer")):
            group = sorted((o for k, o in outputs.items() if k.startswith(f"{family}{tag}-seed")), key=lambda r: r["seed"])
            runs[f"binding_{family}{suffix}"] = group
    intervals = {f"binding_accuracy_{name.removeprefix('binding_')}": t_intervals(group, ["accuracy"])["accuracy"]
                 for name, group in runs.items()}
    base = {k: v for k, v in cfg.as_dict().items() if k != "scale"}
    save_results({
        "about": "Chapter 7's binding accuracy over seeds, at the chapter's budget and four times as long, mean with a "
                 "Student-t 95% interval; written by `python -m attention_dynamics compute binding_seed_spread`.",
        "scale": scale, "seeds": sorted({r["seed"] for group in runs.values() for r in group}),
        "settings": {"binding": {**base, "family": "mamba"},
                     "binding_longer": {**base, "steps": LONGER_FACTOR * cfg.steps, "families": list(BINDING_SPREAD_FAMILIES)}},
        "runs": runs, "intervals": intervals,
    }, folder / SPREAD_FILE)


BINDING_SEED_SPREAD = StoredResult(
    name="binding_seed_spread", chapter="architectures",
    about="Mamba's and the LSTM's binding over five seeds, at the chapter's budget and four times as long",
    files=(SPREAD_FILE,), specs={scale: SETTINGS[scale] for scale in ("fast", "book")}, committed_scale="book",
    expected={"fast": "20 jobs, a minute", "book": "20 jobs: Mamba ~2 CPU-min at the chapter's length and ~3 at 4x "
                                                    "(its binding sequences are short), the LSTM seconds"},
    jobs=binding_seed_spread_jobs, assemble=assemble_binding_seed_spread)

