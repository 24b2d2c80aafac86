"""The drawing kit of the book's diagrams: a canvas that writes plain SVG, a little math typesetting, two themes.

A diagram is drawn once, by a function that takes a :class:`Theme` and returns a :class:`Canvas`; the light and the
dark file differ only in the theme. Positions, sizes and colours are written as attributes (every ``<text>`` and
``<tspan>`` carries its own ``font-size`` in px; faces are four classes of a ``<style>``), so that a test can read the
files without a browser.

Text is real text (searchable, read by screen readers), set in a sans-serif face, with math in ``$…$`` set as the
book's MathJax sets it: Latin and Greek letters italic serif, digits and operators upright, ``_x`` / ``_{ij}`` a
subscript and ``^x`` / ``^{…}`` a superscript (``$α_{ij}$``, ``$W_Q$``, ``$\\E$`` is written ``𝔼``). Widths are
measured with the DejaVu faces that matplotlib ships, a wide face: on a reader's narrower system fonts the text
only gets shorter. :meth:`Canvas.svg` refuses a diagram whose text leaves the canvas, overlaps other text,
does not fit the box it was set in, or is smaller than :data:`MIN_FONT_PX`.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from xml.sax.saxutils import escape

import matplotlib
from matplotlib import ft2font

from ...core.plotting import PALETTE

__all__ = ["MIN_FONT_PX", "SMALLEST_FONT_ATTR", "SUB_SCALE", "Theme", "THEMES", "Canvas", "LayoutError", "Run",
           "typeset", "measure", "wrap", "text_width", "hex_colour", "mix", "contrast_ratio"]

#: The smallest text any diagram may use, in px at its natural width (a subscript included).
MIN_FONT_PX = 9.0
#: The root element's attribute that records the smallest font in points (as the chapters' SVG figures record it),
#: from which the book can size a figure for a phone.
SMALLEST_FONT_ATTR = "data-smallest-font-pt"
#: A subscript's or superscript's size relative to its base.
SUB_SCALE = 0.72

SANS = "DejaVu Sans, Verdana, Arial, Helvetica, sans-serif"
SERIF = "DejaVu Serif, Georgia, 'Times New Roman', serif"


class LayoutError(ValueError):
    """A diagram whose text would be cut off, overlap, overflow its box or be too small."""


def hex_colour(rgb) -> str:
    """Return ``#rrggbb`` for an RGB triple in [0, 1]."""
    return "#" + "".join(f"{round(255 * c):02x}" for c in rgb[:3])


def _rgb(colour: str) -> tuple[float, float, float]:
    return tuple(int(colour[i:i + 2], 16) / 255 for i in (1, 3, 5))


def mix(colour: str, other: str, share: float) -> str:
    """Return ``colour`` moved ``share`` of the way toward ``other`` (both ``#rrggbb``)."""
    a, b = _rgb(colour), _rgb(other)
    return hex_colour([x + share * (y - x) for x, y in zip(a, b)])


def contrast_ratio(fg: str, bg: str) -> float:
    """Return the WCAG contrast ratio of two ``#rrggbb`` colours (1 to 21; 4.5 is the bar for text)."""
    def luminance(colour: str) -> float:
        c = [x / 12.92 if x <= 0.03928 else ((x + 0.055) / 1.055) ** 2.4 for x in _rgb(colour)]
        return 0.2126 * c[0] + 0.7152 * c[1] + 0.0722 * c[2]
    hi, lo = sorted((luminance(fg), luminance(bg)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


@dataclass(frozen=True)
class Theme:
    """The colours of one variant: page background, text, lines, boxes and the three signals.

    ``routing`` (orange) is attention and the routing law, ``value`` (blue) the values and the value law, ``frame``
    (green) the hypothesis frame :math:`W_Q, W_K`: the seaborn "colorblind" palette's first three colours
    (:data:`attention_dynamics.core.plotting.PALETTE`), with a ``*_text`` shade of each that reads as text on the
    background and a ``*_tint`` for filled panels. ``background`` is ``None`` for a transparent canvas.
    """

    name: str
    background: str | None
    page: str
    text: str
    muted: str
    line: str
    box: str
    box_edge: str
    routing: str
    routing_text: str
    routing_tint: str
    value: str
    value_text: str
    value_tint: str
    frame: str
    frame_text: str
    frame_tint: str


def _theme(name: str) -> Theme:
    blue, orange, green, sky = (hex_colour(PALETTE[i]) for i in (0, 1, 2, 9))
    if name == "light":
        page = "#ffffff"
        return Theme(name, None, page, text="#222832", muted="#48566b", line="#48566b", box="#f3f4f5",
                     box_edge="#9ca4af", routing=orange, routing_text=mix(orange, "#000000", 0.4),
                     routing_tint=mix(orange, page, 0.86), value=blue, value_text=mix(blue, "#000000", 0.1),
                     value_tint=mix(blue, page, 0.88), frame=green, frame_text=mix(green, "#000000", 0.35),
                     frame_tint=mix(green, page, 0.9))
    page = "#121212"  # the dark page of the book's theme (sphinx-book-theme's --pst-color-background)
    return Theme(name, page, page, text="#ced6dd", muted="#9ca4af", line="#9ca4af", box="#222832",
                 box_edge="#677384", routing=orange, routing_text=mix(orange, "#ffffff", 0.15),
                 routing_tint=mix(orange, page, 0.8), value=sky, value_text=sky, value_tint=mix(sky, page, 0.8),
                 frame=green, frame_text=mix(green, "#ffffff", 0.35), frame_tint=mix(green, page, 0.8))


#: The two variants every diagram is written in: ``<name>-light.svg`` and ``<name>-dark.svg``.
THEMES = {name: _theme(name) for name in ("light", "dark")}

# --- text: fonts, measurement and the little math typesetter --------------------------------------------------

#: The font file each face is measured with: the DejaVu files Matplotlib ships, the same on every machine (a system
#: font of another version could break a line elsewhere, and the committed files would differ).
_FACES = {
    "sans": "DejaVuSans.ttf",
    "sans-bold": "DejaVuSans-Bold.ttf",
    "sans-italic": "DejaVuSans-Oblique.ttf",
    "math": "DejaVuSerif-Italic.ttf",
    "math-up": "DejaVuSerif.ttf",
    "math-bold": "DejaVuSerif-BoldItalic.ttf",
}


#: Glyph loading without hinting (``LoadFlags`` from Matplotlib 3.10 on); the advance read is the unhinted one.
_NO_HINTING = ft2font.LoadFlags.NO_HINTING if hasattr(ft2font, "LoadFlags") else ft2font.LOAD_NO_HINTING


@lru_cache(maxsize=None)
def _font(face: str) -> ft2font.FT2Font:
    return ft2font.FT2Font(str(Path(matplotlib.get_data_path()) / "fonts" / "ttf" / _FACES[face]))


@lru_cache(maxsize=4096)
def text_width(text: str, size: float, face: str = "sans") -> float:
    """Return the advance width (px) of ``text`` at ``size`` px in a face: ``sans``, ``sans-bold``, ``sans-italic``,
    ``math`` (italic serif), ``math-up`` or ``math-bold``."""
    font = _font(face)
    font.set_size(size, 72)
    return sum(font.load_char(ord(ch), flags=_NO_HINTING).linearHoriAdvance for ch in text) / 65536


#: The class of a tspan in each face but the plain sans (the root's), and what it sets.
_CLASSES = {"sans-bold": "b", "sans-italic": "i", "math": "m", "math-up": "mu", "math-bold": "mb"}
_STYLES = {"sans-bold": "font-weight: bold", "sans-italic": "font-style: italic",
           "math": f"font-family: {SERIF}; font-style: italic", "math-up": f"font-family: {SERIF}",
           "math-bold": f"font-family: {SERIF}; font-style: italic; font-weight: bold"}


@dataclass(frozen=True)
class Run:
    """A stretch of text in one face and size, shifted ``dy`` px from the baseline (down is positive)."""

    text: str
    face: str
    size: float
    dy: float = 0.0


_UPRIGHT_IN_MATH = set("0123456789()[]{}=+−-·,.;:!|/√∑Σ∂𝔼<>≤≥≈→←⊤ᵀ'′ ")
_MATH_TOKEN = re.compile(r"[_^](\{[^{}]*\}|.)|.", re.S)


def _math_runs(src: str, size: float, dy: float, bold: bool) -> list[Run]:
    runs: list[Run] = []
    for m in _MATH_TOKEN.finditer(src):
        token = m.group(0)
        if token[0] in "_^" and len(token) > 1:
            inner = m.group(1)
            inner = inner[1:-1] if inner.startswith("{") else inner
            shift = 0.25 * size if token[0] == "_" else -0.4 * size
            runs += _math_runs(inner, max(size * SUB_SCALE, MIN_FONT_PX + 0.5), dy + shift, bold)
            continue
        up = token in _UPRIGHT_IN_MATH or not token.isalpha()
        face = "math-up" if up else ("math-bold" if bold else "math")
        if runs and runs[-1].face == face and runs[-1].size == size and runs[-1].dy == dy:
            runs[-1] = Run(runs[-1].text + token, face, size, dy)
        else:
            runs.append(Run(token, face, size, dy))
    return runs


def typeset(src: str, size: float, weight: str = "normal", italic: bool = False) -> list[Run]:
    """Return the runs of ``src``: plain text in the sans face, ``$…$`` as math (see the module's docstring)."""
    runs: list[Run] = []
    sans = "sans-bold" if weight == "bold" else ("sans-italic" if italic else "sans")
    for k, part in enumerate(src.split("$")):
        if not part:
            continue
        if k % 2:
            runs += _math_runs(part, size, 0.0, weight == "bold")
        else:
            runs.append(Run(part, sans, size))
    return runs


def _runs_extent(runs: list[Run]) -> tuple[float, float, float]:
    """Return (width, ascent above the baseline, descent below it) of typeset runs."""
    width = sum(text_width(r.text, r.size, r.face) for r in runs)
    ascent = max(0.78 * r.size - r.dy for r in runs)
    descent = max(0.24 * r.size + r.dy for r in runs)
    return width, ascent, descent


def measure(src: str, size: float, weight: str = "normal", italic: bool = False) -> float:
    """Return the width (px) of a label as :meth:`Canvas.text` sets it."""
    return _runs_extent(typeset(src, size, weight, italic))[0]


def wrap(src: str, size: float, width: float, weight: str = "normal") -> list[str]:
    """Return ``src`` broken into lines no wider than ``width`` px (at spaces outside ``$…$``)."""
    words, current, lines = re.findall(r"(?:\$[^$]*\$|[^\s$])+", src), "", []
    for word in words:
        trial = f"{current} {word}" if current else word
        if current and measure(trial, size, weight) > width:
            lines.append(current)
            current = word
        else:
            current = trial
    return lines + ([current] if current else [])


# --- the canvas ---------------------------------------------------------------------------------------------


def _num(x: float) -> str:
    """Return a coordinate with one decimal and no trailing zero (stable text for the committed files)."""
    s = f"{x:.1f}"
    s = s[:-2] if s.endswith(".0") else s
    return "0" if s == "-0" else s


@dataclass
class _Label:
    box: tuple[float, float, float, float]  # x0, y0, x1, y1
    text: str
    inside: tuple[float, float, float, float] | None = None


@dataclass
class Canvas:
    """A diagram being drawn: ``width`` × ``height`` px, in one :class:`Theme`, with its title and description.

    Shapes and text are kept in drawing order; :meth:`Canvas.svg` writes them. Coordinates are px, y downwards.
    """

    width: float
    height: float
    theme: Theme
    title: str
    desc: str
    name: str = "diagram"
    _body: list[str] = field(default_factory=list, init=False, repr=False)
    _labels: list[_Label] = field(default_factory=list, init=False, repr=False)

    # shapes
    def rect(self, x: float, y: float, w: float, h: float, *, fill: str | None = None, stroke: str | None = None,
             width: float = 1.5, radius: float = 6, dash: str | None = None) -> None:
        """Draw a (rounded) rectangle."""
        attrs = [f'x="{_num(x)}" y="{_num(y)}" width="{_num(w)}" height="{_num(h)}"']
        if radius:
            attrs.append(f'rx="{_num(radius)}"')
        attrs.append(f'fill="{fill or "none"}"')
        if stroke:
            attrs.append(f'stroke="{stroke}" stroke-width="{_num(width)}"')
        if dash:
            attrs.append(f'stroke-dasharray="{dash}"')
        self._body.append(f"<rect {' '.join(attrs)}/>")

    def line(self, points: list[tuple[float, float]], *, stroke: str, width: float = 1.5, dash: str | None = None,
             arrow: bool = False, head: float = 9.0) -> None:
        """Draw a polyline through ``points``; with ``arrow`` a filled head at the last point."""
        if arrow:
            points = self._head(points[-2], points[-1], stroke, head, points)
        d = "M" + " L".join(f"{_num(x)} {_num(y)}" for x, y in points)
        self._path(d, stroke, width, dash)

    def curve(self, p0, c1, c2, p1, *, stroke: str, width: float = 1.5, dash: str | None = None,
              arrow: bool = True, head: float = 9.0) -> None:
        """Draw a cubic Bézier from ``p0`` to ``p1`` (controls ``c1``, ``c2``), with a head at ``p1``."""
        if arrow:
            p1 = self._head(c2 if c2 != p1 else c1, p1, stroke, head, [p1])[-1]
        d = f"M{_num(p0[0])} {_num(p0[1])} C{_num(c1[0])} {_num(c1[1])} {_num(c2[0])} {_num(c2[1])} " \
            f"{_num(p1[0])} {_num(p1[1])}"
        self._path(d, stroke, width, dash)

    def _path(self, d: str, stroke: str, width: float, dash: str | None) -> None:
        extra = f' stroke-dasharray="{dash}"' if dash else ""
        self._body.append(f'<path d="{d}" fill="none" stroke="{stroke}" stroke-width="{_num(width)}" '
                          f'stroke-linecap="round" stroke-linejoin="round"{extra}/>')

    def _head(self, before, tip, colour: str, size: float, points: list) -> list:
        """Draw an arrow head at ``tip`` pointing away from ``before``; return ``points`` ending at its base."""
        dx, dy = tip[0] - before[0], tip[1] - before[1]
        n = math.hypot(dx, dy) or 1.0
        ux, uy = dx / n, dy / n
        base = (tip[0] - ux * size, tip[1] - uy * size)
        half = size * 0.5
        corners = [tip, (base[0] - uy * half, base[1] + ux * half), (base[0] + uy * half, base[1] - ux * half)]
        self._body.append('<polygon points="' + " ".join(f"{_num(x)},{_num(y)}" for x, y in corners)
                          + f'" fill="{colour}"/>')
        inset = (tip[0] - ux * size * 0.8, tip[1] - uy * size * 0.8)
        return [*points[:-1], inset]

    def circle(self, cx: float, cy: float, r: float, *, fill: str | None = None, stroke: str | None = None,
               width: float = 1.5) -> None:
        """Draw a circle."""
        extra = f' stroke="{stroke}" stroke-width="{_num(width)}"' if stroke else ""
        self._body.append(f'<circle cx="{_num(cx)}" cy="{_num(cy)}" r="{_num(r)}" fill="{fill or "none"}"{extra}/>')

    # text
    def text(self, x: float, y: float, src: str, *, size: float = 15, colour: str | None = None,
             anchor: str = "middle", weight: str = "normal", italic: bool = False,
             inside: tuple[float, float, float, float] | None = None) -> float:
        """Set one line of text with its baseline at ``y``; return its width (px).

        ``anchor`` is ``start``, ``middle`` or ``end`` at ``x``. ``inside`` (``x0, y0, x1, y1``) is the box the
        text must fit in (checked by :meth:`Canvas.svg`).
        """
        runs = typeset(src, size, weight, italic)
        w, ascent, descent = _runs_extent(runs)
        x0 = {"start": x, "middle": x - w / 2, "end": x - w}[anchor]
        self._labels.append(_Label((x0, y - ascent, x0 + w, y + descent), src, inside))
        colour = colour or self.theme.text
        parts, level = [], 0.0
        for r in runs:
            attrs = [f'font-size="{_num(r.size)}"']
            if r.dy != level:
                attrs.append(f'dy="{_num(r.dy - level)}"')
                level = r.dy
            if r.face != "sans":
                attrs.append(f'class="{_CLASSES[r.face]}"')
            parts.append(f"<tspan {' '.join(attrs)}>{escape(r.text)}</tspan>")
        base_size = max(r.size for r in runs)
        self._body.append(f'<text x="{_num(x)}" y="{_num(y)}" font-size="{_num(base_size)}" '
                          f'text-anchor="{anchor}" fill="{colour}" xml:space="preserve">{"".join(parts)}</text>')
        return w

    def lines(self, x: float, y: float, rows: list[str], *, size: float = 14, leading: float = 1.3,
              **kwargs) -> float:
        """Set several lines, the first baseline at ``y``; return the baseline after the last."""
        for row in rows:
            self.text(x, y, row, size=size, **kwargs)
            y += size * leading
        return y

    def box(self, x: float, y: float, w: float, h: float, label: str | list[str], *, size: float = 15,
            fill: str | None = None, stroke: str | None = None, colour: str | None = None, weight: str = "normal",
            width: float = 1.5, dash: str | None = None, radius: float = 6) -> None:
        """Draw a rectangle with ``label`` (one line or several) centred in it; the text must fit."""
        t = self.theme
        self.rect(x, y, w, h, fill=fill or t.box, stroke=stroke or t.box_edge, width=width, dash=dash,
                  radius=radius)
        rows = [label] if isinstance(label, str) else label
        leading = 1.25 * size
        first = y + h / 2 - leading * (len(rows) - 1) / 2 + 0.3 * size
        for k, row in enumerate(rows):
            self.text(x + w / 2, first + k * leading, row, size=size, colour=colour, weight=weight,
                      inside=(x + 3, y + 1, x + w - 3, y + h - 1))

    # output
    def smallest_font_px(self) -> float:
        """Return the smallest font size (px) of the diagram's text."""
        return min(float(m) for m in re.findall(r'font-size="([\d.]+)"', "".join(self._body)))

    def check(self) -> None:
        """Raise :class:`LayoutError` if text leaves the canvas, overlaps other text or overflows its box."""
        problems = []
        for lab in self._labels:
            x0, y0, x1, y1 = lab.box
            if x0 < 1 or y0 < 1 or x1 > self.width - 1 or y1 > self.height - 1:
                problems.append(f"{lab.text!r} leaves the {self.width:g}×{self.height:g} canvas: "
                                f"({x0:.0f}, {y0:.0f})–({x1:.0f}, {y1:.0f})")
            if lab.inside is not None:
                bx0, by0, bx1, by1 = lab.inside
                if x0 < bx0 or x1 > bx1 or y0 < by0 - 2 or y1 > by1 + 2:
                    problems.append(f"{lab.text!r} does not fit its box ({x1 - x0:.0f} px in {bx1 - bx0:.0f})")
        for i, a in enumerate(self._labels):
            for b in self._labels[i + 1:]:
                if (min(a.box[2], b.box[2]) - max(a.box[0], b.box[0]) > 0.5
                        and min(a.box[3], b.box[3]) - max(a.box[1], b.box[1]) > 1.5):
                    problems.append(f"{a.text!r} overlaps {b.text!r}")
        if problems:
            raise LayoutError(f"diagram {self.name} ({self.theme.name}):\n  " + "\n  ".join(problems))

    def svg(self) -> str:
        """Return the diagram as an SVG document (after :meth:`Canvas.check`)."""
        self.check()
        self.width, self.height = math.ceil(self.width), math.ceil(self.height)
        w, h = _num(self.width), _num(self.height)
        head = [
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}px" height="{h}px" viewBox="0 0 {w} {h}" '
            f'role="img" aria-labelledby="{self.name}-title {self.name}-desc" font-family="{SANS}" '
            f'{SMALLEST_FONT_ATTR}="{self.smallest_font_px() * 0.75:g}">',
            f'<title id="{self.name}-title">{escape(self.title)}</title>',
            f'<desc id="{self.name}-desc">{escape(self.desc)}</desc>',
        ]
        head.append("<style>" + " ".join(f".{cls} {{{_STYLES[face]}}}" for face, cls in _CLASSES.items()) + "</style>")
        if self.theme.background:
            head.append(f'<rect width="{w}" height="{h}" fill="{self.theme.background}"/>')
        return "\n".join([*head, *self._body, "</svg>"]) + "\n"
