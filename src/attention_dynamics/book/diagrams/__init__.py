"""The book's diagrams: drawn by code, written as SVG in a light and a dark variant, checked against the files.

Four diagrams (:data:`DIAGRAMS`), one function each, written to ``book/images/diagrams/<name>-light.svg`` and
``<name>-dark.svg`` by ``python -m attention_dynamics diagrams`` (:func:`write_diagrams`); ``--check``
(:func:`stale_diagrams`) lists the files that differ from what the code draws, and a test runs it, so the committed
pictures cannot drift from their code. The drawing kit is :mod:`attention_dynamics.book.diagrams.kit`.

- ``mechanism``: one attention head with its two gradient laws
  (:func:`~attention_dynamics.book.diagrams.mechanism.mechanism`);
- ``feedback-loop``: the routing–content loop as two-timescale EM
  (:func:`~attention_dynamics.book.diagrams.mechanism.feedback_loop`);
- ``wind-tunnels``: the three wind tunnels with their exact posteriors
  (:func:`~attention_dynamics.book.diagrams.wind_tunnels.wind_tunnels`);
- ``book-map``: the parts and chapters with the claims each decides
  (:func:`~attention_dynamics.book.diagrams.book_map.book_map`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from ...core import paths
from .book_map import book_map
from .kit import THEMES, Canvas, Theme
from .mechanism import feedback_loop, mechanism
from .wind_tunnels import wind_tunnels

__all__ = ["DIAGRAMS", "DIAGRAMS_DIR", "ALT_TEXT", "diagram_files", "write_diagrams", "stale_diagrams",
           "figure_markdown"]

#: The diagrams by file name: each function draws its diagram in a theme.
DIAGRAMS: dict[str, Callable[[Theme], Canvas]] = {
    "mechanism": mechanism,
    "feedback-loop": feedback_loop,
    "wind-tunnels": wind_tunnels,
    "book-map": book_map,
}
#: Where the book's pages find them.
DIAGRAMS_DIR = paths.BOOK_DIR / "images" / "diagrams"


#: A page's alt text for each diagram (its SVG's own description is longer).
ALT_TEXT = {
    "mechanism": "One attention head: queries, keys and values feed the scores s_ij, the attention weights α_ij, the "
                 "context g_i, the logits and the loss L. Dashed arrows carry the gradient back: the error signal "
                 "u_i = ∂L/∂g_i, the routing law ∂L/∂s_ij = α_ij (b_ij − E_α[b]) to the scores and the value law "
                 "∂L/∂v_j = Σ_i α_ij u_i to the values.",
    "feedback-loop": "The hypothesis frame W_Q, W_K sets the scores. Attention, the E-step of soft responsibilities, "
                     "settles first; the values, the M-step of responsibility-weighted prototype updates, keep "
                     "refining. Arrows between them form a loop: values are pulled toward the needs of the queries "
                     "that attend to them, and their advantage grows, so those queries attend to them even more.",
    "wind-tunnels": "Three wind tunnels with a small example each and the exact posterior as a bar chart under the "
                    "predicted position: bijection elimination, uniform over the values not yet revealed; binding, a "
                    "point mass on the stored value for a repeated key, found by content, and uniform for a new key; "
                    "HMM filtering, the forward filter over three states after each observation.",
    "book-map": "The book's nine chapters down a line in five parts, The mechanics, The dynamics, Experiments, "
                "Practice and Where routing is needed, each chapter with the claims of the paper it decides.",
}


def figure_markdown(name: str, *, label: str | None = None, caption: str | None = None) -> str:
    """Return the MyST a page shows diagram ``name`` with: the dark variant as an ``{image}``, then the light one.

    With a ``caption`` the light variant is a ``{figure}`` named ``label`` (one number, referred to by
    ``{numref}``); its image links to the figure itself (``:target:``), which keeps the theme's ``only-light``
    rule from hiding the caption in dark mode, when the dark ``{image}`` above it is shown instead. Without a
    caption both are plain images. Paths are relative to ``book/``, where the pages are.
    """
    alt = ALT_TEXT[name]
    dark = f"```{{image}} images/diagrams/{name}-dark.svg\n:class: only-dark\n:align: center\n:alt: {alt}\n```\n"
    if caption is None:
        light = f"```{{image}} images/diagrams/{name}-light.svg\n:class: only-light\n:align: center\n:alt: {alt}\n```\n"
        return dark + "\n" + light
    label = label or f"fig-{name}"
    light = (f"```{{figure}} images/diagrams/{name}-light.svg\n:class: only-light\n:align: center\n"
             f":target: \"#{label}\"\n:name: {label}\n:alt: {alt}\n\n{caption}\n```\n")
    return dark + "\n" + light


def diagram_files() -> dict[str, str]:
    """Return ``{file name: SVG text}`` for every diagram in every theme (``mechanism-light.svg``, …)."""
    return {f"{name}-{theme}.svg": draw(THEMES[theme]).svg() for name, draw in DIAGRAMS.items() for theme in THEMES}


def write_diagrams(folder: Path = DIAGRAMS_DIR) -> list[Path]:
    """Draw every diagram and write its files into ``folder``; return the paths written."""
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in diagram_files().items():
        path = folder / name
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written


def stale_diagrams(folder: Path = DIAGRAMS_DIR) -> list[str]:
    """Return one line per file of ``folder`` that is missing, differs from what the code draws, or is not drawn."""
    expected = diagram_files()
    problems = []
    for name, text in expected.items():
        path = folder / name
        if not path.exists():
            problems.append(f"{name}: missing")
        elif path.read_text(encoding="utf-8") != text:
            problems.append(f"{name}: differs from what the code draws")
    problems += [f"{p.name}: not drawn by any diagram function" for p in sorted(folder.glob("*.svg"))
                 if p.name not in expected]
    return problems
