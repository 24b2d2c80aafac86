"""The site's ``index.html``: a complete page that sends the reader to the book's first page.

The book's root document is ``book/intro``, so the site has no ``index.html`` of its own;
sphinx-external-toc writes a one-line redirect there (a bare ``<meta http-equiv="Refresh">``).
Without a ``<link rel="icon">`` a browser opening it asks the server for ``/favicon.ico``, which
does not exist (a 404 in the console; on GitHub Pages that is the *user* site's root). This
extension writes the redirect first, as a proper HTML page with the book's title, favicon and a
link for readers whose browser does not follow the redirect; sphinx-external-toc then leaves an
existing ``index.html`` alone.
"""

from __future__ import annotations

import html
import posixpath
from pathlib import Path

from sphinx.application import Sphinx

PAGE = """<!DOCTYPE html>
<html lang="{lang}">
<head>
  <meta charset="utf-8">
  <title>{title}</title>
  {icon}
  <meta http-equiv="Refresh" content="0; url={target}">
</head>
<body>
  <p><a href="{target}">{title}</a></p>
</body>
</html>
"""


def write_site_index(app: Sphinx, exception: Exception | None) -> None:
    """Write ``<outdir>/index.html`` redirecting to the root document (HTML builder, root ≠ index)."""
    if exception is not None or app.builder.name != "html" or app.config.root_doc == "index":
        return
    target = app.builder.get_target_uri(app.config.root_doc)
    favicon = app.config.html_favicon
    icon = ""
    if favicon:
        href = favicon if "://" in favicon else f"_static/{posixpath.basename(favicon)}"
        icon = f'<link rel="icon" href="{html.escape(href)}">'
    title = html.escape(app.config.html_title or app.config.project)
    page = PAGE.format(lang=app.config.language or "en", title=title, icon=icon, target=html.escape(target))
    Path(app.outdir, "index.html").write_text(page, encoding="utf-8")


def setup(app: Sphinx):
    # Before sphinx-external-toc's own redirect (default priority 500), which skips an existing file.
    app.connect("build-finished", write_site_index, priority=400)
    return {"version": "0.1", "parallel_read_safe": True, "parallel_write_safe": True}
