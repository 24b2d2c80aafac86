"""Chapter 4 (chapters.two_timescale_em): the mixture bridge against independent computations, the run bookkeeping,
the settling comparisons, the claims and the figures."""

from __future__ import annotations

import math
from types import SimpleNamespace

import matplotlib

matplotlib.use("Agg")
import numpy as np
import pytest
import torch
from scipy.special import logsumexp
from scipy.stats import multivariate_normal

from attention_dynamics.book.nbcompare import assert_book_close
from attention_dynamics.chapters.two_timescale_em import figures, report, runs, settings
from attention_dynamics.core import plotting
from attention_dynamics.ledger import claims


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    import matplotlib.pyplot as plt

    plt.close("all")


@pytest.fixture(scope="module")
def bridge():
    return runs.gmm_bridge(80, 6, torch.Generator().manual_seed(3))


def _numpy_em_step(x: np.ndarray, means: np.ndarray, sigma: float) -> np.ndarray:
    """One EM mean step with equal weights, written from the formulas (no torch, no package code)."""
    log_joint = -((x[:, None, :] - means[None]) ** 2).sum(-1) / (2 * sigma**2)
    resp = np.exp(log_joint - logsumexp(log_joint, axis=1, keepdims=True))
    return (resp.T @ x) / resp.sum(0)[:, None]


def test_bridge_path_is_em_from_data_points(bridge):
    x = bridge.points.numpy()
    path = bridge.em_path.numpy()
    assert path.shape == (7, settings.GMM_K, settings.GMM_D)
    for mean in path[0]:  # EM starts at K of the data points
        assert np.min(np.abs(x - mean).sum(1)) == 0.0
    for t in range(6):
        assert_book_close(path[t + 1], _numpy_em_step(x, path[t], settings.GMM_SIGMA))
    assert max(bridge.bridge_errors) < 1e-10 and max(bridge.attention_errors) < 1e-10
    assert len(bridge.bridge_errors) == len(bridge.attention_errors) == 6


def test_likelihood_curves_start_at_the_independent_likelihood_and_em_never_decreases(bridge):
    curves = report.likelihood_curves(bridge)
    x, start = bridge.points.numpy(), bridge.start.means.numpy()
    dens = np.mean([multivariate_normal(m, settings.GMM_SIGMA**2 * np.eye(settings.GMM_D)).pdf(x) for m in start], axis=0)
    assert_book_close(curves["em"][0], np.mean(np.log(dens)), rtol=0, atol=1e-10)
    assert np.all(np.diff(curves["em"]) >= -1e-12)  # EM's monotone improvement
    assert_book_close(curves["em"], curves["precond"], rtol=1e-10)  # the Xu–Jordan identity
    assert set(curves["plain"]) == set(settings.PLAIN_FACTORS)


def test_plot_gmm_em_draws_every_path_and_curve(bridge):
    fig = figures.plot_gmm_em(bridge, report.likelihood_curves(bridge))
    axes = fig.axes
    assert len(axes) == 2
    assert len(axes[0].lines) == settings.GMM_K  # one EM path per mean
    assert len(axes[1].lines) == 2 + len(settings.PLAIN_FACTORS)
    assert len(axes[1].get_legend().get_texts()) == 2 + len(settings.PLAIN_FACTORS)


def test_train_heads_splits_the_jobs_by_ratio(monkeypatch):
    monkeypatch.setattr(runs, "map_parallel", lambda fn, jobs: list(jobs))
    cfg = settings.resolve("fast", device="cpu")
    equal, sweep = runs.train_heads(cfg)
    assert [j["seed"] for j in equal] == list(cfg.seeds) and {j["value_lr_ratio"] for j in equal} == {1.0}
    assert list(sweep) == list(cfg.ratios)
    for r, jobs in sweep.items():
        assert [j["seed"] for j in jobs] == list(cfg.sweep_seeds)
        assert {j["value_lr_ratio"] for j in jobs} == {r}
        assert all(j["steps"] == cfg.steps and j["path_every"] == cfg.path_every for j in jobs)


class _FakeRun:
    """A run whose settling steps are given: (frame, value) by rate (any threshold) and by distance."""

    def __init__(self, frame, value, by_distance):
        self._rate, self._distance = (frame, value), by_distance
        self.change_steps = np.arange(0, 500, 100)
        self.frame_change = np.geomspace(0.5, 0.001, 5)
        self.value_change = np.geomspace(0.3, 0.002, 5)

    def settling_steps(self, threshold=0.01):
        return (self._rate[0], True), (self._rate[1], True)

    def settling_steps_by_distance(self, tolerance=0.1):
        return self._distance


FAKE = [_FakeRun(100, 200, (40, 20)), _FakeRun(200, 100, (60, 120)), _FakeRun(300, 600, (10, 50))]


def test_sensitivity_rows_from_given_settling_steps():
    rows = runs.sensitivity_rows(FAKE, 100)
    assert len(rows) == len(settings.SENSITIVITY_THRESHOLDS) + 1
    for _, fraction, ratio, unsettled in rows[:-1]:  # frame first in 2 of 3; t_P/t_F = 2, 0.5, 2
        assert_book_close(fraction, 2 / 3)
        assert_book_close(ratio, 2.0)
        assert unsettled == 0
    name, fraction, ratio, _ = rows[-1]  # by distance: 40<20 no, 60<120 yes, 10<50 yes; ratios 0.5, 2, 5
    assert "distance" in name
    assert_book_close(fraction, 2 / 3)
    assert_book_close(ratio, 2.0)
    table = report.sensitivity_table(rows).splitlines()
    assert len(table) == len(rows) + 1 and table[1].split()[-3] == "0.67"


def test_ratio_sweep_orders_ratios_and_keeps_the_equal_rate_summary():
    equal = {"frame_steps": np.array([1.0]), "value_steps": np.array([2.0]), "frame_first_fraction": 1.0,
             "median_time_ratio": 2.0, "unsettled": 0}
    sweep, table = report.ratio_sweep({4.0: FAKE, 0.5: FAKE[:2]}, equal)
    assert list(sweep) == [0.5, 1.0, 4.0] and sweep[1.0] is equal
    assert_book_close(sweep[4.0]["frame_first_fraction"], 2 / 3)
    assert_book_close(sweep[0.5]["median_time_ratio"], np.median([2.0, 0.5]))
    assert len(table.splitlines()) == 4
    fig = figures.plot_ratio_sweep(sweep)
    axes = fig.axes
    assert len(axes[0].lines) == 2 and len(axes[0].collections) == 2 * 3  # medians; seeds per ratio
    assert len(axes[1].lines) == 3  # t_P/t_F, frame-first share, the line at 1
    assert [t.get_text() for t in axes[1].get_xticklabels()] == ["0.5", "1", "4"]


def test_plot_settling_rates_draws_every_seed():
    summary = {"frame_steps": np.array([100.0, 200.0, 300.0]), "value_steps": np.array([200.0, 100.0, 600.0])}
    fig = figures.plot_settling_rates(FAKE, summary, settle_window=100)
    axes = fig.axes
    assert len(axes[0].lines) == 2 * len(FAKE) + 2 + 1  # two curves per seed, legend stubs, threshold
    assert len(axes[1].collections) == 1 and len(axes[1].collections[0].get_offsets()) == len(FAKE)
    lo, hi = axes[1].get_xlim()
    assert_book_close(lo, 90.0)
    assert_book_close(hi, 660.0)
    assert len(fig.legends) == 1 and all(ax.get_legend() is None for ax in axes)  # one legend, below the panels
    plotting.check_figure(fig)


def _freeze_result(kind, finals, unfrozen, initial, steps):
    rows = [{"seed": s, "freeze_at": t, "final": finals[i][k]} for i, s in enumerate((0, 1)) for k, t in enumerate(steps)]
    rows += [{"seed": s, "freeze_at": None, "final": unfrozen[i], "initial": initial[i]} for i, s in enumerate((0, 1))]
    return {"kind": kind, "settings": {"steps": 300}, "seeds": [0, 1], "freeze_steps": list(steps), "runs": rows}


def test_record_freeze_claims_against_hand_computed_costs(monkeypatch):
    recorded = {}
    monkeypatch.setattr(claims, "record", lambda cid, value, **kw: recorded.setdefault(cid, value))
    steps = (0, 100, 200)
    # unfrozen 1.0: the head's frozen runs end at 1.5 and 1.9 times it at step 0, within 1.25 times from step 100
    head = _freeze_result("head", [[1.5, 1.005, 1.0], [1.9, 1.02, 1.001]], [1.0, 1.0], [2.0, 2.0], steps)
    tunnel = _freeze_result("tunnel", [[0.3, 0.3, 0.3], [0.3, 0.3, 0.3]], [0.1, 0.1], [1.0, 1.0], steps)
    costs = report.record_freeze_claims({"head": head, "tunnel": tunnel, "provenance": {}}, 1.25)
    # at step 100 the ratios 1.005 and 1.02: the interval's upper end, e^(mean + t·sem) of their logs, is below 1.25
    logs = np.log([1.005, 1.02])
    import scipy.stats

    assert np.exp(logs.mean() + scipy.stats.t.ppf(0.975, 1) * scipy.stats.sem(logs)) < 1.25
    assert recorded["frame_precision.freeze_frame_step"] == 100
    assert_book_close(recorded["frame_precision.freeze_frame_cost_bits"], ((0.5 + 0.9) / 2) / math.log(2))
    assert recorded["frame_precision.tunnel_freeze_frame_step"] == 300  # three times the trained KL: the run's length
    assert_book_close(recorded["frame_precision.tunnel_freeze_frame_cost_bits"], 0.2)  # already bits
    assert_book_close(costs["head"][100], round(((0.005 + 0.02) / 2) / math.log(2), 4))


def _path_run(k: int):
    """A run recorded every 10 steps whose frame moves in its first steps and whose values move late."""
    frame = np.r_[[8.0, 4.0, 2.0 + k], np.full(17, 0.01)]
    values = np.r_[np.full(10, 0.05), [1.0, 3.0 + k, 6.0, 2.0], np.full(6, 0.01)]
    return SimpleNamespace(path_steps=np.arange(0, 210, 10), frame_path=frame, value_path=values,
                           probe_loss=np.array([2.0, 0.5, 0.1 * (k + 1)]))


def _remaining_step(increments, fraction):
    """The first recording step whose remaining path is at most ``fraction`` of the whole, by a plain loop."""
    total = sum(increments)
    for k in range(len(increments) + 1):
        if sum(increments[k:]) <= fraction * total:
            return 10 * k
    raise AssertionError


def test_path_comparison_and_order_claims_on_runs_with_a_known_order(monkeypatch):
    glued, recorded = {}, {}
    monkeypatch.setattr(claims, "glue", lambda name, value: glued.__setitem__(name, value))
    monkeypatch.setattr(claims, "record", lambda cid, value, **kw: recorded.setdefault(cid, (value, kw)))
    path_runs = [_path_run(k) for k in range(4)]
    cfg = settings.resolve("fast", device="cpu")
    comparison, order, table = report.path_comparison(path_runs, cfg, seed=0)
    assert len(table.splitlines()) == len(settings.PATH_FRACTIONS) + 1
    frame = [_remaining_step(list(r.frame_path), settings.CLAIM_FRACTION) for r in path_runs]
    values = [_remaining_step(list(r.value_path), settings.CLAIM_FRACTION) for r in path_runs]
    assert glued["ch4.path_median_frame_step"] == np.median(frame)
    assert glued["ch4.path_median_value_step"] == np.median(values)
    assert_book_close(glued["ch4.final_loss_fraction"], np.median([0.05, 0.1, 0.15, 0.2]))
    assert glued["ch4.path_verdict_01"] == "frame first"
    assert order["frame_first_fraction"] == 1.0
    report.record_order_claims(order, cfg)
    share, kw = recorded["dynamics.frame_settles_first_fraction"]
    assert share == 1.0 and kw["lower"] == 0.5 and kw["params"]["steps"] == cfg.steps
    assert recorded["dynamics.precision_to_frame_time_ratio"][1]["lower"] == 1.0


def _fake_path_run(frame_rate, value_rate, n=50):
    steps = np.arange(n + 1) * 2
    t = np.arange(n)
    return SimpleNamespace(path_steps=steps, frame_path=np.exp(-frame_rate * t), value_path=np.exp(-value_rate * t))


def test_settling_comparison_decides_only_with_a_clear_paired_difference():
    fast_frame = [_fake_path_run(0.5 + 0.01 * k, 0.1 + 0.005 * k) for k in range(5)]
    out = runs.settling_comparison(fast_frame, [0.1, 0.01])
    assert all(r["verdict"] == "frame first" for r in out["rows"])
    assert out["resolution"] == 2
    flipped = runs.settling_comparison([_fake_path_run(0.1, 0.5), _fake_path_run(0.12, 0.45), _fake_path_run(0.11, 0.6)],
                                       [0.1])
    assert flipped["rows"][0]["verdict"] == "values first"
    mixed = runs.settling_comparison([_fake_path_run(0.5, 0.1), _fake_path_run(0.1, 0.5), _fake_path_run(0.3, 0.31)],
                                     [0.1])
    assert mixed["rows"][0]["verdict"] == "undecided"
    with pytest.raises(ValueError, match="at least two runs"):
        runs.settling_comparison(fast_frame[:1], [0.1])


def test_order_statistics_intervals():
    row = {"frame": [10, 20, 30, 40, 50, 60], "values": [20, 30, 40, 50, 60, 70]}
    out = runs.order_statistics(row)
    assert out["frame_first_fraction"] == 1.0
    lo, hi = out["fraction_interval"]
    assert hi == 1.0
    assert_book_close(lo, 0.025 ** (1 / 6), rtol=1e-9)  # Clopper–Pearson, k = n
    assert out["ratio_interval"][0] > 1.0
    half = runs.order_statistics({"frame": [10, 20, 30, 40], "values": [20, 10, 40, 30]})
    assert half["fraction_interval"][0] < 0.5 < half["fraction_interval"][1]


def test_plot_settling_comparison_and_freeze_frame_keep_their_legends_off_the_reference_lines():
    rows = [{"fraction": f, "mean_difference": -10.0 * k, "low": -10.0 * k - 5, "high": -10.0 * k + 5,
             "frame": [100, 120], "values": [90, 100]} for k, f in enumerate((0.01, 0.1, 0.3))]
    fig = figures.plot_settling_comparison({"rows": rows, "n_runs": 2, "confidence": 0.95, "resolution": 2})
    assert len(fig.legends) == 1 and fig.axes[0].get_legend() is None
    plotting.check_figure(fig)
    steps = [0, 100, 200]
    head = _freeze_result("head", [[1.5, 1.005, 1.0], [1.9, 1.02, 1.001]], [1.0, 1.0], [2.0, 2.0], steps)
    tunnel = _freeze_result("tunnel", [[0.3, 0.3, 0.3], [0.3, 0.3, 0.3]], [0.1, 0.1], [1.0, 1.0], steps)
    fig = figures.plot_freeze_frame({"head": head, "tunnel": tunnel}, 0.01)
    assert len(fig.axes) == 2 and len(fig.legends) == 1
    assert fig.axes[0].get_xlim()[0] < 0  # a freeze at step 0 stays visible
    plotting.check_figure(fig)
