"""The book's diagrams: the committed SVG files are what the code draws, and each is accessible and legible.

What it protects: a diagram cannot drift from its code (the map of the book follows the verdict rows, the wind
tunnels' bars the tasks' posteriors); every file is well-formed SVG with a title and a description a screen reader
reads, no text below :data:`attention_dynamics.book.diagrams.kit.MIN_FONT_PX` at its natural width, a width a phone
shows without shrinking the text much, and text colours that read on the page of their theme.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections import Counter

import pytest

from attention_dynamics.book import cli
from attention_dynamics.book.diagrams import (
    ALT_TEXT,
    DIAGRAMS,
    DIAGRAMS_DIR,
    diagram_files,
    figure_markdown,
    stale_diagrams,
    write_diagrams,
)
from attention_dynamics.book.diagrams.book_map import CHAPTERS, chapter_claims
from attention_dynamics.book.diagrams.kit import (
    MIN_FONT_PX,
    THEMES,
    Canvas,
    LayoutError,
    contrast_ratio,
    typeset,
)
from attention_dynamics.book.notebooks import book_chapters
from attention_dynamics.ledger.verdicts import PAPER_CLAIMS

SVG = "{http://www.w3.org/2000/svg}"
#: The widest a diagram may be drawn (px): shown on a phone's column of about 330 px, its text keeps 80 % of its size.
MAX_WIDTH_PX = 420
REGENERATE = "run: python -m attention_dynamics diagrams"


def _luminance(colour: str) -> float:
    return contrast_ratio(colour, "#000000")


def _committed() -> dict[str, str]:
    return {p.name: p.read_text(encoding="utf-8") for p in sorted(DIAGRAMS_DIR.glob("*.svg"))}


def test_the_committed_diagrams_are_what_the_code_draws():
    stale = stale_diagrams()
    assert not stale, "the diagrams in book/images/diagrams/ differ from their code (" + REGENERATE + "):\n" + \
        "\n".join(stale)


def test_every_diagram_has_a_light_and_a_dark_file():
    names = set(_committed())
    for name in DIAGRAMS:
        assert {f"{name}-light.svg", f"{name}-dark.svg"} <= names, f"{name}: {REGENERATE}"
    assert set(DIAGRAMS) == {"mechanism", "feedback-loop", "wind-tunnels", "book-map"}  # chapters link these names


@pytest.mark.parametrize("name", sorted(diagram_files()))
def test_each_svg_is_well_formed_titled_and_legible(name):
    text = (DIAGRAMS_DIR / name).read_text(encoding="utf-8")
    root = ET.fromstring(text)
    assert root.tag == SVG + "svg"
    assert root.get("role") == "img"
    first, second = list(root)[:2]
    assert first.tag == SVG + "title" and len(first.text.split()) >= 4, "the first child is a <title>"
    assert second.tag == SVG + "desc" and len(second.text.split()) >= 30, "the second a <desc> that describes it"
    assert root.get("aria-labelledby").split() == [first.get("id"), second.get("id")]
    width = float(root.get("width").removesuffix("px"))
    height = float(root.get("height").removesuffix("px"))
    assert root.get("viewBox") == f"0 0 {width:g} {height:g}", "drawn at its natural size"
    assert width <= MAX_WIDTH_PX, f"{name} is {width:g} px wide: too wide to read on a phone"
    sizes = [float(e.get("font-size")) for e in root.iter() if e.tag in (SVG + "text", SVG + "tspan")]
    assert sizes and all(e.get("font-size") for e in root.iter() if e.tag in (SVG + "text", SVG + "tspan"))
    assert min(sizes) >= MIN_FONT_PX, f"{name}: text of {min(sizes):g} px at its natural width"
    smallest_pt = float(root.get("data-smallest-font-pt"))
    assert smallest_pt == pytest.approx(min(sizes) * 0.75)  # tolerance: px to pt, written with 3 decimals


@pytest.mark.parametrize("theme", sorted(THEMES))
def test_text_colours_read_on_their_page(theme):
    """Every colour text is set in has a contrast of at least 4.5 (WCAG AA) against the page and the boxes."""
    t = THEMES[theme]
    grounds = [t.page, t.box, t.routing_tint, t.value_tint, t.frame_tint]
    for ink in (t.text, t.muted, t.routing_text, t.value_text, t.frame_text):
        for ground in grounds:
            assert contrast_ratio(ink, ground) >= 4.5, f"{theme}: {ink} on {ground}"


def test_the_dark_files_are_light_on_dark():
    page = THEMES["dark"].page
    for name, text in _committed().items():
        if name.endswith("-dark.svg"):
            assert re.search(rf'<rect width="[\d.]+" height="[\d.]+" fill="{page}"/>', text), name
            inks = Counter(re.findall(r'<text [^>]*fill="(#[0-9a-f]{6})"', text))
            body = inks.most_common(1)[0][0]
            assert contrast_ratio(body, page) >= 4.5 and _luminance(body) > _luminance(page), name
            assert THEMES["light"].text not in inks, f"{name}: text in the light theme's ink"
        else:
            assert f'fill="{page}"' not in text, f"{name}: a light file on the dark page's colour"


def test_regenerating_writes_the_same_bytes_and_the_check_command_sees_drift(tmp_path, capsys):
    assert cli.main(["diagrams", "--check", "--out", str(tmp_path)]) == 1
    written = write_diagrams(tmp_path)
    assert sorted(p.name for p in written) == sorted(diagram_files())
    assert {p.name: p.read_text(encoding="utf-8") for p in written} == diagram_files()
    assert cli.main(["diagrams", "--check", "--out", str(tmp_path)]) == 0
    (tmp_path / "mechanism-dark.svg").write_text("<svg/>", encoding="utf-8")
    (tmp_path / "old-diagram-light.svg").write_text("<svg/>", encoding="utf-8")
    assert cli.main(["diagrams", "--check", "--out", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "mechanism-dark.svg: differs" in err and "old-diagram-light.svg: not drawn" in err
    assert cli.main(["diagrams", "--out", str(tmp_path / "new")]) == 0
    assert len(list((tmp_path / "new").glob("*.svg"))) == 2 * len(DIAGRAMS)


def test_the_layout_check_refuses_cut_off_overlapping_and_tiny_text():
    def canvas() -> Canvas:
        return Canvas(200, 100, THEMES["light"], title="t", desc="d")

    c = canvas()
    c.text(190, 50, "far too long a label for the canvas", anchor="start")
    with pytest.raises(LayoutError, match="leaves"):
        c.svg()
    c = canvas()
    c.text(100, 40, "one", size=15)
    c.text(100, 44, "two", size=15)
    with pytest.raises(LayoutError, match="overlaps"):
        c.svg()
    c = canvas()
    c.box(10, 10, 40, 30, "a label wider than its box")
    with pytest.raises(LayoutError, match="does not fit"):
        c.svg()
    assert min(r.size for r in typeset("$α_{i_j}$", 10)) >= MIN_FONT_PX  # a sub-subscript is held at the minimum


def test_math_is_set_as_the_book_sets_it():
    runs = typeset("the law $∂L/∂s_{ij} = α_{ij}$", 14)
    assert runs[0].face == "sans" and runs[0].text == "the law "
    faces = {r.text: r.face for r in runs[1:]}
    assert faces["L"] == "math" and faces["α"] == "math" and faces["∂"] == "math-up"
    sub = [r for r in runs if r.text == "ij"]
    assert len(sub) == 2 and all(r.dy > 0 and r.size < 14 for r in sub)


def test_the_map_shows_every_chapter_and_where_each_claim_is_decided(repo_root):
    stems = {stem for _, stem, _, _ in CHAPTERS}
    on_toc = {c.name for c in book_chapters(repo_root)}
    assert on_toc <= stems, f"chapters missing from the book map: {sorted(on_toc - stems)} ({REGENERATE})"
    sections = {claim.section[0].split("/")[-1] for claim in PAPER_CLAIMS}
    assert sections <= stems, f"claims decided in chapters the map does not show: {sorted(sections - stems)}"
    claims = chapter_claims()
    assert sum(len(v) for v in claims.values()) >= len(PAPER_CLAIMS) - 3  # chapter 7's primitives share a line
    assert "the routing law" in claims["02-gradient-laws"]


def test_the_page_snippet_numbers_the_figure_once_and_reads_in_a_launch_notebook():
    """A chapter shows a diagram with :func:`figure_markdown`: one ``{figure}`` (one number) whose light image links
    to itself, after the dark ``{image}``; its launch notebook shows the light file and the numbered caption."""
    from attention_dynamics.book.launch_notebooks import BookIndex, render_markdown

    text = figure_markdown("mechanism", label="fig-mechanism", caption="The mechanism of the paper.")
    assert text.count("```{figure}") == 1 and text.count("```{image}") == 1
    assert text.index("mechanism-dark.svg") < text.index("mechanism-light.svg")
    assert ':target: "#fig-mechanism"' in text and ":class: only-light" in text and ":class: only-dark" in text
    for name in DIAGRAMS:
        assert len(ALT_TEXT[name].split()) >= 8, name
        assert (DIAGRAMS_DIR / f"{name}-light.svg").exists()
    index = BookIndex(equations={}, citations={}, glue={}, site=None, pages=frozenset(),
                      figures={"fig-mechanism": ("02-gradient-laws", "2.1")})
    out = render_markdown(text, "02-gradient-laws", index)
    assert out.strip().startswith(f"![{ALT_TEXT['mechanism']}](../book/images/diagrams/mechanism-light.svg)")
    assert "**Figure 2.1.** The mechanism of the paper." in out
    assert "dark" not in out and "```" not in out and ":class:" not in out
    plain = render_markdown(figure_markdown("book-map"), "02-gradient-laws", index)
    assert plain.strip() == f"![{ALT_TEXT['book-map']}](../book/images/diagrams/book-map-light.svg)"
