"""Chapter 5's report: claims and glue against independent computations, and the figures it draws."""

from __future__ import annotations

import math
from types import SimpleNamespace

import matplotlib

matplotlib.use("Agg")
import numpy as np
import pytest
from scipy.stats import entropy

from attention_dynamics import claims
from attention_dynamics.experiments import em_vs_sgd_report as report
from attention_dynamics.tasks import sticky_chain


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    import matplotlib.pyplot as plt

    plt.close("all")


@pytest.fixture
def captured(monkeypatch):
    """Claims and glue the report writes, by name (claims keep their value)."""
    out = {}
    monkeypatch.setattr(claims, "record", lambda cid, value, **kw: out.setdefault(cid, SimpleNamespace(value=value, **kw)))
    monkeypatch.setattr(claims, "glue", lambda name, value: out.__setitem__(name, value))
    return out


@pytest.fixture(scope="module")
def heavy():
    from attention_dynamics.results import load_results
    from attention_dynamics.paths import data_path

    return load_results(data_path(report.em_vs_sgd.PAPER_SCALE_FILE))


def _script_matrix(n: int = 8, self_prob: float = 0.3) -> np.ndarray:
    """The reference script's construction, written out: 0.3 and 1/d, row-normalised, × 0.7, + 0.3 on the diagonal."""
    i, j = np.indices((n, n))
    d = np.minimum(np.abs(i - j), n - np.abs(i - j)).astype(float)
    m = np.where(d == 0, self_prob, 1.0 / np.maximum(d, 1))
    return (1 - self_prob) * m / m.sum(1, keepdims=True) + self_prob * np.eye(n)


def test_record_chains_matches_the_script_construction(captured):
    P = report.record_chains()
    expected = _script_matrix()
    np.testing.assert_allclose(P["reference"].numpy(), expected, atol=1e-12)
    assert captured["sticky.effective_self_prob_reference"].value == pytest.approx(expected[0, 0], abs=1e-12)
    assert captured["sticky.self_prob_nominal"] == pytest.approx(0.3, abs=1e-12)
    assert captured["sticky.stationary_max_deviation"] < 1e-10


def test_record_floors_are_mean_row_entropies(captured):
    P = report.record_chains()
    floors = report.record_floors(P, 5_000, seed=0)
    for kind, p in P.items():
        assert floors[kind] == pytest.approx(np.mean([entropy(row) for row in p.numpy()]), abs=1e-10)
        assert captured[f"sticky.hmin_bits_{kind}"] == pytest.approx(floors[kind] / math.log(2), abs=1e-10)
    assert captured["sticky.ln8"] == pytest.approx(math.log(8))


def test_plot_transition_rows_draws_both_chains():
    fig, ax = report.plot_transition_rows({k: sticky_chain.transition_matrix(k) for k in sticky_chain.CHAIN_KINDS})
    assert len(ax.containers) == 2 and all(len(c) == sticky_chain.N_SYMBOLS for c in ax.containers)
    assert len(ax.get_legend().get_texts()) == 2


def test_engine_gradient_check_is_tiny_against_autograd(captured):
    data = sticky_chain.make_sticky_chain_data(42, length=60)
    assert report.engine_gradient_check(data, 42) < 1e-10
    assert captured["sticky.engine_loss_abs_err"] < 1e-12


def _fake_runs(finals: dict[str, list[float]], steps: int = 20):
    runs = {}
    for name, values in finals.items():
        for seed, final in zip((1, 2, 3), values):
            losses = np.linspace(math.log(8), final, steps)
            runs[(name, seed)] = SimpleNamespace(final={"loss": final}, losses=losses)
    return runs


def test_record_protocol_against_hand_computed_summaries(captured):
    runs = _fake_runs({"sgd": [2.0, 1.9, 2.1], "em_like": [1.5, 1.4, 1.6]})
    protocol = {"speedup": {"speedup": 2.0, "threshold": 2.0, "mean_first_step": 10.0, "first_steps": [8, 10, 12]},
                "paired_test": {"mean_difference": -0.5, "t": -9.0, "t_pvalue": 0.01, "wilcoxon_pvalue": 0.25}}
    cfg = {"seeds": (1, 2, 3), "steps": 20, "length": 100}
    hmin = 1.0
    report.record_protocol(runs, protocol, cfg, hmin)
    assert captured["sticky.final_loss_sgd"].value == pytest.approx(2.0)
    assert captured["sticky.final_loss_sgd_sd"] == pytest.approx(0.1)
    assert captured["sticky.final_loss_em"].value == pytest.approx(1.5)
    assert captured["sticky.final_loss_em"].lower == pytest.approx((math.log(8) + 1.0) / 2)
    assert captured["sticky.gap_covered_em_like"] == pytest.approx((math.log(8) - 1.5) / (math.log(8) - 1.0))
    assert captured["sticky.first_step_min"] == 8 and captured["sticky.first_step_max"] == 12
    fig, ax = report.plot_protocol(runs, cfg["seeds"], protocol["speedup"])
    assert len(ax.lines) == 2 + 3  # two mean curves; threshold, ln 8, mean first step
    assert len(ax.collections) == 2  # the seeds' ranges


def test_matched_control_and_interval_read_the_stored_first_steps(captured, heavy):
    report.record_matched_control(heavy)
    block = heavy["ci"]["reference"]
    matched = block["em_like_speedup_over"]["sgd_matched"]
    ratio = np.mean(matched["control_first_steps"]) / np.mean(matched["em_like_first_steps"])
    assert captured["sticky.speedup_vs_matched_lr"].value == pytest.approx(ratio, rel=1e-9)
    ci = report.record_speedup_interval(heavy)
    assert captured["sticky.speedup_ci95_low"].value <= ci["point"] <= captured["sticky.speedup_ci95_high"].value
    steps = heavy["config"]["steps"]
    assert block["speedup"]["em_like"]["speedup"] == pytest.approx(steps / np.mean(block["speedup"]["em_like"]["first_steps"]))


def test_record_surface_verdict_follows_the_intervals(captured):
    def cond(speedup, low, high):
        return {"speedup": speedup, "ci": {"low": low, "high": high}, "ratios": [1, 10, 1], "first_steps": [1, 2]}

    five = {"seeds": [1, 2], "conditions": {"sgd": cond(1.1, 1.0, 1.2), "values_only": cond(3.0, 2.8, 3.2),
                                            "readout_only": cond(2.0, 1.8, 2.2), "routing_only": cond(2.5, 2.3, 2.7),
                                            "values_readout": cond(4.0, 3.5, 4.5)}}
    surface = {"paper_seeds": five, "twenty_seeds": {"seeds": [], "conditions": {}},
               "baseline_source": {"max_abs_difference_where_both": 0.0},
               "config": {"steps": 100, "bootstrap_resamples": 10}}
    assert report.record_surface(surface) is True
    assert captured["sticky.speedup_values_only"].value == 3.0 and captured["sticky.surface_sgd_self"] == 1.1
    five["conditions"]["routing_only"] = cond(2.5, 2.3, 2.9)  # now overlaps values only
    assert report.record_surface(surface) is False


def test_record_deep_and_long_runs_against_the_stored_runs(captured, heavy):
    test = report.record_deep(heavy)
    deep = heavy["deep"]
    assert test["loss"] == pytest.approx(sum(r["test"]["loss"] for r in deep["runs"]) / len(deep["runs"]))
    curve = deep["runs"][0]["test_curve"]
    assert captured["sticky.deep_best_test_loss"] == min(curve["loss"])
    table = report.record_long_runs(heavy)
    for name, short in (("sgd", "sgd"), ("em_like", "em")):
        best = np.mean([min(r["heldout_curve"]["loss"]) for r in heavy["long_run"]["runs"][name]])
        gap = captured[f"sticky.long_run_gap_to_hmin_{short}"].value
        assert gap == pytest.approx(best - heavy["long_run"]["hmin_nats"], abs=1e-4)  # the table rounds to 4 digits
    assert len(table) >= 2


def test_long_run_and_deep_figures(heavy):
    fig, axes = report.plot_long_runs(heavy, 1.9, 1000)
    n = len(heavy["long_run"]["runs"])
    assert len(axes[0].lines) == n + 3 and len(axes[1].lines) == n + 4  # + H_min, ln 8, protocol end (+ filter)
    fig, ax = report.plot_deep(heavy)
    assert len(ax.lines) == 3 and ax.get_yscale() == "log"


def test_plot_value_trajectories_draws_every_prototype():
    rng = np.random.default_rng(0)
    runs = {(name, 7): SimpleNamespace(value_prototypes=rng.normal(size=(5, sticky_chain.N_SYMBOLS, 15)))
            for name in report.SCHEDULE_PAIR}
    fig, axes = report.plot_value_trajectories(runs, 7, 40)
    for ax in axes:
        assert len(ax.lines) == 2 * sticky_chain.N_SYMBOLS + 1  # path and end per prototype; the origin
