"""The book as one PDF, offline: ``python -m attention_dynamics pdf`` (what ``make pdf`` calls).

Two steps. Jupyter Book 1 builds the whole book as a single HTML page (Sphinx's ``singlehtml``
builder) from the committed notebook outputs, executing nothing, with warnings as errors exactly
as the HTML book is built. Headless Chromium then prints that page to PDF from ``file://``: MathJax
and its fonts are served from the page's own ``_static/`` (``book/_ext/offline_assets.py``) and
every host name is unresolvable, so nothing is fetched from the network.

Sphinx writes the single page at the root document's path (``book/intro.html``) but with links
relative to the output folder, so the page is printed from a copy at the folder's root, with
the book's print style sheet (``PRINT_CSS``: A4, margins, wrapped code, tables and figures
within the page width, one chapter per page) added.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

from .notebooks import BookError

__all__ = ["build_pdf"]

#: Print style added to the single page: A4 with margins, nothing cut at the right edge (long code
#: lines wrap, wide tables and figures fit the page width), each chapter on a new page, the
#: "Show code cell source" toggles of hidden code left out (their code stays hidden).
PRINT_CSS = """
@page { size: A4; margin: 16mm 14mm 18mm 14mm; }
@media print {
  html { font-size: 14px; }
  .bd-main .bd-content { margin-left: 0 !important; }
  .bd-main .bd-content .bd-article-container .bd-article { padding-left: 0; padding-right: 0; }
  pre { white-space: pre-wrap !important; overflow-wrap: anywhere; overflow: visible !important; }
  div.highlight, div.cell_output, div.output, .pst-scrollable-table-container, mjx-container {
    overflow: visible !important; max-height: none !important; }
  div.cell_input { break-inside: avoid; }
  details.hide.above-input { display: none !important; }
  table { max-width: 100%; font-size: 0.85em; }
  th, td { overflow-wrap: break-word; }
  img { max-width: 100% !important; height: auto !important; break-inside: avoid; }
  span[id^="document-"] + section { break-before: page; }
}
"""

#: Chromium flags: headless printing with a fresh profile, no background traffic of the browser
#: itself, no host name resolvable (the page is read from disk), no date/URL header or footer.
CHROMIUM_FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--host-resolver-rules=MAP * ~NOTFOUND",
    "--no-pdf-header-footer", "--run-all-compositor-stages-before-draw",
    # Print once the page is idle (MathJax has typeset every formula), at most 30 s of page time.
    "--virtual-time-budget=30000",
)


def find_chromium() -> str:
    """Return the path of the Chromium executable (``$CHROMIUM``, else ``chromium`` on the PATH).

    Raises :class:`~attention_dynamics.notebooks.BookError` when there is none.
    """
    candidate = os.environ.get("CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    if not candidate or not Path(candidate).exists():
        raise BookError("Chromium is needed to print the book to PDF and is not installed "
                        "(Debian: apt-get install chromium; or set CHROMIUM=/path/to/chromium)")
    return candidate


def build_single_page(root: Path, build_dir: Path) -> Path:
    """Return the book's single HTML page, ready to print, built into ``build_dir`` from committed outputs.

    Raises :class:`~attention_dynamics.notebooks.BookError` when the build fails or warns.
    """
    jb = shutil.which("jupyter-book", path=str(Path(sys.executable).parent)) or shutil.which("jupyter-book")
    if jb is None:
        raise BookError("jupyter-book is not installed in this environment (run `make pdf`)")
    cmd = [jb, "build", str(root), "--builder", "singlehtml", "--path-output", str(build_dir),
           "--warningiserror", "--nitpick", "--keep-going", "--quiet"]
    print("Building the book as one HTML page:", " ".join(cmd[1:]))
    if subprocess.run(cmd, cwd=root).returncode != 0:
        raise BookError("the single-page book build failed (warnings are errors); see the messages above")
    outdir = build_dir / "_build" / "singlehtml"
    toc_root = (yaml.safe_load((root / "_toc.yml").read_text(encoding="utf-8")) or {}).get("root", "index")
    page = outdir / f"{toc_root}.html"
    if not page.is_file():
        raise BookError(f"the single-page build wrote no {page}")
    html = page.read_text(encoding="utf-8").replace(f'href="{toc_root}.html#', 'href="#')
    html = html.replace("</head>", f'<style media="print">{PRINT_CSS}</style>\n</head>', 1)
    html = html.replace("<details", "<details open")  # what a reader would click open, printed open
    printable = outdir / "book-print.html"
    printable.write_text(html, encoding="utf-8")
    return printable


def print_to_pdf(chromium: str, page: Path, out: Path, *, timeout: int = 900) -> Path:
    """Return ``out``, the PDF headless Chromium printed from the HTML file ``page``.

    Raises :class:`~attention_dynamics.notebooks.BookError` when Chromium writes no PDF.
    """
    out.parent.mkdir(parents=True, exist_ok=True)
    out.unlink(missing_ok=True)
    with tempfile.TemporaryDirectory(prefix="chromium-profile-") as profile:
        cmd = [chromium, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", f"--print-to-pdf={out}",
               page.resolve().as_uri()]
        try:
            result = subprocess.run(cmd, capture_output=True, text=True, errors="replace",
                                    timeout=timeout)
        except subprocess.TimeoutExpired:
            raise BookError(f"Chromium did not print {page} within {timeout} s") from None
    if not out.is_file() or out.read_bytes()[:5] != b"%PDF-":
        tail = "\n".join((result.stdout + result.stderr).splitlines()[-10:])
        raise BookError(f"Chromium wrote no PDF (exit status {result.returncode}):\n{tail}")
    return out


def build_pdf(root: Path, out: Path | None = None, *, build_dir: Path | None = None) -> Path:
    """Return the path of the book's PDF, built from the committed outputs (nothing is executed).

    ``out`` defaults to ``<root>/_build/pdf/book.pdf``; the single HTML page is built into
    ``build_dir`` (default ``<root>/build/pdf``). Raises
    :class:`~attention_dynamics.notebooks.BookError` when Chromium is missing (checked first) or
    the build fails.
    """
    root = Path(root).resolve()
    chromium = find_chromium()
    out = Path(out) if out is not None else root / "_build" / "pdf" / "book.pdf"
    page = build_single_page(root, Path(build_dir) if build_dir is not None else root / "build" / "pdf")
    print(f"Printing {page.name} to PDF with headless Chromium ...")
    return print_to_pdf(chromium, page, out.resolve())
