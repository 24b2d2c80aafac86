"""The paper's speed-up metric (speedup): the script's threshold rule, the metric and the ratios by hand, the bootstrap
intervals against direct resampling loops."""

from __future__ import annotations

import numpy as np

from attention_dynamics.book.nbcompare import assert_book_close
from attention_dynamics.science import speedup


def test_steps_to_threshold_follows_the_scripts_rule():
    losses = [2.0, 1.9, 1.8, 1.7]
    assert speedup.steps_to_threshold(losses, 1.85) == 2
    assert speedup.steps_to_threshold(losses, 2.5) == 0
    assert speedup.steps_to_threshold(losses, 1.8) == 3  # strictly below
    assert speedup.steps_to_threshold(losses, 1.0) == 4  # never: the number of steps


def test_paper_speedup_by_hand():
    """Threshold = mean baseline final loss 1.5; first steps 5 and 6 → 10 steps / 5.5."""
    curves = [np.linspace(2.0, 1.0, 10), np.r_[np.full(6, 1.6), np.full(4, 1.4)]]
    out = speedup.paper_speedup([1.4, 1.6], curves)
    assert_book_close(out["threshold"], 1.5)
    assert out["first_steps"] == [5, 6]
    assert_book_close(out["speedup"], 10 / 5.5)


def test_em_like_speedup_over_is_a_ratio_of_first_steps():
    em = [np.r_[np.full(4, 2.0), np.full(6, 1.0)]]
    control = [np.r_[np.full(2, 2.0), np.full(8, 1.0)]]
    out = speedup.em_like_speedup_over([1.5], em, control)
    assert_book_close(out["ratio"], 2 / 4)


def test_bootstrap_interval_against_a_direct_resampling_loop():
    rng = np.random.default_rng(0)
    finals = 2.06 + 0.004 * rng.standard_normal(12)
    curves = [2.08 - np.linspace(0, 0.1 + 0.02 * rng.random(), 200) for _ in range(12)]
    ci = speedup.bootstrap_speedup_ci(finals, curves, n_resamples=2000, seed=1)
    # the same statistic by brute force over 2000 resamples drawn independently
    draws = np.random.default_rng(7).integers(0, 12, size=(2000, 12))
    stats = [speedup.paper_speedup(finals[d], [curves[i] for i in d])["speedup"] for d in draws]
    low, high = np.percentile(stats, [2.5, 97.5])
    assert ci["low"] <= ci["point"] <= ci["high"]
    assert_book_close(ci["low"], low, rtol=0.03)
    assert_book_close(ci["high"], high, rtol=0.03)


def test_bootstrap_of_identical_seeds_is_a_point():
    curve = np.linspace(2.0, 1.0, 50)
    ci = speedup.bootstrap_speedup_ci([1.5] * 6, [curve] * 6, n_resamples=200)
    assert ci["low"] == ci["high"] == ci["point"]
    assert_book_close(ci["point"], 50 / speedup.steps_to_threshold(curve, 1.5))


def test_paired_ratio_interval_against_a_direct_resampling_loop():
    rng = np.random.default_rng(0)
    finals = 2.06 + 0.004 * rng.standard_normal(10)
    a = [2.08 - np.linspace(0, 0.2 + 0.05 * rng.random(), 200) for _ in range(10)]
    b = [2.08 - np.linspace(0, 0.1 + 0.05 * rng.random(), 200) for _ in range(10)]
    ci = speedup.bootstrap_speedup_ratio_ci(finals, a, b, n_resamples=2000, seed=1)
    point = speedup.paper_speedup(finals, a)["speedup"] / speedup.paper_speedup(finals, b)["speedup"]
    assert_book_close(ci["point"], point)
    draws = np.random.default_rng(5).integers(0, 10, size=(2000, 10))
    stats = [speedup.paper_speedup(finals[d], [a[i] for i in d])["speedup"]
             / speedup.paper_speedup(finals[d], [b[i] for i in d])["speedup"] for d in draws]
    low, high = np.percentile(stats, [2.5, 97.5])
    assert ci["low"] <= ci["point"] <= ci["high"]
    assert_book_close(ci["low"], low, rtol=0.03)
    assert_book_close(ci["high"], high, rtol=0.03)
    same = speedup.bootstrap_speedup_ratio_ci(finals, a, a, n_resamples=200)
    assert same["low"] == same["high"] == same["point"]
    assert_book_close(same["point"], 1.0)


def test_intervals_separate():
    assert speedup.intervals_separate({"low": 1, "high": 2}, {"low": 2.5, "high": 3})
    assert not speedup.intervals_separate({"low": 1, "high": 2.6}, {"low": 2.5, "high": 3})


def test_paired_speedups_ratio_is_one_for_identical_experiments_and_the_ratio_of_the_paper_metrics():
    from attention_dynamics.science.speedup import bootstrap_paired_speedups_ratio_ci, paper_speedup

    rng = np.random.default_rng(3)
    curves = np.cumsum(-rng.random((6, 40)) * 0.01, axis=1) + 2.0
    slow = curves + 0.05
    finals = slow[:, -1]
    same = bootstrap_paired_speedups_ratio_ci(finals, curves, finals, curves, n_resamples=200)
    assert same["low"] == same["high"] == same["point"] == 1.0
    other = bootstrap_paired_speedups_ratio_ci(finals, curves, finals + 0.02, curves, n_resamples=200)
    expected = paper_speedup(finals, curves)["speedup"] / paper_speedup(finals + 0.02, curves)["speedup"]
    assert other["point"] == expected and other["low"] <= other["point"] <= other["high"]
