"""Chapter 6's stored result ``bijection_seed_spread``: the value manifold's measures over five seeds.

The value manifold's PC1 share (Paper I: > 80 %) and its rank correlation with the posterior entropy land so close
to their thresholds that their seed-to-seed spread reaches across them: one seed's value says nothing about the
paper's claim. The chapter states them as a mean over :data:`SEEDS` with a Student-t 95 % interval, computed here
with the chapter's own model and settings (seed ``s`` trains exactly the model the chapter trains with ``seed=s``),
and decides the claims by the whole interval. Training five models does not fit the chapter's budget, so
``python -m attention_dynamics compute bijection_seed_spread`` stores them in ``data/bijection_seed_spread.json``.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from ...diagnostics.wind_tunnel_geometry import bijection_geometry
from ...ledger.results import Job, StoredResult, check_seeds, save_results, t_intervals
from ...training.wind_tunnels import bijection_probe_batch, train_bijection
from .settings import SETTINGS

__all__ = ["SEEDS", "SPREAD_FILE", "bijection_geometry_seed", "BIJECTION_SEED_SPREAD"]

#: The seeds of the spread runs: the chapter's default seed 0 and four more.
SEEDS = (0, 1, 2, 3, 4)
#: The committed results.
SPREAD_FILE = "bijection_seed_spread.json"


def bijection_geometry_seed(scale: str, seed: int) -> dict[str, float]:
    """Train chapter 6's bijection transformer at ``scale`` with ``seed``; return its value-manifold measures.

    The value manifold is the last layer's attention output at the key positions: PC1's share of variance and its
    Spearman ρ with the exact posterior entropy, on the chapter's probe batch; ``final_loss``: the mean training loss
    over the last 100 steps (nats).
    """
    cfg = BIJECTION_SEED_SPREAD.spec(scale)
    run = train_bijection(cfg.bijection, seed=seed)
    geo = bijection_geometry(run.model(), bijection_probe_batch(cfg.bijection, seed=seed, n=cfg.n_probe))
    return {"seed": seed, "value_pc1_ratio": float(geo.value_ratios[0]),
            "value_pc1_entropy_spearman": float(geo.value_pc1_entropy_spearman),
            "final_loss": float(np.mean(run.losses[-100:]))}


def bijection_seed_spread_jobs(scale: str, seeds: Sequence[int] | None = None) -> list[Job]:
    """Return one job per seed (:data:`SEEDS` unless ``seeds`` are given; at least two)."""
    return [Job(f"geometry-seed{s}", bijection_geometry_seed, {"scale": scale, "seed": s},
                cost=BIJECTION_SEED_SPREAD.spec(scale).bijection.steps) for s in check_seeds(seeds, SEEDS)]


def assemble_bijection_seed_spread(scale: str, outputs: Mapping[str, Any], folder: Path) -> None:
    """Write ``bijection_seed_spread.json``: the per-seed runs and the interval of each measure."""
    runs = sorted(outputs.values(), key=lambda r: r["seed"])
    cfg = BIJECTION_SEED_SPREAD.spec(scale)
    save_results({
        "about": "Chapter 6's value-manifold measures over seeds, mean with a Student-t 95% interval; written by "
                 "`python -m attention_dynamics compute bijection_seed_spread`.",
        "scale": scale, "seeds": [r["seed"] for r in runs],
        "settings": {"tunnel": dataclasses.asdict(cfg.bijection), "n_probe": cfg.n_probe},
        "runs": {"geometry": runs},
        "intervals": t_intervals(runs, ["value_pc1_ratio", "value_pc1_entropy_spearman"]),
    }, folder / SPREAD_FILE)


BIJECTION_SEED_SPREAD = StoredResult(
    name="bijection_seed_spread", chapter="bayesian_manifolds",
    about="chapter 6's bijection transformer trained on five seeds: the value manifold's PC1 share and its "
          "correlation with the posterior entropy, with intervals",
    files=(SPREAD_FILE,), specs={scale: SETTINGS[scale] for scale in ("fast", "book")}, committed_scale="book",
    expected={"fast": "5 jobs, a minute", "book": "5 jobs of ~4 CPU-min each"},
    jobs=bijection_seed_spread_jobs, assemble=assemble_bijection_seed_spread)

