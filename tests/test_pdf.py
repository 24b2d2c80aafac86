"""The book as one PDF (``make pdf``): every chapter, typeset equations, glued numbers, figures.

The slow tests build the PDF once per module from the committed notebooks (nothing is executed)
into a temporary folder, with :func:`attention_dynamics.pdf.build_pdf` exactly as
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

from attention_dynamics.notebooks import book_chapters
from attention_dynamics.pdf import build_pdf
from attention_dynamics.notebooks import BookError

REPO_ROOT = Path(__file__).resolve().parents[1]
#: What raw TeX left by a MathJax that did not run looks like in the text of the PDF.
RAW_TEX = ("\\(", "\\[", "$$", "\\frac", "\\mathbb", "\\begin{", "\\sum", "\\alpha", "\\left", "\\R^", "\\E_")
#: What MathJax writes in place of a formula it could not typeset.
MATH_ERRORS = ("Undefined control sequence", "Math input error", "Misplaced &")
A4 = (595.3, 841.9)  # points


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
    assert (float(box.width), float(box.height)) == pytest.approx(A4, abs=2), f"not A4: {box}"
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


def test_build_pdf_without_chromium_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.delenv("CHROMIUM", raising=False)
    monkeypatch.setattr(shutil, "which", lambda *args, **kwargs: None)
    with pytest.raises(BookError, match="Chromium .* not installed"):
        build_pdf(REPO_ROOT, tmp_path / "book.pdf", build_dir=tmp_path / "build")
    assert not (tmp_path / "build").exists(), "nothing should be built without Chromium"
    assert not (tmp_path / "book.pdf").exists()
