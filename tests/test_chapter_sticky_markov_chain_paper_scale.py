"""Chapter 5's stored result ``sticky_chain_paper_scale`` (chapters.sticky_markov_chain.paper_scale): the committed
file against today's configuration, and a fast regeneration through ``compute`` with the same structure, whose jobs
are the chapter's runs."""

from __future__ import annotations

import json
import math

import pytest
import torch

from attention_dynamics.book import compute
from attention_dynamics.book.nbcompare import assert_book_close
from attention_dynamics.chapters.sticky_markov_chain import paper_scale, runs
from attention_dynamics.core.paths import data_path
from attention_dynamics.ledger.results import load_results
from attention_dynamics.tasks import sticky_chain


def _check_structure(results, config):
    """What the chapter reads from the paper-scale file, and sanity bounds on it."""
    ln8 = math.log(8)
    assert set(results) >= {"config", "ci", "rho_sweep", "long_run", "deep"}
    for kind, schedules in config["ci_runs"].items():
        block = results["ci"][kind]
        hmin = sticky_chain.bayes_floor_nats(sticky_chain.transition_matrix(kind))
        assert_book_close(block["hmin_nats"], hmin)
        for name, seeds in schedules.items():
            assert len(block["final"][name]) == len(seeds)
            assert all(0.5 * hmin < f["loss"] < ln8 + 0.1 for f in block["final"][name])
            if name != "sgd":
                ci = block["speedup_ci"][name]
                assert 0 < ci["low"] <= ci["point"] <= ci["high"]
                assert_book_close(block["speedup"][name]["speedup"], ci["point"])
                assert len(block["speedup"][name]["first_steps"]) == len(seeds)
            if name not in ("sgd", "em_like"):
                assert block["em_like_speedup_over"][name]["ratio"] > 0
    assert sorted(float(r) for r in results["rho_sweep"]) == sorted(config["rho_values"])
    long = results["long_run"]
    assert set(long["runs"]) == set(config["long_schedules"])
    for rs in long["runs"].values():
        assert len(rs) == len(config["long_seeds"])
        for r in rs:
            assert r["steps"] == config["long_steps"]
            assert r["heldout"]["n_sequences"] == config["heldout_sequences"]
            assert r["heldout"]["filtered_floor"] > 0.5 * long["hmin_nats"]
            curve = r["heldout_curve"]
            assert curve["steps"][0] == 0 and curve["steps"][-1] == config["long_steps"]
            assert_book_close(curve["loss"][-1], r["heldout"]["loss"], rtol=1e-6)
            assert r["losses"][-1] < ln8 + 0.1
    deep = results["deep"]
    assert len(deep["runs"]) == len(config["deep_seeds"])
    for r in deep["runs"]:
        assert r["test"]["loss"] > 0.5 * deep["hmin_nats"]  # a held-out loss cannot beat the floor by much
        assert r["test_curve"]["steps"][-1] == config["deep_steps"]
        assert_book_close(r["test_curve"]["loss"][-1], r["test"]["loss"], rtol=1e-6)


def test_jobs_are_every_run_of_the_configuration_once():
    jobs = paper_scale.paper_scale_jobs("paper")
    cfg = paper_scale.PAPER_SCALE_CONFIG
    ci = sum(len(seeds) for schedules in cfg["ci_runs"].values() for seeds in schedules.values())
    rho = sum(len(cfg["ci_runs"]["reference"]["m_step"]) for r in cfg["rho_values"] if r != 1.0)
    long = len(cfg["long_schedules"]) * len(cfg["long_seeds"])
    assert len(jobs) == ci + rho + long + len(cfg["deep_seeds"])
    assert len({j.key for j in jobs}) == len(jobs)
    assert sum(j.kwargs["task"] == "deep" for j in jobs) == len(cfg["deep_seeds"])
    with pytest.raises(ValueError, match="fixed by its configuration"):
        paper_scale.paper_scale_jobs("fast", [1, 2])
    with pytest.raises(ValueError, match="has no seeds to choose"):
        compute.compute("sticky_chain_paper_scale", "fast", seeds=[1, 2])
    with pytest.raises(ValueError, match="unknown job task"):
        paper_scale.heavy_job("grid")


def test_paper_scale_results_regenerate_at_the_fast_scale_through_compute(tmp_path):
    """The committed file's path (the jobs, assembled and saved) at a reduced size, through the same functions."""
    config = paper_scale.CONFIGS["fast"]
    folder = compute.compute("sticky_chain_paper_scale", "fast", root=tmp_path, processes=1, log=lambda m: None)
    loaded = load_results(folder / paper_scale.PAPER_SCALE_FILE)
    _check_structure(loaded, config)
    assert set(loaded) == set(paper_scale.PAPER_SCALE.load()) and loaded["config"] == json.loads(json.dumps(config))
    assert loaded["provenance"]["torch"] == torch.__version__
    for table in (paper_scale.controls_table(loaded, "reference"), paper_scale.controls_table(loaded, "nominal"),
                  paper_scale.rho_sweep_table(loaded), paper_scale.long_run_table(loaded)):
        assert len(table) > 0
    # a job's output is the chapter's run of the same seed and schedule
    direct = runs.train_sticky_head(2024, "em_like", kind="nominal", steps=config["steps"], length=config["length"])
    assert_book_close(loaded["ci"]["nominal"]["final"]["em_like"][1], direct.final)


def test_committed_paper_scale_file_is_complete_and_sane():
    path = data_path(paper_scale.PAPER_SCALE_FILE)
    results = json.loads(path.read_text(encoding="utf-8"))
    assert paper_scale.PAPER_SCALE.committed_scale == "paper"
    assert results["config"] == json.loads(json.dumps(paper_scale.PAPER_SCALE_CONFIG))  # made with today's settings
    _check_structure(results, results["config"])
    assert len(results["ci"]["reference"]["final"]["em_like"]) >= 20
    assert results["long_run"]["steps"] >= 20_000
    assert set(results["provenance"]) >= {"package_version", "torch", "numpy", "python"}
