"""The cross-machine output comparison: numbers by tolerance per kind, words exactly, and the nbval plugin."""

from __future__ import annotations

import json
import subprocess
import sys

import nbformat
import pytest

from attention_dynamics.book.nbcompare import (
    COMPUTED,
    assert_book_close,
    TRAINED,
    TRAINED_TAG,
    NumberTolerance,
    canonical_text,
    cell_tolerance,
    last_digit_unit,
    snap_outputs,
    split_numbers,
    texts_agree,
)


def test_split_numbers_round_trips_and_keeps_identifiers():
    text = "W_Q2 at step 1e-3: loss 2.0647, k2→v4, -0.5 and .25 (T=6)"
    pieces, numbers = split_numbers(text)
    assert numbers == ["1e-3", "2.0647", "-0.5", ".25", "6"]
    assert "".join(p + n for p, n in zip(pieces, numbers + [""])) == text


@pytest.mark.parametrize(
    "ref, test, tolerance, agree",
    [
        # last-digit float differences of a computation: agree
        ("loss 1.3736123", "loss 1.3736124", COMPUTED, True),
        # round-off-level values agree whatever their digits (both below 1e-12)
        ("error 7.5608e-17", "error 1.0229e-16", COMPUTED, True),
        # a real change of a computed value: disagree
        ("loss 1.3736", "loss 1.3741", COMPUTED, False),
        # a computed value that becomes round-off, or the reverse: disagree
        ("error 1e-9", "error 1e-17", COMPUTED, False),
        # counts are exact
        ("24 heads", "25 heads", COMPUTED, False),
        # words must be the same
        ("[pass]", "[fail]", COMPUTED, False),
        # a padded table whose column width changed with a number's width
        ("a    0.012\nbb   1.5", "a   0.0125\nbb  1.5", TRAINED, True),
        # a trained result within its seed spread, and a step count of a training run
        ("KL 4.464e-04 bits", "KL 4.507e-04 bits", TRAINED, True),
        ("settles at 1286", "settles at 1162", TRAINED, True),
        # a trained result that halves: caught
        ("KL 0.035 bits", "KL 0.017 bits", TRAINED, False),
        ("nan", "0.5", TRAINED, False),
        # a different number of numbers
        ("1, 2", "1, 2, 3", TRAINED, False),
        # two close values printed one unit apart in their last digit (rounding), computed and trained
        ("loss 0.12345", "loss 0.12346", COMPUTED, True),
        ("MI 0.003 nats", "MI 0.002 nats", TRAINED, True),
        # two units apart in a short-printed trained value is more than rounding and tolerance allow
        ("MI 0.003 nats", "MI 0.001 nats", TRAINED, False),
    ],
)
def test_texts_agree(ref, test, tolerance, agree):
    assert texts_agree(ref, test, tolerance) is agree


def test_rounding_alone_would_not_hold_but_tolerance_does():
    # Two values a last digit apart, on either side of a rounding boundary.
    a, b = "0.123449999", "0.123450001"
    assert canonical_text(a, 4) != canonical_text(b, 4)
    assert texts_agree(a, b, COMPUTED)


@pytest.mark.parametrize(
    "token, unit", [("0.003", 1e-3), ("4.75e-03", 1e-5), ("12", 1.0), ("2.", 1.0), (".25", 1e-2), ("1E+2", 100.0)]
)
def test_last_digit_unit(token, unit):
    assert_book_close(last_digit_unit(token), unit, rtol=1e-12, what=token)


def test_canonical_text_rounds_and_names_round_off():
    assert canonical_text("err 1.7763568394002505e-15, loss 1.2829773564688913, n 24") == (
        "err <1e-12, loss 1.28298, n 24"
    )


def test_cell_tolerance_by_tag():
    assert cell_tolerance({"metadata": {"tags": [TRAINED_TAG]}}) is TRAINED
    assert cell_tolerance({"metadata": {}}) is COMPUTED


def _stream(text):
    return {"output_type": "stream", "name": "stdout", "text": text}


def _display(text, html=None):
    data = {"text/plain": text}
    if html:
        data["text/html"] = html
    return {"output_type": "display_data", "data": data, "metadata": {}}


def test_snap_outputs_replaces_agreeing_texts_only():
    ref = [_stream("loss 1.00000001\n"), _display("a 0.5", "<td>0.5</td>")]
    test = [_stream("loss 1.00000002\n"), _display("a 0.7", "<td>0.50000001</td>")]
    snapped = snap_outputs(test, ref, COMPUTED)
    assert snapped[0]["text"] == ref[0]["text"]
    assert snapped[1]["data"]["text/html"] == "<td>0.5</td>"
    assert snapped[1]["data"]["text/plain"] == "a 0.7"  # a real difference stays for nbval to report


def test_snap_outputs_leaves_unpaired_outputs_alone():
    ref = [_stream("1.0")]
    test = [_stream("1.0"), _display("2.0")]
    assert snap_outputs(test, ref, COMPUTED) == test


def test_tolerance_integers():
    assert not NumberTolerance(rtol=0.5).agree("10", "11")
    assert NumberTolerance(rtol=0.5, integers_within_rtol=True).agree("10", "11")


# --- the plugin, end to end, on a small notebook ---------------------------------------------------

_CELL = """from attention_dynamics.ledger import claims
x = {value}
claims.record("test.value", x, description="a trained number", unit="", lower=0.0)
print(f"value {{x}}")
"""


def _notebook(path, committed_value, rerun_value, tags=()):
    """Write a notebook whose committed outputs show ``committed_value``; re-running prints ``rerun_value``."""
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell(_CELL.format(value=rerun_value), metadata={"tags": list(tags)})
    cell.execution_count = 1
    claim = {
        "id": "test.value", "description": "a trained number", "value": committed_value, "unit": "",
        "status": "pass", "chapter": None, "paper_value": None, "expected": None, "tolerance": None,
        "lower": 0.0, "upper": None, "explanation": None, "params": {}, "cross_machine_rtol": None,
    }
    cell.outputs = [
        nbformat.v4.new_output("display_data", data={"application/papermill.record/text/plain": repr(committed_value)},
                               metadata={"scrapbook": {"name": "test.value", "mime_prefix": "application/papermill.record/"}}),
        nbformat.v4.new_output("display_data", data={
            "application/papermill.record/application/vnd.attention-dynamics.claim+json": claim,
            "application/papermill.record/text/plain": "test.value = ..."},
            metadata={"scrapbook": {"name": "claim::test.value", "mime_prefix": "application/papermill.record/"}}),
        nbformat.v4.new_output("stream", name="stdout", text=f"value {committed_value}\n"),
    ]
    nb.cells = [cell]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, path)


def _nbval(tmp_path, nb_path):
    out = tmp_path / "executed"
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "attention_dynamics.book.nbval_plugin",
           "--nbval", str(nb_path), "--nbval-current-env", "--book-executed-dir", str(out), "-o", "addopts="]
    result = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    return result, out


@pytest.mark.slow
@pytest.mark.parametrize(
    "committed, rerun, tags, passes",
    [
        (0.5, 0.5000001, (), True),        # last digits of a computation
        (0.5, 0.7, (), False),             # a computation whose value changed (0.5 and 0.6 could be rounding)
        (0.5, 0.6, (TRAINED_TAG,), True),  # a trained result within its tolerance
        (0.5, 0.1, (TRAINED_TAG,), False), # a trained result that moved beyond it
    ],
)
def test_plugin_compares_by_kind_and_writes_the_reexecuted_ledger(tmp_path, committed, rerun, tags, passes):
    nb_path = tmp_path / "01-example.ipynb"
    _notebook(nb_path, committed, rerun, tags)
    result, out = _nbval(tmp_path, nb_path)
    assert (result.returncode == 0) is passes, result.stdout + result.stderr
    ledger = json.loads((out / "claims.json").read_text())["claims"]
    # the claim record itself was left to the claims comparator, and it carries the re-executed value
    assert [c["id"] for c in ledger] == ["test.value"] and ledger[0]["value"] == rerun
    assert ledger[0]["chapter"] == "01-example"
    executed = nbformat.read(out / "01-example.ipynb", as_version=4)
    assert f"value {rerun}" in "".join(o.get("text", "") for o in executed.cells[0].outputs)
    env = json.loads((out / "environment.json").read_text())
    assert env["torch_threads"] >= 1


_FIGURE_CELL = """from IPython.display import SVG, display
display(SVG('<svg xmlns="http://www.w3.org/2000/svg"><rect width="{width}" height="10"/></svg>'))
"""


@pytest.mark.slow
@pytest.mark.parametrize(
    "committed, rerun, tags, passes",
    [
        (40.0, 40.0000001, (), True),     # a computed figure's coordinates, last digits apart
        (40.0, 44.0, (), False),          # a computed figure that changed
        (40.0, 44.0, (TRAINED_TAG,), True),  # a trained figure: its pixels are not compared
    ],
)
def test_plugin_compares_computed_figures_and_leaves_trained_ones(tmp_path, committed, rerun, tags, passes):
    def svg(width):
        return f'<svg xmlns="http://www.w3.org/2000/svg"><rect width="{width}" height="10"/></svg>'

    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell(_FIGURE_CELL.format(width=rerun), metadata={"tags": list(tags)})
    cell.execution_count = 1
    cell.outputs = [nbformat.v4.new_output("display_data", data={"image/svg+xml": svg(committed),
                                                                 "text/plain": "<IPython.core.display.SVG object>"})]
    nb.cells = [cell]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb_path = tmp_path / "01-figure.ipynb"
    nbformat.write(nb, nb_path)
    result, _ = _nbval(tmp_path, nb_path)
    assert (result.returncode == 0) is passes, result.stdout + result.stderr


def _book_sanitizer():
    """nbval's sanitiser with the book's patterns (tests/nbval_sanitize.cfg), as ``make nbval`` loads it."""
    import re
    from pathlib import Path

    from nbval.plugin import get_sanitize_patterns

    patterns = get_sanitize_patterns((Path(__file__).parent / "nbval_sanitize.cfg").read_text())

    def sanitize(text):
        for regex, replace in patterns:
            text = re.sub(regex, replace, text)
        return text

    return sanitize


def test_sanitizer_folds_matplotlib_ids_but_not_what_they_name():
    sanitize = _book_sanitizer()
    a = '<clipPath id="p4c562aa914"><rect x="48.19"/></clipPath><path clip-path="url(#p4c562aa914)" d="M 1 2"/>'
    b = '<clipPath id="p0123456789"><rect x="48.19"/></clipPath><path clip-path="url(#p0123456789)" d="M 1 2"/>'
    assert sanitize(a) == sanitize(b)
    assert sanitize(a.replace("48.19", "52.00")) != sanitize(b)
    assert sanitize('<use xlink:href="#m8a2c1f0e3b"/>') == sanitize('<use xlink:href="#m0000000000"/>')
    assert sanitize("fill: #de8f05") == "fill: #de8f05"  # a colour is not an id


def test_snap_outputs_compares_sanitized_texts():
    sanitize = _book_sanitizer()
    ref = [_display("<Figure>", None)]
    ref[0]["data"]["image/svg+xml"] = '<g clip-path="url(#p4c562aa914)"><path d="M 89.86973 1"/></g>'
    test = [_display("<Figure>", None)]
    test[0]["data"]["image/svg+xml"] = '<g clip-path="url(#pffffffffff)"><path d="M 89.86974 1"/></g>'
    assert snap_outputs(test, ref, COMPUTED)[0]["data"]["image/svg+xml"] != ref[0]["data"]["image/svg+xml"]
    assert snap_outputs(test, ref, COMPUTED, sanitize)[0]["data"]["image/svg+xml"] == ref[0]["data"]["image/svg+xml"]
