"""Figures and equations stay legible on a phone: an SVG figure gets a minimum display width, and scrolls
sideways below it; a display equation wider than its column is set smaller, down to 70 % (``fit-equations.js``).

A chapter glues its figures as SVG (:func:`attention_dynamics.core.plotting.figure_svg`), whose root element records
the figure's smallest font in points. Shown in a column narrower than the figure, an image shrinks, and a figure of
two or three panels drawn for the desktop column would show its tick labels at 4-5 px on a phone. This post-transform
reads each SVG image of a page and gives it the width below which its smallest text would fall under
:data:`~attention_dynamics.core.plotting.MIN_PHONE_TEXT_PX` (:func:`~attention_dynamics.core.plotting.svg_min_width_px`)
as a CSS ``min-width``; the figure around it scrolls sideways inside its own box (class ``book-wide-figure``), so the
page itself never does. On the desktop the minimum is narrower than the column and changes nothing. An SVG that does
not record its smallest font (one not drawn by the book) is left as it is.
"""

from __future__ import annotations

from pathlib import Path

from docutils import nodes
from sphinx.transforms.post_transforms import SphinxPostTransform

FIGURE_CSS = """
/* SVG figures (book/_ext/figure_sizes.py): at least their minimum width, scrolling inside their own box. */
img.book-svg-figure { height: auto; }
figure.book-wide-figure, div.book-wide-figure { max-width: 100%; overflow-x: auto; overflow-y: hidden; }
figure.book-wide-figure > figcaption { position: sticky; left: 0; max-width: calc(100vw - 2.5rem); }
@media print { figure.book-wide-figure, div.book-wide-figure { overflow: visible; } }
"""


class sized_image(nodes.image):
    """An image with a minimum display width (``min_width_px``), rendered as ``<img … style="min-width: …px">``."""


def _image_path(env, uri: str) -> Path:
    path = Path(uri)
    return path if path.is_absolute() else Path(env.srcdir) / path


class SizeSvgFigures(SphinxPostTransform):
    """Give every SVG image that records its smallest font a minimum width, and its figure a scrolling box."""

    default_priority = 910

    def run(self, **kwargs) -> None:
        if self.app.builder.format != "html":
            return
        from attention_dynamics.core.plotting import svg_min_width_px

        for node in list(self.document.findall(nodes.image)):
            uri = node.get("uri", "")
            if not uri.lower().endswith(".svg") or isinstance(node, sized_image):
                continue
            path = _image_path(self.env, uri)
            if not path.is_file():
                continue
            width = svg_min_width_px(path.read_bytes())
            if width is None:
                continue
            sized = sized_image(node.rawsource, **node.attributes)
            sized["min_width_px"] = width
            sized["classes"] = [*node.get("classes", []), "book-svg-figure"]
            node.replace_self(sized)
            box = sized.parent
            while box is not None and not isinstance(box, (nodes.figure, nodes.container, nodes.section)):
                box = box.parent
            if isinstance(box, (nodes.figure, nodes.container)) and "book-wide-figure" not in box["classes"]:
                box["classes"].append("book-wide-figure")


def visit_sized_image(self, node) -> None:
    start = len(self.body)
    self.visit_image(node)
    width = int(node["min_width_px"])
    for i in range(start, len(self.body)):
        if "<img " in self.body[i]:
            tag = self.body[i]
            if ' style="' in tag:  # a width or height of its own: the minimum joins that style
                tag = tag.replace(' style="', f' style="min-width: {width}px; ', 1)
            else:
                tag = tag.replace("<img ", f'<img style="min-width: {width}px" ', 1)
            self.body[i] = tag.replace("<img ", f'<img data-min-width="{width}" ', 1)
            break


def depart_sized_image(self, node) -> None:
    self.depart_image(node)


STATIC = Path(__file__).resolve().parent / "static"


def _write_css(app) -> None:
    if app.builder.format != "html":
        return
    static = Path(app.outdir) / "_static"
    static.mkdir(parents=True, exist_ok=True)
    (static / "figure-sizes.css").write_text(FIGURE_CSS, encoding="utf-8")
    (static / "fit-equations.js").write_text((STATIC / "fit-equations.js").read_text(encoding="utf-8"),
                                             encoding="utf-8")


def setup(app):
    app.add_node(sized_image, html=(visit_sized_image, depart_sized_image))
    app.add_post_transform(SizeSvgFigures)
    app.add_css_file("figure-sizes.css")
    app.add_js_file("fit-equations.js", loading_method="defer")
    app.connect("builder-inited", _write_css)
    return {"version": "0.1", "parallel_read_safe": True, "parallel_write_safe": True}
