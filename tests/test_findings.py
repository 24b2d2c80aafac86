"""The front page's findings (attention_dynamics.ledger.findings): one sentence each, numbers from the ledger."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import pytest
import yaml

from attention_dynamics.ledger import findings as F
from attention_dynamics.ledger import verdicts as v

REPO_ROOT = Path(__file__).resolve().parents[1]
LEDGER = json.loads((REPO_ROOT / "book" / "claims.json").read_text(encoding="utf-8"))["claims"]


def test_the_findings_are_sound_against_the_committed_ledger():
    assert F.finding_problems(LEDGER) == []
    assert 1 <= len(F.FINDINGS) <= F.MAX_FINDINGS == 8


def test_each_finding_carries_its_row_s_reader_label_and_a_link():
    rendered = F.render_findings(LEDGER)
    verdicts = {x.claim.id: x for x in (*v.assess(LEDGER), *v.assess(LEDGER, v.CROSS_CHECKS))}
    toc = (REPO_ROOT / "_toc.yml").read_text(encoding="utf-8")
    for found in rendered:
        assert found.verdict == verdicts[found.finding.row].verdict
        assert found.label == v.reader_label(found.verdict) and found.label in set(v.READER_LABELS.values())
        assert found.docname.removeprefix("book/") in toc and found.anchor, found.finding.row
        assert "{" not in found.text and found.text.endswith(".")
        assert "".join(text for text, _ in found.parts) == found.text
        assert [cid for _, cid in found.parts if cid] == found.finding.claim_ids


def test_a_finding_follows_the_ledger():
    """Change a number in the ledger: the sentence that states it changes; change a status: the label follows."""
    finding = next(f for f in F.FINDINGS if f.row == "sticky_speedup")
    cid = "sticky.speedup_paper_protocol"
    assert cid in finding.claim_ids
    changed = copy.deepcopy(LEDGER)
    for c in changed:
        if c["id"] == cid:
            c["value"] = 9.87
    before = F.render_findings(LEDGER, [finding])[0].text
    after = F.render_findings(changed, [finding])[0].text
    assert "9.9×" in after and "9.9×" not in before


def test_finding_problems_name_what_is_wrong():
    bad = [F.Finding("States nothing.", row="routing_law"), F.Finding("Two. Sentences {gradients.row_sum_max_abs}.",
                                                                       row="routing_law"),
           F.Finding("A missing number {no.such_claim}.", row="routing_law"),
           F.Finding("A row that is not there {gradients.row_sum_max_abs}.", row="no_such_row")]
    found = F.finding_problems(LEDGER, bad * 3)
    assert any("at most 8" in p for p in found)
    assert any("states no number" in p for p in found)
    assert any("one sentence" in p for p in found)
    assert any("not in the ledger: no.such_claim" in p for p in found)
    assert any("no verdict row 'no_such_row'" in p for p in found)
    with pytest.raises(KeyError, match="no_such_row"):
        F.render_findings(LEDGER, [bad[3]])


def test_a_finding_may_link_elsewhere_than_its_row():
    f = F.Finding("The laws hold to {gradients.row_sum_max_abs:.0e}.", row="routing_law",
                  link=("book/08-diagnostics", "a-healthy-run-and-a-broken-one"))
    found = F.render_findings(LEDGER, [f])[0]
    assert (found.docname, found.anchor) == ("book/08-diagnostics", "a-healthy-run-and-a-broken-one")


def test_findings_are_written_for_a_reader():
    """No bookkeeping words in a finding, no claim ids in its text, and short enough for the first screen."""
    for found in F.render_findings(LEDGER):
        assert not re.search(r"\b(claim|claims|verdict|ledger|decided|undecided)\b", found.text, re.I), found.text
        assert len(found.text.split()) <= 45, found.text
    assert yaml.safe_load((REPO_ROOT / "_config.yml").read_text(encoding="utf-8"))["sphinx"]["local_extensions"][
        "reader_pages"] == "book/_ext"
