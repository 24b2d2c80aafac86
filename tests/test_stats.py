"""The one entropy function, against SciPy's (an independent implementation) and closed forms."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy.stats import entropy as scipy_entropy

from attention_dynamics.stats import entropy


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
