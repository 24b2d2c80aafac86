"""The book's figure rules: within the column, text no smaller than the minimum, one colour per model family.

Checked against what the figure itself reports (matplotlib's sizes and the PNG that PIL reads back) and,
for the palette, against colour distances computed independently of it under simulated colour-vision
deficiencies.
"""

from __future__ import annotations

import io

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pytest
from PIL import Image

from attention_dynamics.book.nbcompare import assert_book_close
from attention_dynamics.core import plotting


@pytest.fixture(autouse=True)
def _book_style():
    with matplotlib.rc_context():
        plotting.use_book_style()
        yield
        plt.close("all")


def test_a_wide_row_is_stacked_two_panels_to_a_row_within_the_column():
    fig, axes = plotting.new_figure(5, width=3.5, height=2.5)
    assert len(axes) == 5
    assert fig.get_size_inches()[0] <= plotting.MAX_FIGURE_WIDTH_IN + 1e-9
    rows = sorted({round(ax.get_position().y0, 3) for ax in axes})
    assert len(rows) == 3, "five panels make three rows of two"
    assert len(fig.axes) == 5, "the sixth, empty slot is removed"


def test_a_pair_or_grid_is_narrowed_not_stacked():
    fig, axes = plotting.new_figure(3, nrows=2, width=4.0, height=2.0)
    assert axes.shape == (2, 3)
    assert_book_close(fig.get_size_inches()[0], plotting.MAX_FIGURE_WIDTH_IN)
    fig, axes = plotting.new_figure(2, width=3.0, height=2.0)
    assert_book_close(fig.get_size_inches()[0], 6.0)
    with pytest.raises(ValueError, match="at least one row and one column"):
        plotting.new_figure(0)


def test_smallest_font_is_the_smallest_text_shown():
    fig, ax = plt.subplots(figsize=(4, 3))
    ax.set_title("title", fontsize=12)
    ax.text(0.5, 0.5, "a note", fontsize=9)
    ax.text(0.5, 0.2, "hidden", fontsize=5, visible=False)
    ax.text(0.5, 0.1, "   ", fontsize=4)
    ax.tick_params(labelsize=11)
    ax.set_xlabel("x", fontsize=10)
    assert plotting.smallest_font_pt(fig) == 9


def test_check_figure_rejects_small_text_and_wide_figures():
    fig, ax = plt.subplots(figsize=(4, 3))
    ax.legend(handles=[ax.plot([0, 1], label="a line")[0]], fontsize=7)
    with pytest.raises(ValueError, match="'a line' at 7 pt"):
        plotting.check_figure(fig)
    wide, _ = plt.subplots(figsize=(plotting.MAX_FIGURE_WIDTH_IN + 1, 3))
    with pytest.raises(ValueError, match="wide"):
        plotting.check_figure(wide)
    fine, ax = plt.subplots(figsize=(4, 3))
    ax.plot([0, 1], label="a line")
    ax.legend()
    plotting.check_figure(fine)


def test_glue_figure_checks_and_closes_the_figure_outside_a_notebook():
    fig, ax = plt.subplots(figsize=(4, 3))
    ax.set_xlabel("small", fontsize=6)
    with pytest.raises(ValueError, match="smaller than 8 pt"):
        plotting.glue_figure("fig-x", fig)
    assert not plt.fignum_exists(fig.number), "a rejected figure is closed too"
    fig, _ = plt.subplots(figsize=(4, 3))
    plotting.glue_figure("fig-y", fig)
    assert not plt.fignum_exists(fig.number)


def test_figure_png_records_its_dpi_and_smallest_font_for_the_reader_s_size():
    fig, ax = plt.subplots(figsize=(4, 3))
    ax.plot(np.arange(3))
    ax.set_title("t", fontsize=13)
    ax.tick_params(labelsize=9.5)
    ax.set_xlabel("x", fontsize=11)
    image = Image.open(io.BytesIO(plotting.figure_png(fig, dpi=100)))
    assert float(image.info[plotting.SMALLEST_FONT_KEY]) == 9.5
    assert_book_close(image.info["dpi"][0], 100, rtol=0, atol=0.01)
    # The tight bounding box keeps the figure within its nominal width at that dpi (plus the text it holds).
    assert 300 <= image.size[0] <= 4 * 100 + 10


def test_a_legend_over_a_reference_line_is_caught():
    fig, ax = plt.subplots(figsize=(4, 3))
    x = np.linspace(0, 1, 20)
    ax.plot(x, x, label="model")
    ax.axhline(0.9, color="k", ls="--", label="context-blind")
    ax.set_ylim(0, 1)
    ax.legend(loc="upper left")  # the box spans the top of the axes, where the level 0.9 runs
    assert plotting.covered_reference_lines(fig) == ["context-blind"]
    with pytest.raises(ValueError, match="a legend covers a reference line"):
        plotting.check_figure(fig)
    ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0))  # outside the axes
    assert plotting.covered_reference_lines(fig) == []
    plotting.check_figure(fig)
    fig2, ax2 = plt.subplots(figsize=(4, 3))
    ax2.plot(x, x, label="model")
    ax2.axhline(0.1, color="k", ls="--", label="floor")
    ax2.set_ylim(0, 1)
    ax2.legend(loc="upper left")
    assert plotting.covered_reference_lines(fig2) == [], "a legend away from the level covers nothing"


def test_figure_svg_records_its_smallest_font_and_is_the_same_every_time():
    fig, axes = plotting.new_figure(2, width=3.4)
    for ax in axes:
        ax.plot(np.arange(3))
        ax.tick_params(labelsize=8.5)
        ax.set_xlabel("x", fontsize=11)
    svg = plotting.figure_svg(fig)
    assert svg.startswith(b"<?xml") and b"<svg " in svg and b"<dc:date>" not in svg
    assert f'{plotting.SVG_SMALLEST_FONT_ATTR}="8.5"'.encode() in svg
    assert plotting.figure_svg(fig) == svg, "the same figure gives the same bytes (committed outputs stay put)"
    width_pt, font_pt = plotting.svg_facts(svg)
    assert font_pt == 8.5 and 6.8 * 72 * 0.9 < width_pt <= plotting.MAX_FIGURE_WIDTH_IN * 72
    plt.close(fig)


def test_svg_min_width_keeps_a_figure_s_smallest_text_legible_on_a_phone():
    """Shown at w px, text of f pt in a figure W pt wide is f·w/W px: the minimum width gives MIN_PHONE_TEXT_PX."""
    svg = f'<svg {plotting.SVG_SMALLEST_FONT_ATTR}="8" width="600pt" height="200pt">'
    width = plotting.svg_min_width_px(svg)
    assert width == 488  # ceil(6.5 · 600 / 8)
    assert 8 * width / 600 >= plotting.MIN_PHONE_TEXT_PX > 8 * (width - 1) / 600
    assert plotting.svg_min_width_px('<svg width="600pt">') is None, "an SVG that records no font is left alone"
    assert plotting.svg_facts(f'<svg {plotting.SVG_SMALLEST_FONT_ATTR}="9" width="400px">') == (300.0, 9.0)


def test_glue_figure_glues_an_svg_in_a_notebook(monkeypatch):
    """In a kernel the figure is glued as SVG (its text/plain the same every run), checked and closed."""
    import myst_nb

    glued = {}
    monkeypatch.setattr("IPython.get_ipython", lambda: object())
    monkeypatch.setattr(myst_nb, "glue", lambda name, obj, display=True: glued.update({name: obj}))
    fig, ax = plt.subplots(figsize=(4, 3))
    ax.plot([0, 1])
    plotting.glue_figure("fig-svg", fig)
    bundle = glued["fig-svg"]._repr_mimebundle_()
    assert set(bundle) == {"image/svg+xml", "text/plain"} and bundle["text/plain"] == "<Figure (SVG)>"
    assert plotting.SVG_SMALLEST_FONT_ATTR in bundle["image/svg+xml"]
    assert not plt.fignum_exists(fig.number)
