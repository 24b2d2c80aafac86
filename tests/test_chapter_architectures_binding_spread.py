"""Chapter 7's stored result ``binding_seed_spread`` (chapters.architectures.binding_spread): the committed file
against its runs and the chapter's settings, and a fast regeneration through ``compute`` whose runs are the
chapter's own models, at its length and four times as long."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from scipy import stats

from attention_dynamics.book import compute
from attention_dynamics.book.nbcompare import assert_book_close
from attention_dynamics.chapters.architectures import binding_spread, runs, settings
from attention_dynamics.core.paths import data_path
from attention_dynamics.training.families import compare_architectures


def _interval_matches_scipy(interval, values) -> None:
    low, high = stats.t.interval(0.95, df=len(values) - 1, loc=np.mean(values), scale=stats.sem(values))
    assert_book_close(interval["low"], low)
    assert_book_close(interval["high"], high)
    assert_book_close(interval["mean"], np.mean(values))
    assert interval["n"] == len(values)


@pytest.mark.parametrize("seeds", [[3], [1, 1], [0, -1]])
def test_jobs_reject_bad_seeds(seeds):
    with pytest.raises(ValueError, match="at least two distinct"):
        binding_spread.binding_seed_spread_jobs("fast", seeds)


def test_jobs_are_each_family_and_seed_at_both_lengths():
    jobs = binding_spread.binding_seed_spread_jobs("book", [0, 1])
    steps = settings.SETTINGS["book"].steps
    assert {j.key for j in jobs} == {f"{f}{tag}-seed{s}" for f in binding_spread.BINDING_SPREAD_FAMILIES for tag in ("", "-longer")
                                     for s in (0, 1)}
    longer = [j for j in jobs if "-longer-" in j.key]
    assert {j.kwargs["steps"] for j in longer} == {binding_spread.LONGER_FACTOR * steps}
    assert all("steps" not in j.kwargs for j in jobs if j not in longer)


def _check_file(stored, scale: str) -> None:
    """The file's settings are the chapter's at ``scale``; its intervals are those of its runs."""
    cfg = settings.SETTINGS[scale]
    base = {k: v for k, v in cfg.as_dict().items() if k != "scale"}
    steps = binding_spread.LONGER_FACTOR * cfg.steps
    assert stored["scale"] == scale
    assert stored["settings"]["binding"] == {**base, "family": "mamba"}
    assert stored["settings"]["binding_longer"] == {**base, "steps": steps, "families": list(binding_spread.BINDING_SPREAD_FAMILIES)}
    for family in binding_spread.BINDING_SPREAD_FAMILIES:
        for suffix in ("", "_longer"):
            group = stored["runs"][f"binding_{family}{suffix}"]
            assert [r["seed"] for r in group] == stored["seeds"]
            _interval_matches_scipy(stored["intervals"][f"binding_accuracy_{family}{suffix}"],
                                    [r["accuracy"] for r in group])
            if suffix:
                assert {r["steps"] for r in group} == {steps}
                assert all(len(r["loss_curve"]) == min(binding_spread.CURVE_POINTS, steps) for r in group)
            else:
                assert all("loss_curve" not in r for r in group)  # the chapter's length: no curve stored


def test_committed_file_is_consistent_with_its_runs_and_the_chapters_settings():
    stored = json.loads(data_path(binding_spread.SPREAD_FILE).read_text(encoding="utf-8"))
    assert binding_spread.BINDING_SEED_SPREAD.committed_scale == "book"
    assert stored["seeds"] == list(binding_spread.SEEDS)
    _check_file(stored, "book")
    assert binding_spread.BINDING_SEED_SPREAD.load() == stored


def test_the_fast_regeneration_has_the_committed_shape_and_its_runs_are_the_chapters_models(tmp_path):
    """Seed s of the spread is the model chapter 7's grid trains with seed=s; the longer run stretches it."""
    folder = compute.compute("binding_seed_spread", "fast", seeds=[0, 1], root=tmp_path, processes=1,
                             log=lambda m: None)
    result = json.loads((folder / binding_spread.SPREAD_FILE).read_text())
    committed = binding_spread.BINDING_SEED_SPREAD.load()
    assert set(committed) == set(result) and result["seeds"] == [0, 1]
    _check_file(result, "fast")
    cfg = settings.resolve("fast", device="cpu")
    torch.set_num_threads(1)  # as the jobs run
    grid = compare_architectures(runs.book_tasks(cfg), families=("mamba",), target_params=cfg.target_params,
                                 steps=cfg.steps, batch_size=cfg.batch_size, lr=cfg.lr, seed=1,
                                 eval_sequences=cfg.eval_sequences, processes=1)
    assert_book_close(result["runs"]["binding_mamba"][1]["accuracy"], grid[("mamba", "binding")].metrics["accuracy"])
    direct = binding_spread.binding_seed("fast", 1, "lstm", steps=binding_spread.LONGER_FACTOR * cfg.steps)
    timeless = lambda run: {k: v for k, v in run.items() if k != "cpu_seconds"}  # noqa: E731
    assert timeless(result["runs"]["binding_lstm_longer"][1]) == timeless(direct)
