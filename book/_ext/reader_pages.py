"""The front page's findings: ``{findings}`` renders :data:`attention_dynamics.ledger.findings.FINDINGS`.

Each finding is one sentence whose numbers come from ``book/claims.json`` (never typed by hand), the reader's label of
the verdict row it summarises (holds, holds in part, does not hold, open at this scale, not tested here) and a link to
the chapter section that shows the evidence. Each number is pasted as a glued claim value is, so that it carries the
popover of ``claim_numbers.py`` (the paper's value, its status, its record in the ledger). The page's layout (the
thesis beside the mechanism diagram, the findings under them, all on the first screen) is in :data:`FRONT_CSS`.
"""

from __future__ import annotations

import re
from pathlib import Path

from docutils import nodes
from sphinx.util.docutils import SphinxDirective

FRONT_CSS = """
/* The front page (book/intro.md): the mechanism diagram beside the thesis and the findings, all on the first screen
   of a desktop; on a narrow screen one column (thesis, diagram, findings). */
.bd-page-width:has(.front-page) .bd-sidebar-secondary { display: none; }
.bd-main .bd-content .bd-article-container:has(.front-page) { max-width: 100%; }
article:has(.front-page) h1 { font-size: 1.75rem; margin-bottom: 0.45rem; }
div.front-page { display: grid; grid-template-columns: minmax(0, 0.44fr) minmax(0, 1fr);
                 grid-template-areas: "diagram thesis" "diagram findings"; column-gap: 1.5rem; align-items: start;
                 margin-bottom: 1rem; }
div.front-thesis { grid-area: thesis; }
div.front-diagram { grid-area: diagram; text-align: center; }
div.front-findings { grid-area: findings; }
div.front-thesis p { font-size: 0.98rem; line-height: 1.45; margin: 0 0 0.4rem; }
div.front-diagram img { width: 100%; height: auto; max-height: 560px; object-fit: contain; }
div.front-diagram p { margin: 0.2rem 0 0; font-size: 0.8rem; color: var(--pst-color-text-muted, #555); }
@media (max-width: 960px) {
  div.front-page { grid-template-columns: minmax(0, 1fr); grid-template-areas: "thesis" "diagram" "findings"; }
  div.front-diagram img { max-width: 420px; }
}
div.front-findings > p:first-child { font-weight: 600; margin: 0.1rem 0 0.2rem; }
ol.book-findings { margin: 0 0 0.5rem; padding-left: 1.4em; font-size: 0.875rem; line-height: 1.38; }
ol.book-findings > li > p { margin: 0 0 0.25rem; }
ol.book-findings .verdict { white-space: nowrap; font-size: 0.85em; }
ol.book-findings .finding-link { white-space: nowrap; }
div.run-it-yourself pre { font-size: 0.85em; }
/* The previous / next links at the foot of every page: on a phone a long title wraps inside its half of the row
   instead of pushing the link and its arrow past the screen's edge. */
.prev-next-area a.left-prev, .prev-next-area a.right-next { min-width: 0; max-width: 50%; }
.prev-next-area a .prev-next-info { min-width: 0; overflow-wrap: break-word; }
@media (max-width: 600px) { .prev-next-area a p.prev-next-title { font-size: 0.95rem; } }
"""


def chapter_label(docname: str) -> str:
    """Return how a finding's link names its evidence: "chapter N" for ``book/NN-slug``, else the page's name."""
    match = re.match(r"^book/(\d\d)-", docname)
    return f"chapter {int(match.group(1))}" if match else docname.rsplit("/", 1)[-1].replace("-", " ")


class FindingsDirective(SphinxDirective):
    """Render the book's findings as a numbered list: label, sentence (numbers from the ledger), link to the evidence."""

    def run(self):
        from attention_dynamics.ledger.findings import render_findings
        from book_tables import _doc_link, _read_ledger, _verdict_node

        ledger = _read_ledger(self.env)
        if ledger is None:
            return [nodes.paragraph(text="The ledger has not been written yet: run `make book`.")]
        listing = nodes.enumerated_list(classes=["book-findings"], enumtype="arabic", prefix="", suffix=".")
        for found in render_findings(ledger):
            item = nodes.list_item(classes=["book-finding"])
            para = nodes.paragraph()
            para += _verdict_node(found.label)
            para += nodes.Text(" ")
            text = nodes.inline(classes=["finding-text"])
            for piece, claim_id in found.parts:
                if claim_id is None:
                    text += nodes.Text(piece)
                else:  # pasted like a glued claim value, so that it gets its popover
                    text += nodes.inline(piece, piece, classes=["pasted-text"], glue_key=claim_id)
            para += text
            para += nodes.Text(" ")
            link = nodes.inline(classes=["finding-link"])
            link += _doc_link(self.env, found.docname, f"→ {chapter_label(found.docname)}", found.anchor)
            para += link
            item += para
            listing += item
        return [listing]


def _write_css(app) -> None:
    if app.builder.format != "html":
        return
    static = Path(app.outdir) / "_static"
    static.mkdir(parents=True, exist_ok=True)
    (static / "reader-pages.css").write_text(FRONT_CSS, encoding="utf-8")


def setup(app):
    app.add_directive("findings", FindingsDirective)
    app.add_css_file("reader-pages.css")
    app.connect("builder-inited", _write_css)
    return {"version": "0.1", "parallel_read_safe": True, "parallel_write_safe": True}
