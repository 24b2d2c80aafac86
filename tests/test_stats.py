"""The one entropy function, against SciPy's (an independent implementation) and closed forms; the moving average, against a loop."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy.stats import entropy as scipy_entropy

from attention_dynamics.stats import entropy, moving_average


@pytest.mark.parametrize("unit, base", [("nats", None), ("bits", 2)])
def test_entropy_matches_scipy(unit, base):
    rng = np.random.default_rng(0)
    p = rng.dirichlet(np.ones(7), size=(3, 5))
    p[0, 0, :3] = 0.0  # zeros contribute nothing (0 log 0 = 0)
    p[0, 0] /= p[0, 0].sum()
    np.testing.assert_allclose(entropy(torch.tensor(p), unit=unit).numpy(), scipy_entropy(p, base=base, axis=-1),
                               rtol=1e-12)


def test_entropy_of_uniform_and_one_hot_rows():
    n = torch.arange(1, 6, dtype=torch.float64)
    rows = torch.tril(torch.ones(5, 5, dtype=torch.float64)) / n[:, None]  # causal uniform attention
    torch.testing.assert_close(entropy(rows), torch.log(n))
    torch.testing.assert_close(entropy(rows, unit="bits"), torch.log2(n))
    assert entropy(torch.eye(4)).abs().max().item() == 0.0
    assert entropy(np.full(8, 1 / 8), unit="bits").item() == pytest.approx(3.0, abs=1e-14)


def test_entropy_rejects_an_unknown_unit():
    with pytest.raises(ValueError, match="unknown entropy unit"):
        entropy(torch.ones(2) / 2, unit="dits")
    assert math.isclose(entropy(torch.ones(2) / 2).item(), math.log(2))


def test_moving_average_is_the_mean_of_each_window_at_its_last_step():
    steps, means = moving_average([1.0, 2.0, 3.0, 4.0, 8.0], 2)
    np.testing.assert_array_equal(steps, [1, 2, 3, 4])
    np.testing.assert_allclose(means, [1.5, 2.5, 3.5, 6.0])
    values = np.random.default_rng(0).normal(size=50)
    steps, means = moving_average(values, 7)
    np.testing.assert_allclose(means, [values[s - 6:s + 1].mean() for s in steps], rtol=1e-12)
    assert moving_average(values, 1)[1].tolist() == values.tolist()


@pytest.mark.parametrize("window", [0, 3])
def test_moving_average_rejects_a_window_outside_the_values(window):
    with pytest.raises(ValueError, match="window"):
        moving_average([1.0, 2.0], window)
