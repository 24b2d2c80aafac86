"""Launch buttons that open the notebooks written for running, not the book's source notebooks.

A chapter's source notebook (``book/NN-slug.ipynb``) holds MyST roles (``{glue:text}``, ``{cite}``,
``{eq}``) that only the book build fills in; JupyterLab and Colab would show them as written. The
runner writes each chapter's launch notebook to ``notebooks/NN-slug.ipynb``
(:mod:`attention_dynamics.book.launch_notebooks`), with those roles as text. sphinx-book-theme builds the
Binder and Colab links from the page's own path; this extension, running after it, points every
launch link of a chapter page at the chapter's launch notebook instead.
"""

from __future__ import annotations

import re

from sphinx.application import Sphinx

from attention_dynamics.book.launch_notebooks import LAUNCH_DIR

_CHAPTER_PAGE = re.compile(r"^book/(\d\d-[a-z0-9-]+)$")


def launch_url(url: str, pagename: str) -> str:
    """Return a launch button's ``url`` with the chapter's source notebook replaced by its launch notebook."""
    match = _CHAPTER_PAGE.match(pagename)
    if not match:
        return url
    return url.replace(f"{pagename}.ipynb", f"{LAUNCH_DIR}/{match.group(1)}.ipynb")


def point_launch_buttons(app: Sphinx, pagename: str, templatename: str, context: dict, doctree) -> None:
    """Rewrite the launch buttons of a chapter page (the theme's ``launch-buttons`` group)."""
    for group in context.get("header_buttons", []):
        if group.get("label") != "launch-buttons":
            continue
        for button in group.get("buttons", []):
            if button.get("url"):
                button["url"] = launch_url(button["url"], pagename)


def setup(app: Sphinx):
    # After sphinx-book-theme's own handler (priority 501), which creates the buttons.
    app.connect("html-page-context", point_launch_buttons, priority=600)
    return {"version": "0.1", "parallel_read_safe": True, "parallel_write_safe": True}
