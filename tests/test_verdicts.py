"""The verdict page: one rule from ledger statuses to verdicts, and a paper-claim list the ledger backs."""

from __future__ import annotations

import json
import re

import pytest

from attention_dynamics.book.nbcompare import assert_book_close
from attention_dynamics.core.paths import CLAIMS_PATH, REPO_ROOT
from attention_dynamics.ledger import verdicts as v


@pytest.mark.parametrize(
    "statuses, budget, verdict",
    [
        (["pass", "pass"], False, "reproduces"),
        (["pass", "new"], False, "reproduces"),  # a number without a reference decides nothing
        (["fail"], False, "does not reproduce"),
        (["fail", "fail"], True, "not decided at this scale"),
        (["undecided"], False, "not decided at this scale"),
        (["pass", "fail"], False, "partly"),
        (["pass", "undecided"], False, "reproduces where decided"),  # a pass beside an undecided is not "partly"
        (["fail", "undecided"], False, "does not reproduce where decided"),
        (["fail", "undecided"], True, "not decided at this scale"),
        (["pass", "fail", "undecided"], False, "partly"),
        (["pass", "fail"], True, "reproduces where decided"),  # failures at a budget decide nothing
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
    assert all(x.verdict in v.VERDICTS for x in v.assess(_ledger(), v.CROSS_CHECKS))


def test_the_book_s_cross_checks_are_not_claims_of_the_paper():
    assert "em_bridge" in [pc.id for pc in v.CROSS_CHECKS]
    assert "em_bridge" not in [pc.id for pc in v.PAPER_CLAIMS]


@pytest.mark.parametrize(
    "verdicts, combined",
    [
        (["reproduces", "reproduces"], "reproduces"),
        (["does not reproduce", "does not reproduce"], "does not reproduce"),
        (["reproduces", "does not reproduce"], "depends on the definition"),
        (["reproduces where decided", "does not reproduce"], "depends on the definition"),
        (["partly", "reproduces"], "depends on the definition"),  # mixed under one reading, clean under another
        (["reproduces", "not decided at this scale"], "reproduces where decided"),
        (["does not reproduce", "not decided at this scale"], "does not reproduce where decided"),
        (["partly", "partly", "not decided at this scale"], "partly"),
        (["not decided at this scale", "not decided at this scale"], "not decided at this scale"),
    ],
)
def test_definitions_combine_by_what_they_decide(verdicts, combined):
    assert v.combine_definitions(verdicts) == combined
    assert v.combine_definitions(list(reversed(verdicts))) == combined  # the order of the readings is irrelevant


def test_combine_rejects_nothing_and_unknown_verdicts():
    with pytest.raises(ValueError):
        v.combine_definitions([])
    with pytest.raises(ValueError, match="unknown"):
        v.combine_definitions(["maybe"])


_SECTION = ("book/x", "a", "A")


def test_a_paper_claim_is_decided_one_way():
    d = v.Definition("path", "", ("a.x",))
    with pytest.raises(ValueError, match="exactly one"):
        v.PaperClaim("both", "s", "p", _SECTION, ("a.x",), definitions=(d,))
    with pytest.raises(ValueError, match="exactly one"):
        v.PaperClaim("none", "s", "p", _SECTION)
    with pytest.raises(ValueError, match="distinct"):
        v.PaperClaim("twice", "s", "p", _SECTION, definitions=(d, d))
    with pytest.raises(ValueError, match="at least one"):
        v.Definition("empty", "", ())


def test_definitions_that_disagree_give_depends_on_the_definition_and_each_reading_is_shown():
    ledger = [{"id": "a.path", "status": "fail", "value": 0.0}, {"id": "a.function", "status": "pass", "value": 1.0},
              {"id": "a.freeze", "status": "undecided", "value": 0.5}, {"id": "a.other", "status": "pass", "value": 1.0}]
    pc = v.PaperClaim("order", "s", "p", _SECTION, definitions=(
        v.Definition("path", "", ("a.path",)), v.Definition("function", "", ("a.function", "a.other")),
        v.Definition("intervention", "", ("a.freeze",))))
    (x,) = v.assess(ledger, [pc])
    assert x.verdict == "depends on the definition"
    assert x.by_group == {"path": "does not reproduce", "function": "reproduces",
                          "intervention": "not decided at this scale"}
    assert x.lines() == ["path: does not reproduce", "function: reproduces", "intervention: not decided at this scale"]
    assert x.decided_by()[0] == "path — a.path: fail"
    agree = v.PaperClaim("agree", "s", "p", _SECTION, definitions=(
        v.Definition("function", "", ("a.function",)), v.Definition("intervention", "", ("a.freeze",))))
    (y,) = v.assess(ledger, [agree])
    assert y.verdict == "reproduces where decided"


def test_parts_pool_their_statuses_and_name_what_each_decides():
    ledger = [{"id": "a.early", "status": "pass", "value": 1.0}, {"id": "a.late", "status": "fail", "value": 0.0}]
    pc = v.PaperClaim("feedback", "s", "p", _SECTION, parts=(
        v.Definition("early", "", ("a.early",)), v.Definition("late", "", ("a.late",))))
    (x,) = v.assess(ledger, [pc])
    assert x.verdict == "partly"
    assert x.lines() == ["early: reproduces", "late: does not reproduce"]


def test_a_pass_beside_an_undecided_names_what_is_not_decided():
    ledger = [{"id": "a.x", "status": "pass", "value": 1.0}, {"id": "a.y", "status": "undecided", "value": 0.5}]
    (x,) = v.assess(ledger, [v.PaperClaim("c", "s", "p", _SECTION, ("a.x", "a.y"))])
    assert x.verdict == "reproduces where decided"
    assert x.lines() == ["not decided at this scale: a.y"]
    assert x.summary == "reproduces where decided; not decided at this scale: a.y"


def test_caveats_are_filled_from_the_ledger():
    ledger = {"a.x": {"id": "a.x", "value": 0.25, "status": "pass", "interval": [0.125, 0.5]},
              "a.y": {"id": "a.y", "value": 3, "status": "undecided"}}
    text = "x is {a.x:.0%} ({a.x@low:.3f}–{a.x@high:.1f}), y {a.y}; x {a.x?holds|fails|is open}, y {a.y?holds|fails|is open}"
    assert v.render_caveat(text, ledger) == "x is 25% (0.125–0.5), y 3; x holds, y is open"
    assert v.caveat_claim_ids(text) == ["a.x", "a.y"]
    assert v.render_caveat(None, ledger) is None
    with pytest.raises(KeyError):
        v.render_caveat("{a.z:.2f}", ledger)
    with pytest.raises(ValueError, match="three"):
        v.render_caveat("{a.x?yes|no}", ledger)


def test_a_caveat_follows_the_ledger():
    """Change a number in the ledger: the caveat that states it changes with it."""
    ledger = _ledger()
    row = next(x for x in v.assess(ledger) if x.claim.id == "sticky_speedup")
    first = v.caveat_claim_ids(row.claim.caveat)[0]  # the first number the caveat states
    changed = [{**c, "value": 9.87} if c["id"] == first else c for c in ledger]
    after = next(x for x in v.assess(changed) if x.claim.id == "sticky_speedup")
    assert "9.87" in after.caveat and "9.87" not in row.caveat


def test_problems_name_a_caveat_that_reads_a_missing_claim():
    ledger = [{"id": "a.x", "status": "pass", "value": 1.0}]
    pc = v.PaperClaim("c", "s", "p", _SECTION, ("a.x",), caveat="see {a.z:.2f}")
    assert v.problems(ledger, [pc]) == ["c: a.z is not in the ledger"]


def test_each_row_is_defined_once_and_no_two_rows_share_an_id():
    """One tuple of rows in the paper's order and one of cross-checks: every id once across both, and in the source
    every row written out once (a second definition of a row would be dead code that an edit could miss)."""
    import ast

    ids = [pc.id for pc in (*v.PAPER_CLAIMS, *v.CROSS_CHECKS)]
    assert len(ids) == len(set(ids)), sorted({i for i in ids if ids.count(i) > 1})
    source = (REPO_ROOT / "src" / "attention_dynamics" / "ledger" / "verdicts" / "rows.py").read_text(encoding="utf-8")
    written = [node.args[0].value for node in ast.walk(ast.parse(source))
               if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "PaperClaim"
               and node.args and isinstance(node.args[0], ast.Constant)]
    assert sorted(written) == sorted(ids)
    pc = v.PAPER_CLAIMS[0]
    assert v.problems(_ledger(), [pc, pc])[0] == f"{pc.id}: duplicate paper-claim id"


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

    for pc in (*v.PAPER_CLAIMS, *v.CROSS_CHECKS):
        docname, anchor, title = pc.section
        path = REPO_ROOT / f"{docname}.ipynb"
        assert path.exists(), f"{pc.id}: no chapter {docname}"
        headings = [line.lstrip("#").strip() for cell in nbformat.read(path, as_version=4).cells
                    if cell.cell_type == "markdown" for line in cell.source.splitlines() if line.startswith("#")]
        assert title in headings, f"{pc.id}: {docname} has no section {title!r}"
        # docutils' id of a section title: lower case, runs of other characters as one hyphen
        assert anchor == re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-"), f"{pc.id}: anchor {anchor!r}"


def test_the_verdict_page_shows_each_reading_s_verdict():
    """The page's table (book/_ext/book_tables.py) leads with the reader's label and one sentence (the reason, or the
    caveat filled from the ledger where the row has none), and folds away the rule's verdict, every definition's
    verdict and the deciding numbers grouped by definition."""
    import importlib.util
    from types import SimpleNamespace

    from docutils import nodes

    spec = importlib.util.spec_from_file_location("book_tables", REPO_ROOT / "book" / "_ext" / "book_tables.py")
    tables = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tables)
    ledger = [{"id": "a.path", "status": "fail", "value": 0.0, "unit": "fraction of seeds"},
              {"id": "a.function", "status": "pass", "value": 1.0, "unit": "fraction of seeds"}]
    pc = v.PaperClaim("order", "frame first", "qualitative", _SECTION, definitions=(
        v.Definition("path", "", ("a.path",)), v.Definition("function", "", ("a.function",))),
        caveat="function share {a.function:.0%}")
    fake = SimpleNamespace(env=SimpleNamespace(found_docs=set(), titles={}))
    table = tables.VerdictsTable._table(fake, v.assess(ledger, [pc]), {c["id"]: c for c in ledger})
    text = table.astext()
    for expected in ("depends on the definition", "path: ✗\u00a0does not reproduce", "function: ✓\u00a0reproduces",
                     "Function share 100%.", "path", "0 fraction of seeds", "◐\u00a0holds in part",
                     "✗\u00a0does not hold", "the numbers and the rule"):
        assert expected in text, expected
    classes = {c for node in table.findall(nodes.Element) for c in node.get("classes", [])}
    assert {"verdict-depends-on-the-definition", "verdict-does-not-reproduce", "ours-group",
            "verdict-holds-in-part", "verdict-reason"} <= classes
    assert text.index("Function share") < text.index("the numbers and the rule") < text.index("path: ")
    with_reason = v.PaperClaim("order", "frame first", "qualitative", _SECTION, definitions=pc.definitions,
                               caveat=pc.caveat, reason="It depends on how settling is measured.")
    text = tables.VerdictsTable._table(fake, v.assess(ledger, [with_reason]), {c["id"]: c for c in ledger}).astext()
    assert text.index("It depends on how") < text.index("the numbers and the rule") < text.index("Function share")


def test_a_chapter_can_state_the_verdict_of_a_row_from_the_claims_it_recorded():
    names = {"frame_precision.order_path_sgd": "fail", "frame_precision.order_path_adam": "pass"}
    row = next(pc for pc in v.PAPER_CLAIMS if pc.id == "frame_precision_toy")
    ledger = [{"id": cid, "status": names.get(cid, "undecided"), "value": 0.5} for cid in row.deciding]
    x = v.verdict_of("frame_precision_toy", ledger)
    assert x.verdict == "depends on the definition" and x.caveat is None  # the caveat reads claims not at hand
    assert x.by_group["parameter path, SGD"] == "does not reproduce"
    with pytest.raises(KeyError):
        v.verdict_of("no_such_row", ledger)


def test_the_rows_are_fed_by_the_stored_results():
    """Every row is decided by the committed ledger with the claims the chapters record from the stored results put in
    (what those results give now), with no missing or undeciding claim and every caveat filled."""
    from attention_dynamics.chapters.architectures import formats_report, memory_report
    from attention_dynamics.chapters.bayesian_manifolds import (
        frame_definitions as tunnel_frames,
        frame_definitions_report as tunnel_report,
    )
    from attention_dynamics.chapters.binding_tunnel import binding_tunnel, report as binding_report, routing_controls
    from attention_dynamics.ledger import sticky_routing_seeds
    from attention_dynamics.chapters.routing_content_feedback import feedback_predictions, report as feedback_report
    from attention_dynamics.chapters.sticky_markov_chain import speedup_budget, speedup_budget_report
    from attention_dynamics.chapters.two_timescale_em import frame_definitions, frame_definitions_report
    from attention_dynamics.ledger.frame_results import load_frame_freeze

    ledger = {c["id"]: c for c in _ledger()}
    recorded = [
        *feedback_report.record_feedback_claims(feedback_predictions.FEEDBACK_PREDICTIONS.load()).values(),
        *frame_definitions_report.record_frame_definition_claims(frame_definitions.FRAME_DEFINITIONS.load()).values(),
        *speedup_budget_report.record_speedup_budget_claims(speedup_budget.SPEEDUP_BUDGET.load()).values(),
        *tunnel_report.record_tunnel_order_claims(tunnel_frames.BIJECTION_FRAME_DEFINITIONS.load(),
                                                  load_frame_freeze()).values(),
        *memory_report.record_longmem_claims()["claims"].values(),
        *formats_report.record_format_claims()["claims"].values(),
        *formats_report.record_ch6_setting_claims()["claims"].values(),
        *binding_report.record_routing_need_claims(routing_controls.ROUTING_CONTROLS.load(),
                                                   binding_tunnel.BINDING_TUNNEL.load(),
                                                   sticky_routing_seeds.load_routing_seeds()).values(),
        *binding_report.record_binding_claims(binding_tunnel.BINDING_TUNNEL.load()).values(),
    ]
    for c in recorded:  # where the chapters record it, the committed ledger holds what the stored result gives
        if c.id in ledger:
            assert ledger[c.id]["status"] == c.status, c.id
            assert_book_close(ledger[c.id]["value"], c.value, what=c.id)
    ledger.update({c.id: c.to_json() for c in recorded})
    assert v.problems(ledger.values()) == []
    found = v.assess(ledger.values())
    assert all(x.verdict in v.VERDICTS for x in found)
    assert all(x.caveat for x in found if x.claim.caveat)  # every caveat can be filled


def test_every_claim_a_row_reads_is_written_out_in_the_chapters():
    """Every claim a row reads (deciding, context, caveat) is recorded with its id written out literally in some
    chapter's folder, so that a search for the id finds where it is recorded."""
    import ast

    chapters = REPO_ROOT / "src" / "attention_dynamics" / "chapters"

    # the chapters' folders and the ledger's modules that record claims from shared results (not the rows themselves)
    paths = [*chapters.rglob("*.py"), *(chapters.parent / "ledger").glob("*.py")]
    everywhere = {node.value for path in paths for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
                  if isinstance(node, ast.Constant) and isinstance(node.value, str)}
    for pc in (*v.PAPER_CLAIMS, *v.CROSS_CHECKS):
        ids = {*pc.deciding, *pc.context, *v.caveat_claim_ids(pc.caveat)}
        assert ids <= everywhere, f"{pc.id}: not written out where claims are recorded: {sorted(ids - everywhere)}"


def test_every_row_has_its_claims_in_the_committed_ledger():
    """The committed ledger holds every claim a row reads."""
    ledger = {c["id"] for c in _ledger()}
    for pc in (*v.PAPER_CLAIMS, *v.CROSS_CHECKS):
        assert {*pc.deciding, *pc.context, *v.caveat_claim_ids(pc.caveat)} <= ledger, pc.id


def test_readings_are_grouped_by_verdict_for_the_prose():
    ledger = [{"id": "a.p", "status": "fail", "value": 0.0}, {"id": "a.f", "status": "pass", "value": 1.0},
              {"id": "a.i", "status": "pass", "value": 1.0}]
    pc = v.PaperClaim("order", "s", "p", _SECTION, definitions=(
        v.Definition("path", "", ("a.p",)), v.Definition("function", "", ("a.f",)),
        v.Definition("intervention", "", ("a.i",))))
    (x,) = v.assess(ledger, [pc])
    assert x.readings_text() == "does not reproduce (path), reproduces (function; intervention)"


def test_a_failure_on_a_longer_run_is_a_finding_even_in_a_budget_limited_row():
    """Budget-limited: a failure counts as undecided, except a claim listed as a finding (a plateau, a 4x run)."""
    ledger = [{"id": "a.short", "status": "fail", "value": 1.0}, {"id": "a.long", "status": "fail", "value": 1.0},
              {"id": "a.p", "status": "pass", "value": 1.0}]
    plain = v.PaperClaim("r", "s", "p", _SECTION, ("a.short", "a.long", "a.p"), budget_limited="small models")
    assert v.assess(ledger, [plain])[0].verdict == "reproduces where decided"
    found = v.PaperClaim("r", "s", "p", _SECTION, ("a.short", "a.long", "a.p"), budget_limited="small models",
                         findings=("a.long",))
    x = v.assess(ledger, [found])[0]
    assert x.verdict == "partly" and x.undecided == ("a.short",)
    with pytest.raises(ValueError, match="findings must be deciding claims"):
        v.PaperClaim("r", "s", "p", _SECTION, ("a.p",), findings=("a.zz",))


# --- claims about routing, read on tasks that do not need it ----------------------------------------------------

def _routing_row(**kwargs):
    from attention_dynamics.ledger.verdicts.rule import Definition, PaperClaim

    return PaperClaim("routing_row", "Routing settles first.", "qualitative", ("book/x", "y", "Y"), **kwargs)


def _statuses(**statuses):
    return [{"id": cid.replace("__", "."), "status": st} for cid, st in statuses.items()]


def test_a_reading_on_a_task_that_does_not_need_routing_is_not_tested_here():
    from attention_dynamics.ledger.verdicts import assess
    from attention_dynamics.ledger.verdicts.rule import Definition

    row = _routing_row(definitions=(
        Definition("bijection", "a task uniform attention solves", ("a.bij",), requires_routing=("need.bij",)),
        Definition("binding", "a task that needs routing", ("a.bind",), requires_routing=("need.bind",)),
    ))
    ledger = _statuses(a__bij="pass", a__bind="fail", need__bij="fail", need__bind="pass")
    v = assess(ledger, [row])[0]
    assert v.by_group == {"bijection": "not tested here", "binding": "does not reproduce"}
    assert v.verdict == "does not reproduce" and v.label == "does not hold"  # the untested reading decides nothing
    only_untested = _routing_row(definitions=row.definitions[:1])
    v = assess(_statuses(a__bij="pass", need__bij="fail"), [only_untested])[0]
    assert v.verdict == "not tested here" and v.label == "not tested here"
    undecided_need = assess(_statuses(a__bij="pass", a__bind="fail", need__bij="undecided", need__bind="pass"), [row])[0]
    assert undecided_need.by_group["bijection"] == "not decided at this scale"


def test_plain_evidence_and_parts_are_gated_too():
    from attention_dynamics.ledger.verdicts import assess, problems
    from attention_dynamics.ledger.verdicts.rule import Definition

    plain = _routing_row(evidence=("a.x",), requires_routing=("need.x",))
    assert assess(_statuses(a__x="pass", need__x="fail"), [plain])[0].verdict == "not tested here"
    assert assess(_statuses(a__x="pass", need__x="pass"), [plain])[0].verdict == "reproduces"
    parts = _routing_row(parts=(Definition("toy", "", ("a.t",), requires_routing=("need.t",)),
                                Definition("tunnel", "", ("a.u",), requires_routing=("need.u",))))
    v = assess(_statuses(a__t="fail", a__u="pass", need__t="fail", need__u="pass"), [parts])[0]
    assert v.verdict == "reproduces" and v.by_group["toy"] == "not tested here"
    assert any("need.u" in p for p in problems(_statuses(a__t="fail", a__u="pass", need__t="fail"), [parts]))
    with pytest.raises(KeyError, match="routing-need"):
        assess(_statuses(a__t="fail", a__u="pass", need__t="fail"), [parts])


def test_every_verdict_has_a_reader_label():
    from attention_dynamics.ledger.verdicts import READER_LABELS, VERDICTS, reader_label

    assert set(READER_LABELS) == set(VERDICTS)
    assert set(READER_LABELS.values()) == {"holds", "holds in part", "does not hold", "open at this scale",
                                           "not tested here"}
    with pytest.raises(ValueError):
        reader_label("maybe")


def test_a_row_s_reason_is_one_sentence_filled_from_the_ledger():
    """The verdict page leads with each row's reason: one sentence, its numbers from the ledger (like the caveat)."""
    ledger = [{"id": "a.x", "status": "pass", "value": 0.125}]
    pc = v.PaperClaim("c", "s", "p", _SECTION, ("a.x",), reason="It holds to {a.x:.1%}.")
    x = v.assess(ledger, [pc])[0]
    assert x.reason == "It holds to 12.5%." and x.label == "holds"
    assert v.assess(ledger, [v.PaperClaim("c", "s", "p", _SECTION, ("a.x",))])[0].reason is None
    missing = v.PaperClaim("c", "s", "p", _SECTION, ("a.x",), reason="see {a.z:.2f}.")
    assert v.problems(ledger, [missing]) == ["c: a.z is not in the ledger"]
    for bad in ("", "two\nlines"):
        with pytest.raises(ValueError, match="a reason is one non-empty sentence"):
            v.PaperClaim("c", "s", "p", _SECTION, ("a.x",), reason=bad)
    assert v.render_parts("a {a.x:.2f} b", {"a.x": ledger[0]}) == [("a ", None), ("0.12", "a.x"), (" b", None)]


def test_every_row_says_in_one_sentence_why():
    """Every row of the verdict page has a reason, filled from the committed ledger, one sentence for a reader."""
    ledger = _ledger()
    for x in (*v.assess(ledger), *v.assess(ledger, v.CROSS_CHECKS)):
        assert x.reason, f"{x.claim.id}: no reason (the verdict page leads with it)"
        assert x.reason[0].isupper() and x.reason.endswith("."), x.reason
        assert not re.search(r"[.!?]\s+[A-Z]", x.reason[:-1]), f"{x.claim.id}: more than one sentence"
        assert len(x.reason.split()) <= 50, f"{x.claim.id}: {len(x.reason.split())} words"


def test_a_single_number_s_status_in_the_reader_s_words():
    assert [v.status_label(s) for s in ("pass", "fail", "undecided", "new")] == [
        "holds", "does not hold", "open at this scale", "the book's own number"]
    with pytest.raises(ValueError, match="unknown claim status"):
        v.status_label("maybe")
