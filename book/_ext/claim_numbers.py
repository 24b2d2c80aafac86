"""Every glued number that is a ledger claim links to its evidence: a small popover beside the number.

A chapter glues a ledger claim's value under the claim's id (``claims.record``) and its prose pastes it with
``{glue:text}`claim.id:.3f```. The glue roles (``{glue:text}``, ``{glue}``, ``{glue:any}``) are replaced by
subclasses of myst-nb's own that remember the glue key on the nodes they return; a post-transform then wraps each
pasted value whose key is a claim of ``book/claims.json`` in a :class:`claim_number` element with a
:class:`claim_popover` inside: the paper's value (or "—"), the number's status in the reader's words (pass →
holds, fail → does not hold, undecided → open at this scale, new → the book's own number) and a link to its row on
the reproducibility page (the anchor :func:`book_tables.claim_anchor` gives every ledger row).

The popover shows on hover and on keyboard focus (the number has ``tabindex="0"`` and ``aria-describedby`` naming
the popover), and a tap toggles it (``claim-numbers.js``, served from the built site with ``claim-numbers.css``: no
CDN, the site works offline). Print hides the popovers. A glued value whose key is not a claim gets no popover; every
glued value that is one short word (a number) gets the class ``glued-number``, which keeps it on one line.
"""

from __future__ import annotations

import json
import re
from html import escape
from pathlib import Path

from docutils import nodes
from myst_nb.ext.glue.roles import PasteRoleAny, PasteTextRole
from sphinx.transforms.post_transforms import SphinxPostTransform

STATIC = Path(__file__).resolve().parent / "static"
CSS_FILE, JS_FILE = "claim-numbers.css", "claim-numbers.js"
LEDGER_DOC = "book/reproducibility"


class claim_number(nodes.inline):
    """A pasted claim value with its popover (rendered as ``<span class="claim-number" tabindex="0" …>``)."""


class claim_popover(nodes.inline):
    """The popover of a :class:`claim_number` (``<span class="claim-popover" role="tooltip" id=…>``)."""


def glue_key(text: str, *, with_format: bool) -> str:
    """Return the glue key of a glue role's text: ``key:format`` → key (for ``{glue:text}``), ``doc::key`` → key."""
    key = text.rsplit(":", 1)[0] if with_format and ":" in text.replace("::", "") else text
    return key.split("::", 1)[-1].strip()


class KeyedPasteTextRole(PasteTextRole):
    """myst-nb's ``{glue:text}``, whose pasted nodes remember their glue key (``glue_key``)."""

    def run(self):
        found, messages = super().run()
        key = glue_key(self.text, with_format=True)
        for node in found:
            if isinstance(node, nodes.Element):
                node["glue_key"] = key
        return found, messages


class KeyedPasteRoleAny(PasteRoleAny):
    """myst-nb's ``{glue}`` / ``{glue:any}``, whose pasted nodes remember their glue key (``glue_key``)."""

    def run(self):
        found, messages = super().run()
        key = glue_key(self.text, with_format=False)
        for node in found:
            if isinstance(node, nodes.Element):
                node["glue_key"] = key
        return found, messages


def _register_roles(app, config) -> None:
    if "glue" not in app.registry.domains:  # no myst-nb: nothing is glued
        return
    app.add_role_to_domain("glue", "text", KeyedPasteTextRole(), override=True)
    app.add_role_to_domain("glue", "", KeyedPasteRoleAny(), override=True)
    app.add_role_to_domain("glue", "any", KeyedPasteRoleAny(), override=True)
    app.add_role("glue", KeyedPasteRoleAny(), override=True)


def read_ledger(srcdir: str | Path) -> dict[str, dict]:
    """Return the ledger's claims by id (empty when ``book/claims.json`` does not exist yet)."""
    path = Path(srcdir) / "book" / "claims.json"
    if not path.exists():
        return {}
    return {c["id"]: c for c in json.loads(path.read_text(encoding="utf-8"))["claims"]}


def popover_facts(claim: dict) -> tuple[str, str, str]:
    """Return what a claim's popover says: (the paper's value or "—", the status in the reader's words, the status)."""
    from attention_dynamics.ledger.claims import format_value
    from attention_dynamics.ledger.verdicts import status_label

    paper = "—" if claim.get("paper_value") is None else format_value(claim["paper_value"])
    unit = claim.get("unit") or ""
    if paper != "—" and unit and unit not in ("fraction",):
        paper = f"{paper} {unit}".replace(" ×", "×")
    return paper, status_label(claim["status"]), claim["status"]


def _ledger_uri(env, anchor: str) -> str:
    builder = env.app.builder
    try:
        uri = builder.get_relative_uri(env.docname, LEDGER_DOC)
    except Exception:  # a builder without pages (e.g. a linkcheck)
        uri = ""
    if uri.startswith("#"):  # the single-page build: the row's anchor is on the same page
        uri = ""
    return f"{uri}#{anchor}"


class ClaimNumbers(SphinxPostTransform):
    """Wrap every pasted value whose glue key is a ledger claim in a :class:`claim_number` with its popover."""

    default_priority = 900  # after myst-nb resolves glue references across documents

    def run(self, **kwargs) -> None:
        if self.app.builder.format != "html":
            return
        candidates = [n for n in self.document.findall(nodes.Element) if n.get("glue_key")]
        if not candidates:
            return
        for node in candidates:  # a number (no space, short) keeps on one line: class glued-number
            text = node.astext()
            if text and len(text) <= 24 and not re.search(r"\s", text):
                node["classes"].append("glued-number")
        ledger = read_ledger(self.env.srcdir)
        self.env.note_dependency(str(Path(self.env.srcdir) / "book" / "claims.json"))
        from book_tables import claim_anchor, _status_node

        slug = re.sub(r"[^a-z0-9]+", "-", self.env.docname.lower()).strip("-")
        for n, node in enumerate(candidates):
            claim = ledger.get(node["glue_key"])
            if claim is None or node.parent is None or isinstance(node.parent, claim_number):
                continue
            paper, label, status = popover_facts(claim)
            popover_id = f"claim-pop-{slug}-{n}"
            wrapper = claim_number(classes=["claim-number", f"claim-number-{status}"], claim_id=claim["id"],
                                   popover_id=popover_id, status=status)
            popover = claim_popover(classes=["claim-popover"], popover_id=popover_id)
            line = nodes.inline(classes=["claim-popover-line"])
            line += nodes.inline(text="paper ", classes=["claim-popover-key"])
            line += nodes.Text(paper)
            popover += line
            line = nodes.inline(classes=["claim-popover-line"])
            line += nodes.inline(text="book ", classes=["claim-popover-key"])
            line += _status_node(status, label)
            popover += line
            line = nodes.inline(classes=["claim-popover-line"])
            line += nodes.reference("", "its record on the reproducibility page",
                                    refuri=_ledger_uri(self.env, claim_anchor(claim["id"])), internal=True)
            popover += line
            node.parent.replace(node, wrapper)  # not replace_self: it would copy the number's classes
            wrapper += node
            wrapper += popover


def visit_claim_number(self, node) -> None:
    self.body.append(f'<span class="{" ".join(node["classes"])}" tabindex="0" '
                     f'aria-describedby="{escape(node["popover_id"])}" data-claim="{escape(node["claim_id"])}" '
                     f'data-status="{escape(node["status"])}">')


def depart_claim_number(self, node) -> None:
    self.body.append("</span>")


def visit_claim_popover(self, node) -> None:
    self.body.append(f'<span class="claim-popover" role="tooltip" id="{escape(node["popover_id"])}">')


def depart_claim_popover(self, node) -> None:
    self.body.append("</span>")


def _visit_text_only(self, node) -> None:  # other builders: the number alone
    if isinstance(node, claim_popover):
        raise nodes.SkipNode


def _depart_nothing(self, node) -> None:
    pass


def copy_static(app, exception=None) -> None:
    """Copy the popover's CSS and JS into the site's ``_static`` folder."""
    if app.builder.format != "html":
        return
    static = Path(app.outdir) / "_static"
    static.mkdir(parents=True, exist_ok=True)
    for name in (CSS_FILE, JS_FILE):
        (static / name).write_text((STATIC / name).read_text(encoding="utf-8"), encoding="utf-8")


def setup(app):
    app.connect("config-inited", _register_roles)
    app.add_node(claim_number, html=(visit_claim_number, depart_claim_number),
                 latex=(_visit_text_only, _depart_nothing), text=(_visit_text_only, _depart_nothing))
    app.add_node(claim_popover, html=(visit_claim_popover, depart_claim_popover),
                 latex=(_visit_text_only, _depart_nothing), text=(_visit_text_only, _depart_nothing))
    app.add_post_transform(ClaimNumbers)
    app.add_css_file(CSS_FILE)
    app.add_js_file(JS_FILE, loading_method="defer")
    app.connect("builder-inited", copy_static)
    return {"version": "0.1", "parallel_read_safe": True, "parallel_write_safe": True}
