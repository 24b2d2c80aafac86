"""One tolerance policy for every float comparison: the helper the tests compare floats with, and a check that they do.

The book compares a re-executed chapter with its committed outputs by one policy (:mod:`attention_dynamics.book.nbcompare`:
anything below the round-off floor is zero, the rest agrees to a relative tolerance). The unit tests compare stored and
recomputed floats by the same policy, through :func:`~attention_dynamics.book.nbcompare.assert_book_close`; a test that
compares floats another way says why on the same line (``# tolerance: <reason>``).
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
import torch

from attention_dynamics.book.nbcompare import COMPUTED, ROUNDOFF_FLOOR, assert_book_close, book_close

TESTS = Path(__file__).resolve().parent

#: Float comparisons that bypass the book's policy (their own default tolerances, an absolute tolerance of zero).
DIRECT = re.compile(r"\b(?:assert_allclose|approx|isclose|allclose|assert_close|assert_(?:array_)?almost_equal)\s*\(")
#: The marker that lets a line compare floats another way: a comment giving the reason.
MARKER = re.compile(r"#\s*tolerance:\s*\S")


def test_round_off_is_zero_and_a_real_difference_fails():
    # the stored and recomputed long-memory ladder: its last entry is pure round-off on both machines
    assert_book_close([0.3462529, 1.2e-3, 5.5455958375135997e-17], [0.3462529, 1.2e-3, 2.5026769561054043e-20])
    assert_book_close(1.0 + 1e-7, 1.0)  # a last-digit change of a float32 computation
    with pytest.raises(AssertionError, match=r"\[1\]: actual 2\.0, expected 2\.1"):
        assert_book_close([1.0, 2.0, 3.0], [1.0, 2.1, 3.0])
    with pytest.raises(AssertionError, match="value: actual 1e-09, expected 2e-09"):
        assert_book_close(1e-9, 2e-9)  # small is not round-off: relative tolerance above the floor
    with pytest.raises(AssertionError):
        assert_book_close(2e-12, 0.0)  # above the floor a number is not zero


def test_tolerances_are_relative_with_the_book_s_floor():
    assert COMPUTED.rtol == 1e-5 and ROUNDOFF_FLOOR == 1e-12
    assert_book_close(1.000009, 1.0)
    assert_book_close(-1e5, -1e5 - 0.9)
    with pytest.raises(AssertionError):
        assert_book_close(1.00002, 1.0)
    assert_book_close(1.00002, 1.0, rtol=1e-4)  # a looser comparison says so
    with pytest.raises(AssertionError, match="rtol=1e-12"):
        assert_book_close(1.0 + 1e-10, 1.0, rtol=1e-12)  # a closed form in float64 may ask for less
    assert_book_close(0.52, 0.5, rtol=0, atol=0.03)  # a Monte Carlo estimate on a known scale
    with pytest.raises(ValueError, match="round-off floor"):
        assert_book_close(1.0, 1.0, atol=1e-15)  # never below the floor
    with pytest.raises(ValueError, match="rtol"):
        book_close(1.0, 1.0, rtol=-1e-3)


def test_nan_only_equals_nan_and_infinities_themselves():
    assert_book_close([np.nan, np.inf, -np.inf], [np.nan, np.inf, -np.inf])
    for actual, expected in ((np.nan, 0.0), (0.0, np.nan), (np.inf, 1e308), (np.inf, -np.inf)):
        with pytest.raises(AssertionError):
            assert_book_close(actual, expected)


def test_shapes_must_match_and_a_number_stands_for_every_entry():
    assert_book_close(np.full((2, 3), 0.5), 0.5)
    with pytest.raises(AssertionError, match=r"shapes differ: actual \(2, 3\), expected \(3,\)"):
        assert_book_close(np.zeros((2, 3)), np.zeros(3))
    with pytest.raises(AssertionError, match="shapes differ"):
        assert_book_close(np.zeros(3), np.zeros(4))


def test_tensors_lists_and_mappings():
    t = torch.tensor([1.0, 2.0], dtype=torch.float32, requires_grad=True) * 1
    assert_book_close(t, [1.0, 2.0])
    assert book_close(t, torch.tensor([1.0, 2.5])).tolist() == [True, False]
    assert_book_close({"loss": 2.0, "name": "sgd", "n": 3, "none": None}, {"loss": 2.0 + 1e-9, "name": "sgd", "n": 3,
                                                                            "none": None})
    with pytest.raises(AssertionError, match=r"run\['loss'\]"):
        assert_book_close({"loss": 2.0}, {"loss": 2.1}, what="run")
    with pytest.raises(AssertionError, match="not the same keys"):
        assert_book_close({"loss": 2.0}, {"loss": 2.0, "steps": 3})
    with pytest.raises(AssertionError, match="'adam'"):
        assert_book_close({"optimizer": "sgd"}, {"optimizer": "adam"})


def test_failure_message_names_what_is_compared_and_the_first_entries():
    with pytest.raises(AssertionError) as err:
        assert_book_close(np.arange(10.0), np.arange(10.0) + 1, what="kl_bits")
    text = str(err.value)
    assert text.startswith("kl_bits: 10 of 10 entries differ beyond rtol=1e-05")
    assert "[0]: actual 0.0, expected 1.0" in text and "(and 5 more)" in text


def _direct_comparisons(path: Path) -> list[str]:
    out = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        code = line.split("#", 1)[0]
        if DIRECT.search(code) and not MARKER.search(line):
            out.append(f"{path.name}:{number}: {line.strip()}")
    return out


def test_the_policy_check_finds_direct_comparisons(tmp_path):
    sample = tmp_path / "test_sample.py"
    sample.write_text("np.testing.assert_allclose(a, b)\n"
                      "assert x == pytest.approx(y)\n"
                      "assert np.isclose(x, y) and math.isclose(x, y)\n"
                      "torch.testing.assert_close(a, b, rtol=0, atol=0)\n"
                      "assert torch.allclose(a, b)\n"
                      "np.testing.assert_array_almost_equal(a, b)\n"
                      "np.testing.assert_allclose(a, b)  # tolerance: exact integer counts\n"
                      "assert_book_close(a, b)  # the helper\n"
                      "# np.testing.assert_allclose in a comment\n")
    assert [s.split(":")[1] for s in _direct_comparisons(sample)] == ["1", "2", "3", "4", "5", "6"]


def test_every_test_compares_floats_through_the_helper():
    """No test file compares floats with NumPy's, pytest's, PyTorch's or math's own closeness functions (their defaults
    differ from the book's and from each other) unless the line says why: ``# tolerance: <reason>``."""
    found = [hit for path in sorted(TESTS.glob("*.py")) if path.name != Path(__file__).name
             for hit in _direct_comparisons(path)]
    assert found == [], ("compare floats with attention_dynamics.book.nbcompare.assert_book_close, or give the reason "
                         "on the line as '# tolerance: <reason>':\n" + "\n".join(found))
