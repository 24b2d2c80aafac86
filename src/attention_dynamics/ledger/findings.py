"""What the book finds, in plain sentences: the front page's list, filled from the ledger.

:data:`FINDINGS` is the list the front page shows (the ``{findings}`` directive, ``book/_ext/reader_pages.py``), at
most :data:`MAX_FINDINGS` entries in reading order. Each is one sentence for a reader, written as a template whose
``{claim.id:format}`` fields are filled from ``book/claims.json`` exactly as a verdict row's caveat is
(:func:`~attention_dynamics.ledger.verdicts.render_caveat`), so that no number is typed by hand; beside it the page
shows the reader's label of the verdict row it summarises (holds, holds in part, does not hold, open at this scale,
not tested here: :func:`~attention_dynamics.ledger.verdicts.reader_label`) and a link to the section that shows the
evidence (the row's own section unless the finding names another).

To revise a finding, edit its entry: the sentence (``text``), the verdict row whose label it carries (``row``) and,
if the evidence is elsewhere than the row's section, ``link`` (chapter docname, section anchor). The tests check
that every field fills from the ledger, that each entry is one sentence stating at least one number, and that its
row and link exist.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable, Mapping

from .verdicts import CROSS_CHECKS, PAPER_CLAIMS, assess, caveat_claim_ids, reader_label, render_caveat, render_parts

__all__ = ["Finding", "RenderedFinding", "FINDINGS", "MAX_FINDINGS", "render_findings", "finding_problems"]

#: The most findings the front page lists (its first screen holds them all).
MAX_FINDINGS = 8


@dataclass(frozen=True)
class Finding:
    """One finding: ``text``, a one-sentence template with ``{claim.id:format}`` fields; ``row``, the id of the
    verdict row (a paper claim or a cross-check) whose reader label it carries; ``link``, the evidence as
    ``(chapter docname, section anchor)``, default the row's own section."""

    text: str
    row: str
    link: tuple[str, str] | None = None

    @property
    def claim_ids(self) -> list[str]:
        """Return the ledger claims the sentence states, in order."""
        return caveat_claim_ids(self.text)


@dataclass(frozen=True)
class RenderedFinding:
    """A finding filled from the ledger: its sentence (``text``; ``parts``: the pieces with the claim id of each
    number), the verdict of its row and that verdict's reader label, and where its evidence is (docname, anchor,
    the section's title)."""

    finding: Finding
    text: str
    parts: list[tuple[str, str | None]]
    verdict: str
    label: str
    docname: str
    anchor: str
    section_title: str


#: The book's findings, in reading order. One entry each; the numbers come from the ledger.
FINDINGS: tuple[Finding, ...] = (
    Finding("The paper's gradient laws for the scores, values, queries and keys are exact: they match automatic "
            "differentiation to within {gradients.sdpa_agreement_max_abs_err:.0e}, which is round-off.",
            row="routing_law"),
    Finding("A value step makes the values a query uses better for it, as the paper predicts, at the start of "
            "training (the predicted change is {dynamics.db_prediction_rel_err_init:.1%} off) but not once routing "
            "has formed ({dynamics.db_prediction_rel_err_transition:.0%} off).",
            row="feedback_first_order"),
    Finding("Bijection elimination cannot test what routing does: with uniform attention the same transformer "
            "ends at {routing_need.bijection.uniform_kl_ratio:.2f} times the trained model's KL, against "
            "{routing_need.binding.uniform_kl_ratio:.0f} times on a binding tunnel, where a key's value must be found "
            "by content.",
            row="frame_precision_wind_tunnel", link=("book/09-binding-tunnel", "which-tasks-need-routing")),
    Finding("On the binding tunnel routing is nearly in place half-way through training: frozen there, the model "
            "ends at {binding.freeze_kl_ratio_t1000:.2f} times the trained model's KL, "
            "{binding.freeze_kl_ratio_t1000?within|outside|at the edge of} the book's bound for a free freeze.",
            row="frame_precision_wind_tunnel", link=("book/09-binding-tunnel",
                                                     "frame-before-precision-on-a-task-that-needs-a-frame")),
    Finding("Whether attention settles before the values on chapter 4's recall head depends on how settling is "
            "measured: judged by what the model computes it does in {frame_precision.order_function_sgd:.0%} of "
            "seeds, judged by how far its weights still have to move in {frame_precision.order_path_sgd:.0%} under "
            "SGD.",
            row="frame_precision_toy"),
    Finding("The paper's 2.3× speed-up of its EM-like schedule comes out at {sticky.speedup_paper_protocol:.1f}× on "
            "its own protocol and at {routing_need.sticky.speedup_identity_routing:.1f}× with the routing fixed to "
            "the chain's Bayes routing: a step-size effect, not faster learning of the routing.",
            row="sticky_speedup"),
    Finding("Small transformers match the exact Bayesian posterior on bijection elimination to "
            "{bijection.entropy_mae_bits:.3f} bits, as Paper I reports (0.007 bits).",
            row="bijection_calibration"),
    Finding("The value vectors lie along one curve ordered by uncertainty (its main direction carries "
            "{geometry.value_pc1_ratio:.0%} of their variance), but the keys are not orthogonal (mean |cos| "
            "{geometry.key_abs_cos_layer0:.2f}, Paper I: below 0.1).",
            row="geometry"),
)


def _index(ledger: Iterable[object]) -> dict[str, dict]:
    out = {}
    for c in ledger:
        d = c if isinstance(c, Mapping) else c.to_json()
        out[d["id"]] = d
    return out


def render_findings(ledger: Iterable[object], findings: Iterable[Finding] | None = None) -> list[RenderedFinding]:
    """Return the findings (default :data:`FINDINGS`) filled from a ledger (Claim objects or their JSON dicts), each
    with its row's verdict and reader label and where its evidence is. A missing claim or row raises ``KeyError``."""
    index = _index(ledger)
    rows = {pc.id: pc for pc in (*PAPER_CLAIMS, *CROSS_CHECKS)}
    found = list(FINDINGS if findings is None else findings)
    wanted = []
    for f in found:
        if f.row not in rows:
            raise KeyError(f"finding {f.text[:40]!r}…: no verdict row {f.row!r}")
        wanted.append(rows[f.row])
    verdicts = {x.claim.id: x for x in assess(index.values(), list(dict.fromkeys(wanted)))}
    out = []
    for f in found:
        pc, verdict = rows[f.row], verdicts[f.row].verdict
        docname, anchor, title = pc.section
        if f.link is not None:
            docname, anchor = f.link
            title = ""
        out.append(RenderedFinding(f, render_caveat(f.text, index), render_parts(f.text, index), verdict,
                                   reader_label(verdict), docname, anchor, title))
    return out


_SENTENCE_END = re.compile(r"[.!?](?:\s+|$)(?=[A-Z]|$)")


def finding_problems(ledger: Iterable[object], findings: Iterable[Finding] | None = None) -> list[str]:
    """Return what is wrong with the findings (default :data:`FINDINGS`) against a ledger (empty when sound): more
    than :data:`MAX_FINDINGS`, a row that does not exist, a field that cannot be filled, a sentence that states no
    number from the ledger, or more than one sentence."""
    found = list(FINDINGS if findings is None else findings)
    index = _index(ledger)
    rows = {pc.id for pc in (*PAPER_CLAIMS, *CROSS_CHECKS)}
    out = []
    if len(found) > MAX_FINDINGS:
        out.append(f"{len(found)} findings: the front page lists at most {MAX_FINDINGS}")
    for f in found:
        name = f.text[:50] + "…"
        if f.row not in rows:
            out.append(f"{name}: no verdict row {f.row!r}")
        if not f.claim_ids:
            out.append(f"{name}: states no number from the ledger")
        missing = [cid for cid in f.claim_ids if cid not in index]
        if missing:
            out.append(f"{name}: not in the ledger: {', '.join(missing)}")
            continue
        try:
            text = render_caveat(f.text, index)
        except (KeyError, ValueError, TypeError) as err:
            out.append(f"{name}: cannot be filled ({err})")
            continue
        ends = _SENTENCE_END.findall(text)
        if len(ends) != 1 or not text.rstrip().endswith((".", "!", "?")):
            out.append(f"{name}: one sentence, ending with its full stop (found {len(ends)})")
    return out
