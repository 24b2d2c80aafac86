"""Chapter 6's stored result ``bijection_seed_spread``: the committed file against its runs and the chapter's settings,
and a fast regeneration through ``compute`` whose runs are the chapter's own models."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
from scipy import stats

from attention_dynamics.book import compute
from attention_dynamics.book.nbcompare import assert_book_close
from attention_dynamics.chapters.bayesian_manifolds import seed_spread, settings
from attention_dynamics.core.paths import data_path
from attention_dynamics.diagnostics.wind_tunnel_geometry import bijection_geometry
from attention_dynamics.ledger.results import seed_range
from attention_dynamics.training import wind_tunnels as wt


def _interval_matches_scipy(interval, values) -> None:
    low, high = stats.t.interval(0.95, df=len(values) - 1, loc=np.mean(values), scale=stats.sem(values))
    assert_book_close(interval["low"], low)
    assert_book_close(interval["high"], high)
    assert_book_close(interval["mean"], np.mean(values))
    assert interval["n"] == len(values)


@pytest.mark.parametrize("seeds", [[3], [1, 1], [0, -1]])
def test_jobs_reject_bad_seeds(seeds):
    with pytest.raises(ValueError, match="at least two distinct"):
        seed_spread.bijection_seed_spread_jobs("fast", seeds)


def test_jobs_are_one_per_seed():
    jobs = seed_spread.bijection_seed_spread_jobs("book")
    assert [j.key for j in jobs] == [f"geometry-seed{s}" for s in seed_spread.SEEDS]
    assert all(j.kwargs == {"scale": "book", "seed": s} for j, s in zip(jobs, seed_spread.SEEDS))


def _check_file(stored, scale: str) -> None:
    """The file's settings are the chapter's at ``scale``, and its intervals are those of its runs."""
    cfg = settings.SETTINGS[scale]
    assert stored["scale"] == scale
    assert stored["settings"] == {"tunnel": json.loads(json.dumps(dataclasses.asdict(cfg.bijection))),
                                  "n_probe": cfg.n_probe}
    runs = stored["runs"]["geometry"]
    assert [r["seed"] for r in runs] == stored["seeds"]
    assert set(stored["intervals"]) == {"value_pc1_ratio", "value_pc1_entropy_spearman"}
    for name in stored["intervals"]:
        _interval_matches_scipy(stored["intervals"][name], [r[name] for r in runs])


def test_committed_file_is_consistent_with_its_runs_and_the_chapters_settings():
    stored = json.loads(data_path(seed_spread.SPREAD_FILE).read_text(encoding="utf-8"))
    assert seed_spread.BIJECTION_SEED_SPREAD.committed_scale == "book"
    assert stored["seeds"] == list(seed_spread.SEEDS)
    _check_file(stored, "book")
    assert seed_spread.BIJECTION_SEED_SPREAD.load() == stored
    low, high = seed_range(stored, "geometry", "value_pc1_ratio")
    assert (low, high) == (min(r["value_pc1_ratio"] for r in stored["runs"]["geometry"]),
                           max(r["value_pc1_ratio"] for r in stored["runs"]["geometry"]))


@pytest.mark.slow
def test_the_fast_regeneration_has_the_committed_shape_and_its_runs_are_the_chapters_models(tmp_path):
    """Seed s of the spread runs is the model chapter 6 trains with seed=s (measured on the chapter's probe)."""
    folder = compute.compute("bijection_seed_spread", "fast", seeds=[0, 1], root=tmp_path, processes=1,
                             log=lambda m: None)
    assert folder == tmp_path / "bijection_seed_spread" / "fast-seeds-0-1"
    result = json.loads((folder / seed_spread.SPREAD_FILE).read_text())
    committed = seed_spread.BIJECTION_SEED_SPREAD.load()
    assert set(result) == set(committed) and result["seeds"] == [0, 1]
    assert set(result["runs"]["geometry"][0]) == set(committed["runs"]["geometry"][0])
    _check_file(result, "fast")
    cfg = settings.resolve("fast", device="cpu")
    run = wt.train_bijection(cfg.bijection, seed=1, checkpoints=cfg.n_checkpoints)  # as chapter 6 trains it
    geo = bijection_geometry(run.model(), wt.bijection_probe_batch(cfg.bijection, seed=1, n=cfg.n_probe))
    assert_book_close(result["runs"]["geometry"][1]["value_pc1_ratio"], float(geo.value_ratios[0]), rtol=1e-6)
    assert_book_close(result["runs"]["geometry"][1]["value_pc1_entropy_spearman"],
                      float(geo.value_pc1_entropy_spearman), rtol=1e-6)
