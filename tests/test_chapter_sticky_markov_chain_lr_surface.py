"""Chapter 5's stored result ``sticky_chain_lr_surface`` (chapters.sticky_markov_chain.lr_surface): ratio schedules,
the stages, a fast regeneration through ``compute`` against direct runs, a partial set of jobs, the committed file."""

from __future__ import annotations

import json
import math

import matplotlib

matplotlib.use("Agg")

import numpy as np
import pytest
import torch

from attention_dynamics.book import compute
from attention_dynamics.book.nbcompare import assert_book_close
from attention_dynamics.chapters.sticky_markov_chain import figures, lr_surface, paper_scale, runs
from attention_dynamics.core import plotting
from attention_dynamics.core.paths import data_path
from attention_dynamics.ledger.results import load_results
from attention_dynamics.models.single_head import initial_head
from attention_dynamics.science.speedup import paper_speedup
from attention_dynamics.tasks import sticky_chain
from attention_dynamics.training.head_engine import SingleHeadModule, autograd_head_loss
from attention_dynamics.training.schedules import SCHEDULES, get_schedule, lr_ratio_schedule


def _rates(s):
    return (s.query_key_lr, s.value_lr, s.readout_lr, s.value_update)


def test_ratio_schedules_are_the_papers_schedules_at_their_corners():
    assert _rates(lr_ratio_schedule(1, 1, 1)) == _rates(SCHEDULES["sgd"])
    assert _rates(lr_ratio_schedule(1, 10, 1)) == _rates(SCHEDULES["em_like"])
    assert _rates(lr_ratio_schedule(10, 10, 10)) == _rates(SCHEDULES["sgd_matched"])
    s = get_schedule("lr_qk3_v1_o10")
    assert_book_close((s.query_key_lr, s.value_lr, s.readout_lr), (0.03, 0.01, 0.1))
    assert_book_close(get_schedule(lr_surface.condition_schedule((10, 1, 1))).query_key_lr, 0.1)
    with pytest.raises(ValueError):
        lr_ratio_schedule(0, 1, 1)
    with pytest.raises(ValueError):
        get_schedule("lr_qk1_v1")


def test_stages_cover_the_conditions_and_the_grid_once():
    stages = lr_surface.surface_stages()
    assert [name for name, _, _ in stages] == ["paper", "values_axis", "twenty_claims", "twenty_rest", "grid"]
    paper = stages[0]
    assert paper[1] == list(sticky_chain.PAPER_SEEDS) and set(paper[2]) == set(lr_surface.CONDITIONS.values())
    assert stages[1][2] == [(1, 30, 1)]
    extra = set(stages[2][2]) | set(stages[3][2])
    assert extra == set(lr_surface.CONDITIONS.values()) and not set(stages[2][2]) & set(stages[3][2])
    grid = stages[4][2]
    assert len(grid) == 27 - 8 and set(grid).isdisjoint(lr_surface.CONDITIONS.values())
    jobs = lr_surface.surface_jobs()
    assert len(jobs) == 8 * 5 + 1 * 5 + 8 * 15 + 19 * 5
    assert len({json.dumps(j, sort_keys=True) for j in jobs}) == len(jobs)


def test_m_step_value_step_ratio_against_a_dense_computation():
    seed, rho, T = 4, 0.7, 40
    ratio = lr_surface.m_step_value_step_ratio(seed, rho, length=T)
    data = sticky_chain.make_sticky_chain_data(seed, length=T)
    x = data.x.double()
    model = SingleHeadModule(initial_head(seed, dtype=torch.float64))
    autograd_head_loss(model, (x, data.y)).backward()
    g = model.W_V.grad.numpy()
    with torch.no_grad():
        scores = (x @ model.W_Q) @ (x @ model.W_K).T / math.sqrt(model.W_Q.shape[1])
        scores = scores.masked_fill(torch.ones(len(x), len(x), dtype=torch.bool).triu(1), -math.inf)
        counts = torch.softmax(scores, dim=-1).sum(0).numpy()  # N_j = Σ_i α_ij
    xn = x.numpy()
    S = (xn.T * counts) @ xn / counts.sum()
    expected = rho * np.linalg.norm(np.linalg.solve(S, g)) / (0.01 * np.linalg.norm(g))
    assert_book_close(ratio, expected, rtol=1e-10)


def test_jobs_per_scale_are_the_stages_the_scale_runs():
    for scale, (config, stages) in lr_surface.SCALES.items():
        jobs = lr_surface.lr_surface_jobs(scale)
        assert [j.kwargs for j in jobs] == lr_surface.surface_jobs(config, stages)
        assert [j.key for j in jobs] == [paper_scale.job_key(j) for j in lr_surface.surface_jobs(config, stages)]
    assert "grid" not in lr_surface.SCALES["book"][1] and "grid" in lr_surface.SCALES["paper"][1]
    with pytest.raises(ValueError, match="fixed by its configuration"):
        lr_surface.lr_surface_jobs("fast", [1])


FAST = lr_surface.SCALES["fast"][0]


def test_surface_regenerates_at_the_fast_scale_through_compute(tmp_path):
    """The committed file's path (the jobs, assembled and saved) at a reduced size, checked against direct runs."""
    folder = compute.compute("sticky_chain_lr_surface", "fast", root=tmp_path, processes=1, log=lambda m: None)
    loaded = load_results(folder / lr_surface.SURFACE_FILE)
    assert loaded["missing"] == {} and loaded["config"] == json.loads(json.dumps(FAST))
    committed = json.loads(data_path(lr_surface.SURFACE_FILE).read_text())
    # the committed file also carries its code commit under an older key, the same as its provenance's
    assert committed["code_version"] == committed["provenance"]["code_commit"]
    assert set(loaded) == set(committed) - {"code_version"}
    steps, length = FAST["steps"], FAST["length"]
    paper, extra = FAST["paper_seeds"], FAST["extra_seeds"]
    for key, seeds in (("paper_seeds", paper), ("twenty_seeds", paper + extra)):
        block = loaded[key]
        assert block["seeds"] == seeds
        assert set(block["conditions"]) == set(lr_surface.CONDITIONS)
        direct = {name: [runs.train_sticky_head(s, name, steps=steps, length=length) for s in seeds]
                  for name in ("sgd", "em_like", "sgd_matched")}
        baseline = [r.final["loss"] for r in direct["sgd"]]
        assert_book_close(block["sgd_final_loss"], baseline, rtol=0)
        for name, condition in (("em_like", "values_only"), ("sgd_matched", "all_three")):
            expected = paper_speedup(baseline, [r.losses for r in direct[name]])
            got = block["conditions"][condition]
            assert got["first_steps"] == expected["first_steps"]
            assert_book_close(got["speedup"], expected["speedup"])
        for cond in block["conditions"].values():
            assert_book_close(cond["speedup"], steps / np.mean(cond["first_steps"]))
            assert cond["ci"]["low"] <= cond["speedup"] * (1 + 1e-12) and cond["speedup"] <= cond["ci"]["high"] * (1 + 1e-12)
        assert set(block["comparisons"]) == {f"values_only_over_{n}" for n in lr_surface.CONDITIONS
                                             if n not in ("sgd", "values_only")}
    levels = {(1, v, 1) for v in FAST["values_axis_levels"]}
    assert {tuple(p["ratios"]) for p in loaded["grid"]} == set(lr_surface.CONDITIONS.values()) | levels
    table = lr_surface.surface_table(loaded)
    assert len(table) == len(lr_surface.CONDITIONS)
    fig = figures.plot_lr_surface(loaded)
    assert len(fig.axes) == 2
    fig = figures.plot_condition_speedups(loaded, m_step={"M-step": 2.0})
    assert len(fig.axes) == 1
    plotting.check_figure(fig)


def test_a_partial_set_of_jobs_gives_a_partial_file():
    """Only the first stage's jobs done (run as a worker runs them): the rest is listed as missing."""
    config = {**FAST, "steps": 12, "length": 80}
    outputs = {paper_scale.job_key(j): paper_scale.heavy_job(**j) for j in lr_surface.surface_jobs(config, ["paper"])}
    assert len(outputs) == 8 * len(FAST["paper_seeds"])
    out = lr_surface.collect_surface_results(config, outputs)
    assert out["twenty_seeds"] is None
    assert set(out["missing"]) == {"values_axis", "twenty_claims", "twenty_rest"}
    assert len(out["grid"]) == 8
    finals = dict(zip(out["paper_seeds"]["seeds"], out["paper_seeds"]["sgd_final_loss"]))
    extra = FAST["extra_seeds"][0]
    with_file = lr_surface.collect_surface_results(config, outputs, baseline_finals={**finals, extra: 2.0})
    assert with_file["baseline_source"] == {"from_paper_scale_file": [extra], "max_abs_difference_where_both": 0.0}


def test_committed_surface_file_is_consistent():
    path = data_path(lr_surface.SURFACE_FILE)
    results = json.loads(path.read_text(encoding="utf-8"))
    assert results["config"] == json.loads(json.dumps(lr_surface.SURFACE_CONFIG))  # today's settings
    assert lr_surface.LR_SURFACE.committed_scale == "book"
    assert set(results["provenance"]) >= {"package_version", "torch", "numpy"}
    heavy = paper_scale.PAPER_SCALE.load()["ci"]["reference"]
    stored_sgd = dict(zip(heavy["seeds"]["sgd"], (f["loss"] for f in heavy["final"]["sgd"])))
    steps = results["config"]["steps"]
    paper = results["paper_seeds"]
    assert set(paper["conditions"]) == set(lr_surface.CONDITIONS)  # the first stage is complete
    for block in (paper, results["twenty_seeds"]):
        if block is None:
            continue
        # the baseline is the paper-scale file's SGD: the same computation, and here the same numbers
        assert_book_close(block["sgd_final_loss"], [stored_sgd[s] for s in block["seeds"]], rtol=1e-6)
        assert_book_close(block["threshold"], np.mean(block["sgd_final_loss"]))
        for cond in block["conditions"].values():
            assert len(cond["first_steps"]) == len(block["seeds"])
            assert_book_close(cond["speedup"], steps / np.mean(cond["first_steps"]))
            assert cond["ci"]["low"] <= cond["speedup"] <= cond["ci"]["high"]
            assert all(0.5 < f < math.log(8) + 0.1 for f in cond["final_loss"])
    # the corners the paper-scale file also ran agree with it (EM-like and the matched control)
    for heavy_name, condition, block in (("em_like", "values_only", results["twenty_seeds"]),
                                         ("sgd_matched", "all_three", paper)):
        if block is not None and condition in block["conditions"]:
            assert_book_close(block["conditions"][condition]["speedup"],
                              heavy["speedup"][heavy_name]["speedup"], rtol=1e-6)
    by_ratio = {tuple(p["ratios"]): p for p in results["grid"]}
    for name, ratios in lr_surface.CONDITIONS.items():
        assert_book_close(by_ratio[tuple(ratios)]["speedup"], paper["conditions"][name]["speedup"])


def test_values_axis_interpolates_in_log_log():
    results = {"grid": [{"ratios": [1, 1, 1], "speedup": 1.0}, {"ratios": [1, 10, 1], "speedup": 4.0},
                        {"ratios": [1, 1, 10], "speedup": 9.0}]}
    assert lr_surface.values_axis(results) == {"ratio": [1.0, 10.0], "speedup": [1.0, 4.0]}
    assert_book_close(lr_surface.values_axis_speedup_at(results, math.sqrt(10)), 2.0)
    assert math.isnan(lr_surface.values_axis_speedup_at(results, 30.0))
    fig = figures.plot_values_axis(results, {0.3: (3.0, 1.5)})
    assert len(fig.axes) == 1
    plotting.check_figure(fig)
