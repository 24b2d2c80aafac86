"""The one entropy function, against SciPy's (an independent implementation) and closed forms; the moving average, against a
loop; the seed intervals against SciPy's."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy import stats
from scipy.stats import entropy as scipy_entropy

from attention_dynamics.book.nbcompare import assert_book_close
from attention_dynamics.science.stats import entropy, moving_average, paired_tests, t_interval


@pytest.mark.parametrize("unit, base", [("nats", None), ("bits", 2)])
def test_entropy_matches_scipy(unit, base):
    rng = np.random.default_rng(0)
    p = rng.dirichlet(np.ones(7), size=(3, 5))
    p[0, 0, :3] = 0.0  # zeros contribute nothing (0 log 0 = 0)
    p[0, 0] /= p[0, 0].sum()
    assert_book_close(entropy(torch.tensor(p), unit=unit).numpy(), scipy_entropy(p, base=base, axis=-1), rtol=1e-12)


def test_entropy_of_uniform_and_one_hot_rows():
    n = torch.arange(1, 6, dtype=torch.float64)
    rows = torch.tril(torch.ones(5, 5, dtype=torch.float64)) / n[:, None]  # causal uniform attention
    assert_book_close(entropy(rows), torch.log(n))
    assert_book_close(entropy(rows, unit="bits"), torch.log2(n))
    assert entropy(torch.eye(4)).abs().max().item() == 0.0
    assert_book_close(entropy(np.full(8, 1 / 8), unit="bits").item(), 3.0, rtol=0)


def test_entropy_rejects_an_unknown_unit():
    with pytest.raises(ValueError, match="unknown entropy unit"):
        entropy(torch.ones(2) / 2, unit="dits")
    assert_book_close(entropy(torch.ones(2) / 2), math.log(2))


def test_moving_average_is_the_mean_of_each_window_at_its_last_step():
    steps, means = moving_average([1.0, 2.0, 3.0, 4.0, 8.0], 2)
    np.testing.assert_array_equal(steps, [1, 2, 3, 4])
    assert_book_close(means, [1.5, 2.5, 3.5, 6.0])
    values = np.random.default_rng(0).normal(size=50)
    steps, means = moving_average(values, 7)
    assert_book_close(means, [values[s - 6:s + 1].mean() for s in steps], rtol=1e-12)
    assert moving_average(values, 1)[1].tolist() == values.tolist()


@pytest.mark.parametrize("window", [0, 3])
def test_moving_average_rejects_a_window_outside_the_values(window):
    with pytest.raises(ValueError, match="window"):
        moving_average([1.0, 2.0], window)


def test_t_interval_matches_scipy():
    values = [0.77, 0.885, 0.873, 0.81, 0.9]
    ci = t_interval(values)
    low, high = stats.t.interval(0.95, df=4, loc=np.mean(values), scale=stats.sem(values))
    assert_book_close(ci["low"], low, rtol=1e-12)
    assert_book_close(ci["high"], high, rtol=1e-12)
    assert_book_close(ci["mean"], np.mean(values))
    assert ci["n"] == 5
    assert_book_close(ci["sd"], np.std(values, ddof=1))
    assert t_interval([1.0, 1.0])["low"] == t_interval([1.0, 1.0])["high"] == 1.0


@pytest.mark.parametrize("values, confidence, message", [([1.0], 0.95, "at least two"), ([1.0, 2.0], 1.0, "confidence")])
def test_t_interval_rejects_bad_input(values, confidence, message):
    with pytest.raises(ValueError, match=message):
        t_interval(values, confidence)


def test_paired_t_statistic_by_hand():
    a = np.array([1.0, 2.0, 3.5, 4.0, 6.0])
    b = np.array([1.5, 2.0, 3.0, 5.0, 7.5])
    d = a - b
    t = d.mean() / (d.std(ddof=1) / math.sqrt(len(d)))
    out = paired_tests(a, b)
    assert_book_close(out["t"], t)
    assert_book_close(out["t_pvalue"], 2 * stats.t.sf(abs(t), df=4))
    assert_book_close(out["mean_difference"], d.mean())
    assert_book_close(out["wilcoxon_pvalue"], stats.wilcoxon(a, b).pvalue)
    assert out["n"] == 5
