"""The book's output-table extension (book/_ext/output_tables.py): dict values and printed dicts become small
tables; missing values in output tables read as a dash; anything else is left alone."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "book" / "_ext"))
import output_tables as ot  # noqa: E402


def test_a_dict_repr_reads_back_with_numpy_scalars_unwrapped():
    text = "{'head': {0: np.float64(2.1545), 25: np.float64(2.1542)}, 'n': np.int64(3), 'ok': True}"
    assert ot.parse_dict(text) == {"head": {0: 2.1545, 25: 2.1542}, "n": 3, "ok": True}


@pytest.mark.parametrize("text", ["[1, 2]", "{1, 2}", "{}", "hello {'a': 1}", "{'a': array([1, 2])}", "0.5"])
def test_what_is_not_a_dict_is_left_alone(text):
    assert ot.parse_dict(text) is None


def test_rows_flatten_inner_dicts_and_round_to_four_digits():
    rows = ot.dict_rows({"a": {"x": 0.9999997139730521, "y": None}, "b": [0.56, 0.609], "c": (0.013, "pass"),
                         "d": float("nan"), "e": 4.336808689942018e-19})
    assert rows == [("a · x", "0.99999971"), ("a · y", "—"), ("b", "0.56, 0.609"), ("c", "0.013, pass"), ("d", "—"),
                    ("e", "4.337e-19")]
    html = ot.dict_table_html({"<k>": 1})
    assert "<th>&lt;k&gt;</th><td>1</td>" in html and html.startswith('<div class="output text_html">')


def test_missing_cells_read_as_a_dash_and_numbers_stay():
    html = '<table><tr><td>NaN</td><td class="c"> None </td><td>1.5</td><td>Nancy</td></tr></table>'
    out = ot.dash_missing_cells(html)
    assert out.count("—") == 2 and "<td>1.5</td>" in out and "<td>Nancy</td>" in out
