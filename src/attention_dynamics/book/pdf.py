"""The book as one PDF, offline: ``python -m attention_dynamics pdf`` (what ``make pdf`` calls).

Two steps. Jupyter Book 1 builds the whole book as a single HTML page (Sphinx's ``singlehtml``
builder) from the committed notebook outputs, executing nothing, with warnings as errors exactly
as the HTML book is built. Headless Chromium then prints that page to PDF from ``file://``: MathJax
and its fonts are served from the page's own ``_static/`` (``book/_ext/offline_assets.py``) and
every host name is unresolvable, so nothing is fetched from the network.

Sphinx writes the single page at the root document's path (``book/intro.html``) but with links
relative to the output folder, so the page is printed from a copy at the folder's root, made a
book by :func:`printable_html`: each part of ``_toc.yml`` gets its title as a top-level heading
(chapters and their sections one level below), the API reference becomes a one-paragraph appendix
that points to the online book (links into it point there too), and the book's print style sheet
(``PRINT_CSS``: A4, margins, page numbers, wrapped code, tables and figures within the page width,
each part and chapter on a new page) is added. Chromium writes the PDF's bookmarks (outline) from
the headings: parts, chapters, sections; :func:`repair_outline` then restores the titles it mangles, and writes a
heading's math as text (:func:`tex_to_text`: "lowers the loss by η Σ_j ‖Σ_i α_ij u_i‖²"), which Chromium leaves out.
The claims ledger prints as a compact appendix (the book's print style: no claim ids, no folded details, small type),
and the dark-theme copy of each diagram is left out of the printed page.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from html import escape
from pathlib import Path
from urllib.parse import urlsplit

import yaml

from .notebooks import BookError

__all__ = ["build_pdf", "printable_html", "toc_parts", "online_book_url", "heading_titles", "repair_outline",
           "tex_to_text"]

#: Print style added to the single page: A4 with margins and the page number at the foot of every
#: page, nothing cut at the right edge (long code lines wrap, wide tables and figures fit the page
#: width), each part and each chapter on a new page, the "Show code cell source" toggles of hidden
#: code left out (their code stays hidden), no heading's "#" link (it would end up in the bookmarks).
PRINT_CSS = """
@page { size: A4; margin: 16mm 14mm 18mm 14mm;
        @bottom-center { content: counter(page) " / " counter(pages); font-size: 9pt; color: #555; } }
@media print {
  a.headerlink { display: none !important; }
  h1, h2, h3, h4, h5, h6 { break-inside: avoid; break-after: avoid; }
  /* The theme hides an article's first <h1> in print (its printed contents repeat the title); a
     part title is the first <h1> of its block and must show. */
  h1.part-title { display: block !important; break-before: page; font-size: 2.2rem; margin-top: 30%; }
  #jb-print-docs-body > h1 { font-size: 1.6rem; }
  /* The theme lays the page out in flex boxes; forced page breaks are honoured in plain blocks. */
  .bd-container, .bd-container__inner, .bd-main, .bd-main .bd-content, .bd-main .bd-content .bd-article-container {
    display: block !important; }
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
  span[id^="document-"] { display: block; }
  span[id^="document-"] + section { break-before: page; }
}
"""

#: Chromium flags: headless printing with a fresh profile, no background traffic of the browser
#: itself, no host name resolvable (the page is read from disk), no date/URL header or footer.
CHROMIUM_FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--host-resolver-rules=MAP * ~NOTFOUND",
    "--no-pdf-header-footer", "--run-all-compositor-stages-before-draw",
    # Bookmarks from the headings: parts (h1), chapters (h2), sections (h3), ...
    "--generate-pdf-document-outline",
    # Print once the page is idle (MathJax has typeset every formula), at most 30 s of page time.
    "--virtual-time-budget=30000",
)


def find_chromium() -> str:
    """Return the path of the Chromium executable (``$CHROMIUM``, else ``chromium`` on the PATH).

    Raises :class:`~attention_dynamics.book.notebooks.BookError` when there is none.
    """
    candidate = os.environ.get("CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    if not candidate or not Path(candidate).exists():
        raise BookError("Chromium is needed to print the book to PDF and is not installed "
                        "(Debian: apt-get install chromium; or set CHROMIUM=/path/to/chromium)")
    return candidate


#: The page left out of the PDF (its whole text is online): the API reference.
API_DOC = "book/api"


def toc_parts(root: Path) -> list[str]:
    """Return the captions of the parts of ``root/_toc.yml``, in order."""
    toc = yaml.safe_load((root / "_toc.yml").read_text(encoding="utf-8")) or {}
    return [part.get("caption", "") for part in toc.get("parts", [])]


def online_book_url(repository_url: str | None) -> str | None:
    """Return the address of the published book (GitHub Pages) for a GitHub repository url, or None."""
    if not repository_url:
        return None
    parts = urlsplit(repository_url.rstrip("/"))
    owner_name = parts.path.strip("/").split("/")
    if parts.netloc != "github.com" or len(owner_name) != 2:
        return None
    return f"https://{owner_name[0].lower()}.github.io/{owner_name[1]}/"


_HEADING_TAG = re.compile(r"<(/?)h([1-6])\b")
_PART = '<div class="toctree-wrapper compound">'


def printable_html(html: str, parts: list[str], *, api_url: str | None = None, api_doc: str = API_DOC) -> str:
    """Return the single-page book made ready to print as a book.

    ``html``: Sphinx's single page, whose ``toctree-wrapper`` blocks are the parts of ``_toc.yml``
    in order (``parts``: their captions). Each part opens with its caption as an ``<h1 class="part-title">``
    and the headings inside it move so that its documents' titles are ``<h2>``, so that the PDF's
    outline reads part > chapter > section. The document ``api_doc`` is replaced by a short appendix
    pointing to ``api_url`` (its online page), and every link to an anchor it held points there. A diagram's
    dark-theme copy (an image of class ``only-dark``) is left out. Raises ValueError when the page has not one block
    per part.
    """
    blocks = html.split(_PART)
    if len(blocks) - 1 != len(parts):
        raise ValueError(f"the single page has {len(blocks) - 1} table-of-contents blocks but _toc.yml "
                         f"{len(parts)} parts")
    api_start = f'<span id="document-{api_doc}"></span>'
    removed_ids: set[str] = set()
    for i, block in enumerate(blocks[1:], start=1):
        if api_start in block:
            head, rest = block.split(api_start, 1)
            end = rest.find('<span id="document-')
            if end < 0:  # the last document of its part: it ends where the part does
                end = rest.find("</div>", rest.rfind("</section>"))
            removed, tail = rest[:end], rest[end:]
            removed_ids.update(re.findall(r'\bid="([^"]+)"', removed))
            where = (f'online, <a href="{escape(api_url)}">{escape(api_url)}</a>' if api_url
                     else "in the HTML book (book/api.html)")
            block = (f'{head}{api_start}<section id="api-reference"><h3>API reference</h3>'
                     f"<p>The reference of every module, function and class of the package "
                     f"<code>attention_dynamics</code> is left out of the printed book; it is {where}.</p>"
                     f"</section>{tail}")
        # The part's documents start one level below the part title, whatever depth Sphinx nested them at.
        levels = [int(m.group(2)) for m in _HEADING_TAG.finditer(block) if not m.group(1)]
        shift = min(levels, default=2) - 2
        block = _HEADING_TAG.sub(lambda m: f"<{m.group(1)}h{min(max(int(m.group(2)) - shift, 2), 6)}", block)
        blocks[i] = f'<h1 class="part-title">{escape(parts[i - 1])}</h1>' + block
    out = _PART.join(blocks)
    # a diagram's dark-theme copy is hidden on paper: leave it out rather than print it hidden
    out = re.sub(r'<img\b[^>]*\bclass="[^"]*\bonly-dark\b[^"]*"[^>]*>', "", out)
    # The printed contents list the parts' captions as headings (role="heading"): in the bookmarks
    # they would stand beside the part titles themselves.
    out = out.replace('<p aria-level="2" class="caption" role="heading">', '<p class="caption">')
    if removed_ids:
        target = api_url or ""
        out = re.sub(r'href="#([^"]+)"',
                     lambda m: f'href="{target}#{m.group(1)}"' if m.group(1) in removed_ids and target else m.group(0),
                     out)
    return out


_HEADING = re.compile(r"<h[1-6]\b[^>]*>(.*?)</h[1-6]>", re.DOTALL)
_MATH_SPAN = re.compile(r'<span class="math[^"]*">\\\((.*?)\\\)</span>', re.DOTALL)

#: TeX commands a heading's math uses, as text (the book's macros included).
_TEX_SYMBOLS = {
    "alpha": "α", "beta": "β", "gamma": "γ", "delta": "δ", "epsilon": "ε", "varepsilon": "ε", "zeta": "ζ", "eta": "η",
    "theta": "θ", "kappa": "κ", "lambda": "λ", "mu": "μ", "nu": "ν", "xi": "ξ", "pi": "π", "rho": "ρ", "sigma": "σ",
    "tau": "τ", "phi": "φ", "varphi": "φ", "chi": "χ", "psi": "ψ", "omega": "ω", "Gamma": "Γ", "Delta": "Δ",
    "Theta": "Θ", "Lambda": "Λ", "Sigma": "Σ", "Phi": "Φ", "Psi": "Ψ", "Omega": "Ω", "sum": "Σ", "prod": "Π",
    "partial": "∂", "nabla": "∇", "infty": "∞", "cdot": "·", "times": "×", "to": "→", "rightarrow": "→",
    "leftarrow": "←", "le": "≤", "leq": "≤", "ge": "≥", "geq": "≥", "neq": "≠", "approx": "≈", "sim": "~",
    "in": "∈", "top": "⊤", "lVert": "‖", "rVert": "‖", "|": "‖", "lvert": "|", "rvert": "|", "mid": "|",
    "E": "𝔼", "R": "ℝ", "ldots": "…", "dots": "…", "cdots": "⋯", "propto": "∝", "pm": "±", "prime": "′",
}
_SUPERSCRIPTS = str.maketrans("0123456789+-=()n", "⁰¹²³⁴⁵⁶⁷⁸⁹⁺⁻⁼⁽⁾ⁿ")


def tex_to_text(tex: str) -> str:
    """Return a heading's TeX as plain text for a PDF bookmark: Greek letters and operators as Unicode, the book's
    macros (``\\norm{x}`` → ‖x‖, ``\\E`` → 𝔼), ``\\frac{a}{b}`` → a/b, a digit superscript raised (²), subscripts
    kept as ``_ij``, and spacing commands and braces dropped."""
    text = re.sub(r"_\{([^{}]*)\}", r"_\1", tex)  # subscripts first: they are the innermost braces
    for _ in range(3):  # nested macros
        text = re.sub(r"\\norm\{([^{}]*)\}", r"‖\1‖", text)
        text = re.sub(r"\\abs\{([^{}]*)\}", r"|\1|", text)
        text = re.sub(r"\\frac\{([^{}]*)\}\{([^{}]*)\}", r"\1/\2", text)
        text = re.sub(r"\\(?:text|mathrm|operatorname|mathbf|mathit|mathsf|boldsymbol)\{([^{}]*)\}", r"\1", text)
    text = re.sub(r"\\mathbb\{E\}", "𝔼", text)
    text = re.sub(r"\\mathbb\{R\}", "ℝ", text)
    text = re.sub(r"\\(?:left|right|big|Big|bigg|Bigg)(?=[^a-zA-Z])", "", text)
    text = re.sub(r"\\[,;:!> ]|~", " ", text)
    text = re.sub(r"\\([a-zA-Z]+|\|)", lambda m: _TEX_SYMBOLS.get(m.group(1), m.group(1)), text)
    text = re.sub(r"\^\{?([0-9n+\-=()]+)\}?", lambda m: m.group(1).translate(_SUPERSCRIPTS), text)
    text = re.sub(r"\^\{([^{}]*)\}", r"^\1", text)
    text = re.sub(r"_\{([^{}]*)\}", r"_\1", text)
    text = text.replace("{", "").replace("}", "").replace("-", "−").replace("∂ ", "∂")
    return re.sub(r"\s+", " ", text).strip()
_HEADERLINK = re.compile(r'<a class="headerlink".*?</a>', re.DOTALL)


def heading_titles(html: str) -> dict[str, str]:
    """Return ``{key: title}`` for the page's headings, for :func:`repair_outline`.

    The key is a form a bookmark title may take in Chromium's outline, without whitespace: the
    heading's text, and the text with each of its text pieces written twice (what Chromium records
    for some headings that a page break moved); a heading's math is not in it (Chromium's outline leaves typeset
    math out). The title is the heading's text as shown, its math as text (:func:`tex_to_text`).
    """
    import html as html_module

    titles = {}
    for match in _HEADING.finditer(html):
        inner = _HEADERLINK.sub("", match.group(1))
        maths = [tex_to_text(html_module.unescape(m)) for m in _MATH_SPAN.findall(inner)]
        marked = _MATH_SPAN.sub("\x00", inner)
        pieces = [html_module.unescape(t) for t in re.split(r"<[^>]+>", marked) if t.strip()]
        shown = "".join(pieces)
        for math in maths:
            shown = shown.replace("\x00", math, 1)
        plain = re.sub(r"\s+", " ", shown).strip()
        bare = [p.replace("\x00", "") for p in pieces if p.replace("\x00", "").strip()]
        for form in ("".join(bare), "".join(t + t for t in bare)):
            titles.setdefault(re.sub(r"\s+", "", form), plain)
    return titles


def repair_outline(pdf_path: Path, titles: dict[str, str]) -> int:
    """Rewrite the PDF's bookmark titles that are a heading's text mangled by the printer; return how many.

    Chromium's outline sometimes writes a heading's text twice over ("1.3. 1.3. ChecksChecks") or loses
    the space at a line break; each bookmark whose title, without whitespace, is a form listed in
    ``titles`` (:func:`heading_titles`) gets the heading's own text.
    """
    from pypdf import PdfWriter
    from pypdf.generic import NameObject, TextStringObject

    writer = PdfWriter(clone_from=str(pdf_path))
    root = writer.root_object.get("/Outlines")
    fixed = 0
    stack = [root.get_object()] if root is not None else []
    while stack:
        node = stack.pop()
        item = node.get("/First")
        while item is not None:
            entry = item.get_object()
            title = str(entry.get("/Title", ""))
            wanted = titles.get(re.sub(r"\s+", "", title))
            if wanted is not None and wanted != title:
                entry[NameObject("/Title")] = TextStringObject(wanted)
                fixed += 1
            if "/First" in entry:
                stack.append(entry)
            item = entry.get("/Next")
    if fixed:
        with open(pdf_path, "wb") as f:
            writer.write(f)
    return fixed


def build_single_page(root: Path, build_dir: Path) -> Path:
    """Return the book's single HTML page, ready to print, built into ``build_dir`` from committed outputs.

    Raises :class:`~attention_dynamics.book.notebooks.BookError` when the build fails or warns.
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
    from .notebooks import repository_url

    site = online_book_url(repository_url(root))
    html = printable_html(html, toc_parts(root), api_url=f"{site}{API_DOC}.html" if site else None)
    html = html.replace("</head>", f'<style media="print">{PRINT_CSS}</style>\n</head>', 1)
    html = html.replace("<details", "<details open")  # what a reader would click open, printed open
    printable = outdir / "book-print.html"
    printable.write_text(html, encoding="utf-8")
    return printable


def print_to_pdf(chromium: str, page: Path, out: Path, *, timeout: int = 900) -> Path:
    """Return ``out``, the PDF headless Chromium printed from the HTML file ``page``.

    Raises :class:`~attention_dynamics.book.notebooks.BookError` when Chromium writes no PDF.
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
    :class:`~attention_dynamics.book.notebooks.BookError` when Chromium is missing (checked first) or
    the build fails.
    """
    root = Path(root).resolve()
    chromium = find_chromium()
    out = Path(out) if out is not None else root / "_build" / "pdf" / "book.pdf"
    page = build_single_page(root, Path(build_dir) if build_dir is not None else root / "build" / "pdf")
    print(f"Printing {page.name} to PDF with headless Chromium ...")
    pdf = print_to_pdf(chromium, page, out.resolve())
    repair_outline(pdf, heading_titles(page.read_text(encoding="utf-8")))
    return pdf
