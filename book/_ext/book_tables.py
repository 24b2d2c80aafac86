"""Sphinx directives that render the book's generated JSON files as tables (and the book's CSS).

``claims-table`` renders ``book/claims.json`` (the claims ledger) and ``status-table`` renders
``book/status.json`` (per-chapter execution time and environment). Both files are written by
``python -m attention_dynamics reproduce``; reading them at build time keeps the pages in step.
"""

from __future__ import annotations

import json
from pathlib import Path

from docutils import nodes
from sphinx import addnodes
from sphinx.util.docutils import SphinxDirective

from attention_dynamics.claims import format_value


def _table(header: list[str], rows: list[list[str]], widths: list[int], classes: list[str]) -> nodes.table:
    # "colwidths-given": Sphinx's HTML writer then emits the column widths (relative, in %).
    table = nodes.table(classes=[*classes, "colwidths-given"])
    group = nodes.tgroup(cols=len(header))
    table += group
    for w in widths:
        group += nodes.colspec(colwidth=w)
    thead = nodes.thead()
    group += thead
    thead += _row(header)
    tbody = nodes.tbody()
    group += tbody
    for r in rows:
        tbody += _row(r)
    return table


def _row(cells: list[str]) -> nodes.row:
    row = nodes.row()
    for text in cells:
        entry = nodes.entry()
        entry += nodes.paragraph(text=text)
        row += entry
    return row


def _reference(claim: dict) -> str:
    if claim.get("expected") is not None:
        return f"{format_value(claim['expected'])} ± {format_value(claim['tolerance'])} (closed form)"
    lo, hi = claim.get("lower"), claim.get("upper")
    parts = []
    if lo is not None or hi is not None:
        parts.append(f"[{format_value(lo) if lo is not None else '−∞'}, {format_value(hi) if hi is not None else '∞'}]")
    if claim.get("paper_value") is not None:
        tol = claim.get("tolerance")
        paper = f"paper {format_value(claim['paper_value'])}"
        if tol is not None and lo is None and hi is None:
            paper += f" ± {format_value(tol)}"
        parts.append(paper)
    return "; ".join(parts) or "—"


def _ours(c: dict) -> str:
    """The claim's value with its unit, and its interval where it has one."""
    text = f"{format_value(c['value'])} {c['unit']}".strip()
    if c.get("interval"):
        low, high = c["interval"]
        text += f" (95% interval {format_value(low)}–{format_value(high)})"
    return text


#: Order of the statuses on the reproducibility page: what does not reproduce comes first.
STATUS_ORDER = ("fail", "undecided", "pass", "new")
STATUS_LABELS = {"fail": "fail", "undecided": "undecided", "pass": "pass", "new": "new"}


def _status_node(status: str) -> nodes.inline:
    return nodes.inline(text=STATUS_LABELS.get(status, status), classes=["claim-status", f"claim-status-{status}"])


def _details(summary: str, body_lines: list[str]) -> nodes.raw:
    """An HTML ``<details>`` element (works offline, no script): the summary, then the lines."""
    from html import escape

    body = "".join(f"<p>{escape(line)}</p>" for line in body_lines if line)
    return nodes.raw("", f"<details class=\"claim-details\"><summary>{escape(summary)}</summary>{body}</details>",
                     format="html")


def _chapter_title(env, name: str) -> str:
    docname = f"book/{name}"
    title = env.titles.get(docname)
    return title.astext() if title is not None else name


def _doc_link(env, docname: str, text: str, anchor: str = "") -> nodes.Node:
    """A link to ``docname`` (and its section ``anchor``) from the current page, or the text alone."""
    if docname not in env.found_docs:
        return nodes.Text(text)
    if anchor:
        uri = env.app.builder.get_relative_uri(env.docname, docname)
        if uri.startswith("#"):  # a single-page build: the anchors are the sections' own ids
            uri = ""
        return nodes.reference("", text, refuri=f"{uri}#{anchor}", internal=True)
    ref = addnodes.pending_xref("", refdomain="std", reftype="doc", reftarget=f"/{docname}",
                                refexplicit=True, refwarn=True)
    ref += nodes.inline(text=text)
    return ref


class ClaimsTable(SphinxDirective):
    """Render the claims ledger at a glance: counts, then one table per chapter.

    Columns: claim · paper · ours · status (four narrow columns that fit the page); what the
    claim measures, its reference and parameters sit in a ``<details>`` under its id. Within a
    chapter, claims that fail or are undecided come first, with their explanation.
    """

    def run(self):
        path = Path(self.env.srcdir) / "book" / "claims.json"
        self.env.note_dependency(str(path))
        if not path.exists():
            return [nodes.paragraph(text="The ledger has not been written yet: run `make book`.")]
        claims = json.loads(path.read_text(encoding="utf-8"))["claims"]
        counts = {s: sum(c["status"] == s for c in claims) for s in STATUS_ORDER}
        summary = nodes.paragraph(
            text=f"{len(claims)} claims: {counts['pass']} pass, {counts['fail']} fail (explained), "
                 f"{counts['undecided']} not decided at this scale (explained), {counts['new']} new.",
            classes=["claims-counts"])
        out = [summary]
        chapters: dict[str, list[dict]] = {}
        for c in claims:
            chapters.setdefault(c.get("chapter") or "", []).append(c)
        for chapter, rows in chapters.items():
            rows = sorted(rows, key=lambda c: STATUS_ORDER.index(c["status"]) if c["status"] in STATUS_ORDER else 9)
            section = nodes.container(classes=["claims-chapter"])
            heading = nodes.paragraph(classes=["claims-chapter-title"])
            heading += _doc_link(self.env, f"book/{chapter}", _chapter_title(self.env, chapter))
            n_bad = sum(c["status"] in ("fail", "undecided") for c in rows)
            heading += nodes.Text(f" — {len(rows)} claims" + (f", {n_bad} not reproduced or undecided" if n_bad else ""))
            section += heading
            table = _table(["claim", "paper", "ours", "status"], [], [46, 18, 22, 14], ["claims-ledger"])
            tbody = table.next_node(nodes.tbody)
            for c in rows:
                row = nodes.row()
                first = nodes.entry()
                first += nodes.paragraph(text=c["id"], classes=["claim-id"])
                lines = [c["description"], f"Reference: {_reference(c)}"]
                if c.get("params"):
                    lines.append("Parameters: " + ", ".join(f"{k} = {v}" for k, v in c["params"].items()))
                first += _details("what it measures", lines)
                if c.get("explanation"):
                    first += nodes.paragraph(text=c["explanation"], classes=["claim-explanation"])
                row += first
                for text in (_paper(c), _ours(c)):
                    entry = nodes.entry()
                    entry += nodes.paragraph(text=text)
                    row += entry
                status = nodes.entry()
                para = nodes.paragraph()
                para += _status_node(c["status"])
                status += para
                row += status
                tbody += row
            section += table
            out.append(section)
        return out


def _paper(c: dict) -> str:
    """The paper's value, or the bound / closed form the claim is held to when the paper has none."""
    if c.get("paper_value") is not None:
        return format_value(c["paper_value"])
    if c.get("expected") is not None:
        return f"{format_value(c['expected'])} (closed form)"
    if c.get("lower") is not None or c.get("upper") is not None:
        return _reference(c)
    return "—"


class VerdictsTable(SphinxDirective):
    """Render one row per claim of the paper: statement · paper · verdict · where the book shows it.

    The verdicts come from the ledger (``book/claims.json``) through
    :func:`attention_dynamics.verdicts.assess`; the deciding ledger claims and their statuses are
    listed under each verdict.
    """

    def run(self):
        from attention_dynamics import verdicts as v

        path = Path(self.env.srcdir) / "book" / "claims.json"
        self.env.note_dependency(str(path))
        if not path.exists():
            return [nodes.paragraph(text="The ledger has not been written yet: run `make book`.")]
        ledger = json.loads(path.read_text(encoding="utf-8"))["claims"]
        found = v.assess(ledger)
        counts = {name: sum(x.verdict == name for x in found) for name in v.VERDICTS}
        summary = nodes.paragraph(
            text=f"{len(found)} claims of the paper: " + ", ".join(f"{n} {name}" for name, n in counts.items()) + ".",
            classes=["claims-counts"])
        table = _table(["the paper says", "paper", "verdict", "shown in"], [], [50, 14, 16, 20], ["verdicts-table"])
        tbody = table.next_node(nodes.tbody)
        for x in found:
            pc = x.claim
            row = nodes.row()
            first = nodes.entry()
            first += nodes.paragraph(text=pc.statement)
            if pc.caveat:
                first += nodes.paragraph(text=pc.caveat, classes=["claim-explanation"])
            row += first
            entry = nodes.entry()
            entry += nodes.paragraph(text=pc.paper_value)
            row += entry
            entry = nodes.entry()
            para = nodes.paragraph()
            para += nodes.inline(text=x.verdict, classes=["verdict", "verdict-" + x.verdict.replace(" ", "-")])
            entry += para
            lines = [f"{cid}: {status}" for cid, status in x.statuses.items()]
            if pc.budget_limited:
                lines.append(f"Failures count as undecided: {pc.budget_limited}.")
            entry += _details("decided by", lines)
            row += entry
            entry = nodes.entry()
            para = nodes.paragraph()
            docname, anchor, title = pc.section
            para += _doc_link(self.env, docname, f"{_chapter_title(self.env, docname.split('/')[-1])}: {title}", anchor)
            entry += para
            row += entry
            tbody += row
        return [summary, table]


class StatusTable(SphinxDirective):
    """Render per-chapter execution time and the environment of the run that produced it.

    Each chapter links to its page; a last row gives the total time of the chapters listed, and
    a list under the table names the platform (operating system, machine) of the runs.
    """

    def run(self):
        path = Path(self.env.srcdir) / "book" / "status.json"
        self.env.note_dependency(str(path))
        chapters = json.loads(path.read_text(encoding="utf-8")).get("chapters", {}) if path.exists() else {}
        if not chapters:
            return [nodes.paragraph(text="No chapter has been executed by the runner yet.")]
        header = ["chapter", "run time", "Python", "torch", "numpy", "device", "CPU threads"]
        table = _table(header, [], [30, 12, 8, 12, 8, 12, 8], ["status-table"])
        tbody = table.next_node(nodes.tbody)
        total = 0.0
        platforms: dict[str, list[str]] = {}
        for name, info in chapters.items():
            env = info.get("environment", {})
            total += float(info["seconds"])
            platforms.setdefault(env.get("platform", "unknown"), []).append(name)
            row = _row(["", _duration(info["seconds"]), env.get("python", ""), env.get("torch", ""),
                        env.get("numpy", ""), env.get("device", ""), env.get("cpu_threads", "")])
            row.children[0].children[0] += self._chapter_link(name)
            tbody += row
        tbody += _row(["all chapters", _duration(total), "", "", "", "", ""])
        listing = nodes.bullet_list()
        for platform, names in platforms.items():
            item = nodes.list_item()
            item += nodes.paragraph(text=f"Platform {platform}: {', '.join(names)}.")
            listing += item
        return [table, listing]

    def _chapter_link(self, name: str) -> nodes.Node:
        """Return a link to the chapter's page (its title as text), or its name if it has no page."""
        docname = f"book/{name}"
        if docname not in self.env.found_docs:
            return nodes.Text(name)
        ref = addnodes.pending_xref(
            "", refdomain="std", reftype="doc", reftarget=f"/{docname}", refexplicit=False, refwarn=True
        )
        ref += nodes.inline(text=name)
        return ref


def _duration(seconds: float) -> str:
    """Return a run time as ``42 s`` or ``3 min 05 s`` (no-break spaces: one line in a table cell)."""
    seconds = round(float(seconds))
    text = f"{seconds} s" if seconds < 60 else f"{seconds // 60} min {seconds % 60:02d} s"
    return text.replace(" ", "\u00a0")


BOOK_CSS = """
/* The claims and verdict tables: four columns that fit the text column, details on demand. */
table.claims-ledger, table.verdicts-table { width: 100%; table-layout: fixed; }
table.claims-ledger td, table.verdicts-table td { vertical-align: top; overflow-wrap: anywhere; }
table.claims-ledger th:nth-child(1) { width: 44%; } table.claims-ledger th:nth-child(2) { width: 20%; }
table.claims-ledger th:nth-child(3) { width: 22%; } table.claims-ledger th:nth-child(4) { width: 14%; }
table.verdicts-table th:nth-child(1) { width: 46%; } table.verdicts-table th:nth-child(2) { width: 16%; }
table.verdicts-table th:nth-child(3) { width: 18%; } table.verdicts-table th:nth-child(4) { width: 20%; }
.claim-id { font-family: var(--pst-font-family-monospace, monospace); font-size: 0.85em; margin-bottom: 0.2em; }
.claim-explanation { font-size: 0.85em; color: var(--pst-color-text-muted, #555); }
details.claim-details { font-size: 0.85em; }
details.claim-details p { margin: 0.2em 0; }
.claims-chapter-title { font-weight: 600; margin-top: 1.5em; }
.claim-status-fail, .verdict-does-not-reproduce { color: #b00020; font-weight: 600; }
.claim-status-undecided, .verdict-not-decided-at-this-scale, .verdict-partly { color: #a15c00; font-weight: 600; }
.claim-status-pass, .verdict-reproduces { color: #1b7a2e; font-weight: 600; }
/* Chapter code cells are formatted to 100 characters a line; the text column holds about 80, so a
   long line wraps (indented continuation) instead of making the cell scroll sideways. */
div.cell_input div.highlight pre { white-space: pre-wrap; overflow-wrap: anywhere; }
/* Prose tables that name functions and tests: long identifiers break instead of widening the table. */
.bd-article table td { overflow-wrap: anywhere; }
/* Sphinx's general index: two columns of long dotted names, wrapped to the page. */
table.indextable { width: 100%; table-layout: fixed; }
table.indextable td, table.indextable li, table.indextable a { white-space: normal; overflow-wrap: anywhere; }
.bd-article table td code, .bd-article table td span.pre { white-space: normal; overflow-wrap: anywhere; }
/* The package's source pages (viewcode): a long line wraps instead of widening the page. */
div.highlight pre:has(.viewcode-block) { white-space: pre-wrap; overflow-wrap: anywhere; }
dt.sig { overflow-wrap: anywhere; }
/* A source page's title names a dotted module path with no break point. */
article.bd-article h1 { overflow-wrap: anywhere; }
"""


def _write_css(app) -> None:
    if app.builder.format != "html":
        return
    static = Path(app.outdir) / "_static"
    static.mkdir(parents=True, exist_ok=True)
    (static / "book-tables.css").write_text(BOOK_CSS, encoding="utf-8")


def setup(app):
    app.add_css_file("book-tables.css")
    app.connect("builder-inited", _write_css)
    app.add_directive("verdicts-table", VerdictsTable)
    app.add_directive("claims-table", ClaimsTable)
    app.add_directive("status-table", StatusTable)
    return {"version": "0.1", "parallel_read_safe": True, "parallel_write_safe": True}
