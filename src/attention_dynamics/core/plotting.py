"""One plotting style for every figure of the book.

Figures have an opaque white background and dark text, so they read the same on the book's
light and dark themes; colour maps are perceptually uniform (sequential) or centred at zero
(diverging) and colour-blind safe, and every training schedule keeps one colour across the book
(:func:`schedule_color`; a model family's colour is its entry's in :mod:`attention_dynamics.models.registry`).

Figures are made for the book's column: :func:`new_figure` keeps a figure within
:data:`MAX_FIGURE_WIDTH_IN` (stacking the panels of a wide row two to a row), so that shown at the
column's width no figure is scaled below about 70 % and its smallest text, at least
:data:`MIN_FONT_PT`, stays legible (the browser test measures both). :func:`glue_figure` hands a
figure to the page as a numbered, captioned figure (``{glue:figure}`` with its alt text), after
:func:`check_figure` has refused text below :data:`MIN_FONT_PT`, a figure wider than the column and a
legend over a reference line.

Figures are glued as SVG (:func:`figure_svg`): vector, sharp at any zoom, with their smallest font recorded on the
root element (:data:`SVG_SMALLEST_FONT_ATTR`). The book gives each SVG figure a minimum display width
(:func:`svg_min_width_px`, ``book/_ext/figure_sizes.py``) so that on a phone its smallest text stays at least
:data:`MIN_PHONE_TEXT_PX` CSS pixels; a figure wider than the phone then scrolls sideways inside its own box.
"""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import numpy as np
import seaborn as sns

__all__ = [
    "MIN_FONT_PT",
    "MAX_FIGURE_WIDTH_IN",
    "glue_figure",
    "check_figure",
    "covered_reference_lines",
    "figure_png",
    "figure_svg",
    "svg_facts",
    "svg_min_width_px",
    "smallest_font_pt",
    "SMALLEST_FONT_KEY",
    "SVG_SMALLEST_FONT_ATTR",
    "MIN_PHONE_TEXT_PX",
    "PALETTE",
    "SEQUENTIAL_CMAP",
    "DIVERGING_CMAP",
    "BOOK_RC",
    "use_book_style",
    "schedule_color",
    "new_figure",
    "plot_matrix",
]

#: Colour-blind-safe qualitative palette (seaborn "colorblind").
PALETTE = sns.color_palette("colorblind")
SEQUENTIAL_CMAP = "viridis"
DIVERGING_CMAP = "RdBu_r"

BOOK_RC = {
    "figure.facecolor": "white",
    "axes.facecolor": "white",
    "savefig.facecolor": "white",
    "figure.dpi": 110,
    "savefig.dpi": 110,
    "figure.figsize": (6.4, 4.0),
    "font.size": 10,
    "axes.titlesize": 11,
    "axes.labelsize": 10,
    "legend.fontsize": 9,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "image.cmap": SEQUENTIAL_CMAP,
    "text.color": "#222222",
    "axes.labelcolor": "#222222",
    "xtick.color": "#222222",
    "ytick.color": "#222222",
    "svg.hashsalt": "attention-dynamics",
}

#: The smallest font size (points) any figure uses: at the book's dpi and column width it stays above 8 CSS px.
MIN_FONT_PT = 8.0
#: The widest a figure may be (inches): 924 pixels at the book's 110 dpi, shown in a column of about 690.
MAX_FIGURE_WIDTH_IN = 8.4

_SCHEDULE_COLORS = {
    "sgd": PALETTE[0],
    "em_like": PALETTE[1],
    "sgd_matched": PALETTE[2],
    "m_step": PALETTE[3],
}


def use_book_style() -> None:
    """Apply the book's matplotlib style globally (chapters call it once, at the top)."""
    sns.set_theme(context="notebook", style="whitegrid", palette=PALETTE, rc=BOOK_RC)


def schedule_color(name: str):
    """Return the fixed colour of a training schedule (the same in every chapter)."""
    return _SCHEDULE_COLORS.get(name, PALETTE[len(_SCHEDULE_COLORS) % len(PALETTE)])


def new_figure(ncols: int = 1, nrows: int = 1, *, width: float = 3.4, height: float = 3.0, **kwargs):
    """Return ``(fig, axes)`` with panels of ``width`` × ``height`` inches and constrained layout, within the column.

    A single row wider than :data:`MAX_FIGURE_WIDTH_IN` is stacked, two panels to a row (``axes`` is still the flat
    array of ``ncols`` panels, in reading order); a grid of several rows, or a pair, is narrowed to fit instead.
    """
    if ncols < 1 or nrows < 1:
        raise ValueError(f"a figure needs at least one row and one column, got {nrows} × {ncols}")
    if ncols * width <= MAX_FIGURE_WIDTH_IN:
        return plt.subplots(nrows, ncols, figsize=(width * ncols, height * nrows), layout="constrained", **kwargs)
    if nrows == 1 and ncols >= 3:
        per_row = 2 if 2 * width <= MAX_FIGURE_WIDTH_IN else 1
        rows = math.ceil(ncols / per_row)
        width = min(width, MAX_FIGURE_WIDTH_IN / per_row)
        fig, grid = plt.subplots(rows, per_row, figsize=(width * per_row, height * rows), layout="constrained",
                                 squeeze=False, **kwargs)
        flat = grid.ravel()
        for ax in flat[ncols:]:
            ax.remove()
        return fig, flat[:ncols]
    width = MAX_FIGURE_WIDTH_IN / ncols
    return plt.subplots(nrows, ncols, figsize=(width * ncols, height * nrows), layout="constrained", **kwargs)


#: The PNG text key under which a glued figure records its smallest font size (points); the browser test reads it.
SMALLEST_FONT_KEY = "Smallest font (pt)"


def smallest_font_pt(fig) -> float:
    """Return the smallest font size (points) of any text ``fig`` shows (titles, labels, ticks, legends, notes).

    Empty and hidden texts do not count; nor do the superscripts and subscripts inside a mathtext label,
    which matplotlib sets at a fixed fraction of the label's size.
    """
    from matplotlib.text import Text

    fig.draw_without_rendering()  # tick labels get their text when the figure is drawn
    sizes = [t.get_fontsize() for t in fig.findobj(Text) if t.get_visible() and t.get_text().strip()]
    return float(min(sizes)) if sizes else math.inf


def figure_png(fig, *, dpi: float | None = None) -> bytes:
    """Return ``fig`` as PNG bytes (tight bounding box, the book's dpi) recording its dpi and smallest font."""
    import io

    buffer = io.BytesIO()
    smallest = smallest_font_pt(fig)
    metadata = {SMALLEST_FONT_KEY: f"{smallest:g}"} if math.isfinite(smallest) else {}
    fig.savefig(buffer, format="png", dpi=dpi or plt.rcParams["savefig.dpi"], bbox_inches="tight",
                metadata=metadata)
    return buffer.getvalue()


#: The attribute of a glued SVG figure's root element that records its smallest font size (points).
SVG_SMALLEST_FONT_ATTR = "data-smallest-font-pt"
#: The smallest a figure's text may be shown on a phone (CSS px): the book widens the figure (it scrolls) rather than
#: shrink its text below this.
MIN_PHONE_TEXT_PX = 6.5


def figure_svg(fig) -> bytes:
    """Return ``fig`` as SVG bytes (tight bounding box, no date: the same figure gives the same bytes) whose root
    element records the figure's smallest font in points (:data:`SVG_SMALLEST_FONT_ATTR`)."""
    import io

    buffer = io.BytesIO()
    smallest = smallest_font_pt(fig)
    fig.savefig(buffer, format="svg", bbox_inches="tight", metadata={"Date": None, "Creator": None})
    svg = buffer.getvalue()
    if math.isfinite(smallest):
        svg = svg.replace(b"<svg ", f'<svg {SVG_SMALLEST_FONT_ATTR}="{smallest:g}" '.encode(), 1)
    return svg


def svg_facts(svg: bytes | str) -> tuple[float, float] | None:
    """Return ``(width in points, smallest font in points)`` of an SVG figure made by :func:`figure_svg`, or None
    when it does not record them."""
    import re

    text = svg.decode("utf-8", "replace") if isinstance(svg, bytes) else svg
    root = re.search(r"<svg\b[^>]*>", text)
    if root is None:
        return None
    width = re.search(r'\bwidth="([\d.]+)(pt|px)?"', root.group(0))
    font = re.search(SVG_SMALLEST_FONT_ATTR + r'="([\d.]+)"', root.group(0))
    if width is None or font is None:
        return None
    points = float(width.group(1)) * (0.75 if width.group(2) == "px" else 1.0)
    return points, float(font.group(1))


def svg_min_width_px(svg: bytes | str, min_text_px: float = MIN_PHONE_TEXT_PX) -> int | None:
    """Return the narrowest width (CSS px) at which an SVG figure shows its smallest text at ``min_text_px`` or more,
    or None when the SVG does not record its size and smallest font. Shown at ``w`` px, text of ``f`` pt in a figure
    ``W`` pt wide is ``f · w / W`` px."""
    facts = svg_facts(svg)
    if facts is None:
        return None
    width_pt, font_pt = facts
    return math.ceil(min_text_px * width_pt / font_pt)


class _SvgFigure:
    """A figure's display for the notebook and the book: its SVG (:func:`figure_svg`)."""

    def __init__(self, svg: bytes):
        self.svg = svg

    def _repr_mimebundle_(self, include=None, exclude=None) -> dict:
        return {"image/svg+xml": self.svg.decode("utf-8"), "text/plain": repr(self)}

    def __repr__(self) -> str:  # the same text every run (no object address in the committed outputs)
        return "<Figure (SVG)>"


def check_figure(fig) -> None:
    """Raise ``ValueError`` if ``fig`` is wider than the column allows or shows text smaller than :data:`MIN_FONT_PT`."""
    width = float(fig.get_size_inches()[0])
    if width > MAX_FIGURE_WIDTH_IN + 1e-6:
        raise ValueError(f"the figure is {width:.2f} in wide, more than the column's {MAX_FIGURE_WIDTH_IN} in: "
                         "stack its panels (plotting.new_figure does) or narrow it")
    from matplotlib.text import Text

    fig.draw_without_rendering()
    small = sorted({(t.get_fontsize(), t.get_text().strip()[:30]) for t in fig.findobj(Text)
                    if t.get_visible() and t.get_text().strip() and t.get_fontsize() < MIN_FONT_PT - 1e-9})
    if small:
        shown = ", ".join(f"{text!r} at {size:g} pt" for size, text in small[:4])
        raise ValueError(f"text smaller than {MIN_FONT_PT:g} pt cannot be read where the figure is shown: {shown}")
    covered = covered_reference_lines(fig)
    if covered:
        raise ValueError(f"a legend covers a reference line ({', '.join(covered[:4])}): move the legend "
                         "(outside the axes, or to a corner the line does not cross)")


def covered_reference_lines(fig) -> list[str]:
    """Return the reference lines of ``fig`` that a legend covers (their labels, or where they are).

    A reference line is one drawn across the axes at a level (``axhline``, ``axvline``, ``axline``: its
    transform is not the data's); a legend, of the axes or of the figure, covers it when the drawn line
    passes through the legend's box.
    """
    fig.draw_without_rendering()
    legends = [leg for leg in fig.legends if leg.get_visible()]
    for ax in fig.axes:
        if ax.get_legend() is not None and ax.get_legend().get_visible():
            legends.append(ax.get_legend())
    if not legends:
        return []
    covered = []
    for ax in fig.axes:
        for line in ax.get_lines():
            if not line.get_visible() or line.get_transform() == ax.transData:
                continue
            path = line.get_transform().transform_path(line.get_path())
            for leg in legends:
                box = leg.get_window_extent()
                if path.intersects_bbox(box, filled=False):
                    label = line.get_label()
                    covered.append(label if not label.startswith("_") else f"a line in '{ax.get_title()[:30]}'")
                    break
    return covered


def glue_figure(name: str, fig) -> None:
    """Hand ``fig`` to the page under ``name`` for a ``{glue:figure}`` directive (numbered, captioned, alt text); close it.

    The figure is checked first (:func:`check_figure`) and stored as an SVG that records its smallest font
    (:func:`figure_svg`), from which the book sets its minimum width on a phone and the browser test computes how
    large its text is shown.
    The cell also displays the figure, so that a reader running the chapter in Jupyter or Colab sees it
    under the cell; the book hides that copy (the cell's ``remove-output`` tag) and shows the figure where
    the directive stands. Outside a notebook (a script, a test) the figure is only checked and closed.
    """
    try:
        check_figure(fig)
        try:
            from IPython import get_ipython
        except ImportError:  # pragma: no cover - IPython comes with the book's environment
            get_ipython = None
        if get_ipython is not None and get_ipython() is not None:
            from myst_nb import glue

            glue(name, _SvgFigure(figure_svg(fig)), display=True)
    finally:
        plt.close(fig)


def plot_matrix(
    ax,
    matrix,
    *,
    title: str,
    xlabel: str = "key position j",
    ylabel: str = "query position i",
    cbar_label: str = "",
    diverging: bool = False,
    mask=None,
    vmax: float | None = None,
    colorbar: bool = True,
):
    """Draw ``matrix`` as a heat map on ``ax`` (masked entries blank) and return the image.

    Diverging maps are centred at zero with symmetric limits, so colour means sign. With ``colorbar=False`` the
    panel gets no colour bar of its own (panels on one scale share one, drawn by the caller from the image).
    """
    m = np.asarray(matrix, dtype=float)
    if mask is not None:
        m = np.where(np.asarray(mask, dtype=bool), m, np.nan)
    finite = m[np.isfinite(m)]
    if diverging:
        lim = vmax if vmax is not None else (float(np.abs(finite).max()) if finite.size else 1.0)
        lim = lim or 1.0
        im = ax.imshow(m, cmap=DIVERGING_CMAP, vmin=-lim, vmax=lim, interpolation="nearest")
    else:
        im = ax.imshow(m, cmap=SEQUENTIAL_CMAP, vmin=None, vmax=vmax, interpolation="nearest")
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(False)
    if colorbar:
        cbar = ax.figure.colorbar(im, ax=ax, shrink=0.85)
        cbar.set_label(cbar_label)
    return im
