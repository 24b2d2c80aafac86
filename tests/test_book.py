"""The rendered book: it builds with warnings as errors, and every page works in a real browser.

Slow tests (``@pytest.mark.slow``) build the HTML book once per session from the committed
notebooks (nothing is executed), with ``-W -n --keep-going`` exactly as ``make book`` does, into
a temporary folder (or ``$BOOK_TEST_DIR``; ``$BOOK_TEST_BUILT`` names a build to reuse as it is), serve it on 127.0.0.1 and open every page in
headless Chromium (Debian's ``chromium`` driven by Playwright). For each page they check that
MathJax rendered every formula and left no raw TeX, that every image loaded, that the console
shows no error and that no request left the machine. A full-page screenshot of every page is
kept under ``<build folder>/_build/screenshots/`` for inspection.

Fast tests check the pieces around the book that need no build: the Binder environment, the
citation file, the publishing workflows, the bibliography file and the book's Sphinx extensions.
"""

from __future__ import annotations

import contextlib
import functools
import http.server
import os
import re
import shutil
import subprocess
import sys
import threading
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import yaml

REPO_ROOT = Path(__file__).resolve().parents[1]
EXT_DIR = REPO_ROOT / "book" / "_ext"
CONFIG = yaml.safe_load((REPO_ROOT / "_config.yml").read_text(encoding="utf-8"))
PACKAGE = "attention_dynamics"

#: Chromium flags: no first-run UI, no background traffic of the browser itself, a fresh profile
#: (Playwright's persistent context takes it as ``user_data_dir``). The host-resolver rule makes
#: every host name except the local server unresolvable, so even a request the page-level checks
#: missed could not leave the machine.
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1",
]
LOCAL_HOST = "127.0.0.1"
VIEWPORT = {"width": 1280, "height": 900}
#: A phone: every page is checked again at this width (nothing may scroll the page sideways).
PHONE = {"width": 390, "height": 844}
SCREENSHOT_MAX_HEIGHT = 12_000  # px: enough to see the theme, equations and figures of a page
#: WCAG AA for normal text: the verdict and status colours reach it in both themes.
MIN_CONTRAST = 4.5


def _ext_module(name: str):
    """Import one of the book's Sphinx extensions from book/_ext."""
    if str(EXT_DIR) not in sys.path:
        sys.path.insert(0, str(EXT_DIR))
    return __import__(name)


def _repository() -> tuple[str, str]:
    """Return (``owner/name``, branch) of the repository named in _config.yml."""
    url = CONFIG["repository"]["url"].rstrip("/")
    parts = urlsplit(url)
    assert parts.netloc == "github.com", f"the repository url must be a GitHub url, got {url}"
    return parts.path.strip("/"), CONFIG["repository"].get("branch", "main")


def _chapter_notebooks() -> list[Path]:
    from attention_dynamics.book.notebooks import book_chapters

    return [c.path for c in book_chapters(REPO_ROOT)]


# --------------------------------------------------------------------------------------------
# The build (once per session)
# --------------------------------------------------------------------------------------------


# The session fixture ``built_book`` (the book built once, from committed outputs) is in tests/conftest.py: the
# reading-budget tests (tests/test_reading_budget.py) measure the same build.


@pytest.mark.slow
def test_book_builds_with_warnings_as_errors(built_book):
    assert built_book.returncode == 0, (
        f"the book does not build with warnings as errors ({' '.join(built_book.command)}):\n"
        + "\n".join(built_book.problems()[-60:])
    )
    toc_pages = _toc_files(yaml.safe_load((REPO_ROOT / "_toc.yml").read_text(encoding="utf-8")))
    missing = [f for f in toc_pages if not (built_book.html / f"{f}.html").exists()]
    assert not missing, f"pages listed in _toc.yml but not built: {missing}"


def _toc_files(entry) -> list[str]:
    files = []
    if isinstance(entry, dict):
        if "file" in entry:
            files.append(entry["file"])
        if "root" in entry:
            files.append(entry["root"])
        for key in ("parts", "chapters", "sections"):
            for child in entry.get(key, []):
                files.extend(_toc_files(child))
    return files


# --------------------------------------------------------------------------------------------
# Static checks of the built HTML
# --------------------------------------------------------------------------------------------

_REMOTE_ASSET = re.compile(r"<(?:script|link|img|iframe|source)\b[^>]*\b(?:src|href)=\"(?:https?:)?//[^\"]+\"[^>]*>")


@pytest.mark.slow
def test_no_page_loads_assets_from_the_network(built_book):
    """No <script>, <link>, <img> or <iframe> points off-site (links in the text are fine)."""
    offenders = {}
    for page in built_book.pages():
        tags = [t for t in _REMOTE_ASSET.findall(page.read_text(encoding="utf-8"))
                if not re.search(r"<link\b[^>]*rel=\"(?:canonical|alternate)\"", t)]
        if tags:
            offenders[str(page.relative_to(built_book.html))] = tags
    assert not offenders, f"pages that load remote assets: {offenders}"


@pytest.mark.slow
def test_mathjax_is_served_by_the_book(built_book):
    mathjax_path = CONFIG["sphinx"]["config"]["mathjax_path"]
    served = built_book.html / "_static" / mathjax_path
    assert served.is_file(), f"MathJax entry point not in the site: {served}"
    # MathJax loads its components and fonts on demand, relative to the entry point.
    assert (served.parent / "output" / "chtml" / "fonts" / "woff-v2").is_dir()
    assert (served.parent / "input" / "tex" / "extensions").is_dir()
    chapter = built_book.html / "book" / f"{_chapter_notebooks()[0].stem}.html"
    html = chapter.read_text(encoding="utf-8")
    local_script = r"<script[^>]*src=\"\.\./_static/" + re.escape(mathjax_path)
    assert re.search(local_script, html), "chapter 1 does not load the local MathJax"
    assert "window.MathJax" in html and "macros" in html, "the MathJax configuration (TeX macros) is not on the page"


@pytest.mark.slow
def test_launch_buttons_on_every_notebook_page(built_book):
    """Binder and Colab open the chapter's launch notebook (numbers as text), never its MyST source."""
    from attention_dynamics.book.launch_notebooks import LAUNCH_DIR

    repo, branch = _repository()
    for nb in _chapter_notebooks():
        rel = nb.relative_to(REPO_ROOT).as_posix()
        html = (built_book.html / Path(rel).with_suffix(".html")).read_text(encoding="utf-8")
        launch = f"{LAUNCH_DIR}/{nb.name}"
        assert (REPO_ROOT / launch).exists(), f"no launch notebook {launch}"
        binder = f"https://mybinder.org/v2/gh/{repo}/{branch}?urlpath=lab/tree/{launch}"
        colab = f"https://colab.research.google.com/github/{repo}/blob/{branch}/{launch}"
        assert binder in html, f"{rel}: no Binder button ({binder})"
        assert colab in html, f"{rel}: no Colab button ({colab})"
        assert f"lab/tree/{rel}" not in html and f"blob/{branch}/{rel}" not in html, f"{rel}: a button opens the source"


@pytest.mark.slow
def test_launch_notebooks_number_equations_as_the_book_does(built_book):
    """The equation numbers written into the launch notebooks are the ones Sphinx gave the book's equations."""
    import nbformat

    from attention_dynamics.book.launch_notebooks import equation_numbers
    from attention_dynamics.book.notebooks import book_chapters

    ours = equation_numbers([(c, nbformat.read(c.path, as_version=4)) for c in book_chapters(REPO_ROOT)])
    assert len(ours) > 30
    built = {}
    for nb in _chapter_notebooks():
        html = (built_book.html / "book" / f"{nb.stem}.html").read_text(encoding="utf-8")
        for label, number in re.findall(r'id="equation-([\w-]+)">\s*<span class="eqno">\(([\d.]+)\)', html):
            built[label] = (nb.stem, number)
    assert built == ours


def test_no_tracked_file_cites_a_file_the_reader_does_not_have():
    """The book, the package, the tests and the docs cite the paper (arXiv:2512.22473, its sections) or the authors'
    code (github.com/vishalmisra/bayesian-wind-tunnel, a file's path there), never a note of the book's authors that
    is not in the repository."""
    if not (REPO_ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    # the names are spelled as a pattern so that this file does not match itself
    found = subprocess.run(["git", "grep", "-n", "-I", "-E", r"\b(PAPER|DESIGN|STYLE)\.md\b"], cwd=REPO_ROOT,
                           capture_output=True, text=True)
    assert found.returncode in (0, 1), found.stderr
    assert found.stdout == "", f"tracked files that cite a file outside the repository:\n{found.stdout}"


@pytest.mark.slow
def test_no_raw_repr_or_nan_reaches_a_page(built_book):
    """Cell outputs on the chapter pages: no dict repr (shown as a small table, book/_ext/output_tables.py), no numpy
    scalar repr, no NaN or None in a table cell."""
    found = []
    for page in sorted((built_book.html / "book").glob("0*.html")):
        html = page.read_text(encoding="utf-8")
        for output in re.findall(r'<div class="cell_output.*?</div>\s*</div>', html, re.S):
            text = re.sub(r"<[^>]+>", "", output).strip()
            if re.match(r"\{\s*&#39;|\{'|\{&quot;", text) or "np.float64(" in text:
                found.append(f"{page.name}: a raw repr: {text[:60]!r}")
            for cell in re.findall(r"<td[^>]*>\s*(NaN|nan|None)\s*</td>", output):
                found.append(f"{page.name}: a table cell reads {cell}")
    assert not found, found


@pytest.mark.slow
def test_results_come_first(built_book):
    """The front page opens with the verdict scoreboard; every chapter opens with its verdict box; links land on rows."""
    front = (built_book.html / "book" / "intro.html").read_text(encoding="utf-8")
    verdicts = (built_book.html / "book" / "verdicts.html").read_text(encoding="utf-8")
    article = front[front.index("<article"):]
    assert article.index("verdict-scoreboard") < article.index("<h2"), "the scoreboard is not on the front page's top"
    rows = set(re.findall(r'<tr[^>]*\bid="(verdict-[\w-]+)"', verdicts))
    links = re.findall(r'href="verdicts\.html#(verdict-[\w-]+)"', front)
    from attention_dynamics.ledger import verdicts as v

    claim_rows = {"verdict-" + pc.id.replace("_", "-") for pc in v.PAPER_CLAIMS}
    check_rows = {"verdict-" + pc.id.replace("_", "-") for pc in v.CROSS_CHECKS}  # the book's cross-checks
    assert rows == claim_rows | check_rows and set(links) == claim_rows, "every claim links from the scoreboard to its row"
    for nb in _chapter_notebooks():
        html = (built_book.html / "book" / f"{nb.stem}.html").read_text(encoding="utf-8")
        body = html[html.index("<article"):]
        box = body.find("chapter-verdicts")
        assert 0 < box < body.index("</h1>") + 400, f"{nb.stem}: the verdict box is not right under the title"
        assert box < min((body.find(t) for t in ("<h2", "cell_input") if body.find(t) > 0), default=len(body))


@pytest.mark.slow
def test_api_page_documents_every_module(built_book):
    api_modules = _ext_module("api_modules")
    html = (built_book.html / "book" / "api.html").read_text(encoding="utf-8")
    missing = [m for m in api_modules.package_modules(PACKAGE) if f'id="module-{m}"' not in html]
    assert not missing, f"modules without API documentation: {missing}"


@pytest.mark.slow
def test_status_page_shows_every_recorded_chapter(built_book):
    import json

    status = json.loads((REPO_ROOT / "book" / "status.json").read_text(encoding="utf-8"))
    html = (built_book.html / "book" / "status.html").read_text(encoding="utf-8")
    chapters = {nb.stem for nb in _chapter_notebooks()}
    for name, info in status["chapters"].items():
        for value in (info["environment"]["python"], info["environment"]["torch"]):
            assert value in html
        if name in chapters:  # a chapter of the book links to its page
            assert f'href="{name}.html"' in html, f"status page has no link to {name}"
        else:
            assert name in html, f"status page has no row for {name}"


# --------------------------------------------------------------------------------------------
# Every page in a real browser
# --------------------------------------------------------------------------------------------


def _chromium() -> str:
    """Return the path of the Chromium executable, or skip (outside CI) / fail (in CI) without it."""
    candidate = os.environ.get("CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    if candidate and Path(candidate).exists():
        return candidate
    message = "Chromium is not installed (Debian: apt-get install chromium); .ci/run installs it"
    if os.environ.get("CI"):
        pytest.fail(message, pytrace=False)
    pytest.skip(message)


@contextlib.contextmanager
def _serve(directory: Path):
    """Serve ``directory`` over HTTP on 127.0.0.1 (a free port); yield the base URL."""

    class QuietHandler(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):  # keep the test output clean
            pass

    handler = functools.partial(QuietHandler, directory=str(directory))
    server = http.server.ThreadingHTTPServer((LOCAL_HOST, 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://{LOCAL_HOST}:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@contextlib.contextmanager
def _chromium_context(profile: Path):
    """Yield a Playwright browser context of headless Chromium with a fresh profile in ``profile``."""
    executable = _chromium()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            str(profile), executable_path=executable, headless=True, args=CHROMIUM_FLAGS, viewport=VIEWPORT,
            service_workers="block",
        )
        try:
            yield context
        finally:
            context.close()


@pytest.fixture(scope="session")
def local_server(built_book):
    """Serve the built site on 127.0.0.1 for the session; yield its base URL."""
    with _serve(built_book.html) as url:
        yield url


@dataclass
class PageReport:
    """What the browser saw on one page."""

    path: str
    problems: list[str] = field(default_factory=list)
    formulas: int = 0
    images: int = 0


# Wait for MathJax (if the page loads it) and return what it rendered. Sphinx marks every
# formula with class "math"; MathJax puts an <mjx-container> inside each one it typesets.
_MATH_JS = """
async () => {
  const formulas = [...document.querySelectorAll('.math')];
  if (!window.MathJax) return {loaded: false, formulas: formulas.length};
  await MathJax.startup.promise;
  const unrendered = formulas.filter(n => !n.querySelector('mjx-container')).map(n => n.textContent.slice(0, 80));
  const errors = [...document.querySelectorAll('mjx-merror')]
    .map(n => n.getAttribute('data-mjx-error') || n.textContent);
  const red = [...document.querySelectorAll('mjx-mtext[style*="color: red"]')].map(n => n.textContent);
  return {loaded: true, formulas: formulas.length, unrendered, errors: errors.concat(red),
          rendered: document.querySelectorAll('mjx-container').length};
}
"""

# Raw TeX left in the text a reader sees (code, MathJax output and scripts excluded).
_RAW_TEX_JS = r"""
() => {
  const body = document.body.cloneNode(true);
  body.querySelectorAll('pre, code, script, style, textarea, mjx-container, .highlight, .MathJax_Preview')
    .forEach(n => n.remove());
  const text = body.textContent;
  const found = [];
  for (const marker of ['$$', '\\(', '\\)', '\\[', '\\begin{', '\\frac{']) {
    const at = text.indexOf(marker);
    if (at >= 0) found.push(text.slice(Math.max(0, at - 40), at + 40).replace(/\s+/g, ' '));
  }
  return found;
}
"""

# Load every image (lazy ones too) and return those that did not load.
_IMAGES_JS = """
async () => {
  const images = [...document.images];
  images.forEach(img => { img.loading = 'eager'; });
  await Promise.all(images.map(img => img.complete ? null : new Promise(resolve => {
    img.addEventListener('load', resolve); img.addEventListener('error', resolve); setTimeout(resolve, 10000);
  })));
  return {count: images.length,
          broken: images.filter(img => !(img.complete && img.naturalWidth > 0)).map(img => img.currentSrc || img.src)};
}
"""


# What scrolls sideways at the page's width: the page itself, a visible code cell, a table (at the
# desktop width; on a phone a wide table may scroll inside its own box), a display equation that is
# wider than its box without scrolling in it, an equation number over its equation.
# Hidden inputs (the theme's hide-input toggle) are checked after expanding them: a reader who
# opens one must not meet a scrolling cell either.
_OVERFLOW_JS = """
(phone) => {
  const found = [];
  // Every collapsed input (the theme's hide-input toggle) opens and shows its code; a folded output (hide-output)
  // opens too, and holds no code.
  document.querySelectorAll('details.hide').forEach(d => {
    d.open = true;
    if (!d.classList.contains('above-input')) return;
    const code = d.querySelector('.cell_input');
    if (!code || code.offsetHeight === 0) found.push('a hidden input does not expand: ' + d.textContent.trim().slice(0, 60));
  });
  document.querySelectorAll('details').forEach(d => { d.open = true; });
  const doc = document.documentElement;
  if (doc.scrollWidth > window.innerWidth + 1) found.push(`the page is ${doc.scrollWidth} px wide`);
  const wide = (n) => n.scrollWidth > n.clientWidth + 1 && n.offsetParent !== null;
  const scrolls = (n) => ['auto', 'scroll'].includes(getComputedStyle(n).overflowX);
  document.querySelectorAll('.cell_input pre').forEach(n => {
    if (wide(n)) found.push(`code scrolls (${n.scrollWidth} > ${n.clientWidth} px): ` +
                            n.textContent.split('\\n').sort((a, b) => b.length - a.length)[0].slice(0, 60));
  });
  document.querySelectorAll('article table').forEach(t => {
    if (t.offsetParent === null || t.closest('.cell_output')) return;
    const box = t.closest('.table-wrapper, .pst-scrollable-table-container') || t.parentElement;
    if (box.scrollWidth <= box.clientWidth + 1) return;
    if (!phone) found.push(`table scrolls (${box.scrollWidth} > ${box.clientWidth} px): ` + t.textContent.trim().slice(0, 60));
    else if (!scrolls(box)) found.push(`table cut off (${box.scrollWidth} > ${box.clientWidth} px): ` + t.textContent.trim().slice(0, 60));
  });
  document.querySelectorAll('mjx-container[display="true"]').forEach(m => {
    if (m.offsetParent === null) return;
    const right = m.getBoundingClientRect().left + m.scrollWidth;  // where the equation's content ends
    let limit = doc.clientWidth;
    for (let n = m; n && n !== document.body; n = n.parentElement) {
      const o = getComputedStyle(n).overflowX;
      if (o === 'auto' || o === 'scroll') return;  // it scrolls inside its own box
      if (o === 'hidden' || o === 'clip') limit = Math.min(limit, n.getBoundingClientRect().right);
    }
    if (right > limit + 1) found.push('a display equation is cut off or runs off the page: ' + m.textContent.slice(0, 40));
  });
  document.querySelectorAll('div.math').forEach(d => {
    const number = d.querySelector(':scope > .eqno'), eq = d.querySelector('mjx-container');
    if (!number || !eq || d.offsetParent === null) return;
    const a = number.getBoundingClientRect(), b = eq.getBoundingClientRect();
    if (a.left < b.right - 1 && b.left < a.right - 1 && a.top < b.bottom - 1 && b.top < a.bottom - 1)
      found.push('an equation runs under its number ' + number.textContent.replace('#', '').trim());
    if (a.right > doc.clientWidth + 1) found.push('an equation number is cut off: ' + number.textContent);
  });
  return found;
}
"""

# Words and numbers split across lines inside a table cell ("2.064|7", "repr|oduc|es"): a token with
# no break opportunity of its own whose glyphs sit on more than one line. Code (identifiers) may break.
_SPLIT_JS = r"""
() => {
  const found = [];
  for (const cell of document.querySelectorAll('article td, article th')) {
    if (cell.offsetParent === null || cell.closest('table.indextable')) continue;  // the index lists identifiers
    const walker = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT, {acceptNode: n =>
      n.parentElement.closest('code, pre, mjx-container, .claim-id') ? NodeFilter.FILTER_REJECT : NodeFilter.FILTER_ACCEPT});
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      const re = /[^\s\-\u2010-\u2015\/|]{2,}/g;
      for (let m = re.exec(node.data); m; m = re.exec(node.data)) {
        const range = document.createRange();
        range.setStart(node, m.index); range.setEnd(node, m.index + m[0].length);
        const tops = new Set([...range.getClientRects()].filter(r => r.width > 0).map(r => Math.round(r.top)));
        if (tops.size > 1) { found.push(m[0]); if (found.length >= 5) return found; }
      }
    }
  }
  return found;
}
"""

# Contrast of every verdict and claim status against what is behind it (the first opaque background
# up the tree), in the light and in the dark theme.
_CONTRAST_JS = """
(minimum) => {
  const rgb = (c) => (c.match(/[\\d.]+/g) || []).map(Number);
  const channel = (v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; };
  const lum = ([r, g, b]) => 0.2126 * channel(r) + 0.7152 * channel(g) + 0.0722 * channel(b);
  const behind = (el) => {
    for (let n = el; n; n = n.parentElement) {
      const c = rgb(getComputedStyle(n).backgroundColor);
      if (c.length === 3 || (c.length === 4 && c[3] > 0.5)) return c.slice(0, 3);
    }
    return [255, 255, 255];
  };
  const found = [];
  const root = document.documentElement, before = root.dataset.theme;
  for (const theme of ['light', 'dark']) {
    root.dataset.theme = theme;
    for (const el of document.querySelectorAll('.verdict, .claim-status')) {
      if (el.offsetParent === null) continue;
      const fg = lum(rgb(getComputedStyle(el).color)), bg = lum(behind(el));
      const ratio = (Math.max(fg, bg) + 0.05) / (Math.min(fg, bg) + 0.05);
      if (ratio < minimum) found.push(`${theme}: "${el.textContent.trim()}" at ${ratio.toFixed(2)}:1`);
    }
  }
  root.dataset.theme = before;
  return [...new Set(found)].slice(0, 8);
}
"""

# The page's chrome: how many search boxes a reader sees, and whether an (empty) header bar is shown.
_CHROME_JS = """
() => {
  const shown = (n) => n.offsetParent !== null && getComputedStyle(n).visibility !== 'hidden' && n.getClientRects().length;
  // The search page's own form is its content, not a second box.
  const search = [...document.querySelectorAll('.search-button-field, .search-button, form.bd-search')]
    .filter(n => shown(n) && !n.closest('article, .bd-article, .bd-search-container'));
  const header = document.querySelector('#pst-header');
  return {search: search.length, header: header && shown(header) ? Math.round(header.getBoundingClientRect().height) : 0};
}
"""

# Every figure of the page (a PNG in the article): its pixel width and the width it is shown at.
_FIGURES_JS = """
() => [...document.querySelectorAll('article figure img, article .cell_output img')]  // figures, not page icons
  .filter(img => img.offsetParent !== null && /\\.png([?#]|$)/i.test(img.currentSrc || img.src))
  .map(img => ({src: img.currentSrc || img.src, natural: img.naturalWidth, shown: img.getBoundingClientRect().width}))
"""
#: The smallest text a figure may show, in CSS px as displayed, and the least it may be scaled.
MIN_FIGURE_TEXT_PX = 8.0
MIN_FIGURE_SCALE = 0.5


def _figure_problems(figures: list[dict]) -> list[str]:
    """Return what makes a shown figure hard to read: scaled below :data:`MIN_FIGURE_SCALE`, or text under
    :data:`MIN_FIGURE_TEXT_PX` as displayed, computed from the smallest font the PNG records (points, written
    by :func:`attention_dynamics.core.plotting.figure_png`), its dpi and the scale it is shown at."""
    import io
    import urllib.request

    from PIL import Image

    from attention_dynamics.core.plotting import SMALLEST_FONT_KEY

    problems = []
    for fig in figures:
        name = fig["src"].rsplit("/", 1)[-1][:40]
        if not fig["natural"]:
            continue  # a broken image is reported on its own
        scale = fig["shown"] / fig["natural"]
        if scale < MIN_FIGURE_SCALE - 1e-3:
            problems.append(f"figure {name} is shown at {scale:.0%} of its {fig['natural']} px")
        with urllib.request.urlopen(fig["src"], timeout=30) as response:
            info = Image.open(io.BytesIO(response.read())).info
        if SMALLEST_FONT_KEY not in info or "dpi" not in info:
            problems.append(f"figure {name} records no smallest font or dpi (draw it with plotting.glue_figure)")
            continue
        text_px = float(info[SMALLEST_FONT_KEY]) * float(info["dpi"][0]) / 72.0 * scale
        if text_px < MIN_FIGURE_TEXT_PX - 1e-3:
            problems.append(f"figure {name}: its smallest text is {text_px:.1f} px as shown "
                            f"({info[SMALLEST_FONT_KEY]} pt at {float(info['dpi'][0]):.0f} dpi, shown at {scale:.0%})")
    return problems


_REDIRECT = re.compile(r'<meta[^>]*http-equiv="refresh"[^>]*url=([^"]+)"', re.IGNORECASE)


def _check_page(context, base_url: str, path: str, source: str, screenshot: Path, *, top_shots: bool = False) -> PageReport:
    """Open one page and report every problem the browser sees on it, at the desktop and at a phone's width.

    ``top_shots``: also keep a screenshot of the page's first screen at both widths, light and dark.
    """
    report = PageReport(path)
    page = context.new_page()

    def on_request(request):
        parts = urlsplit(request.url)
        if parts.scheme in ("http", "https", "ws", "wss") and parts.hostname != LOCAL_HOST:
            report.problems.append(f"request left the machine: {request.url}")

    def on_response(response):
        if response.status >= 400:
            report.problems.append(f"HTTP {response.status} for {response.url}")

    page.on("request", on_request)
    page.on("response", on_response)
    page.on("requestfailed", lambda r: report.problems.append(f"request failed: {r.url} ({r.failure})"))
    page.on("console", lambda m: m.type == "error" and report.problems.append(f"console error: {m.text}"))
    page.on("pageerror", lambda exc: report.problems.append(f"uncaught exception: {exc}"))
    try:
        page.goto(f"{base_url}/{path}", wait_until="load", timeout=60_000)
        if redirect := _REDIRECT.search(source):  # index.html: check the page it lands on
            page.wait_for_url(f"**/{redirect.group(1).strip()}", wait_until="load", timeout=30_000)
        page.wait_for_function("() => !window.MathJax || (window.MathJax.startup && window.MathJax.startup.promise)",
                               timeout=30_000)
        math = page.evaluate(_MATH_JS)
        report.formulas = math["formulas"]
        if math["formulas"] and not math["loaded"]:
            report.problems.append(f"{math['formulas']} formulas but MathJax did not load")
        if math["loaded"]:
            if math["unrendered"]:
                report.problems.append(f"formulas MathJax did not render: {math['unrendered'][:5]}")
            if math["errors"]:
                report.problems.append(f"TeX errors: {math['errors'][:5]}")
        raw = page.evaluate(_RAW_TEX_JS)
        if raw:
            report.problems.append(f"raw TeX in the text: {raw}")
        images = page.evaluate(_IMAGES_JS)
        report.images = images["count"]
        if images["broken"]:
            report.problems.append(f"images that did not load: {images['broken']}")
        contrast = page.evaluate(_CONTRAST_JS, MIN_CONTRAST)
        if contrast:
            report.problems.append(f"verdict or status colours below {MIN_CONTRAST}:1: {contrast}")
        screenshot.parent.mkdir(parents=True, exist_ok=True)
        for viewport in (VIEWPORT, PHONE) if top_shots else ():  # the first screen, as a reader sees it
            page.set_viewport_size(viewport)
            page.wait_for_timeout(500)  # the theme's sidebar slides away when the window narrows
            for theme in ("light", "dark"):
                page.evaluate("(t) => { document.documentElement.dataset.theme = t; window.scrollTo(0, 0); }", theme)
                page.wait_for_timeout(100)
                page.screenshot(path=str(screenshot.with_name(f"{screenshot.stem}-top-{viewport['width']}-{theme}.png")))
        page.evaluate("() => { document.documentElement.dataset.theme = 'light'; }")
        for viewport, phone in ((VIEWPORT, False), (PHONE, True)):
            page.set_viewport_size(viewport)
            page.wait_for_timeout(100)
            if not phone:  # figures are sized for the desktop column (a phone shows them at its width)
                report.problems += [f"at {viewport['width']} px: {p}" for p in _figure_problems(page.evaluate(_FIGURES_JS))]
            overflow = page.evaluate(_OVERFLOW_JS, phone)
            if overflow:
                report.problems.append(f"at {viewport['width']} px: {overflow[:5]}")
            split = page.evaluate(_SPLIT_JS)
            if split:
                report.problems.append(f"at {viewport['width']} px, split inside a table cell: {split}")
            chrome = page.evaluate(_CHROME_JS)
            if chrome["search"] > 1 or chrome["header"]:
                report.problems.append(f"at {viewport['width']} px: {chrome['search']} search boxes, a header bar of "
                                       f"{chrome['header']} px (one search box, no empty bar)")
        page.set_viewport_size(VIEWPORT)
        page.wait_for_timeout(200)  # let late console messages arrive
        # The whole page, down to SCREENSHOT_MAX_HEIGHT (the API page is over 100 000 px tall).
        height = min(page.evaluate("() => document.documentElement.scrollHeight"), SCREENSHOT_MAX_HEIGHT)
        page.screenshot(path=str(screenshot), full_page=True, timeout=120_000,
                        clip={"x": 0, "y": 0, "width": VIEWPORT["width"], "height": height})
    except Exception as exc:  # a timeout or a crashed page is a finding about this page
        report.problems.append(f"{type(exc).__name__}: {str(exc).splitlines()[0]}")
    finally:
        page.close()
    return report


@pytest.mark.slow
def test_every_page_in_headless_chromium(built_book, local_server, tmp_path):
    """Open every page at 1280 and 390 px: math rendered, no raw TeX, images loaded, no console error, no
    remote request, nothing scrolling the page sideways or cut off, no word or number split in a table
    cell, verdict colours readable in both themes.

    The front page and every chapter also leave screenshots of their first screen at both widths, light
    and dark (``<name>-top-<width>-<theme>.png``).
    """
    pages = [p.relative_to(built_book.html).as_posix() for p in built_book.pages()]
    assert pages, "the build produced no pages"
    reports = []
    first_screens = {"book/intro.html", *(f"book/{nb.stem}.html" for nb in _chapter_notebooks())}
    with _chromium_context(tmp_path / "chromium-profile") as context:
        for path in pages:
            shot = built_book.screenshots / (path.removesuffix(".html").replace("/", "__") + ".png")
            source = (built_book.html / path).read_text(encoding="utf-8")
            reports.append(_check_page(context, local_server, path, source, shot, top_shots=path in first_screens))

    failures = {r.path: r.problems for r in reports if r.problems}
    summary = "\n".join(f"  {r.path}: {r.formulas} formulas, {r.images} images" for r in reports)
    print(f"\nOpened {len(reports)} pages in Chromium; screenshots in {built_book.screenshots}\n{summary}")
    assert not failures, "pages with problems:\n" + "\n".join(
        f"  {path}:\n" + "\n".join(f"    - {p}" for p in problems) for path, problems in failures.items()
    )
    chapters = [r for r in reports if re.match(r"book/\d\d-", r.path)]
    assert chapters and all(r.formulas > 0 for r in chapters), "a chapter page shows no typeset formula"
    assert len(list(built_book.screenshots.glob("*-top-*.png"))) == 4 * len(first_screens)
    assert len([p for p in built_book.screenshots.glob("*.png") if "-top-" not in p.name]) == len(pages)


BROKEN_PAGE = r"""<!DOCTYPE html>
<html><head><meta charset="utf-8"><link rel="icon" href="data:,">
<script>window.MathJax = {tex: {packages: {"[-]": ["noundefined"]}},
  options: {processHtmlClass: "math", ignoreHtmlClass: "document"}};</script>
<script defer src="mathjax/tex-chtml.js"></script>
<script src="https://cdn.example.org/library.js"></script>
</head><body><header id="pst-header" style="height: 60px"><button class="search-button-field">Search</button></header>
<div class="document"><button class="search-button">Search</button>
<p>Rendered: <span class="math">\(x^2\)</span>. Undefined macro: <span class="math">\(\nosuchmacro\)</span>.</p>
<p>Left raw: $$ y = x^2 $$</p>
<img src="missing.png" alt="a figure that does not exist">
<article><figure><img src="tiny-text.png" alt="a wide figure with small text" style="width: 600px"></figure><figure><img src="bare.png" alt="a figure from elsewhere"></figure><img src="icon.png" alt="a page icon, not a figure"><div class="cell_input"><div class="highlight"><pre style="overflow-x: auto; width: 300px">claims.record("a.claim", value, description="a description far too long for the column it sits in ....")</pre></div></div>
<details class="hide above-input"><summary>Show code cell source</summary><div class="output">no code in here</div></details>
<details class="hide above-output"><summary>Show the table</summary><div class="output">a folded output, not code</div></details>
<div class="table-wrapper" style="overflow-x: auto; width: 300px"><table><tr><td style="white-space: nowrap">a table whose one row is much wider than its column can ever show</td></tr></table></div>
<table style="width: 60px"><tr><td style="overflow-wrap: anywhere; width: 40px">2.06473191</td></tr></table>
<p style="background: #29313d"><span class="verdict" style="color: #b00020">does not reproduce</span></p>
<div style="width: 600px">a block wider than a phone</div>
<div class="math" style="position: relative"><span class="eqno" style="position: absolute; left: 0; top: 0">(1.1)</span>\[ a + b = c \]</div>
<div class="math" style="width: 100px; overflow: hidden">\[ x_1 + x_2 + x_3 + x_4 + x_5 + x_6 + x_7 + x_8 + x_9 \]</div></article>
<script>console.error("a script failed");</script>
</div></body></html>
"""


@pytest.mark.slow
def test_page_checks_catch_a_broken_page(tmp_path):
    """The browser checks find each defect of a deliberately broken page (they can fail)."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "mathjax").symlink_to(_ext_module("offline_assets").packaged_mathjax_dir(), target_is_directory=True)
    (site / "broken.html").write_text(BROKEN_PAGE, encoding="utf-8")
    from PIL import Image
    from PIL.PngImagePlugin import PngInfo

    from attention_dynamics.core.plotting import SMALLEST_FONT_KEY

    meta = PngInfo()
    meta.add_text(SMALLEST_FONT_KEY, "7")
    Image.new("RGB", (1800, 300), "white").save(site / "tiny-text.png", dpi=(110, 110), pnginfo=meta)
    Image.new("RGB", (200, 100), "white").save(site / "bare.png")
    Image.new("RGB", (16, 16), "white").save(site / "icon.png")  # a page icon: no figure, no figure check
    no_mathjax = ('<!DOCTYPE html><html><head><link rel="icon" href="data:,"></head>'
                  '<body><span class="math">\\(x\\)</span></body></html>')
    (site / "no-mathjax.html").write_text(no_mathjax, encoding="utf-8")
    with _serve(site) as url, _chromium_context(tmp_path / "profile") as context:
        report = _check_page(context, url, "broken.html", BROKEN_PAGE, tmp_path / "broken.png")
        unserved = _check_page(context, url, "no-mathjax.html", no_mathjax, tmp_path / "no-mathjax.png")
    assert any("MathJax did not load" in p for p in unserved.problems), unserved.problems
    assert any("raw TeX" in p for p in unserved.problems), unserved.problems
    found = "\n".join(report.problems)
    assert report.formulas == 4
    for expected in ("request left the machine: https://cdn.example.org/library.js",
                     "TeX errors: ['Undefined control sequence",
                     "raw TeX in the text", "images that did not load", "HTTP 404", "console error: a script failed",
                     "code scrolls", "table scrolls", "a hidden input does not expand",
                     "split inside a table cell: ['2.06473191']", "verdict or status colours below 4.5:1",
                     "px wide", "an equation runs under its number (1.1)",
                     "a display equation is cut off or runs off the page",
                     "at 1280 px: 2 search boxes, a header bar of 60 px",
                     "figure tiny-text.png is shown at 33% of its 1800 px",
                     "figure tiny-text.png: its smallest text is 3.6 px as shown (7 pt at 110 dpi, shown at 33%)",
                     "figure bare.png records no smallest font or dpi"):
        assert expected in found, f"not reported: {expected!r}; the report was:\n{found}"
    assert "icon.png" not in found, "a page icon is not a figure"
    assert "does not expand: Show the table" not in found, "a folded output is not a hidden input"
    assert (tmp_path / "broken.png").exists()


# --------------------------------------------------------------------------------------------
# The reader's pages: the front page's first screen, the popovers of glued numbers, clean chapter pages
# --------------------------------------------------------------------------------------------

#: The first screen of the front page, as a desktop reader opens it.
FIRST_SCREEN = {"width": 1280, "height": 800}
#: The smallest a figure's text may be shown on a phone (CSS px); a wide figure scrolls rather than shrink below it.
MIN_PHONE_FIGURE_TEXT_PX = 6.5

# What the front page shows in its first screen: the thesis, the diagram of the mechanism, the findings.
_FRONT_JS = """
() => {
  const shown = (n) => n && n.offsetParent !== null && n.getClientRects().length > 0;
  const box = (n) => { const r = n.getBoundingClientRect(); return {top: r.top, bottom: r.bottom, height: r.height}; };
  const thesis = document.querySelector('.front-thesis');
  const images = [...document.querySelectorAll('.front-diagram img')].filter(shown);
  const items = [...document.querySelectorAll('ol.book-findings > li')];
  const board = document.querySelector('.verdict-scoreboard');
  const labels = board ? [...board.querySelectorAll('.scoreboard-counts .verdict')].map(n => n.textContent.trim()) : [];
  return {
    thesis: thesis ? {text: thesis.innerText.trim(), ...box(thesis)} : null,
    images: images.map(img => ({src: img.currentSrc || img.src, loaded: img.complete && img.naturalWidth > 0, ...box(img)})),
    items: items.map(li => ({text: li.innerText.trim(), label: !!li.querySelector('.verdict'),
                             number: !!li.querySelector('.claim-number'), link: !!li.querySelector('a[href*="#"]'),
                             ...box(li)})),
    findingsBeforeBoard: !!(board && items.length &&
      (items[items.length - 1].compareDocumentPosition(board) & Node.DOCUMENT_POSITION_FOLLOWING)),
    labels,
    height: window.innerHeight,
  };
}
"""


@pytest.mark.slow
def test_front_page_tells_the_story_on_its_first_screen(built_book, local_server, tmp_path):
    """At 1280 × 800, light and dark: the thesis in at most three sentences, the mechanism's diagram (the theme's
    copy), at most eight findings, each one sentence with its label, a number from the ledger and a link to its
    evidence, all on the first screen; the scoreboard follows, in the reader's labels, with no empty label."""
    from attention_dynamics.ledger.verdicts import READER_LABELS

    problems = []
    with _chromium_context(tmp_path / "profile") as context:
        page = context.new_page()
        page.set_viewport_size(FIRST_SCREEN)
        page.goto(f"{local_server}/book/intro.html", wait_until="load")
        page.wait_for_function("() => !window.MathJax || MathJax.startup.promise", timeout=30_000)
        for theme in ("light", "dark"):
            page.evaluate("(t) => { document.documentElement.dataset.theme = t; window.scrollTo(0, 0); }", theme)
            page.wait_for_timeout(300)
            found = page.evaluate(_FRONT_JS)
            bottom = found["height"]
            thesis = found["thesis"]
            if not thesis:
                problems.append(f"{theme}: no thesis (.front-thesis)")
            else:
                sentences = [s for s in re.split(r"(?<=[.!?])\s+(?=[A-Z])", thesis["text"]) if s.strip()]
                if len(sentences) > 3:
                    problems.append(f"{theme}: the thesis has {len(sentences)} sentences (at most 3)")
                if thesis["bottom"] > bottom:
                    problems.append(f"{theme}: the thesis ends below the first screen ({thesis['bottom']:.0f} px)")
            images = found["images"]
            wanted = f"mechanism-{theme}.svg"
            if len(images) != 1 or not images[0]["src"].endswith(wanted) or not images[0]["loaded"]:
                problems.append(f"{theme}: the diagram shown is {[i['src'].rsplit('/', 1)[-1] for i in images]}, "
                                f"not {wanted} alone")
            elif images[0]["bottom"] > bottom or images[0]["height"] < 200:
                problems.append(f"{theme}: the diagram is not on the first screen whole ({images[0]})")
            items = found["items"]
            if not 1 <= len(items) <= 8:
                problems.append(f"{theme}: {len(items)} findings (one to eight)")
            for k, item in enumerate(items, start=1):
                text = re.sub(r"→ chapter \d+\s*$", "", item["text"]).strip()
                if len([s for s in re.split(r"(?<=[.!?])\s+(?=[A-Z])", text) if s.strip()]) != 1:
                    problems.append(f"{theme}: finding {k} is not one sentence: {text[:80]}")
                if not (item["label"] and item["number"] and item["link"]):
                    problems.append(f"{theme}: finding {k} lacks its label, its number or its link")
            if items and items[-1]["bottom"] > bottom:
                problems.append(f"{theme}: the findings end below the first screen ({items[-1]['bottom']:.0f} > "
                                f"{bottom} px)")
            if not found["findingsBeforeBoard"]:
                problems.append(f"{theme}: the scoreboard does not follow the findings")
            shown_labels = [re.sub(r"^\W+", "", t).rsplit(":", 1) for t in found["labels"]]
            if not shown_labels or any(len(x) != 2 or x[0].strip() not in set(READER_LABELS.values())
                                       or int(x[1]) == 0 for x in shown_labels):
                problems.append(f"{theme}: the scoreboard's labels are {found['labels']}")
        page.screenshot(path=str(tmp_path / "front.png"))
    assert not problems, "\n".join(problems)


@pytest.mark.slow
def test_a_glued_claim_number_shows_its_popover(built_book, local_server, tmp_path):
    """Hover, keyboard focus and a tap show a glued claim number's popover (the paper's value, its status in the
    reader's words, a link); the link lands on the number's row of the reproducibility page."""
    chapter = next(nb.stem for nb in _chapter_notebooks()
                   if "claim-number" in (built_book.html / "book" / f"{nb.stem}.html").read_text(encoding="utf-8"))
    statuses = ("holds", "does not hold", "open at this scale", "the book's own number", "the book’s own number")
    with _chromium_context(tmp_path / "profile") as context:
        page = context.new_page()
        page.goto(f"{local_server}/book/{chapter}.html", wait_until="load")
        number = page.locator(".claim-number").first
        number.scroll_into_view_if_needed()
        popover = number.locator(".claim-popover")
        assert not popover.is_visible(), "the popover shows before it is asked for"
        number.hover()
        popover.wait_for(state="visible", timeout=5_000)
        text = popover.inner_text()
        assert "paper" in text and any(s in text for s in statuses), text
        described = number.get_attribute("aria-describedby")
        assert described and popover.get_attribute("id") == described and popover.get_attribute("role") == "tooltip"
        assert number.get_attribute("tabindex") == "0"
        page.mouse.move(0, 0)
        popover.wait_for(state="hidden", timeout=5_000)
        number.focus()  # the keyboard
        popover.wait_for(state="visible", timeout=5_000)
        page.keyboard.press("Escape")
        popover.wait_for(state="hidden", timeout=5_000)
        page.evaluate("() => document.activeElement.blur()")
        page.mouse.move(0, 0)
        number.dispatch_event("click")  # a tap
        assert "open" in (number.get_attribute("class") or "") and popover.is_visible()
        number.dispatch_event("click")
        assert "open" not in (number.get_attribute("class") or "")
        number.hover()
        link = popover.locator("a")
        href = link.get_attribute("href")
        assert href and re.search(r"reproducibility\.html#claim-[\w-]+$", href), href
        link.click()
        page.wait_for_url(f"**/book/{href}", timeout=10_000)
        anchor = href.split("#", 1)[1]
        row = page.locator(f"#{anchor}")
        assert row.count() == 1 and row.is_visible(), f"no row {anchor} on the reproducibility page"
        assert page.evaluate("(id) => { const r = document.getElementById(id).getBoundingClientRect(); "
                             "return r.top >= -2 && r.top < window.innerHeight; }", anchor), "the link does not land"


# Problems of a chapter page a reader would see: a code cell that opens with imports, a hidden input that is not
# collapsed, a raw Python repr or a table with identifiers as column labels in an output, a display equation wider
# than its box, a glued number in bold where the author did not ask for it, a settings table below 4.5:1.
_CLEAN_JS = """
() => {
  const found = [];
  const shown = (n) => n.offsetParent !== null && n.getClientRects().length > 0;
  document.querySelectorAll('.cell').forEach(cell => {
    const input = cell.querySelector('.cell_input');
    if (!input) return;  // remove-input: no code at all
    const folded = input.closest('details');
    if (folded) {  // (a closed <details> keeps laying its content out: ask whether it is drawn)
      const drawn = input.checkVisibility ? input.checkVisibility() : input.offsetHeight > 0;
      if (folded.open || drawn) found.push('a hidden input shows its code: ' + input.innerText.trim().slice(0, 50));
      return;
    }
    if (!shown(input)) return;
    const lines = input.innerText.split('\\n').map(l => l.trim()).filter(l => l && !l.startsWith('#'));
    if (lines.length && /^(import\\s|from\\s+\\S+\\s+import\\s)/.test(lines[0]))
      found.push('a code cell that opens with imports is shown: ' + lines[0].slice(0, 60));
  });
  const reprs = [/\\b[A-Z]\\w*Settings\\(/, /\\{'/, /\\barray\\(/, /<attention_dynamics/, /\\bnp\\.\\w+\\(/, /\\btensor\\(/,
                 /object at 0x/];
  document.querySelectorAll('.cell_output, .pasted-inline').forEach(out => {
    if (!shown(out)) return;
    const text = out.innerText;
    for (const re of reprs) {
      const m = text.match(re);
      if (m) { found.push('a raw Python repr: ' + text.slice(Math.max(0, m.index - 20), m.index + 40).replace(/\\s+/g, ' ')); break; }
    }
  });
  document.querySelectorAll('article table').forEach(t => {
    if (!shown(t) || !t.closest('.cell_output, .pasted-inline, .output')) return;
    const labels = [...t.querySelectorAll('thead th')].map(th => th.innerText.trim()).filter(x => x);
    const snake = labels.filter(x => /^[a-z][a-z0-9]*(_[a-z0-9]+)+$/.test(x));
    if (snake.length) found.push('a raw data frame (identifiers for column labels): ' + snake.slice(0, 4).join(', '));
  });
  document.querySelectorAll('mjx-container[display="true"]').forEach(m => {
    if (!shown(m)) return;
    if (m.scrollWidth > m.clientWidth + 1)
      found.push(`a display equation is wider than its box (${m.scrollWidth} > ${m.clientWidth} px): ` + m.textContent.slice(0, 30));
  });
  document.querySelectorAll('article p span.pasted-text').forEach(n => {
    if (!shown(n) || n.closest('strong, b, th, .claim-popover')) return;
    const mine = getComputedStyle(n).fontWeight, around = getComputedStyle(n.closest('p')).fontWeight;
    if (mine !== around) found.push(`a glued number in weight ${mine} in text of weight ${around}: ` + n.textContent);
  });
  const rgb = (c) => (c.match(/[\\d.]+/g) || []).map(Number);
  const channel = (v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; };
  const lum = ([r, g, b]) => 0.2126 * channel(r) + 0.7152 * channel(g) + 0.0722 * channel(b);
  const behind = (el) => {
    for (let n = el; n; n = n.parentElement) {
      const c = rgb(getComputedStyle(n).backgroundColor);
      if (c.length === 3 || (c.length === 4 && c[3] > 0.5)) return c.slice(0, 3);
    }
    return document.documentElement.dataset.theme === 'dark' ? [18, 18, 18] : [255, 255, 255];
  };
  document.querySelectorAll('table.settings-table td, table.settings-table td code').forEach(el => {
    if (!shown(el)) return;
    const fg = lum(rgb(getComputedStyle(el).color)), bg = lum(behind(el));
    const ratio = (Math.max(fg, bg) + 0.05) / (Math.min(fg, bg) + 0.05);
    if (ratio < 4.5) found.push(`a settings table entry at ${ratio.toFixed(2)}:1: ` + el.textContent.trim().slice(0, 30));
  });
  return [...new Set(found)];
}
"""


def _clean_page_problems(page) -> list[str]:
    """Return what :data:`_CLEAN_JS` finds on the open page at 1280 and 390 px, in the light and the dark theme."""
    problems = []
    for viewport in (VIEWPORT, PHONE):
        page.set_viewport_size(viewport)
        page.wait_for_timeout(400)  # the sidebar, and the equations refitted to the width
        for theme in ("light", "dark"):
            page.evaluate("(t) => { document.documentElement.dataset.theme = t; }", theme)
            page.wait_for_timeout(100)
            problems += [f"{viewport['width']} px, {theme}: {p}" for p in page.evaluate(_CLEAN_JS)]
    return problems


@pytest.mark.slow
def test_chapter_pages_are_clean(built_book, local_server, tmp_path):
    """Every chapter at 1280 and 390 px, light and dark: no code cell that opens with imports (hidden inputs
    collapsed), no raw Python repr or raw data frame, no display equation wider than its box, glued numbers in the
    body's weight, the settings table readable."""
    failures = {}
    with _chromium_context(tmp_path / "profile") as context:
        page = context.new_page()
        for nb in _chapter_notebooks():
            page.goto(f"{local_server}/book/{nb.stem}.html", wait_until="load")
            page.wait_for_function("() => !window.MathJax || MathJax.startup.promise", timeout=30_000)
            page.evaluate("() => MathJax.startup.promise")
            found = _clean_page_problems(page)
            if found:
                failures[nb.stem] = found
    assert not failures, "chapter pages a reader would find untidy:\n" + "\n".join(
        f"  {name}:\n" + "\n".join(f"    - {p}" for p in found[:12]) for name, found in failures.items())


# Every figure shown on the page, with what its smallest text needs: an SVG's width (pt) and smallest font (pt) are
# read from the file, a PNG's font (pt) and dpi from its metadata (by the test).
_PHONE_FIGURES_JS = """
async () => {
  const figures = [...document.querySelectorAll('article figure img, article .cell_output img')]
    .filter(img => img.offsetParent !== null && /\\.(png|svg)([?#]|$)/i.test(img.currentSrc || img.src));
  const out = [];
  for (const img of figures) {
    const src = img.currentSrc || img.src;
    const item = {src, shown: img.getBoundingClientRect().width, natural: img.naturalWidth, svg: null};
    if (/\\.svg/i.test(src)) item.svg = (await (await fetch(src)).text()).slice(0, 4000);
    out.push(item);
  }
  return {figures: out, pageWidth: document.documentElement.scrollWidth, window: window.innerWidth};
}
"""


def _phone_figure_problems(found: dict) -> list[str]:
    """Return the figures whose smallest text is under :data:`MIN_PHONE_FIGURE_TEXT_PX` as shown (and a page that
    scrolls sideways)."""
    import io
    import urllib.request

    from PIL import Image

    from attention_dynamics.core.plotting import SMALLEST_FONT_KEY, svg_facts

    problems = []
    if found["pageWidth"] > found["window"] + 1:
        problems.append(f"the page is {found['pageWidth']} px wide")
    for fig in found["figures"]:
        name = fig["src"].rsplit("/", 1)[-1][:40]
        if fig["svg"] is not None:
            facts = svg_facts(fig["svg"])
            if facts is None:
                problems.append(f"figure {name} records no smallest font (draw it with plotting.glue_figure)")
                continue
            text_px = facts[1] * fig["shown"] / facts[0]
        else:
            if not fig["natural"]:
                continue
            with urllib.request.urlopen(fig["src"], timeout=30) as response:
                info = Image.open(io.BytesIO(response.read())).info
            if SMALLEST_FONT_KEY not in info or "dpi" not in info:
                problems.append(f"figure {name} records no smallest font or dpi")
                continue
            text_px = float(info[SMALLEST_FONT_KEY]) * float(info["dpi"][0]) / 72.0 * fig["shown"] / fig["natural"]
        if text_px < MIN_PHONE_FIGURE_TEXT_PX - 1e-3:
            problems.append(f"figure {name}: its smallest text is {text_px:.1f} px on a phone")
    return problems


@pytest.mark.slow
def test_figures_are_legible_on_a_phone(built_book, local_server, tmp_path):
    """At 390 px every figure's smallest text is at least 6.5 CSS px (a wide SVG figure keeps a minimum width and
    scrolls inside its box), and the page itself does not scroll sideways."""
    failures = {}
    with _chromium_context(tmp_path / "profile") as context:
        page = context.new_page()
        page.set_viewport_size(PHONE)
        for path in ["book/intro.html", *(f"book/{nb.stem}.html" for nb in _chapter_notebooks())]:
            page.goto(f"{local_server}/{path}", wait_until="load")
            page.wait_for_timeout(300)
            found = _phone_figure_problems(page.evaluate(_PHONE_FIGURES_JS))
            if found:
                failures[path] = found
    assert not failures, "figures a phone cannot read:\n" + "\n".join(
        f"  {name}:\n" + "\n".join(f"    - {p}" for p in found[:10]) for name, found in failures.items())


DIRTY_PAGE = r"""<!DOCTYPE html>
<html><head><meta charset="utf-8"><link rel="icon" href="data:,"><link rel="stylesheet" href="book.css">
<script>window.MathJax = {startup: {typeset: true}};</script><script defer src="mathjax/tex-chtml.js"></script>
</head><body><article class="bd-article">
<div class="cell"><div class="cell_input"><pre>import torch
from attention_dynamics import plotting</pre></div></div>
<div class="cell"><details class="hide" open><summary>Show code</summary><div class="cell_input"><pre>x = 1</pre></div></details></div>
<div class="cell"><div class="cell_output"><pre>ToySettings(steps=3) {'a': 1} array([1, 2])</pre></div></div>
<div class="cell"><div class="cell_output"><table class="dataframe"><thead><tr><th>final_loss</th><th>Steps</th></tr></thead>
<tbody><tr><td>1</td><td>2</td></tr></tbody></table></div></div>
<div class="math" style="width: 200px">\[ x_1 + x_2 + x_3 + x_4 + x_5 + x_6 + x_7 + x_8 + x_9 + x_{10} + x_{11} + x_{12} \]</div>
<p>A glued <span class="pasted-text" style="font-weight: bold">0.25</span> in bold, a chosen
<strong><span class="pasted-text">0.5</span></strong>.</p>
<div class="cell"><div class="cell_output"><table class="settings-table"><tbody><tr><td style="color: #f3c7ee; background: #ced6dd">lr</td><td>1</td></tr></tbody></table></div></div>
<figure><img src="small.svg" alt="a wide figure with small text" style="width: 100%"></figure>
</article></body></html>"""


@pytest.mark.slow
def test_clean_page_checks_catch_a_dirty_page(tmp_path):
    """The checks of clean chapter pages and of figures on a phone find each defect of a deliberately dirty page."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "mathjax").symlink_to(_ext_module("offline_assets").packaged_mathjax_dir(), target_is_directory=True)
    (site / "book.css").write_text(_ext_module("book_tables").BOOK_CSS, encoding="utf-8")
    (site / "dirty.html").write_text(DIRTY_PAGE, encoding="utf-8")
    from attention_dynamics.core.plotting import SVG_SMALLEST_FONT_ATTR

    (site / "small.svg").write_text(f'<svg xmlns="http://www.w3.org/2000/svg" {SVG_SMALLEST_FONT_ATTR}="8" '
                                    'width="600pt" height="200pt" viewBox="0 0 600 200"><rect width="600" '
                                    'height="200" fill="#eee"/></svg>', encoding="utf-8")
    with _serve(site) as url, _chromium_context(tmp_path / "profile") as context:
        page = context.new_page()
        page.goto(f"{url}/dirty.html", wait_until="load")
        page.wait_for_function("() => window.MathJax && MathJax.startup && MathJax.startup.promise", timeout=30_000)
        page.evaluate("() => MathJax.startup.promise")
        found = "\n".join(_clean_page_problems(page))
        page.set_viewport_size(PHONE)
        phone = "\n".join(_phone_figure_problems(page.evaluate(_PHONE_FIGURES_JS)))
    for expected in ("a code cell that opens with imports is shown: import torch", "a hidden input shows its code",
                     "a raw Python repr: ToySettings(steps=3)", "a raw data frame (identifiers for column labels): "
                     "final_loss", "a display equation is wider than its box", "a glued number in weight 700",
                     "a settings table entry at"):
        assert expected in found, f"not reported: {expected!r}; the report was:\n{found}"
    assert "0.5" not in found.split("a glued number")[-1].split("\n")[0], "a number the author made bold is fine"
    assert "figure small.svg: its smallest text is" in phone, phone


# --------------------------------------------------------------------------------------------
# Fast checks: Binder, Colab, citation, publishing, bibliography, the book's extensions
# --------------------------------------------------------------------------------------------


def _pins(path: Path) -> dict[str, str]:
    pins = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if "==" in line and not line.startswith("-"):
            name, version = line.split("==", 1)
            pins[name.strip().lower().replace("_", "-")] = version.strip()
    return pins


def test_binder_environment_is_cpu_only_and_matches_the_pins():
    text = (REPO_ROOT / "binder" / "requirements.txt").read_text(encoding="utf-8")
    assert "--extra-index-url https://download.pytorch.org/whl/cpu" in text
    binder, book = _pins(REPO_ROOT / "binder" / "requirements.txt"), _pins(REPO_ROOT / "requirements.txt")
    assert binder["torch"] == f"{book['torch']}+cpu", "Binder must install the CPU build of the pinned torch"
    differ = {n: (v, book[n]) for n, v in binder.items() if n != "torch" and n in book and book[n] != v}
    assert not differ, f"binder/requirements.txt disagrees with requirements.txt: {differ}"
    # What the chapters import at run time must be installed on Binder.
    for needed in ("numpy", "scipy", "matplotlib", "seaborn", "myst-nb", "papermill", "pyyaml"):
        assert needed in binder, f"binder/requirements.txt lacks {needed}"
    post_build = (REPO_ROOT / "binder" / "postBuild").read_text(encoding="utf-8")
    installs_package = re.search(r"pip install .*(-e )?\.\s*$", post_build, re.MULTILINE)
    assert installs_package, "binder/postBuild must install the package"
    assert os.access(REPO_ROOT / "binder" / "postBuild", os.X_OK), "binder/postBuild must be executable"
    requires_python = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["requires-python"]
    runtime = (REPO_ROOT / "binder" / "runtime.txt").read_text().strip()
    assert re.fullmatch(r"python-3\.\d+", runtime) and int(runtime.split(".")[1]) >= int(requires_python.split(".")[-1])


def test_every_chapter_starts_with_the_colab_install_cell():
    import nbformat

    from attention_dynamics.book.notebooks import COLAB_TAG

    url = CONFIG["repository"]["url"].rstrip("/")
    for path in _chapter_notebooks():
        first = nbformat.read(path, as_version=4).cells[0]
        assert COLAB_TAG in first.metadata.get("tags", []), f"{path.name}: first cell is not the Colab install cell"
        assert "google.colab" in first.source, f"{path.name}: the Colab cell does not detect Colab"
        assert f"git+{url}" in first.source, f"{path.name}: the Colab cell installs from elsewhere than {url}"


def _git(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-C", str(REPO_ROOT), *args], capture_output=True, text=True)


def test_the_colab_install_cell_pins_the_code_the_outputs_came_from():
    """Every chapter's Colab cell installs a commit whose package is the package of this checkout.

    Not a branch head (which moves on after the outputs were made). The runner refreshes the pin
    (`make book`); this fails when the package was changed and committed without refreshing it.
    """
    import nbformat

    from attention_dynamics.book.notebooks import colab_pin
    from attention_dynamics.core.provenance import PACKAGE_PATHS

    if _git("rev-parse", "--git-dir").returncode != 0:
        pytest.skip("not a git checkout (an unpacked archive): there is no history to pin against")
    if _git("rev-parse", "--is-shallow-repository").stdout.strip() == "true":
        pytest.skip("a shallow clone lacks the pinned commit; clone with full history (fetch-depth: 0)")
    url = CONFIG["repository"]["url"].rstrip("/")
    pins = {}
    for path in _chapter_notebooks():
        pin = colab_pin(nbformat.read(path, as_version=4))
        assert pin is not None, f"{path.name}: the Colab cell names no ref"
        assert pin[0] == url, f"{path.name}: the Colab cell installs from {pin[0]}, not {url}"
        assert re.fullmatch(r"[0-9a-f]{40}", pin[1]), f"{path.name}: the Colab cell pins {pin[1]!r}, not a commit"
        pins[path.name] = pin[1]
    assert len(set(pins.values())) == 1, f"the chapters pin different commits: {pins}"
    commit = next(iter(pins.values()))
    assert _git("cat-file", "-e", f"{commit}^{{commit}}").returncode == 0, f"the pinned commit {commit} is not in history"
    diff = _git("diff", "--name-only", commit, "HEAD", "--", *PACKAGE_PATHS)
    assert diff.returncode == 0, diff.stderr
    assert not diff.stdout.strip(), (
        f"the package changed since the pinned commit {commit[:12]} ({', '.join(diff.stdout.split())}): "
        "run `make book` to refresh the Colab pin")


def test_citation_file_is_complete():
    cff = yaml.safe_load((REPO_ROOT / "CITATION.cff").read_text(encoding="utf-8"))
    for key in ("cff-version", "message", "title", "authors", "type", "license", "version", "repository-code",
                "preferred-citation"):
        assert cff.get(key), f"CITATION.cff lacks {key}"
    assert cff["version"] == tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["version"]
    # The original repository (a fork changes _config.yml's url, and keeps citing the original).
    assert urlsplit(cff["repository-code"]).netloc == "github.com"
    paper = cff["preferred-citation"]
    assert paper["title"].startswith("Gradient Dynamics of Attention")
    assert [a["family-names"] for a in paper["authors"]] == ["Agarwal", "Dalal", "Misra"]
    assert any(i.get("value") == "10.48550/arXiv.2512.22473" for i in paper.get("identifiers", []))


def test_workflows_test_pull_requests_and_publish_main():
    ci = yaml.safe_load((REPO_ROOT / ".github" / "workflows" / "ci.yml").read_text(encoding="utf-8"))
    pages = yaml.safe_load((REPO_ROOT / ".github" / "workflows" / "pages.yml").read_text(encoding="utf-8"))
    # YAML reads the key "on" as True.
    assert "pull_request" in ci[True]
    ci_steps = [s.get("run", "") for job in ci["jobs"].values() for s in job["steps"]]
    assert any(".ci/run" in r or "make test" in r for r in ci_steps), "ci.yml must run the test command"
    # Pages publishes only a main commit whose tests passed: it follows the tests workflow.
    trigger = pages[True]["workflow_run"]
    assert trigger["workflows"] == [ci["name"]] and trigger["types"] == ["completed"]
    assert trigger["branches"] == [CONFIG["repository"].get("branch", "main")]
    assert "conclusion == 'success'" in pages["jobs"]["build"]["if"]
    uses = [s.get("uses", "") for job in pages["jobs"].values() for s in job["steps"]]
    assert any(u.startswith("actions/upload-pages-artifact@") for u in uses)
    assert any(u.startswith("actions/deploy-pages@") for u in uses)
    runs = " ".join(s.get("run", "") for job in pages["jobs"].values() for s in job["steps"])
    assert "attention_dynamics build" in runs, "pages.yml must build from committed outputs (no re-execution)"
    # On failure the re-executed notebooks (nbval's, and the runner's failing chapter) are kept.
    ci_job = next(iter(ci["jobs"].values()))
    kept = [s for s in ci_job["steps"] if s.get("if") == "failure()" and s.get("uses", "").startswith("actions/upload-artifact@")]
    assert kept and "build/nbval/" in kept[0]["with"]["path"] and "build/failed/" in kept[0]["with"]["path"]
    checkout = next(s for s in ci_job["steps"] if s.get("uses", "").startswith("actions/checkout@"))
    assert checkout.get("with", {}).get("fetch-depth") == 0, "the Colab pin test needs the full history"


# The first major of each action that runs on Node 24 (Node 20 runtimes are retired on GitHub's runners).
NODE24_MAJORS = {"actions/checkout": 5, "actions/cache": 5, "actions/upload-artifact": 6, "actions/setup-python": 6,
                 "actions/configure-pages": 6, "actions/upload-pages-artifact": 5, "actions/deploy-pages": 5}


def test_workflow_actions_run_on_node_24():
    for name in ("ci.yml", "pages.yml"):
        workflow = yaml.safe_load((REPO_ROOT / ".github" / "workflows" / name).read_text(encoding="utf-8"))
        for job in workflow["jobs"].values():
            for step in job["steps"]:
                if "uses" not in step:
                    continue
                action, _, ref = step["uses"].partition("@")
                assert action in NODE24_MAJORS, f"{name}: {action} is not a known Node 24 action"
                assert re.fullmatch(r"v\d+", ref) and int(ref[1:]) >= NODE24_MAJORS[action], (
                    f"{name}: {step['uses']} predates Node 24 (needs v{NODE24_MAJORS[action]} or later)")


def test_bibliography_entries_parse_and_are_findable():
    from pybtex.database import parse_file

    bib = parse_file(str(REPO_ROOT / "book" / "references.bib"))
    for key in ("agarwal2025geometry", "agarwal2025gradient", "agarwal2025scaling"):
        assert key in bib.entries, f"the trilogy paper {key} is missing"
    unfindable = [k for k, e in bib.entries.items() if not ({"doi", "url"} & {f.lower() for f in e.fields})]
    assert not unfindable, f"entries with neither doi nor url: {unfindable}"


def test_every_arxiv_paper_is_cited_with_the_version_the_book_checked():
    """An arXiv paper is revised after the book checks it: each @article entry for one names its version (``version``,
    a positive integer), links to that version and says so in its note; the bibliography page says which."""
    from pybtex.database import parse_file

    bib = parse_file(str(REPO_ROOT / "book" / "references.bib"))
    arxiv = {k: e for k, e in bib.entries.items()
             if e.type == "article" and "arxiv" in e.fields.get("journal", "").lower()}
    assert {"agarwal2025geometry", "agarwal2025gradient", "agarwal2025scaling"} <= set(arxiv)
    page = re.sub(r"\s+", " ", (REPO_ROOT / "book" / "bibliography.md").read_text(encoding="utf-8"))
    for key, e in arxiv.items():
        version = e.fields.get("version", "")
        assert re.fullmatch(r"[1-9]\d*", version), f"{key}: no version the book checked it against"
        number = re.search(r"arXiv:(\d{4}\.\d{4,5})", e.fields["journal"]).group(1)
        assert e.fields["url"] == f"https://arxiv.org/abs/{number}v{version}", key
        assert f"Version {version} (" in e.fields.get("note", ""), key
    for key in ("agarwal2025geometry", "agarwal2025gradient", "agarwal2025scaling"):
        assert f"{{cite}}`{key}` at version {arxiv[key].fields['version']} (" in page, key


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("mean |cos| over pairs", r"mean \|cos\| over pairs"),
        ("min(|i − j|, n − |i − j|)", r"min(\|i − j\|, n − \|i − j\|)"),
        ("``|x|`` stays literal, |y| does not", r"``|x|`` stays literal, \|y\| does not"),
        (":math:`|x|` and :func:`f` stay", ":math:`|x|` and :func:`f` stay"),
        ("| a | b |", "| a | b |"),  # a table row
        (r"already \|escaped\|", r"already \|escaped\|"),
    ],
)
def test_docstring_pipes_are_escaped_outside_literals(line, expected):
    assert _ext_module("api_modules").escape_pipes(line) == expected


def test_package_objects_are_found_by_their_dotted_names():
    api_modules = _ext_module("api_modules")
    assert api_modules._package_object_exists(f"{PACKAGE}.science.attention.single_head_forward")
    assert api_modules._package_object_exists(f"{PACKAGE}.tasks")
    assert not api_modules._package_object_exists(f"{PACKAGE}.science.attention.no_such_function")
    assert not api_modules._package_object_exists("numpy.sum")  # only the package's own objects


def test_package_modules_lists_public_modules_only():
    names = _ext_module("api_modules").package_modules(PACKAGE)
    assert PACKAGE in names and f"{PACKAGE}.science.attention" in names and f"{PACKAGE}.tasks" in names
    assert not [n for n in names if "._" in n or n.endswith("__main__")]


def test_mathjax_is_configured_offline():
    config = CONFIG["sphinx"]["config"]
    assert "://" not in config["mathjax_path"] and not config["mathjax_path"].startswith("/")
    offline_assets = _ext_module("offline_assets")
    assert (offline_assets.packaged_mathjax_dir() / Path(config["mathjax_path"]).name).is_file()
    assert CONFIG["launch_buttons"].get("thebe") is False, "thebe loads its kernel code from a CDN"


def test_chapter_code_is_formatted_and_fits_the_page():
    """Every chapter's code cells: ruff-formatted, at most 100 characters a line (none scrolls sideways).

    The Colab install cell is generated by the runner and never shown (remove-cell): it is exempt.
    """
    import nbformat

    from attention_dynamics.book.notebooks import COLAB_TAG

    too_long = []
    for path in _chapter_notebooks():
        for cell in nbformat.read(path, as_version=4).cells:
            if cell.cell_type != "code" or COLAB_TAG in cell.metadata.get("tags", []):
                continue
            too_long += [f"{path.name} {cell.get('id')}: {len(line)} characters: {line[:60]}…"
                         for line in cell.source.splitlines() if len(line) > 100]
    assert not too_long, "code lines over 100 characters:\n" + "\n".join(too_long)
    ruff = shutil.which("ruff") or str(Path(sys.executable).with_name("ruff"))
    if not Path(ruff).exists():
        pytest.skip("ruff is not installed (requirements.txt pins it)")
    res = subprocess.run([ruff, "format", "--check", *map(str, _chapter_notebooks())], cwd=REPO_ROOT,
                         capture_output=True, text=True)
    assert res.returncode == 0, f"run `make format`:\n{res.stdout}{res.stderr}"


_GLUE_FIGURE_CALL = re.compile(r"glue_figure\(\s*[\"'](?P<name>[\w-]+)[\"']")
_FIGURE_DIRECTIVE = re.compile(r"^```\{glue:figure\} (?P<key>[\w-]+)\n(?P<body>.*?)^```", re.M | re.S)


def test_every_figure_is_numbered_captioned_described_and_referred_to():
    """Every figure a chapter draws is glued (:func:`plotting.glue_figure`) from a cell whose own copy the
    book hides (``remove-output``) and shown by a ``{glue:figure}`` directive with a ``:name:`` (its number),
    an ``:alt:`` text of at least a sentence and a caption; the prose refers to it by number (``{numref}``).
    No chapter shows a figure any other way (``plt.show()``, a figure left as a cell's value).
    """
    import nbformat

    problems = []
    for path in _chapter_notebooks():
        nb = nbformat.read(path, as_version=4)
        glued, directives = {}, {}
        markdown = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
        for cell in nb.cells:
            if cell.cell_type == "code":
                names = [m.group("name") for m in _GLUE_FIGURE_CALL.finditer(cell.source)]
                glued.update(dict.fromkeys(names, cell))
                if names and "remove-output" not in cell.metadata.get("tags", []):
                    problems.append(f"{path.name}: the cell gluing {names} shows its own copy (tag it remove-output)")
                if re.search(r"\bplt\.show\(|\bfig\s*$", cell.source, re.M):
                    problems.append(f"{path.name}: a cell shows a figure without a number: {cell.source[:60]!r}")
                images = [o for o in cell.get("outputs", []) if {"image/png", "image/svg+xml"} & set(o.get("data", {}))
                          and "scrapbook" not in o.get("metadata", {})]
                if images:
                    problems.append(f"{path.name}: a cell outputs an image that is not a glued figure: {cell.source[:60]!r}")
        for m in _FIGURE_DIRECTIVE.finditer(markdown):
            body = m.group("body")
            options = dict(re.findall(r"^:([\w-]+):[ \t]*(.*)$", body, re.M))
            caption = re.sub(r"^:[\w-]+:.*$", "", body, flags=re.M).strip()
            directives[m.group("key")] = options
            if options.get("name") != m.group("key"):
                problems.append(f"{path.name}: figure {m.group('key')} has no :name: of its own (its number)")
            if len(options.get("alt", "").split()) < 8:
                problems.append(f"{path.name}: figure {m.group('key')} has no alt text that says what it shows")
            if len(caption.split()) < 5:
                problems.append(f"{path.name}: figure {m.group('key')} has no caption")
            if not re.search(r"\{numref\}`(?:[^`<]*<)?" + re.escape(m.group("key")) + r">?`", markdown):
                problems.append(f"{path.name}: the prose never refers to figure {m.group('key')} by number")
        problems += [f"{path.name}: figure {k} is glued but never shown" for k in glued if k not in directives]
        problems += [f"{path.name}: figure {k} is shown but never glued" for k in directives if k not in glued]
    assert not problems, "\n".join(problems)


#: A chapter's code cell is shown collapsed (the theme's hide-input: output visible, code one click
#: away) when it is bookkeeping (records or glues two or more numbers), draws a figure at length, or
#: is long: the page then reads sentence, figure, sentence.
COLLAPSE_RULE = {"claims_calls": 2, "plot_calls": 8, "lines": 30}


def _should_collapse(source: str) -> bool:
    claims_calls = len(re.findall(r"\bclaims\.(?:record|glue)\(", source))
    plot_calls = len(re.findall(r"\b(?:ax|axes|axr|fig|plt|plotting)\b[.\[]", source))
    return (claims_calls >= COLLAPSE_RULE["claims_calls"] or plot_calls >= COLLAPSE_RULE["plot_calls"]
            or len(source.splitlines()) > COLLAPSE_RULE["lines"])


def test_bookkeeping_and_long_cells_are_collapsed():
    import nbformat

    from attention_dynamics.book.notebooks import COLAB_TAG

    shown = []
    for path in _chapter_notebooks():
        for cell in nbformat.read(path, as_version=4).cells:
            tags = cell.metadata.get("tags", [])
            if cell.cell_type != "code" or COLAB_TAG in tags or "parameters" in tags:
                continue
            if _should_collapse(cell.source) and not {"hide-input", "remove-input", "remove-cell"} & set(tags):
                shown.append(f"{path.name} {cell.get('id')}: {cell.source.splitlines()[0][:60]}")
    assert not shown, "cells to collapse with the hide-input tag:\n" + "\n".join(shown)


def test_format_code_cells_formats_sources_and_leaves_outputs_alone():
    import nbformat
    from nbformat.v4 import new_code_cell, new_notebook, new_output

    from attention_dynamics.book.notebooks import COLAB_TAG, format_code_cells

    ruff = shutil.which("ruff") or str(Path(sys.executable).with_name("ruff"))
    if not Path(ruff).exists():
        pytest.skip("ruff is not installed (requirements.txt pins it)")
    output = new_output("execute_result", data={"text/plain": "1.1102230246251565e-16"}, execution_count=1)
    nb = new_notebook(cells=[
        new_code_cell("%pip install  x", metadata={"tags": [COLAB_TAG]}),
        new_code_cell("x=dict(a = 1,b=[1,2 , 3])", outputs=[output]),
        new_code_cell("y = 2"),
    ])
    before = nbformat.writes(nb)
    assert format_code_cells(nb, ruff) == 1
    assert nb.cells[1].source == "x = dict(a=1, b=[1, 2, 3])"
    assert nb.cells[1].outputs[0]["data"]["text/plain"] == "1.1102230246251565e-16"
    assert nb.cells[0].source == "%pip install  x", "the Colab magic is left as it is"
    assert nbformat.writes(nb) != before and format_code_cells(nb, ruff) == 0


def test_every_chapter_has_its_text_form_in_sync():
    """book/text/<chapter>.py (jupytext percent format) is what the notebook's cells say: review reads text."""
    import jupytext
    import nbformat

    from attention_dynamics.book.notebooks import text_form, text_form_path

    for path in _chapter_notebooks():
        text = text_form_path(path)
        assert text.exists(), f"{path.name}: no text form at {text} (run `make book` or `make format`)"
        nb = nbformat.read(path, as_version=4)
        assert text.read_text(encoding="utf-8") == text_form(nb), f"{text.name} is out of date: run `make format`"
        back = jupytext.reads(text.read_text(encoding="utf-8"), fmt="py:percent")
        code = [c for c in nb.cells if c.cell_type == "code"]
        assert [c.source for c in back.cells if c.cell_type == "code"] == [c.source for c in code], (
            f"{text.name} does not round-trip to the notebook's code")


def test_verdict_rendering_takes_a_verdict_it_does_not_know():
    """A verdict added later (one the rendering does not know) is counted, marked and coloured like the others."""
    from attention_dynamics.ledger import verdicts as v

    tables = _ext_module("book_tables")
    claim = v.PAPER_CLAIMS[0]
    found = [v.Verdict(claim, "reproduces"), v.Verdict(claim, "holds in part later"),
             v.Verdict(claim, "holds in part later")]
    counts = tables.verdict_counts(found, v.VERDICTS)
    assert list(counts)[:len(v.VERDICTS)] == list(v.VERDICTS), "the known verdicts first, in their order"
    assert counts["reproduces"] == 1 and counts["does not reproduce"] == 0
    assert counts["holds in part later"] == 2
    assert tables.verdict_class("holds in part later") == "verdict-holds-in-part-later"
    assert tables.verdict_mark("holds in part later") == tables.OTHER_MARK
    assert tables.verdict_mark("does not reproduce") == "✗"
    # Every verdict, known or not, gets a colour: the generic .verdict rule, in both themes.
    assert re.search(r"\.verdict, \.claim-status \{[^}]*color: var\(--verdict-other\)", tables.BOOK_CSS)
    assert tables.BOOK_CSS.count("--verdict-other:") == 2


def test_every_verdict_of_the_rule_has_its_mark_and_colour():
    """Each verdict the rule gives ("depends on the definition", "reproduces where decided", …) has a mark of its
    own kind and a colour class set in both themes (the browser test measures its contrast)."""
    from attention_dynamics.ledger import verdicts as v

    tables = _ext_module("book_tables")
    for verdict in v.VERDICTS:
        assert verdict in tables.VERDICT_MARKS, verdict
        rule = re.search(r"([^{}]*\." + re.escape(tables.verdict_class(verdict)) + r"\b[^{}]*)\{([^}]*)\}",
                         tables.BOOK_CSS)
        assert rule, f"no CSS rule for {tables.verdict_class(verdict)}"
        variable = re.search(r"color: var\((--verdict-[a-z]+)\)", rule.group(2)).group(1)
        assert tables.BOOK_CSS.count(f"{variable}:") == 2, f"{variable} is not set in both themes"
    assert tables.verdict_mark("depends on the definition") != tables.OTHER_MARK


def test_every_paper_claim_has_a_short_name_or_a_readable_fallback():
    from attention_dynamics.ledger import verdicts as v

    tables = _ext_module("book_tables")
    for claim in v.PAPER_CLAIMS:
        name = tables.short_name(claim)
        assert 3 < len(name) <= 80, (claim.id, name)
    unnamed = v.PaperClaim("x", "A new claim: with details after the colon.", "1", ("book/01-x", "a", "A"), ("c",))
    assert tables.short_name(unnamed) == "A new claim"
