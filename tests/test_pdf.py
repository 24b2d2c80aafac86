"""The book as one PDF (``make pdf``): every chapter, typeset equations, glued numbers, figures.

The slow tests build the PDF once per module from the committed notebooks (nothing is executed)
into a temporary folder, with :func:`attention_dynamics.book.pdf.build_pdf` exactly as
``python -m attention_dynamics pdf`` does, and read it back with pypdf. They need Debian's
``chromium``: without it they are skipped (failed in CI). The fast test checks the error when
Chromium is missing.
"""

from __future__ import annotations

import html
import os
import re
import shutil
import unicodedata
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from attention_dynamics.book.nbcompare import assert_book_close
from attention_dynamics.book.notebooks import BookError, book_chapters
from attention_dynamics.book.pdf import (
    build_pdf,
    heading_titles,
    online_book_url,
    printable_html,
    repair_outline,
    tex_to_text,
    toc_parts,
)

REPO_ROOT = Path(__file__).resolve().parents[1]
#: What raw TeX left by a MathJax that did not run looks like in the text of the PDF.
RAW_TEX = ("\\(", "\\[", "$$", "\\frac", "\\mathbb", "\\begin{", "\\sum", "\\alpha", "\\left", "\\R^", "\\E_")
#: What MathJax writes in place of a formula it could not typeset.
MATH_ERRORS = ("Undefined control sequence", "Math input error", "Misplaced &")
A4 = (595.3, 841.9)  # points
#: A book, not a dump: the printed book stays under this many pages (the API reference is online only).
MAX_PAGES = 200
#: The claims ledger prints as a compact appendix of at most this many pages.
MAX_LEDGER_PAGES = 15


def _normalise(text: str) -> str:
    """Return ``text`` with ligatures unfolded (ﬁ → fi) and every run of whitespace one space."""
    return re.sub(r"\s+", " ", unicodedata.normalize("NFKC", text)).strip()


def _flat(text: str) -> str:
    """Return ``text`` normalised and without whitespace (a number the PDF wrapped still matches)."""
    return re.sub(r"\s+", "", unicodedata.normalize("NFKC", text))


def _chapter_title(path: Path) -> str:
    """Return the text of a chapter notebook's first Markdown heading, without Markdown markup."""
    import nbformat

    for cell in nbformat.read(path, as_version=4).cells:
        if cell.cell_type == "markdown":
            for line in cell.source.splitlines():
                if line.startswith("#"):
                    return re.sub(r"[*_`]", "", line.lstrip("#")).strip()
    raise AssertionError(f"{path.name} has no Markdown heading")


@dataclass
class BookPdf:
    """The PDF built by the module fixture, its text and the HTML page it was printed from."""

    path: Path
    pages: list  # pypdf pages
    text: str  # the text of every page, normalised
    page_html: str  # the printed single HTML page


@pytest.fixture(scope="module")
def book_pdf(tmp_path_factory) -> BookPdf:
    """Build the book's PDF from committed outputs into a temporary folder and read it back."""
    if not (os.environ.get("CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")):
        message = "Chromium is not installed (Debian: apt-get install chromium); the PDF is printed with it"
        if os.environ.get("CI"):
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    from pypdf import PdfReader

    tmp = tmp_path_factory.mktemp("pdf")
    path = build_pdf(REPO_ROOT, tmp / "book.pdf", build_dir=tmp / "build")
    pages = list(PdfReader(path).pages)
    printed = tmp / "build" / "_build" / "singlehtml" / "book-print.html"
    return BookPdf(path=path, pages=pages, text=_normalise("\n".join(p.extract_text() for p in pages)),
                   page_html=printed.read_text(encoding="utf-8"))


@pytest.mark.slow
def test_pdf_is_a4_and_has_every_chapter(book_pdf):
    assert book_pdf.path.read_bytes()[:5] == b"%PDF-"
    assert len(book_pdf.pages) > 20, f"only {len(book_pdf.pages)} pages"
    box = book_pdf.pages[0].mediabox
    assert_book_close((float(box.width), float(box.height)), A4, rtol=0, atol=2, what=f"not A4: {box}")
    titles = [_chapter_title(c.path) for c in book_chapters(REPO_ROOT)]
    assert len(titles) >= 8
    missing = [t for t in titles if _normalise(t) not in book_pdf.text]
    assert not missing, f"chapter titles not in the PDF: {missing}"


@pytest.mark.slow
def test_pdf_equations_are_typeset(book_pdf):
    assert "mjx-container" in book_pdf.page_html or 'class="math' in book_pdf.page_html
    raw = {tex: book_pdf.text.count(tex) for tex in RAW_TEX if tex in book_pdf.text}
    assert not raw, f"raw TeX in the PDF (MathJax did not typeset before printing): {raw}"
    errors = [e for e in MATH_ERRORS if e in book_pdf.text]
    assert not errors, f"MathJax errors in the PDF: {errors}"


@pytest.mark.slow
def test_pdf_has_every_glued_number(book_pdf):
    glued = [html.unescape(v) for v in re.findall(r'<span class="pasted-text">([^<]*)</span>', book_pdf.page_html)]
    assert len(glued) > 50, f"only {len(glued)} glued values on the printed page"
    flat = _flat(book_pdf.text)
    # a long glued phrase may be split by a page break with a figure in between: its two ends are checked
    missing = [v for v in glued if (_flat(v) not in flat if len(_flat(v)) <= 60
                                    else _flat(v)[:20] not in flat or _flat(v)[-15:] not in flat)]
    assert not missing, f"{len(missing)} glued values of the HTML page are not in the PDF: {missing[:10]}"
    # A glue role that did not resolve would be printed as written, e.g. {glue:text}`setup.loss:.3f`.
    keys = set()
    for chapter in book_chapters(REPO_ROOT):
        keys.update(re.findall(r"\{glue(?::\w+)?\}`([^`:]+)", chapter.path.read_text(encoding="utf-8")))
    assert keys, "the chapters glue no values"
    unresolved = sorted(k for k in keys if re.search(r"\{glue(?::\w+)?\}`?" + re.escape(k), book_pdf.text))
    assert not unresolved, f"unresolved glue roles in the PDF: {unresolved}"


def _vector_forms(page) -> int:
    """Return how many form XObjects (what Chromium prints an SVG image as) a PDF page draws."""
    resources = page.get("/Resources")
    xobjects = resources.get_object().get("/XObject") if resources is not None else None
    if xobjects is None:
        return 0
    return sum(1 for ref in xobjects.get_object().values() if ref.get_object().get("/Subtype") == "/Form")


@pytest.mark.slow
def test_pdf_has_every_figure(book_pdf):
    """Every raster figure of the printed page is an image of the PDF, every SVG figure (and diagram) a vector form."""
    figures = set(re.findall(r'<img[^>]*src="(_images/[^"]+)"', book_pdf.page_html))
    assert figures, "the printed page has no figures"
    raster = {f for f in figures if not f.lower().endswith(".svg")}
    vector = figures - raster
    images = sum(len(page.images) for page in book_pdf.pages)
    assert images >= len(raster), f"{len(raster)} raster figures on the page but {images} images in the PDF"
    forms = sum(_vector_forms(page) for page in book_pdf.pages)
    assert forms >= len(vector), f"{len(vector)} SVG figures on the page but {forms} vector forms in the PDF"
    assert not re.search(r'<img[^>]*class="[^"]*only-dark', book_pdf.page_html), "a diagram's dark copy is printed"


def _straight(text: str) -> str:
    """Return ``text`` with typographic quotes made straight (the book's headings get curly ones)."""
    return text.translate(str.maketrans({"\u2019": "'", "\u2018": "'", "\u201c": '"', "\u201d": '"'}))


def _outline(reader) -> list[tuple[int, str, int]]:
    """Return the PDF's bookmarks as (depth, title, page index), in order."""
    found = []

    def walk(items, depth):
        for item in items:
            if isinstance(item, list):
                walk(item, depth + 1)
            else:
                found.append((depth, _normalise(item.title), reader.get_destination_page_number(item)))

    walk(reader.outline, 0)
    return found


def _section_titles(path: Path) -> list[str]:
    """Return a chapter's section titles (its ``##`` headings) without Markdown markup, in order."""
    import nbformat

    titles = []
    for cell in nbformat.read(path, as_version=4).cells:
        if cell.cell_type == "markdown":
            titles += [re.sub(r"[*_`]", "", line[3:]).strip() for line in cell.source.splitlines()
                       if line.startswith("## ")]
    return titles


@pytest.mark.slow
def test_pdf_is_a_book_with_bookmarks_and_page_numbers(book_pdf):
    """Bookmarks for every part (top level), chapter (under its part) and section; numbered pages; < 200 pages."""
    from pypdf import PdfReader

    reader = PdfReader(book_pdf.path)
    n = len(reader.pages)
    assert n < MAX_PAGES, f"the PDF has {n} pages (at most {MAX_PAGES}: the API reference is online only)"
    outline = _outline(reader)
    assert outline, "the PDF has no bookmarks"
    top = [title for depth, title, _ in outline if depth == 0]
    parts = [_normalise(p) for p in toc_parts(REPO_ROOT)]
    missing_parts = [p for p in parts if p not in top]
    assert not missing_parts, f"parts without a top-level bookmark: {missing_parts}; top level: {top}"
    for chapter in book_chapters(REPO_ROOT):
        title = f"{chapter.number}. {_normalise(_chapter_title(chapter.path))}"
        entries = [(depth, page) for depth, t, page in outline if t == title]
        assert entries and entries[0][0] == 1, f"no bookmark for {title!r} under its part"
        depths_below = {_straight(t): depth for depth, t, _ in outline}
        for k, section in enumerate(_section_titles(chapter.path), start=1):
            if "$" in section:  # a bookmark holds the heading's text, not its typeset math
                continue
            numbered = _straight(f"{chapter.number}.{k}. {_normalise(section)}")
            assert depths_below.get(numbered) == 2, f"no section bookmark {numbered!r}"
    pages = [p for _, _, p in outline]
    assert pages == sorted(pages), "the bookmarks are not in page order"
    unnumbered = [i + 1 for i, page in enumerate(reader.pages) if f"{i + 1} / {n}" not in page.extract_text()]
    assert not unnumbered, f"pages without their number: {unnumbered[:10]}"


@pytest.mark.slow
def test_pdf_leaves_out_the_api_reference(book_pdf):
    assert "API reference" in book_pdf.text, "the API reference's appendix note is missing"
    assert 'id="module-attention_dynamics' not in book_pdf.page_html, "the API reference was printed"
    site = online_book_url(yaml.safe_load((REPO_ROOT / "_config.yml").read_text(encoding="utf-8"))["repository"]["url"])
    assert site and f"{site}book/api.html" in book_pdf.page_html, "the appendix does not point to the online API page"


SINGLE_PAGE = """<html><head></head><body>
<div id="jb-print-toc"><p aria-level="2" class="caption" role="heading"><span>Part one</span></p></div>
<h1>Book</h1><section><h2>Intro section</h2>
<div class="toctree-wrapper compound"><span id="document-book/a"></span><section id="a"><h3>Chapter A</h3>
<p>See <a href="#attention_dynamics.f">f</a>.</p><section><h4>A.1</h4></section></section></div>
<div class="toctree-wrapper compound"><span id="document-book/api"></span><section id="api"><h3>API</h3>
<dl><dt id="attention_dynamics.f">f</dt></dl></section><span id="document-book/bib"></span><section id="bib"><h3>Bib</h3></section>
</div></section></body></html>"""


def test_printable_html_titles_parts_and_replaces_the_api_reference():
    out = printable_html(SINGLE_PAGE, ["Part one", "About"], api_url="https://o.github.io/b/book/api.html")
    assert '<h1 class="part-title">Part one</h1><span id="document-book/a">' in out
    assert '<h1 class="part-title">About</h1>' in out
    assert "<h2>Chapter A</h2>" in out and "<h3>A.1</h3>" in out, "a chapter sits one level below its part"
    assert "<h2>Bib</h2>" in out and "<h1>Book</h1>" in out and "<h2>Intro section</h2>" in out
    assert 'id="attention_dynamics.f"' not in out, "the API reference is left out"
    assert "<h2>API reference</h2>" in out and "https://o.github.io/b/book/api.html" in out
    assert 'href="https://o.github.io/b/book/api.html#attention_dynamics.f"' in out, "links into the API go online"
    assert 'role="heading"' not in out, "the printed contents' captions are not headings"
    with pytest.raises(ValueError, match="2 table-of-contents blocks but _toc.yml 3 parts"):
        printable_html(SINGLE_PAGE, ["a", "b", "c"])


def _page_of(outline: list[tuple[int, str, int]], title: str) -> tuple[int, int, int]:
    """Return (its index in the outline, its depth, its page) of the bookmark titled ``title``."""
    for i, (depth, t, page) in enumerate(outline):
        if _straight(t) == _straight(_normalise(title)):
            return i, depth, page
    raise AssertionError(f"no bookmark {title!r}")


def _page_title(path: Path) -> str:
    """Return a Markdown page's title (its first heading)."""
    return next(line.lstrip("# ").strip() for line in path.read_text(encoding="utf-8").splitlines()
                if line.startswith("# "))


@pytest.mark.slow
def test_pdf_prints_the_ledger_as_a_compact_appendix(book_pdf):
    """The ledger appendix: at most 15 pages, every number's description, no claim ids, code hashes or folded
    details' markers."""
    from pypdf import PdfReader

    reader = PdfReader(book_pdf.path)
    outline = _outline(reader)
    i, depth, start = _page_of(outline, _page_title(REPO_ROOT / "book" / "reproducibility.md"))
    end = next(page for d, _, page in outline[i + 1:] if d <= depth)
    pages = end - start
    assert 0 < pages <= MAX_LEDGER_PAGES, f"the ledger prints on {pages} pages (at most {MAX_LEDGER_PAGES})"
    text = _normalise("\n".join(reader.pages[k].extract_text() for k in range(start, end)))
    import json

    claims = json.loads((REPO_ROOT / "book" / "claims.json").read_text(encoding="utf-8"))["claims"]
    flat = _flat(text)
    quoted = _flat(" ".join(f"{c['description']} {c.get('explanation') or ''}" for c in claims))
    ids = [c["id"] for c in claims if _flat(c["id"]) in flat and _flat(c["id"]) not in quoted]  # not the prose's own
    assert not ids, f"claim ids printed in the appendix: {ids[:5]}"
    assert not re.search(r"\b[0-9a-f]{40}\b", text), "a code hash is printed in the appendix"
    # a folded block's marker, or what it holds (each number's reference and parameters)
    for marker in ("▾", "▸", "Reference: ", "Parameters: "):
        assert marker not in text, f"{marker!r} printed in the appendix"
    straight = _flat(_straight(text))
    described = [c for c in claims if _flat(_straight(c["description"]))[:40] in straight]
    assert len(described) >= 0.95 * len(claims), f"only {len(described)} of {len(claims)} descriptions printed"


@pytest.mark.slow
def test_pdf_outline_titles_keep_their_math(book_pdf):
    """A heading with math is bookmarked with its math as text, not with a hole where the formula was."""
    from pypdf import PdfReader

    outline = [t for _, t, _ in _outline(PdfReader(book_pdf.path))]
    checked = 0
    for chapter in book_chapters(REPO_ROOT):
        for title in _heading_texts(chapter.path):
            if "$" not in title:
                continue
            with_math = re.sub(r"\$([^$]+)\$", lambda m: tex_to_text(m.group(1)), title)
            found = [t for t in outline if _straight(t).endswith(_straight(_normalise(with_math)))]
            assert found, f"no bookmark ends with {with_math!r} (a heading of {chapter.path.name})"
            checked += 1
    assert checked, "no chapter heading has math: nothing checked"
    holes = [t for t in outline if re.search(r"\b(by|of|to|is|and|changes by)\s*$", t) or "  " in t]
    assert not holes, f"bookmarks that lost their math: {holes}"


def _heading_texts(path: Path) -> list[str]:
    """Return a chapter's headings (## and ###) without Markdown markup other than math, in order."""
    import nbformat

    titles = []
    for cell in nbformat.read(path, as_version=4).cells:
        if cell.cell_type == "markdown":
            titles += [re.sub(r"[*`]", "", line.lstrip("#")).strip() for line in cell.source.splitlines()
                       if re.match(r"#{2,3} ", line)]
    return titles


@pytest.mark.slow
def test_every_chapter_starts_on_its_own_page(book_pdf):
    """Each chapter's bookmark points to a page that begins with the chapter's title: nothing of the page before."""
    from pypdf import PdfReader

    reader = PdfReader(book_pdf.path)
    outline = _outline(reader)
    for chapter in book_chapters(REPO_ROOT):
        title = f"{chapter.number}. {_normalise(_chapter_title(chapter.path))}"
        _, _, page = _page_of(outline, title)
        head = _straight(_normalise(reader.pages[page].extract_text()))[:len(title) + 40]
        assert _flat(_straight(title))[:30] in _flat(head), (
            f"chapter {chapter.number} does not start its page (page {page + 1} begins {head[:80]!r})")
        before = _normalise(reader.pages[page - 1].extract_text()) if page else ""
        assert _flat(_straight(title))[:30] not in _flat(_straight(before)), f"chapter {chapter.number} starts a page late"


def test_tex_to_text_writes_a_heading_s_math_as_text():
    assert tex_to_text(r"\eta \sum_j \norm{\sum_i \alpha_{ij} u_i}^2") == "η Σ_j ‖Σ_i α_ij u_i‖²"
    assert tex_to_text(r"-\eta \sum_{i'} \alpha_{i'j}\, u_i \cdot u_{i'}") == "−η Σ_i' α_i'j u_i · u_i'"
    assert tex_to_text(r"\frac{\partial L}{\partial s_{ij}} = \E_{\alpha}[b]") == "∂L/∂s_ij = 𝔼_α[b]"
    assert tex_to_text(r"b_{ij}") == "b_ij" and tex_to_text(r"\mathbb{R}^{d}") == "ℝ^d"


def test_repair_outline_writes_a_heading_s_math_into_its_bookmark(tmp_path):
    from pypdf import PdfReader, PdfWriter

    html = (r'<h3><span class="section-number">3.3.1. </span>A step lowers the loss by <span class="math '
            r'notranslate nohighlight">\(\eta \norm{u}^2\)</span><a class="headerlink" href="#s">#</a></h3>')
    writer = PdfWriter()
    writer.add_blank_page(100, 100)
    writer.add_outline_item(title="3.3.1. A step lowers the loss by  ", page_number=0)
    path = tmp_path / "m.pdf"
    with open(path, "wb") as f:
        writer.write(f)
    assert repair_outline(path, heading_titles(html)) == 1
    assert PdfReader(path).outline[0].title == "3.3.1. A step lowers the loss by η ‖u‖²"


def test_printable_html_leaves_out_a_diagram_s_dark_copy():
    page = SINGLE_PAGE.replace("<h3>Chapter A</h3>", '<h3>Chapter A</h3><img alt="d" class="only-light" src="_images/'
                               'm-light.svg" /><img alt="d" class="only-dark" src="_images/m-dark.svg" />')
    out = printable_html(page, ["Part one", "About"])
    assert "m-light.svg" in out and "m-dark.svg" not in out


def test_repair_outline_restores_headings_the_printer_mangled(tmp_path):
    from pypdf import PdfReader, PdfWriter

    html = ('<h1>Gradient Dynamics — a reproducible companion</h1>'
            '<h3><span class="section-number">1.3. </span>Checks &amp; more<a class="headerlink" href="#c">#</a></h3>')
    titles = heading_titles(html)
    writer = PdfWriter()
    writer.add_blank_page(100, 100)
    top = writer.add_outline_item(title="Gradient Dynamics — areproducible companion", page_number=0)
    writer.add_outline_item(title="1.3. 1.3. Checks & moreChecks & more", page_number=0, parent=top)
    writer.add_outline_item(title="Unrelated ChecksChecks", page_number=0, parent=top)
    path = tmp_path / "t.pdf"
    with open(path, "wb") as f:
        writer.write(f)
    assert repair_outline(path, titles) == 2
    reader = PdfReader(path)
    assert reader.outline[0].title == "Gradient Dynamics — a reproducible companion"
    assert [i.title for i in reader.outline[1]] == ["1.3. Checks & more", "Unrelated ChecksChecks"]


def test_online_book_url_follows_the_repository():
    assert online_book_url("https://github.com/Attention-Dynamics/gradient-dynamics-book/") == (
        "https://attention-dynamics.github.io/gradient-dynamics-book/")
    assert online_book_url("https://gitlab.com/a/b") is None and online_book_url(None) is None


def test_build_pdf_without_chromium_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.delenv("CHROMIUM", raising=False)
    monkeypatch.setattr(shutil, "which", lambda *args, **kwargs: None)
    with pytest.raises(BookError, match="Chromium .* not installed"):
        build_pdf(REPO_ROOT, tmp_path / "book.pdf", build_dir=tmp_path / "build")
    assert not (tmp_path / "build").exists(), "nothing should be built without Chromium"
    assert not (tmp_path / "book.pdf").exists()
