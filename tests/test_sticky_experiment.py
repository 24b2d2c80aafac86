"""The sticky-chain experiment: the paper's metric, bootstrap, trajectory measures, runs, and the paper-scale file."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import scipy.stats
import torch

from attention_dynamics.experiments import em_vs_sgd as sticky
from attention_dynamics.results import load_results, save_results
from attention_dynamics.paths import data_path
from attention_dynamics.tasks import sticky_chain


def test_steps_to_threshold_follows_the_scripts_rule():
    losses = [2.0, 1.9, 1.8, 1.7]
    assert sticky.steps_to_threshold(losses, 1.85) == 2
    assert sticky.steps_to_threshold(losses, 2.5) == 0
    assert sticky.steps_to_threshold(losses, 1.8) == 3  # strictly below
    assert sticky.steps_to_threshold(losses, 1.0) == 4  # never: the number of steps


def test_paper_speedup_by_hand():
    """Threshold = mean baseline final loss 1.5; first steps 5 and 6 → 10 steps / 5.5."""
    curves = [np.linspace(2.0, 1.0, 10), np.r_[np.full(6, 1.6), np.full(4, 1.4)]]
    out = sticky.paper_speedup([1.4, 1.6], curves)
    assert out["threshold"] == pytest.approx(1.5)
    assert out["first_steps"] == [5, 6]
    assert out["speedup"] == pytest.approx(10 / 5.5)


def test_em_like_speedup_over_is_a_ratio_of_first_steps():
    em = [np.r_[np.full(4, 2.0), np.full(6, 1.0)]]
    control = [np.r_[np.full(2, 2.0), np.full(8, 1.0)]]
    out = sticky.em_like_speedup_over([1.5], em, control)
    assert out["ratio"] == pytest.approx(2 / 4)


def test_bootstrap_interval_against_a_direct_resampling_loop():
    rng = np.random.default_rng(0)
    finals = 2.06 + 0.004 * rng.standard_normal(12)
    curves = [2.08 - np.linspace(0, 0.1 + 0.02 * rng.random(), 200) for _ in range(12)]
    ci = sticky.bootstrap_speedup_ci(finals, curves, n_resamples=2000, seed=1)
    # the same statistic by brute force over 2000 resamples drawn independently
    draws = np.random.default_rng(7).integers(0, 12, size=(2000, 12))
    stats = [sticky.paper_speedup(finals[d], [curves[i] for i in d])["speedup"] for d in draws]
    low, high = np.percentile(stats, [2.5, 97.5])
    assert ci["low"] <= ci["point"] <= ci["high"]
    assert ci["low"] == pytest.approx(low, rel=0.03)
    assert ci["high"] == pytest.approx(high, rel=0.03)


def test_bootstrap_of_identical_seeds_is_a_point():
    curve = np.linspace(2.0, 1.0, 50)
    ci = sticky.bootstrap_speedup_ci([1.5] * 6, [curve] * 6, n_resamples=200)
    assert ci["low"] == ci["high"] == ci["point"] == pytest.approx(50 / sticky.steps_to_threshold(curve, 1.5))


def test_paired_t_statistic_by_hand():
    a = np.array([1.0, 2.0, 3.5, 4.0, 6.0])
    b = np.array([1.5, 2.0, 3.0, 5.0, 7.5])
    d = a - b
    t = d.mean() / (d.std(ddof=1) / math.sqrt(len(d)))
    out = sticky.paired_tests(a, b)
    assert out["t"] == pytest.approx(t)
    assert out["t_pvalue"] == pytest.approx(2 * scipy.stats.t.sf(abs(t), df=4))
    assert out["mean_difference"] == pytest.approx(d.mean())


def test_trajectory_length_and_coherence():
    steps = np.linspace(0, 1, 11)[:, None, None]
    line = np.concatenate([steps * np.array([3.0, 4.0]), steps * np.array([0.0, 1.0])], axis=1)  # (11, 2, 2)
    assert sticky.trajectory_length(line) == pytest.approx((5.0 + 1.0) / 2)
    assert sticky.trajectory_coherence(line) == pytest.approx(1.0)
    angles = np.linspace(0, 2 * np.pi, 201)
    loop = np.stack([np.cos(angles), np.sin(angles)], axis=1)[:, None, :]  # a closed unit circle
    assert sticky.trajectory_length(loop) == pytest.approx(2 * np.pi, rel=1e-3)
    assert sticky.trajectory_coherence(loop) == pytest.approx(0.0, abs=1e-12)


def test_between_symbol_share():
    labels = np.repeat(np.arange(4), 50)
    separated = np.eye(4)[labels] * 10.0
    assert sticky.between_symbol_share(separated, labels) == pytest.approx(1.0)
    noise = np.random.default_rng(0).standard_normal((200, 3))
    assert sticky.between_symbol_share(noise, labels) < 0.05  # expected (4 − 1)/(200 − 1) ≈ 0.015


def test_trajectory_pca_shares_axes():
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((5, 8, 15)), rng.standard_normal((7, 8, 15))
    projected, ratios = sticky.trajectory_pca({"a": a, "b": b})
    assert projected["a"].shape == (5, 8, 2) and projected["b"].shape == (7, 8, 2)
    assert ratios[0] >= ratios[1] > 0


@pytest.mark.slow
def test_runs_share_data_and_initialisation_across_schedules_and_are_reproducible():
    sgd = sticky.train_sticky_head(3, "sgd", steps=5, length=80, snapshot_every=2)
    em = sticky.train_sticky_head(3, "em_like", steps=5, length=80)
    again = sticky.train_sticky_head(3, "sgd", steps=5, length=80, snapshot_every=2)
    assert sgd.losses[0] == em.losses[0]  # same data, same initial weights
    assert sgd.initial == em.initial
    np.testing.assert_array_equal(sgd.losses, again.losses)
    assert sgd.value_prototypes.shape == (4, 8, 15)  # steps 0, 2, 4 and the end
    assert list(sgd.snapshot_steps) == [0, 2, 4, 5]
    data = sticky_chain.make_sticky_chain_data(3, length=80)
    init = sticky.initial_head(3)
    np.testing.assert_allclose(sgd.value_prototypes[0], (data.mu @ init.W_V).numpy(), rtol=1e-6)


@pytest.mark.slow
def test_run_grid_in_parallel_equals_in_process():
    parallel = sticky.run_grid([1, 2], ["sgd"], steps=3, length=60, processes=2)
    serial = sticky.run_grid([1, 2], ["sgd"], steps=3, length=60, processes=1)
    for key in serial:
        np.testing.assert_array_equal(parallel[key].losses, serial[key].losses)


@pytest.mark.slow
def test_paper_protocol_summary_tables():
    runs = sticky.run_grid([1, 2, 3], ["sgd", "em_like"], steps=4, length=60, processes=1)
    out = sticky.paper_protocol_summary(runs)
    assert out["seeds"] == [1, 2, 3]
    assert list(out["per_seed"].index) == [1, 2, 3]
    assert out["summary"].loc[("sgd", "loss"), "mean"] == pytest.approx(
        np.mean([runs[("sgd", s)].final["loss"] for s in (1, 2, 3)]), abs=1e-4)


REDUCED_CONFIG = {
    **sticky.PAPER_SCALE_CONFIG,
    "steps": 12,
    "length": 80,
    "ci_runs": {"reference": {"sgd": [1, 2, 3], "em_like": [1, 2, 3], "sgd_matched": [1, 2], "m_step": [1, 2]},
                "nominal": {"sgd": [1, 2], "em_like": [1, 2], "sgd_matched": [1, 2]}},
    "bootstrap_resamples": 200,
    "rho_values": [0.3, 1.0],
    "long_steps": 20,
    "long_seeds": [1],
    "long_loss_stride": 5,
    "heldout_sequences": 2,
    "deep_seeds": [1],
    "deep_steps": 2,
}


def _check_structure(results, config):
    """What the chapter reads from the paper-scale file, and sanity bounds on it."""
    ln8 = math.log(8)
    assert set(results) >= {"config", "ci", "rho_sweep", "long_run", "deep"}
    for kind, schedules in config["ci_runs"].items():
        block = results["ci"][kind]
        hmin = sticky_chain.bayes_floor_nats(sticky_chain.transition_matrix(kind))
        assert block["hmin_nats"] == pytest.approx(hmin)
        for name, seeds in schedules.items():
            assert len(block["final"][name]) == len(seeds)
            assert all(0.5 * hmin < f["loss"] < ln8 + 0.1 for f in block["final"][name])
            if name != "sgd":
                ci = block["speedup_ci"][name]
                assert 0 < ci["low"] <= ci["point"] <= ci["high"]
                assert block["speedup"][name]["speedup"] == pytest.approx(ci["point"])
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
            assert curve["loss"][-1] == pytest.approx(r["heldout"]["loss"], rel=1e-6)
            assert r["losses"][-1] < ln8 + 0.1
    deep = results["deep"]
    assert len(deep["runs"]) == len(config["deep_seeds"])
    for r in deep["runs"]:
        assert r["test"]["loss"] > 0.5 * deep["hmin_nats"]  # a held-out loss cannot beat the floor by much
        assert r["test_curve"]["steps"][-1] == config["deep_steps"]
        assert r["test_curve"]["loss"][-1] == pytest.approx(r["test"]["loss"], rel=1e-6)


@pytest.mark.slow
def test_paper_scale_results_regenerate_at_reduced_size(tmp_path):
    """The chapter's --scale paper path (compute, save, load) at a reduced size, through the same functions."""
    results = sticky.compute_paper_scale_results(REDUCED_CONFIG, processes=2)
    path = save_results(results, tmp_path / sticky.PAPER_SCALE_FILE)
    loaded = load_results(path)
    _check_structure(loaded, REDUCED_CONFIG)
    assert loaded["provenance"]["torch"] == torch.__version__
    for table in (sticky.controls_table(loaded, "reference"), sticky.controls_table(loaded, "nominal"),
                  sticky.rho_sweep_table(loaded), sticky.long_run_table(loaded)):
        assert len(table) > 0


def test_committed_paper_scale_file_is_complete_and_sane():
    path = data_path(sticky.PAPER_SCALE_FILE)
    results = json.loads(path.read_text(encoding="utf-8"))
    assert results["config"] == json.loads(json.dumps(sticky.PAPER_SCALE_CONFIG))  # made with today's settings
    _check_structure(results, results["config"])
    assert len(results["ci"]["reference"]["final"]["em_like"]) >= 20
    assert results["long_run"]["steps"] >= 20_000
    assert set(results["provenance"]) >= {"package_version", "torch", "numpy", "python"}


def test_describe_machine_names_what_the_benchmark_recorded():
    machine = {"cpu_count": 2, "platform": "Linux-6-x86_64", "processor": "", "cpu_model": "AMD EPYC"}
    assert sticky.describe_machine(machine) == "2 cores, AMD EPYC, Linux-6-x86_64"
    assert sticky.describe_machine({"cpu_count": 4, "platform": "macOS-14-arm64", "processor": "arm"}) == (
        "4 cores, arm, macOS-14-arm64")
    assert sticky.describe_machine({}) == "an unrecorded machine"


def test_the_engine_timing_is_not_a_ledger_claim():
    """Timings depend on the machine; the ledger holds only what any machine reproduces."""
    from attention_dynamics.claims import load_ledger
    from attention_dynamics.paths import CLAIMS_PATH

    ids = {claim.id for claim in load_ledger(CLAIMS_PATH)}
    assert "sticky.engine_speedup_vs_autograd" not in ids
    assert not any("ms_per_step" in claim_id or "speedup_vs_autograd" in claim_id for claim_id in ids)
