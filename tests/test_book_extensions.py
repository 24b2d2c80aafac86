"""The reader-facing Sphinx extensions of book/_ext, each on a tiny Sphinx project (a few seconds, no book build).

- ``claim_numbers``: a glued number whose glue key is a claim of ``book/claims.json`` gets its popover (the paper's
  value, the status in the reader's words, a link to its row on the reproducibility page); other glued numbers are
  left alone; the ledger's rows carry the anchors the popovers link to.
- ``figure_sizes``: an SVG figure that records its smallest font gets its minimum width and a scrolling box.
- ``reader_pages``: the ``{findings}`` directive lists the findings with their labels, numbers and links.
- the book's CSS: glued numbers in the body's weight, the settings table readable in the dark theme.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

REPO_ROOT = Path(__file__).resolve().parents[1]
EXT_DIR = REPO_ROOT / "book" / "_ext"


def _glued(name: str, value: str) -> dict:
    """A display output as myst-nb's ``glue(name, value, display=False)`` writes it."""
    return new_output("display_data", data={"application/papermill.record/text/plain": value},
                      metadata={"scrapbook": {"name": name, "mime_prefix": "application/papermill.record/"}})


def _claim(cid: str, value: float, status: str, paper: float | None) -> dict:
    return {"id": cid, "description": f"what {cid} measures", "value": value, "unit": "×", "status": status,
            "chapter": "01-toy", "paper_value": paper, "expected": None, "tolerance": None, "lower": 2.0,
            "upper": None, "interval": None, "explanation": "why" if status in ("fail", "undecided") else None,
            "params": {"code": "0" * 40}, "cross_machine_rtol": None, "undecided_because": None}


def _build(tmp_path: Path, svg: bytes) -> Path:
    """Build a tiny project (a chapter notebook, the reproducibility page, a findings page) with the book's
    extensions; return the HTML folder."""
    sphinx = pytest.importorskip("sphinx.cmd.build")
    src = tmp_path / "src"
    (src / "book" / "images").mkdir(parents=True)
    (src / "book" / "claims.json").write_text(json.dumps({"claims": [
        _claim("toy.speedup", 2.1843, "pass", 2.3), _claim("toy.other", 1.5, "fail", None),
        _claim("toy.own", 0.25, "new", None)]}), encoding="utf-8")
    (src / "book" / "images" / "wide.svg").write_bytes(svg)
    nb = new_notebook(cells=[
        new_markdown_cell("# A toy chapter\n\nThe speed-up is {glue:text}`toy.speedup:.2f`, the other "
                          "**{glue:text}`toy.other:.1f`**, the book's own {glue:text}`toy.own:.2f` and a plain "
                          "{glue:text}`toy.plain:.1f`.\n\n```{figure} images/wide.svg\n:name: fig-wide\n\nA wide figure.\n```"),
        new_code_cell("glue(...)", outputs=[_glued("toy.speedup", "2.18435998"), _glued("toy.other", "1.5"),
                                            _glued("toy.own", "0.25"), _glued("toy.plain", "3.0")]),
    ], metadata={"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}})
    nbformat.write(nb, src / "book" / "toy-chapter.ipynb")
    (src / "book" / "reproducibility.md").write_text("# The ledger\n\n```{claims-table}\n```\n", encoding="utf-8")
    (src / "index.md").write_text("# Toy\n\n```{toctree}\nbook/toy-chapter\nbook/reproducibility\n```\n", encoding="utf-8")
    (src / "conf.py").write_text(
        f"import sys\nsys.path.insert(0, {str(EXT_DIR)!r})\n"
        "extensions = ['myst_nb', 'book_tables', 'claim_numbers', 'figure_sizes', 'reader_pages']\n"
        "nb_execution_mode = 'off'\nmyst_enable_extensions = ['colon_fence']\nexclude_patterns = ['_build']\n",
        encoding="utf-8")
    out = tmp_path / "html"
    assert sphinx.build_main(["-q", "-b", "html", str(src), str(out)]) == 0
    return out


@pytest.fixture(scope="module")
def toy_site(tmp_path_factory) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    from attention_dynamics.core import plotting

    fig, axes = plotting.new_figure(3, width=2.8)
    for ax in axes:
        ax.plot([0, 1], [0, 1])
        ax.set_xlabel("step")
    svg = plotting.figure_svg(fig)
    return _build(tmp_path_factory.mktemp("toy-site"), svg)


def test_a_glued_claim_number_gets_its_popover(toy_site):
    html = (toy_site / "book" / "toy-chapter.html").read_text(encoding="utf-8")
    numbers = re.findall(r'<span class="claim-number[^"]*"[^>]*>.*?</span></span></span>', html, re.S)
    assert len(numbers) == 3, "the three claims get a popover, the plain glued number none"
    first = numbers[0]
    assert 'tabindex="0"' in first and 'data-claim="toy.speedup"' in first
    popover_id = re.search(r'aria-describedby="([^"]+)"', first).group(1)
    assert f'id="{popover_id}"' in first and 'role="tooltip"' in first
    assert "2.18" in first and "paper" in first and "2.3×" in first, "the paper's value beside the number"
    assert "holds" in first and 'href="reproducibility.html#claim-toy-speedup"' in first
    assert "does not hold" in numbers[1] and "<strong>" in html.split(numbers[1])[0][-200:], "bold stays bold"
    assert "the book’s own number" in numbers[2] or "the book's own number" in numbers[2]
    assert "—" in numbers[1], "no paper value: a dash"
    plain = html.split("a plain")[1][:200]
    assert "claim-number" not in plain and "pasted-text" in plain and "glued-number" in plain
    ledger = (toy_site / "book" / "reproducibility.html").read_text(encoding="utf-8")
    assert 'id="claim-toy-speedup"' in ledger, "the ledger row the popover links to"
    for name in ("claim-numbers.css", "claim-numbers.js"):
        assert (toy_site / "_static" / name).is_file()
        assert f"_static/{name}" in html
    assert "://" not in (toy_site / "_static" / "claim-numbers.js").read_text(encoding="utf-8"), "nothing remote"


def test_an_svg_figure_gets_a_minimum_width_and_a_scrolling_box(toy_site):
    from attention_dynamics.core.plotting import svg_min_width_px

    html = (toy_site / "book" / "toy-chapter.html").read_text(encoding="utf-8")
    img = re.search(r"<img[^>]*wide[^>]*>", html).group(0)
    svg = next((toy_site / "_images").glob("wide*.svg")).read_bytes()
    width = svg_min_width_px(svg)
    assert width and width > 390, "a three-panel figure needs more than a phone's width"
    assert f"min-width: {width}px" in img and "book-svg-figure" in img
    assert re.search(r'<figure class="[^"]*book-wide-figure', html)
    assert (toy_site / "_static" / "figure-sizes.css").is_file()


def test_the_ledger_prints_compactly_and_the_glued_numbers_read_plain():
    sys.path.insert(0, str(EXT_DIR))
    tables = __import__("book_tables")
    css = tables.BOOK_CSS
    assert re.search(r"\.bd-article span\.pasted-text \{ font-weight: inherit; \}", css)
    assert re.search(r"\.bd-article \.glued-number, \.bd-article \.claim-number \{ white-space: nowrap; \}", css)
    assert re.search(r"@media print \{[^@]*\.claim-id, table\.claims-ledger details\.claim-details \{ display: none",
                     css), "ids and folded details are left out of print"
    assert re.search(r"data-theme=\"dark\"\] [^{]*:has\(table\.settings-table\) \{[^}]*background-color: transparent",
                     css), "the settings table is not on light grey in the dark theme"
    assert tables.claim_anchor("sticky.speedup_paper_protocol") == "claim-sticky-speedup-paper-protocol"


def test_findings_directive_lists_labels_numbers_and_links(tmp_path):
    """The front page's findings from the committed ledger: one item each, its label, its numbers, its link."""
    from attention_dynamics.ledger.findings import FINDINGS

    sphinx = pytest.importorskip("sphinx.cmd.build")
    src = tmp_path / "src"
    (src / "book").mkdir(parents=True)
    shutil.copy(REPO_ROOT / "book" / "claims.json", src / "book" / "claims.json")
    (src / "index.md").write_text("# Front\n\n```{findings}\n```\n", encoding="utf-8")
    (src / "conf.py").write_text(
        f"import sys\nsys.path.insert(0, {str(EXT_DIR)!r})\n"
        "extensions = ['myst_nb', 'book_tables', 'claim_numbers', 'reader_pages']\nnb_execution_mode = 'off'\n",
        encoding="utf-8")
    out = tmp_path / "html"
    assert sphinx.build_main(["-q", "-b", "html", str(src), str(out)]) == 0
    html = (out / "index.html").read_text(encoding="utf-8")
    items = re.findall(r'<li class="book-finding">(.*?)</li>', html, re.S)
    assert len(items) == len(FINDINGS)
    for item in items:
        assert re.search(r'class="verdict verdict-(holds|holds-in-part|does-not-hold|open-at-this-scale|'
                         r'not-tested-here)"', item), item[:200]
        assert "claim-number" in item, "every finding states a number from the ledger, with its popover"
        assert "→ chapter" in item
