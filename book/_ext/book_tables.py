"""Sphinx directives that render the book's generated JSON files as tables (and the book's CSS).

``claims-table`` renders ``book/claims.json`` (the claims ledger) and ``status-table`` renders
``book/status.json`` (per-chapter execution time and environment). Both files are written by
``python -m attention_dynamics reproduce``; reading them at build time keeps the pages in step.

The verdicts (:func:`attention_dynamics.ledger.verdicts.assess` over the ledger) are rendered three ways, each
leading with the reader's labels (holds, holds in part, does not hold, open at this scale, not tested here):
``verdicts-table`` (one row per claim of the paper: the statement, the paper's value, one sentence saying what the
book finds, the label; folded under the sentence, the rule's fine-grained verdict, each reading's own, the caveat and
the deciding numbers; then the book's own cross-checks in a second table), ``verdicts-scoreboard`` (the count per
label and one line per label naming its claims, each a link to its row; labels no claim has are left out) and,
injected at build time at the top of every chapter page (:func:`add_chapter_verdicts`), a box with that chapter's
verdicts and how many of its numbers hold. A verdict the rendering does not know (a new one added to
:mod:`attention_dynamics.ledger.verdicts`) is shown and counted like the others, in its own colour.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from docutils import nodes
from sphinx import addnodes
from sphinx.util.docutils import SphinxDirective

from attention_dynamics.ledger.claims import format_value


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


def _status_node(status: str, text: str | None = None) -> nodes.inline:
    """A ledger number's status as the reader sees it: its mark and its words (default: the reader's words)."""
    if text is None:
        from attention_dynamics.ledger.verdicts import STATUS_READER_LABELS

        text = STATUS_READER_LABELS.get(status, status)
    return nodes.inline(text=f"{STATUS_MARKS.get(status, OTHER_MARK)}\u00a0{text}",
                        classes=["claim-status", f"claim-status-{status}"])


def claim_anchor(claim_id: str) -> str:
    """Return the HTML id of a claim's row on the reproducibility page (a glued number's popover links to it)."""
    return nodes.make_id(f"claim-{claim_id}")


def _identifier(name: str, css_class: str) -> nodes.Node:
    """A dotted identifier as a paragraph that may break after its dots and underscores only (``<wbr>``)."""
    from html import escape

    breakable = re.sub(r"([._])", r"\1<wbr>", escape(name))
    return nodes.raw("", f'<p class="{css_class}">{breakable}</p>', format="html")


def _text_with_identifiers(text: str, css_class: str) -> nodes.raw:
    """A paragraph of text whose dotted identifiers (claim ids) may break after their dots and underscores."""
    from html import escape

    breakable = re.sub(r"\b[a-z][a-z0-9_]*(?:\.[a-z0-9_]+)+",
                       lambda m: re.sub(r"([._])", r"\1<wbr>", m.group(0)), escape(text))
    return nodes.raw("", f'<p class="{css_class}">{breakable}</p>', format="html")


def _details(summary: str, body_lines: list[str]) -> nodes.raw:
    """An HTML ``<details>`` element (works offline, no script): the summary, then the lines."""
    from html import escape

    body = "".join(f"<p>{escape(line)}</p>" for line in body_lines if line)
    return nodes.raw("", f"<details class=\"claim-details\"><summary>{escape(summary)}</summary>{body}</details>",
                     format="html")


def _fold(summary: str, children: list[nodes.Node], classes: list[str]) -> list[nodes.Node]:
    """Docutils nodes between an HTML ``<details>`` opening (with its summary) and its closing: a folded block."""
    from html import escape

    return [nodes.raw("", f'<details class="{" ".join(classes)}"><summary>{escape(summary)}</summary>', format="html"),
            *children, nodes.raw("", "</details>", format="html")]


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

    Columns: what it measures · paper · ours · status (in the reader's words). Each row carries the id
    :func:`claim_anchor` of its claim (a glued number's popover links to it); under what it measures come the claim's
    id (small) and, folded, its reference and parameters; claims that do not hold or are open come first in their
    chapter, with their explanation. The printed book leaves out the ids and the folded details (print CSS), so the
    ledger prints as a compact appendix.
    """

    def run(self):
        path = Path(self.env.srcdir) / "book" / "claims.json"
        self.env.note_dependency(str(path))
        if not path.exists():
            return [nodes.paragraph(text="The ledger has not been written yet: run `make book`.")]
        claims = json.loads(path.read_text(encoding="utf-8"))["claims"]
        counts = {s: sum(c["status"] == s for c in claims) for s in STATUS_ORDER}
        summary = nodes.paragraph(
            text=f"{len(claims)} numbers: {counts['pass']} hold, {counts['fail']} do not hold (explained), "
                 f"{counts['undecided']} open at this scale (explained), {counts['new']} the book's own.",
            classes=["claims-counts"])
        out = [summary]
        chapters: dict[str, list[dict]] = {}
        for c in claims:
            chapters.setdefault(c.get("chapter") or "", []).append(c)
        for chapter, rows in chapters.items():
            rows = sorted(rows, key=lambda c: STATUS_ORDER.index(c["status"]) if c["status"] in STATUS_ORDER else 9)
            section = nodes.container(classes=["claims-chapter"], ids=[nodes.make_id(f"ledger-{chapter}")])
            heading = nodes.paragraph(classes=["claims-chapter-title"])
            heading += _doc_link(self.env, f"book/{chapter}", _chapter_title(self.env, chapter))
            n_bad = sum(c["status"] in ("fail", "undecided") for c in rows)
            heading += nodes.Text(f" — {len(rows)} numbers" + (f", {n_bad} that do not hold or are open" if n_bad else ""))
            section += heading
            table = _table(["what it measures", "paper", "ours", "status"], [], [52, 14, 20, 14], ["claims-ledger"])
            tbody = table.next_node(nodes.tbody)
            for c in rows:
                row = nodes.row(ids=[claim_anchor(c["id"])])
                first = nodes.entry()
                first += nodes.paragraph(text=c["description"], classes=["claim-what"])
                first += _identifier(c["id"], "claim-id")
                lines = [f"Reference: {_reference(c)}"]
                if c.get("params"):
                    lines.append("Parameters: " + ", ".join(f"{k} = {v}" for k, v in c["params"].items()))
                first += _details("reference and settings", lines)
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


# --------------------------------------------------------------------------------------------
# Verdicts: the table, the scoreboard and each chapter's box
# --------------------------------------------------------------------------------------------

#: A mark beside each verdict, so that the verdict does not rest on its colour alone.
VERDICT_MARKS = {"reproduces": "✓", "reproduces where decided": "✓", "partly": "◐", "depends on the definition": "◇",
                 "not decided at this scale": "?", "not tested here": "∅", "does not reproduce where decided": "✗",
                 "does not reproduce": "✗",
                 # the reader's labels (attention_dynamics.ledger.verdicts.READER_LABELS)
                 "holds": "✓", "holds in part": "◐", "open at this scale": "?", "does not hold": "✗"}
#: The mark of a verdict this rendering does not know yet (one added to the rule later).
OTHER_MARK = "•"
#: What each status of a ledger number looks like beside the number.
STATUS_MARKS = {"pass": "✓", "fail": "✗", "undecided": "?", "new": "·"}

#: A short name per claim of the paper, for the scoreboard and the chapter boxes (the full
#: statement is on the verdict page). A claim without one is named by its statement.
SHORT_NAMES = {
    "routing_law": "the advantage routing law",
    "routing_law_properties": "its properties: rows sum to zero, routing freezes first",
    "value_law": "the responsibility-weighted value update",
    "query_key_laws": "the query and key laws",
    "feedback_first_order": "positive feedback, to first order",
    "em_bridge": "EM as a preconditioned gradient step",
    "frame_precision_toy": "routing settles before the values (toy task)",
    "frame_precision_wind_tunnel": "frame before precision in the wind tunnels",
    "sticky_speedup": "the EM-like schedule's 2.3× speed-up",
    "sticky_m_step_on_values": "the speed-up as an M-step on the values",
    "sticky_plateau": "both schedules still near ln 8 after 1000 steps",
    "sticky_trajectories": "longer, more coherent value trajectories",
    "bijection_calibration": "calibration on bijection elimination",
    "hmm_filtering": "HMM filtering and length generalisation",
    "geometry": "the geometry of keys, values and attention",
    "transformer_primitives": "the transformer realises all three primitives",
    "mamba_primitives": "Mamba: accumulation and transport, binding weak",
    "lstm_primitives": "the LSTM: accumulation only",
    "mlp_primitives": "the context-blind MLP: no primitive",
    "content_routing": "the routing law beyond softmax attention",
    "diagnostics": "the compatibility and advantage diagnostics",
}


def verdict_class(verdict: str) -> str:
    """Return the CSS class of a verdict: ``verdict-`` and its words joined by hyphens."""
    return "verdict-" + (re.sub(r"[^a-z0-9]+", "-", verdict.lower()).strip("-") or "unknown")


def verdict_mark(verdict: str) -> str:
    """Return the mark shown before a verdict (:data:`OTHER_MARK` for a verdict not in :data:`VERDICT_MARKS`)."""
    return VERDICT_MARKS.get(verdict, OTHER_MARK)


def row_id(paper_claim_id: str) -> str:
    """Return the HTML id of a paper claim's row on the verdict page (the scoreboard links to it)."""
    return nodes.make_id(f"verdict-{paper_claim_id}")


def short_name(paper_claim) -> str:
    """Return the claim's short name, or its statement up to the first colon when it has none."""
    if paper_claim.id in SHORT_NAMES:
        return SHORT_NAMES[paper_claim.id]
    head = paper_claim.statement.split(":", 1)[0].strip().rstrip(".")
    return head if len(head) <= 80 else head[:77].rstrip() + "…"


def verdict_counts(found: list, known: tuple[str, ...]) -> dict[str, int]:
    """Return ``{verdict: number of paper claims}``: every known verdict (zeros included), then any other in order of appearance."""
    counts = {name: 0 for name in known}
    for x in found:
        counts[x.verdict] = counts.get(x.verdict, 0) + 1
    return counts


def _verdict_node(verdict: str, text: str | None = None) -> nodes.inline:
    """A verdict as the reader sees it: its mark and its words, in the verdict's colour."""
    return nodes.inline(text=f"{verdict_mark(verdict)}\u00a0{text or verdict}", classes=["verdict", verdict_class(verdict)])


def _verdict_doc_link(env, paper_claim_id: str, text: str) -> nodes.Node:
    """A link to a paper claim's row on the verdict page."""
    return _doc_link(env, "book/verdicts", text, row_id(paper_claim_id))


def _read_ledger(env) -> list[dict] | None:
    path = Path(env.srcdir) / "book" / "claims.json"
    env.note_dependency(str(path))
    if not path.exists():
        return None
    return json.loads(path.read_text(encoding="utf-8"))["claims"]


def _ours_lines(ledger_by_id: dict[str, dict], groups) -> nodes.Node:
    """The deciding numbers, one line each: value with unit (and interval), what it is, its status; grouped under
    the name of the definition or part they decide (``groups``: the paper claim's
    :attr:`~attention_dynamics.ledger.verdicts.PaperClaim.groups`, one unnamed group for plain evidence)."""
    box = nodes.container(classes=["verdict-ours"])
    for group in groups:
        if group.name:
            box += nodes.paragraph(text=group.name, classes=["ours-group"])
        for cid in group.evidence:
            c = ledger_by_id[cid]
            para = nodes.paragraph(classes=["ours-line"])
            para += nodes.inline(text=_ours(c), classes=["ours-value"])
            para += nodes.Text(" ")
            para += nodes.inline(text=cid.split(".", 1)[-1].replace("_", " "), classes=["ours-what"])
            para += nodes.Text(" ")
            para += _status_node(c["status"])
            box += para
    return box


def _verdict_entry(x) -> nodes.entry:
    """The verdict cell: the row's verdict in the reader's words (holds, holds in part, does not hold, open at this
    scale, not tested here)."""
    entry = nodes.entry()
    para = nodes.paragraph()
    para += _verdict_node(x.label)
    entry += para
    return entry


def _rule_lines(x) -> list[nodes.Node]:
    """What the folded block of a row says about the rule: the fine-grained verdict, each reading's (or part's) own
    verdict or what is open at this scale beside a decided part, and the budget note."""
    out = []
    para = nodes.paragraph(classes=["verdict-definition"])
    para += nodes.Text("By the rule: ")
    para += _verdict_node(x.verdict)
    out.append(para)
    if x.by_group:
        for name, verdict in x.by_group.items():
            line = nodes.paragraph(classes=["verdict-definition"])
            line += nodes.Text(f"{name}: ")
            line += _verdict_node(verdict)
            out.append(line)
    else:
        for text in x.lines():  # may name claim ids: they break after their dots and underscores only
            out.append(_text_with_identifiers(text, "verdict-definition"))
    if x.claim.budget_limited:
        out.append(nodes.paragraph(text=f"Failures count as open at this scale: {x.claim.budget_limited}.",
                                   classes=["claim-explanation"]))
    return out


def _reason(x) -> str:
    """The row's one sentence for a reader: its reason, else its caveat, else its verdict in words."""
    text = x.reason or (x.caveat[0].upper() + x.caveat[1:] + "." if x.caveat else "")
    return text or f"The deciding numbers give: {x.summary}."


class VerdictsTable(SphinxDirective):
    """Render one row per claim of the paper: statement · paper · the book finds · verdict; then the book's
    cross-checks.

    The verdicts come from the ledger (``book/claims.json``) through
    :func:`attention_dynamics.ledger.verdicts.assess`. A row leads with the verdict in the reader's words
    (:data:`~attention_dynamics.ledger.verdicts.READER_LABELS`) and one sentence saying why (the row's ``reason``,
    filled from the ledger; its caveat where it has none); a folded block under that sentence keeps the rule's
    fine-grained verdict, each reading's (definition's or part's) own verdict, the caveat and the deciding numbers
    with their statuses, grouped by the reading they decide. The statement's cell links to the section that shows
    the evidence. Each row has the id :func:`row_id` of its claim, which the scoreboard and the chapter boxes link
    to. A second table lists the book's own cross-checks
    (:data:`attention_dynamics.ledger.verdicts.CROSS_CHECKS`) the same way.
    """

    def run(self):
        from attention_dynamics.ledger import verdicts as v

        ledger = _read_ledger(self.env)
        if ledger is None:
            return [nodes.paragraph(text="The ledger has not been written yet: run `make book`.")]
        by_id = {c["id"]: c for c in ledger}
        out = [self._table(v.assess(ledger), by_id)]
        checks = v.assess(ledger, v.CROSS_CHECKS)
        if checks:
            out.append(nodes.paragraph(text="The book's cross-checks: results the book adds beside the paper's "
                                            "claims, judged the same way.", classes=["claims-chapter-title"]))
            out.append(self._table(checks, by_id, header="the book checks"))
        return out

    def _table(self, found, by_id: dict[str, dict], header: str = "the paper says") -> nodes.table:
        table = _table([header, "paper", "the book finds", "verdict"], [], [32, 12, 42, 14], ["verdicts-table"])
        tbody = table.next_node(nodes.tbody)
        for x in found:
            pc = x.claim
            row = nodes.row(ids=[row_id(pc.id)])
            first = nodes.entry()
            first += nodes.paragraph(text=pc.statement)
            where = nodes.paragraph(classes=["verdict-where"])
            docname, anchor, title = pc.section
            where += nodes.Text("Shown in ")
            where += _doc_link(self.env, docname, f"{_chapter_title(self.env, docname.split('/')[-1])}: {title}", anchor)
            first += where
            row += first
            entry = nodes.entry()
            entry += nodes.paragraph(text=pc.paper_value)
            row += entry
            entry = nodes.entry()
            entry += nodes.paragraph(text=_reason(x), classes=["verdict-reason"])
            folded = _rule_lines(x)
            if x.caveat and x.reason:
                folded.append(nodes.paragraph(text=x.caveat[0].upper() + x.caveat[1:] + ".",
                                              classes=["claim-explanation"]))
            folded.append(_ours_lines(by_id, pc.groups))
            for node in _fold("the numbers and the rule", folded, ["claim-details", "verdict-fold"]):
                entry += node
            row += entry
            row += _verdict_entry(x)
            tbody += row
        return table


def reader_counts(found: list) -> dict[str, int]:
    """Return ``{reader label: number of paper claims}`` for the labels that occur, in the rule's order of verdicts
    (a verdict the rule does not know keeps its own name, after the others)."""
    from attention_dynamics.ledger import verdicts as v

    order = list(dict.fromkeys(v.READER_LABELS[name] for name in v.VERDICTS))
    counts: dict[str, int] = {}
    for x in found:
        label = v.READER_LABELS.get(x.verdict, x.verdict)
        counts[label] = counts.get(label, 0) + 1
    known = [label for label in order if label in counts]
    return {label: counts[label] for label in [*known, *(k for k in counts if k not in known)]}


class VerdictsScoreboard(SphinxDirective):
    """Render the verdicts at a glance, in the reader's words: the count per label, then one line per label naming
    its claims.

    The labels are :data:`~attention_dynamics.ledger.verdicts.READER_LABELS` (holds, holds in part, open at this
    scale, not tested here, does not hold); a label no claim has is not shown. Each claim links to its row on the
    verdict page; a verdict :mod:`attention_dynamics.ledger.verdicts` adds later is counted and listed too.
    """

    def run(self):
        from attention_dynamics.ledger import verdicts as v

        ledger = _read_ledger(self.env)
        if ledger is None:
            return [nodes.paragraph(text="The ledger has not been written yet: run `make book`.")]
        found = v.assess(ledger)
        counts = reader_counts(found)
        box = nodes.container(classes=["verdict-scoreboard"])
        head = nodes.paragraph(classes=["scoreboard-counts"])
        head += nodes.inline(text=f"{len(found)} claims of the paper", classes=["scoreboard-total"])
        for label, n in counts.items():
            head += nodes.Text(" ")
            head += _verdict_node(label, f"{label}: {n}")
        box += head
        listing = nodes.bullet_list(classes=["scoreboard-lines"])
        for label, n in counts.items():
            item = nodes.list_item()
            para = nodes.paragraph()
            para += _verdict_node(label, label[0].upper() + label[1:])
            para += nodes.Text(f" ({n}): ")
            claims = [x.claim for x in found if v.READER_LABELS.get(x.verdict, x.verdict) == label]
            for i, pc in enumerate(claims):
                if i:
                    para += nodes.Text("; ")
                para += _verdict_doc_link(self.env, pc.id, short_name(pc))
            para += nodes.Text(".")
            item += para
            listing += item
        box += listing
        return [box]


_CHAPTER_DOC = re.compile(r"^book/(\d\d-[a-z0-9-]+)$")


def chapter_verdicts_box(env, chapter: str, ledger: list[dict]) -> nodes.admonition:
    """Return the box that opens a chapter page: what it finds about the paper's claims in the reader's words (each
    linked to its row on the verdict page) and a link to its numbers beside the paper's (no counts: the box says what
    the chapter finds)."""
    from attention_dynamics.ledger import verdicts as v

    found = [x for x in v.assess(ledger) if x.claim.section[0] == f"book/{chapter}"]
    checks = [x for x in v.assess(ledger, v.CROSS_CHECKS) if x.claim.section[0] == f"book/{chapter}"]
    box = nodes.admonition(classes=["chapter-verdicts"])
    box += nodes.title(text="What this chapter finds" if found else "What this chapter does")
    if found:
        listing = nodes.bullet_list()
        for x in found:
            item = nodes.list_item()
            para = nodes.paragraph()
            para += _verdict_node(x.label)
            para += nodes.Text(": ")
            para += _verdict_doc_link(env, x.claim.id, short_name(x.claim))
            para += nodes.Text(f" — paper: {x.claim.paper_value}")
            item += para
            listing += item
        for x in checks:
            item = nodes.list_item()
            para = nodes.paragraph()
            para += _verdict_node(x.label)
            para += nodes.Text(": ")
            para += _verdict_doc_link(env, x.claim.id, short_name(x.claim))
            para += nodes.Text(" — the book's cross-check")
            item += para
            listing += item
        box += listing
    else:
        para = nodes.paragraph(text="It tests none of the paper's claims: it sets up the ")
        para += _doc_link(env, "book/notation", "notation")
        para += nodes.Text(" and the checks the later chapters build on.")
        box += para
    if any(c.get("chapter") == chapter for c in ledger):  # where its numbers stand beside the paper's, not a count
        para = nodes.paragraph(classes=["chapter-ledger"])
        para += nodes.Text("Every number on this page stands beside the paper's on the ")
        para += _doc_link(env, "book/reproducibility", "reproducibility page", nodes.make_id(f"ledger-{chapter}"))
        para += nodes.Text(".")
        box += para
    return box


def add_chapter_verdicts(app, doctree) -> None:
    """Put the chapter's verdict box right under the title of every chapter page (``book/NN-slug``)."""
    env = app.env
    match = _CHAPTER_DOC.match(env.docname)
    if not match:
        return
    ledger = _read_ledger(env)
    section = doctree.next_node(nodes.section)
    if ledger is None or section is None:
        return
    title = section.next_node(nodes.title)
    index = section.index(title) + 1 if title is not None and title.parent is section else 0
    section.insert(index, chapter_verdicts_box(env, match.group(1), ledger))


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
/* The header bar of the underlying theme holds only a second search box (the sidebar has one):
   the book theme's own article header carries the buttons, so the bar is not shown. */
#pst-header { display: none !important; }

/* Verdict and status colours: at least 4.5:1 against the page in the light and the dark theme
   (the browser test measures it). Each verdict also carries a mark (✓ ◐ ? ✗), so colour is never
   the only signal. A verdict without a colour of its own (one added later) takes --verdict-other. */
html { --verdict-reproduces: #17692a; --verdict-partly: #7a5300; --verdict-depends: #1d4ed8;
       --verdict-undecided: #475569; --verdict-untested: #8a3b12; --verdict-fails: #b00020; --verdict-other: #5b3fa8; }
html[data-theme="dark"] { --verdict-reproduces: #7ee28f; --verdict-partly: #f2c94c; --verdict-depends: #93c5fd;
       --verdict-undecided: #cbd5e1; --verdict-untested: #f6ad7b; --verdict-fails: #ff8a80; --verdict-other: #c6a8ff; }
.verdict, .claim-status { font-weight: 600; color: var(--verdict-other); }
.verdict-reproduces, .verdict-reproduces-where-decided, .verdict-holds, .claim-status-pass { color: var(--verdict-reproduces); }
.verdict-partly, .verdict-holds-in-part { color: var(--verdict-partly); }
.verdict-depends-on-the-definition { color: var(--verdict-depends); }
.verdict-not-decided-at-this-scale, .verdict-open-at-this-scale, .claim-status-undecided { color: var(--verdict-undecided); }
.verdict-not-tested-here { color: var(--verdict-untested); }
.verdict-does-not-reproduce, .verdict-does-not-reproduce-where-decided, .verdict-does-not-hold, .claim-status-fail { color: var(--verdict-fails); }
.claim-status-new { color: inherit; font-weight: normal; }

/* The scoreboard (front page, verdict page) and each chapter's box. */
.verdict-scoreboard { border: 1px solid var(--pst-color-border, #ccc); border-radius: 6px; padding: 0.6em 1em;
                      margin: 1em 0 1.5em; }
div.verdict-scoreboard.docutils.container { padding: 0.6em 1em; }
.scoreboard-counts { font-size: 1.1em; margin-bottom: 0.4em; display: flex; flex-wrap: wrap; column-gap: 1em; }
.scoreboard-counts .verdict { white-space: nowrap; }
@media (max-width: 640px) { .scoreboard-counts .verdict { white-space: normal; } }
.scoreboard-total { font-weight: 600; }
ul.scoreboard-lines { margin-bottom: 0; }
ul.scoreboard-lines li p, .chapter-verdicts li p { margin: 0.15em 0; }
.chapter-ledger { font-size: 0.9em; }
/* The row a link points to. */
table.verdicts-table tr:target, table.claims-ledger tr:target { outline: 2px solid var(--pst-color-primary, #0a7d91);
                                                                outline-offset: -2px; }
/* A verdict row leads with its one sentence; the rule's wording, the readings and the numbers are folded. */
p.verdict-reason { margin: 0 0 0.3em; }
details.verdict-fold > summary { color: var(--pst-color-text-muted, #555); }
details.verdict-fold[open] { margin-top: 0.3em; }

/* Glued numbers read in the body's weight (myst-nb makes them bold); **…** around one still makes it bold. */
.bd-article span.pasted-text { font-weight: inherit; }
/* A glued number never breaks across lines ("1.6e-" | "16"); a glued phrase wraps as text does. */
.bd-article .glued-number, .bd-article .claim-number { white-space: nowrap; }

/* A chapter's settings table (core.settings.ChapterSettings.table): labels as plain text, readable in both themes
   (older outputs wrap the keys in <code>, pink on the output's light grey in the dark theme). */
html[data-theme="dark"] .bd-content div.cell_output .text_html:has(table.settings-table) {
  background-color: transparent; color: inherit; padding: 0; }
table.settings-table code { color: inherit; background: none; border: none; padding: 0; font-size: 0.95em; }
table.settings-table td, table.settings-table th { padding: 0.2em 0.8em 0.2em 0; text-align: left; }

/* The claims and verdict tables: columns that fit the text column, words and numbers never split
   (an identifier breaks at its dots and underscores, <wbr> in the HTML), details on demand. */
table.claims-ledger, table.verdicts-table { width: 100%; }
table.claims-ledger td, table.verdicts-table td { vertical-align: top; }
.claim-what { margin-bottom: 0.1em; }
.claim-id { font-family: var(--pst-font-family-monospace, monospace); font-size: 0.75em; margin-bottom: 0.2em;
            color: var(--pst-color-text-muted, #555); }
.claim-explanation, .verdict-where { font-size: 0.85em; color: var(--pst-color-text-muted, #555); }
.verdict-ours p.ours-line { margin: 0 0 0.3em; font-size: 0.9em; }
.verdict-ours p.ours-group { margin: 0.4em 0 0.15em; font-size: 0.85em; font-style: italic; }
p.verdict-definition { margin: 0.15em 0; font-size: 0.85em; }
.ours-value { font-weight: 600; }
.ours-what { color: var(--pst-color-text-muted, #555); }
.ours-line .claim-status { font-weight: normal; white-space: nowrap; }
details.claim-details { font-size: 0.85em; }
details.claim-details p { margin: 0.2em 0; }
.claims-chapter-title { font-weight: 600; margin-top: 1.5em; }
/* On a phone the two tables read as one block per row, each cell under its column's name. */
@media (max-width: 640px) {
  table.verdicts-table, table.claims-ledger, table.verdicts-table tbody, table.claims-ledger tbody,
  table.verdicts-table tr, table.claims-ledger tr, table.verdicts-table td, table.claims-ledger td {
    display: block; width: auto !important; }
  table.verdicts-table thead, table.claims-ledger thead, table.verdicts-table colgroup, table.claims-ledger colgroup {
    display: none; }
  table.verdicts-table tr, table.claims-ledger tr { border-top: 1px solid var(--pst-color-border, #ccc);
    padding: 0.4em 0; }
  table.verdicts-table td, table.claims-ledger td { border: none !important; padding: 0.15em 0 !important; }
  table.verdicts-table td:nth-child(2)::before { content: "paper: "; font-weight: 600; }
  table.verdicts-table td:nth-child(3)::before { content: "the book finds:"; font-weight: 600; display: block; }
  table.claims-ledger td:nth-child(2)::before { content: "paper: "; font-weight: 600; }
  table.claims-ledger td:nth-child(3)::before { content: "ours: "; font-weight: 600; }
  table.verdicts-table td > p, table.claims-ledger td > p { display: inline; }
  table.verdicts-table td > p + p, table.verdicts-table td > p + div { display: block; }
}

/* The printed book: the ledger as a compact appendix (no ids, no folded details, smaller type), the verdict rows
   without their folds. */
@media print {
  table.claims-ledger { font-size: 7.5pt !important; line-height: 1.25; }
  table.claims-ledger td { padding: 0.1em 0.35em !important; }
  table.claims-ledger p { margin: 0 !important; }
  table.claims-ledger .claim-id, table.claims-ledger details.claim-details { display: none !important; }
  table.claims-ledger .claim-explanation { font-size: 7pt; }
  table.claims-ledger tr { break-inside: avoid; }
  .claims-chapter-title { margin-top: 0.6em; break-after: avoid; }
  details.verdict-fold { display: none !important; }
}

/* Every other table keeps its words and numbers whole; when it is wider than the column it
   scrolls inside its own box (the theme's scrollable container, the cell output), never the page. */
.bd-article .pst-scrollable-table-container, div.cell_output, div.cell_output .output { max-width: 100%; overflow-x: auto; }
div.cell_output table td, div.cell_output table th { white-space: nowrap; }
/* Identifiers in prose and in prose tables (function names, file paths) may break anywhere: they
   are code, not words, and a long one would otherwise widen the page on a phone. */
.bd-article code.literal { overflow-wrap: anywhere; }
.bd-article code.literal span.pre { white-space: normal; }

/* Display equations scroll inside their own box; a numbered one keeps its number beside it. */
div.math { max-width: 100%; }
div.math > mjx-container[display="true"] { overflow-x: auto; overflow-y: hidden; max-width: 100%;
                                            padding: 0.15em 0; }
div.math:has(> span.eqno) { display: flex; flex-direction: row-reverse; align-items: center; gap: 0.5em; }
div.math > span.eqno { float: none !important; flex: none; }
div.math:has(> span.eqno) > mjx-container[display="true"] { flex: 1 1 auto; min-width: 0; margin: 0.5em 0; }

/* Chapter code cells are formatted to 100 characters a line; the text column holds about 80, so a
   long line wraps (indented continuation) instead of making the cell scroll sideways. */
div.cell_input div.highlight pre { white-space: pre-wrap; overflow-wrap: anywhere; }
/* Sphinx's general index: two columns of long dotted names, wrapped to the page. */
table.indextable { width: 100%; table-layout: fixed; }
table.indextable td, table.indextable li, table.indextable a { white-space: normal; overflow-wrap: anywhere; }
/* The package's source pages (viewcode): a long line wraps instead of widening the page. */
div.highlight pre:has(.viewcode-block) { white-space: pre-wrap; overflow-wrap: anywhere; }
dt.sig { overflow-wrap: anywhere; }
dt.sig span.pre { white-space: normal; }
/* An API entry's fields (Parameters, Returns) on a phone: the name above its list, not beside it. */
@media (max-width: 640px) { .bd-article dl.field-list { display: block; } .bd-article dl.field-list > dd { margin-left: 1em; } }
/* A source page's title names a dotted module path with no break point. */
article.bd-article h1 { overflow-wrap: anywhere; }
/* On a phone a title of two lines leaves room for the chapter's verdicts on the first screen. */
@media (max-width: 640px) { article.bd-article h1 { font-size: 2rem; } }
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
    app.add_directive("verdicts-scoreboard", VerdictsScoreboard)
    app.connect("doctree-read", add_chapter_verdicts)
    app.add_directive("claims-table", ClaimsTable)
    app.add_directive("status-table", StatusTable)
    return {"version": "0.1", "parallel_read_safe": True, "parallel_write_safe": True}
