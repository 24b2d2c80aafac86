"""One plotting style for every figure of the book.

Figures have an opaque white background and dark text, so they read the same on the book's
light and dark themes; colour maps are perceptually uniform (sequential) or centred at zero
(diverging) and colour-blind safe.
"""

from __future__ import annotations


import matplotlib.pyplot as plt
import numpy as np
import seaborn as sns

__all__ = [
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
    """Return ``(fig, axes)`` sized ``width`` × ``height`` inches per panel, with constrained layout."""
    return plt.subplots(nrows, ncols, figsize=(width * ncols, height * nrows), layout="constrained", **kwargs)


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
):
    """Draw ``matrix`` as a heat map on ``ax`` (masked entries blank) and return the image.

    Diverging maps are centred at zero with symmetric limits, so colour means sign.
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
    cbar = ax.figure.colorbar(im, ax=ax, shrink=0.85)
    cbar.set_label(cbar_label)
    return im
