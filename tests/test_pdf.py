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
    missing = [v for v in glued if _flat(v) not in flat]
    assert not missing, f"{len(missing)} glued values of the HTML page are not in the PDF: {missing[:10]}"
    # A glue role that did not resolve would be printed as written, e.g. {glue:text}`setup.loss:.3f`.
    keys = set()
    for chapter in book_chapters(REPO_ROOT):
        keys.update(re.findall(r"\{glue(?::\w+)?\}`([^`:]+)", chapter.path.read_text(encoding="utf-8")))
    assert keys, "the chapters glue no values"
    unresolved = sorted(k for k in keys if re.search(r"\{glue(?::\w+)?\}`?" + re.escape(k), book_pdf.text))
    assert not unresolved, f"unresolved glue roles in the PDF: {unresolved}"


@pytest.mark.slow
def test_pdf_has_every_figure(book_pdf):
    figures = set(re.findall(r'<img[^>]*src="(_images/[^"]+)"', book_pdf.page_html))
    assert figures, "the printed page has no figures"
    with_images = [i + 1 for i, page in enumerate(book_pdf.pages) if page.images]
    images = sum(len(book_pdf.pages[i - 1].images) for i in with_images)
    assert with_images, "no page of the PDF has an image"
    assert images >= len(figures), f"{len(figures)} figures on the page but {images} images in the PDF"


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
