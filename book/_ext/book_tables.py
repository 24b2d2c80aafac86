"""Sphinx directives that render the book's generated JSON files as tables.

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
    table = nodes.table(classes=classes)
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


class ClaimsTable(SphinxDirective):
    """Render the claims ledger: id | chapter | what | ours | reference | status | explanation."""

    def run(self):
        path = Path(self.env.srcdir) / "book" / "claims.json"
        self.env.note_dependency(str(path))
        if not path.exists():
            return [nodes.paragraph(text="The ledger has not been written yet: run `make book`.")]
        claims = json.loads(path.read_text(encoding="utf-8"))["claims"]
        rows = [
            [
                c["id"],
                c.get("chapter") or "",
                c["description"],
                _ours(c),
                _reference(c),
                c["status"],
                c.get("explanation") or "",
            ]
            for c in claims
        ]
        header = ["claim", "chapter", "what", "ours", "reference", "status", "explanation"]
        counts = {s: sum(c["status"] == s for c in claims) for s in ("pass", "fail", "undecided", "new")}
        summary = nodes.paragraph(
            text=f"{len(claims)} claims: {counts['pass']} pass, {counts['fail']} fail (explained), "
                 f"{counts['undecided']} not decided at this scale (explained), {counts['new']} new."
        )
        return [summary, _table(header, rows, [16, 10, 30, 10, 14, 6, 24], ["claims-ledger"])]


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


def setup(app):
    app.add_directive("claims-table", ClaimsTable)
    app.add_directive("status-table", StatusTable)
    return {"version": "0.1", "parallel_read_safe": True, "parallel_write_safe": True}
