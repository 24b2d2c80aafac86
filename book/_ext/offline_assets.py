"""Keep every page of the book self-contained: it must work with no network.

Two things in a default Jupyter Book reach for a CDN: MathJax and thebe.

**MathJax.** Sphinx loads MathJax from ``cdn.jsdelivr.net`` by default; offline, a reader sees raw TeX.
This extension copies the MathJax 3 distribution packaged on PyPI as ``django-static-mathjax``
(``mathjax/static/mathjax/es5``) into the built site, next to the other static files, and
checks that ``mathjax_path`` points into that copy.

Why not ``html_static_path``: Jupyter Book 1 injects every ``.js`` file found under a static
folder into every page as a ``<script>``; MathJax's hundred-odd component files must be served
(MathJax loads the ones it needs on demand) but never injected. So the files are copied into
``<outdir>/_static/<dirname(mathjax_path)>/`` when the HTML builder starts, and only the one
entry point named by ``mathjax_path`` is put on the pages (by ``sphinx.ext.mathjax``, which
resolves a relative ``mathjax_path`` against ``_static/``).

**thebe** (live code cells, sphinx-thebe) fetches its kernel machinery from unpkg.com when
activated. The book turns it off (``launch_buttons.thebe: false``: readers run chapters on
Binder or Colab instead), but Jupyter Book still puts sphinx-thebe's loader on every page, and
Sphinx 7.4 adds its inline configuration script twice (once before and once after the HTML
builder starts), which throws ``Identifier 'THEBE_JS_URL' has already been declared`` in every
page's console. With thebe off, :func:`drop_unused_thebe` removes those assets from each page.
"""

from __future__ import annotations

import posixpath
import shutil
from pathlib import Path

from sphinx.application import Sphinx
from sphinx.errors import ExtensionError
from sphinx.util import logging

logger = logging.getLogger(__name__)

#: What the TeX-input/CommonHTML entry point may load on demand: TeX extensions (autoload),
#: output fonts, the context menu, accessibility (assistive MathML, the explorer and its speech
#: rule engine). The other combined bundles (tex-svg.js, mml-chtml.js, ...) are left out.
MATHJAX_SUBFOLDERS = ("a11y", "adaptors", "input", "output", "sre", "ui")
MATHJAX_TOP_FILES = ("core.js", "loader.js", "startup.js")


def packaged_mathjax_dir() -> Path:
    """Return the folder of the packaged MathJax 3 ``es5`` distribution (django-static-mathjax)."""
    try:
        import mathjax  # the import name of the django-static-mathjax distribution
    except ImportError as exc:  # pragma: no cover - the pinned requirements install it
        raise ExtensionError(
            "offline_assets needs the 'django-static-mathjax' package (pinned in requirements.txt)"
        ) from exc
    es5 = Path(mathjax.__file__).resolve().parent / "static" / "mathjax" / "es5"
    if not (es5 / "tex-chtml.js").is_file():
        raise ExtensionError(f"no MathJax distribution found at {es5}")
    return es5


def _check_config(app: Sphinx, config) -> None:
    path = config.mathjax_path
    if "://" in path or path.startswith("/"):
        raise ExtensionError(
            f"mathjax_path must be relative to _static/ so MathJax is served by the book, got {path!r}"
        )


def copy_mathjax(app: Sphinx) -> None:
    """Copy the MathJax entry point named by ``mathjax_path`` and what it loads into the site."""
    if app.builder.format != "html":
        return
    source = packaged_mathjax_dir()
    entry_dir, entry = posixpath.split(app.config.mathjax_path)
    if not (source / entry).is_file():
        raise ExtensionError(f"mathjax_path names {entry!r}, which the packaged MathJax does not have")
    target = Path(app.outdir) / "_static" / entry_dir
    target.mkdir(parents=True, exist_ok=True)
    for name in (entry, *MATHJAX_TOP_FILES):
        shutil.copy2(source / name, target / name)
    for folder in MATHJAX_SUBFOLDERS:
        shutil.copytree(source / folder, target / folder, dirs_exist_ok=True)
    # Apache-2.0: the licence travels with the copy.
    shutil.copy2(source.parent / "LICENSE", target / "LICENSE")
    logger.info("MathJax served from _static/%s/ (copied from %s)", entry_dir, source)


def _thebe_enabled(app: Sphinx) -> bool:
    launch = (app.config.html_theme_options or {}).get("launch_buttons", {}) or {}
    return bool(launch.get("thebe"))


def _is_thebe_asset(asset) -> bool:
    filename = str(getattr(asset, "filename", "") or "")
    body = str(getattr(asset, "attributes", {}).get("body", "") or "")
    return posixpath.basename(filename).startswith("sphinx-thebe.") or "THEBE_JS_URL" in body


def drop_unused_thebe(app: Sphinx, pagename: str, templatename: str, context: dict, doctree) -> None:
    """Remove sphinx-thebe's scripts and stylesheet from a page when thebe is turned off."""
    if _thebe_enabled(app):
        return
    for key in ("script_files", "css_files"):
        if key in context:
            context[key] = [asset for asset in context[key] if not _is_thebe_asset(asset)]


def setup(app: Sphinx):
    app.connect("config-inited", _check_config)
    app.connect("builder-inited", copy_mathjax)
    app.connect("html-page-context", drop_unused_thebe)
    return {"version": "0.1", "parallel_read_safe": True, "parallel_write_safe": True}
