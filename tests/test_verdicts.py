"""The verdict page: one rule from ledger statuses to verdicts, and a paper-claim list the ledger backs."""

from __future__ import annotations

import json
import re

import pytest

from attention_dynamics import verdicts as v
from attention_dynamics.paths import CLAIMS_PATH, REPO_ROOT


@pytest.mark.parametrize(
    "statuses, budget, verdict",
    [
        (["pass", "pass"], False, "reproduces"),
        (["pass", "new"], False, "reproduces"),  # a number without a reference decides nothing
        (["fail"], False, "does not reproduce"),
        (["fail", "fail"], True, "not decided at this scale"),
        (["undecided"], False, "not decided at this scale"),
        (["pass", "fail"], False, "partly"),
        (["pass", "fail"], True, "partly"),
        (["pass", "undecided"], False, "partly"),
        (["fail", "undecided"], False, "partly"),
        (["fail", "undecided"], True, "not decided at this scale"),
    ],
)
def test_verdict_rule(statuses, budget, verdict):
    assert v.verdict_from_statuses(statuses, budget_limited=budget) == verdict


def test_verdict_rule_rejects_what_decides_nothing():
    with pytest.raises(ValueError, match="at least one deciding"):
        v.verdict_from_statuses(["new", "new"])
    with pytest.raises(ValueError, match="unknown claim status"):
        v.verdict_from_statuses(["maybe"])


def _ledger():
    return json.loads(CLAIMS_PATH.read_text(encoding="utf-8"))["claims"]


def test_every_paper_claim_is_backed_by_the_committed_ledger():
    assert v.problems(_ledger()) == []
    found = v.assess(_ledger())
    assert [x.claim.id for x in found] == [pc.id for pc in v.PAPER_CLAIMS]
    assert all(x.verdict in v.VERDICTS for x in found)


def test_problems_name_a_missing_or_undeciding_claim():
    ledger = [{"id": "a.x", "status": "pass"}, {"id": "a.y", "status": "new"}]
    good = v.PaperClaim("good", "s", "p", ("book/x", "a", "A"), ("a.x",), context=("a.y",))
    missing = v.PaperClaim("missing", "s", "p", ("book/x", "a", "A"), ("a.z",))
    hollow = v.PaperClaim("hollow", "s", "p", ("book/x", "a", "A"), ("a.y",))
    assert v.problems(ledger, [good]) == []
    assert v.problems(ledger, [good, good])[0] == "good: duplicate paper-claim id"
    assert "missing: a.z is not in the ledger" in v.problems(ledger, [missing])
    assert v.problems(ledger, [hollow]) == ["hollow: no deciding evidence (every evidence claim is 'new' or missing)"]
    with pytest.raises(KeyError, match="a.z"):
        v.assess(ledger, [missing])


def test_a_verdict_follows_the_ledger():
    """Flip one deciding claim of a reproducing paper claim: its verdict changes."""
    ledger = _ledger()
    before = {x.claim.id: x.verdict for x in v.assess(ledger)}
    target = next(pc for pc in v.PAPER_CLAIMS if before[pc.id] == "reproduces" and len(pc.evidence) > 1)
    flipped = [{**c, "status": "fail"} if c["id"] == target.evidence[0] else c for c in ledger]
    after = {x.claim.id: x.verdict for x in v.assess(flipped)}
    assert after[target.id] == "partly"
    assert {k: val for k, val in after.items() if k != target.id} == {k: val for k, val in before.items() if k != target.id}


def test_every_section_a_verdict_links_to_exists():
    import nbformat

    for pc in v.PAPER_CLAIMS:
        docname, anchor, title = pc.section
        path = REPO_ROOT / f"{docname}.ipynb"
        assert path.exists(), f"{pc.id}: no chapter {docname}"
        headings = [line.lstrip("#").strip() for cell in nbformat.read(path, as_version=4).cells
                    if cell.cell_type == "markdown" for line in cell.source.splitlines() if line.startswith("#")]
        assert title in headings, f"{pc.id}: {docname} has no section {title!r}"
        # docutils' id of a section title: lower case, runs of other characters as one hyphen
        assert anchor == re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-"), f"{pc.id}: anchor {anchor!r}"
