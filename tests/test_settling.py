"""The settling primitives against brute-force definitions on random boolean sequences."""

from __future__ import annotations

import numpy as np
import pytest

from attention_dynamics.book.nbcompare import assert_book_close
from attention_dynamics.science.settling import first_true, first_true_for_good


def _brute_first(c):
    return next((i for i, x in enumerate(c) if x), None)


def _brute_for_good(c):
    return next((i for i in range(len(c)) if all(c[i:])), None)


@pytest.mark.parametrize("seed", range(20))
def test_primitives_agree_with_their_definitions(seed):
    rng = np.random.default_rng(seed)
    c = rng.random(rng.integers(1, 30)) < rng.random()
    assert first_true(c) == _brute_first(list(c))
    assert first_true_for_good(c) == _brute_for_good(list(c))


def test_edge_cases_and_shape_check():
    assert first_true([]) is None and first_true_for_good([]) is None
    assert first_true_for_good([True, True]) == 0 and first_true_for_good([True, False]) is None
    with pytest.raises(ValueError):
        first_true(np.ones((2, 2), dtype=bool))


def test_late_drop_of_a_falling_a_flat_and_a_rising_curve():
    from attention_dynamics.science.settling import late_drop

    t = np.arange(1000)
    falling = 1.0 + 1.0 / (1 + t / 100)  # excess over the floor 1 halves from t = 800 ... to later
    expected = 1 - np.mean(1 / (1 + t[900:] / 100)) / np.mean(1 / (1 + t[800:900] / 100))
    assert_book_close(late_drop(falling, floor=1.0), expected)
    assert late_drop(falling, floor=1.0) > 0.05  # still falling
    flat = 2.0 + 1e-4 * np.sin(t)
    assert abs(late_drop(flat, floor=1.0)) < 1e-3
    assert late_drop(1 + t / 1000, floor=0.0) < 0  # rising
    with pytest.raises(ValueError):
        late_drop([1.0])


def test_path_settling_step_on_a_known_path():
    from attention_dynamics.science.settling import path_settling_step

    steps = np.arange(0, 11)
    inc = np.array([4, 3, 1, 1, 0.5, 0.25, 0.125, 0.125, 0, 0], dtype=float)  # total 10
    # remaining at steps 0..: 1, .6, .3, .2, .1, .05, .025, .0125, 0, 0, 0
    assert path_settling_step(steps, inc, 0.5) == 2
    assert path_settling_step(steps, inc, 0.1) == 4
    assert path_settling_step(steps, inc, 0.01) == 8
    # unit-free: scaling the increments changes nothing
    assert path_settling_step(steps, 1e3 * inc, 0.1) == 4
    with pytest.raises(ValueError):
        path_settling_step(steps[:-1], inc, 0.1)
