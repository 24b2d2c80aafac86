"""The claims ledger: status rules, validation, round trip through a notebook, and the committed ledger."""

from __future__ import annotations

import json
import math

import nbformat
import numpy as np
import pytest

from attention_dynamics.book.nbcompare import assert_book_close
from attention_dynamics.book.notebooks import book_chapters
from attention_dynamics.ledger.claims import (
    CLAIM_GLUE_PREFIX,
    CLAIM_MIME_TYPE,
    Claim,
    claim_status,
    claims_from_notebook,
    format_value,
    ledger_problems,
    load_ledger,
    record,
    write_ledger,
)


@pytest.mark.parametrize(
    "value, kwargs, status",
    [
        (1e-13, dict(expected=0.0, tolerance=1e-12), "pass"),
        (2e-12, dict(expected=0.0, tolerance=1e-12), "fail"),
        (0.5, dict(lower=0.0, upper=1.0), "pass"),
        (1.5, dict(lower=0.0, upper=1.0), "fail"),
        (0.005, dict(upper=0.01), "pass"),
        (0.02, dict(upper=0.01), "fail"),
        (2.2, dict(paper_value=2.3, tolerance=0.2), "pass"),
        (1.0, dict(paper_value=2.3, tolerance=0.2), "fail"),
        (1.0, dict(paper_value=2.3), "new"),
        (1.0, dict(), "new"),
        # a closed form takes precedence over the paper's number
        (0.0, dict(expected=0.0, tolerance=1e-9, paper_value=5.0), "pass"),
        # a mean over seeds with its interval: the whole interval decides
        (0.85, dict(lower=0.8, interval=(0.82, 0.88)), "pass"),
        (0.84, dict(lower=0.8, interval=(0.73, 0.95)), "undecided"),
        (0.70, dict(lower=0.8, interval=(0.65, 0.79)), "fail"),
        (0.05, dict(upper=0.1, interval=(0.02, 0.12)), "undecided"),
        (0.5, dict(lower=0.4, upper=0.6, interval=(0.3, 0.7)), "undecided"),  # spans the whole band
        (0.9, dict(lower=0.0, upper=0.6, interval=(0.7, 1.1)), "fail"),
        # a measurement that cannot decide (its positive control fails): undecided whatever the value
        (0.9, dict(lower=0.5, undecided_because="the control fails"), "undecided"),
        (0.1, dict(lower=0.5, undecided_because="the control fails"), "undecided"),
        (0.1, dict(undecided_because="the control fails"), "new"),  # nothing to decide against
    ],
)
def test_claim_status_rules(value, kwargs, status):
    assert claim_status(value, **kwargs) == status


def test_an_interval_must_hold_the_value_and_face_a_bound():
    with pytest.raises(ValueError, match="does not contain"):
        claim_status(0.9, lower=0.8, interval=(0.6, 0.7))
    with pytest.raises(ValueError, match="needs a bound"):
        claim_status(0.9, interval=(0.8, 1.0))


def test_an_undecided_claim_needs_its_explanation():
    undecided = record("test.interval", 0.84, description="a seed mean", unit="fraction", lower=0.8,
                       interval=(0.73, 0.95), explanation="the seeds straddle the bound")
    assert undecided.status == "undecided" and undecided.interval == [0.73, 0.95]
    assert ledger_problems([undecided]) == []
    bare = record("test.interval_bare", 0.84, description="a seed mean", unit="fraction", lower=0.8, interval=(0.73, 0.95))
    assert ledger_problems([bare]) == ["test.interval_bare: status 'undecided' without an explanation of what would decide it"]
    moved = Claim(**{**undecided.to_json(), "interval": [0.81, 0.95]})
    assert ledger_problems([moved]) == ["test.interval: stored status 'undecided' but the value gives 'pass'"]


def test_expected_needs_tolerance():
    with pytest.raises(ValueError, match="needs a tolerance"):
        claim_status(1.0, expected=1.0)


def test_record_outside_a_kernel_returns_the_claim():
    c = record("test.value", 0.25, description="a number", unit="bits", upper=1.0, params={"seed": 3, "dims": (2, 3)})
    assert c.status == "pass" and c.params == {"seed": 3, "dims": [2, 3]}


@pytest.mark.parametrize(
    "claim_id, value, error",
    [
        ("NoDots", 1.0, ValueError),
        ("chapter.", 1.0, ValueError),
        ("test.nan", math.nan, ValueError),
        ("test.inf", math.inf, ValueError),
        ("test.text", "1.0", TypeError),
    ],
)
def test_record_rejects_bad_input(claim_id, value, error):
    with pytest.raises(error):
        record(claim_id, value, description="x", unit="")


def test_explanation_kept_only_for_failures():
    ok = record("test.ok", 1.0, description="x", unit="", upper=2.0, explanation="not needed")
    bad = record("test.bad", 3.0, description="x", unit="", upper=2.0, explanation="differs because ...")
    assert ok.explanation is None and bad.explanation == "differs because ..."


def _claim(**overrides):
    base = dict(id="a.b", description="d", value=1.0, unit="", status="pass", chapter="01-x",
                paper_value=None, expected=1.0, tolerance=0.1, lower=None, upper=None, explanation=None, params={})
    base.update(overrides)
    return Claim(**base)


def test_ledger_problems_catch_each_defect():
    assert ledger_problems([_claim()]) == []
    assert "duplicate id" in " ".join(ledger_problems([_claim(), _claim()]))
    unexplained = _claim(value=5.0, status="fail")
    assert "without an explanation" in " ".join(ledger_problems([unexplained]))
    assert ledger_problems([_claim(value=5.0, status="fail", explanation="because")]) == []
    assert "stored status" in " ".join(ledger_problems([_claim(value=5.0, status="pass")]))
    assert "unknown status" in " ".join(ledger_problems([_claim(status="maybe")]))


def test_write_and_load_round_trip(tmp_path):
    path = write_ledger([_claim(), _claim(id="a.c", value=0.5, expected=None, tolerance=None, status="new")], tmp_path / "c.json")
    assert [c.to_json() for c in load_ledger(path)] == [_claim().to_json(), _claim(id="a.c", value=0.5, expected=None, tolerance=None, status="new").to_json()]
    assert list(tmp_path.iterdir()) == [path]  # no temporary file left behind


def test_claims_survive_a_notebook_round_trip():
    """A claim glued as a display output is read back by the runner from the notebook JSON."""
    claim = _claim()
    output = nbformat.v4.new_output(
        "display_data",
        data={"application/papermill.record/" + CLAIM_MIME_TYPE: claim.to_json(), "application/papermill.record/text/plain": "x"},
        metadata={"scrapbook": {"name": CLAIM_GLUE_PREFIX + claim.id, "mime_prefix": "application/papermill.record/"}},
    )
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("", outputs=[output])])
    nbformat.validate(nb)
    nb = nbformat.reads(nbformat.writes(nb), as_version=4)
    (back,) = claims_from_notebook(nb, chapter="07-chapter")
    assert back.chapter == "07-chapter" and back.value == claim.value and back.id == claim.id


def test_format_value():
    assert format_value(3) == "3" and format_value(0.123456) == "0.1235" and format_value(1.5e-13) == "1.500e-13"
    assert format_value(None) == "—"


def test_committed_ledger_is_sound_and_matches_the_notebooks(repo_root):
    """book/claims.json: no unexplained failure, statuses consistent, identical to the notebooks' claims."""
    ledger_path = repo_root / "book" / "claims.json"
    claims = load_ledger(ledger_path)
    assert claims, "the ledger is empty"
    assert ledger_problems(claims) == []
    from_notebooks = []
    for chapter in book_chapters(repo_root):
        from_notebooks += claims_from_notebook(nbformat.read(chapter.path, as_version=4), chapter.name)
    from attention_dynamics.ledger.claims import attach_tolerances, load_tolerances

    from_notebooks = attach_tolerances(from_notebooks, load_tolerances(repo_root / "book" / "claim_tolerances.json"))
    assert [c.to_json() for c in claims] == [c.to_json() for c in from_notebooks], "run `make book` to refresh book/claims.json"
    assert json.loads(ledger_path.read_text())["claims"][0].keys() >= {"id", "chapter", "value", "paper_value", "status"}


#: Pairs of ledger claims allowed to hold the same value (each with its reason): two different computations whose
#: results coincide. A value that comes from one computation is one claim, which the verdict rows and the prose
#: reference wherever they need it. (Values below the round-off floor are zero, and integers and numbers of fewer
#: than four significant digits coincide too easily to say anything: neither is checked.)
SAME_VALUE_ALLOWED: dict[frozenset[str], str] = {}


def _significant_digits(value: float) -> int:
    """The significant digits of a float as Python writes it (the shortest repr that reads back the same)."""
    mantissa = repr(abs(value)).lower().split("e")[0].replace(".", "")
    return len(mantissa.lstrip("0"))


def shared_values(claims) -> list[tuple[float, list[str]]]:
    """Return ``(value, ids)`` for every value held by more than one claim: floats with at least four significant
    digits, not integers, above the round-off floor, and not a pair in :data:`SAME_VALUE_ALLOWED`."""
    from attention_dynamics.book.nbcompare import ROUNDOFF_FLOOR

    by_value: dict[float, list[str]] = {}
    for c in claims:
        v = c["value"] if isinstance(c, dict) else c.value
        if (isinstance(v, float) and math.isfinite(v) and not v.is_integer() and abs(v) >= ROUNDOFF_FLOOR
                and _significant_digits(v) >= 4):
            by_value.setdefault(v, []).append(c["id"] if isinstance(c, dict) else c.id)
    out = []
    for v, ids in by_value.items():
        if len(ids) > 1 and not (len(ids) == 2 and frozenset(ids) in SAME_VALUE_ALLOWED):
            out.append((v, sorted(ids)))
    return out


def test_shared_values_finds_one_number_recorded_twice():
    assert _significant_digits(2.18435998252512) == 15 and _significant_digits(0.0125) == 3
    assert _significant_digits(1.5e-07) == 2 and _significant_digits(-0.8810108090198161) == 16
    ledger = [{"id": "a.protocol", "value": 2.18435998252512}, {"id": "a.budget", "value": 2.18435998252512},
              {"id": "a.half", "value": 0.5}, {"id": "b.half", "value": 0.5},  # too few digits to mean anything
              {"id": "a.n", "value": 8.0}, {"id": "b.n", "value": 8.0},  # integers
              {"id": "a.err", "value": 1.7763568394002505e-15}, {"id": "b.err", "value": 1.7763568394002505e-15},
              {"id": "c.x", "value": 0.12345}, {"id": "c.y", "value": 0.12346}]
    assert shared_values(ledger) == [(2.18435998252512, ["a.budget", "a.protocol"])]


def test_one_number_one_claim(repo_root):
    """No two claims of the committed ledger hold the same value from the same computation: such a value is recorded
    once and referenced from every place that needs it (a coincidence goes into SAME_VALUE_ALLOWED with its reason)."""
    assert all(len(pair) == 2 and reason for pair, reason in SAME_VALUE_ALLOWED.items())
    found = shared_values(json.loads((repo_root / "book" / "claims.json").read_text(encoding="utf-8"))["claims"])
    assert found == [], "\n".join(f"{v!r}: {', '.join(ids)}" for v, ids in found)


def test_foundation_claims_present(repo_root):
    ids = {c.id for c in load_ledger(repo_root / "book" / "claims.json")}
    assert {"setup.forward_vs_sdpa_max_abs_err", "setup.upstream_grad_vs_autograd_max_abs_err"} <= ids


def test_committed_chapters_ran_with_the_book_defaults(repo_root):
    """A committed chapter holds no papermill-injected parameters: its outputs are the book's default scale."""
    for chapter in book_chapters(repo_root):
        nb = nbformat.read(chapter.path, as_version=4)
        injected = [i for i, c in enumerate(nb.cells) if "injected-parameters" in c.metadata.get("tags", [])]
        assert injected == [], f"{chapter.name}: cells {injected} carry injected parameters; run `make book`"


def _trained(**overrides):
    return _claim(**{**dict(expected=None, tolerance=None, lower=0.0, value=0.5, cross_machine_rtol=0.1), **overrides})


def test_compare_ledgers_accepts_values_within_their_tolerance_and_names_the_rest():
    from attention_dynamics.ledger.claims import compare_ledgers

    exact = _claim(id="a.exact", value=1.0, expected=1.0, tolerance=1e-9)
    ref = [exact, _trained(id="a.trained")]
    assert compare_ledgers(ref, [_claim(id="a.exact", value=1.0 + 1e-10, expected=1.0, tolerance=1e-9),
                                 _trained(id="a.trained", value=0.54)]) == []
    moved = compare_ledgers(ref, [exact, _trained(id="a.trained", value=0.6)])
    assert len(moved) == 1 and moved[0].startswith("a.trained: value")
    flipped = compare_ledgers(ref, [exact, _trained(id="a.trained", value=-0.1, status="fail", explanation="x")])
    assert "status pass committed, fail re-executed" in flipped[0]
    assert "missing from the re-executed" in compare_ledgers(ref, [exact])[0]
    no_tol = compare_ledgers([_trained(id="a.t", cross_machine_rtol=None)], [_trained(id="a.t")])
    assert "declares no cross-machine tolerance" in no_tol[0]


def test_measure_tolerances_from_the_seed_spread():
    from attention_dynamics.ledger.claims import measure_tolerances

    ref = [_trained(id="a.t", value=1.0), _claim(id="a.exact")]
    out = measure_tolerances(ref, [[_trained(id="a.t", value=1.2)], [_trained(id="a.t", value=0.8)]])
    assert set(out) == {"a.t"}  # closed forms keep their own tolerance
    assert_book_close(out["a.t"]["rtol"], 3 * 0.2, rtol=1e-3)  # 3 × sample sd (0.2) / mean (1)


def test_margin_problems_flag_a_claim_near_its_threshold():
    from attention_dynamics.ledger.claims import margin_problems

    assert margin_problems([_trained(id="a.far", value=0.5)]) == []
    assert "straddles" in margin_problems([_trained(id="a.near", value=0.04, cross_machine_rtol=2.0)])[0]


def test_no_committed_claim_could_change_status_within_its_tolerance(repo_root):
    """A claim whose status a re-execution elsewhere could flip is stated too close to its threshold."""
    from attention_dynamics.ledger.claims import margin_problems

    assert margin_problems(load_ledger(repo_root / "book" / "claims.json")) == []


def test_margin_problems_see_an_interval_claim_through_its_interval():
    from attention_dynamics.ledger.claims import margin_problems

    clear = _trained(id="a.ci", value=0.85, lower=0.8, upper=None, interval=[0.83, 0.87], status="pass",
                     cross_machine_rtol=1e-6)
    assert margin_problems([clear]) == []
    touching = _trained(id="a.ci", value=0.85, lower=0.8, upper=None, interval=[0.8001, 0.9], status="pass",
                        cross_machine_rtol=0.01)
    assert "straddles" in margin_problems([touching])[0]


def test_ledger_compare_command_fails_on_one_moved_value(repo_root, tmp_path):
    """`ledger --compare` passes on the committed ledger itself and fails on one value moved beyond its tolerance."""
    from attention_dynamics.book.cli import main

    committed = load_ledger(repo_root / "book" / "claims.json")
    same = write_ledger(committed, tmp_path / "same.json")
    assert main(["ledger", "--compare", str(same)]) == 0
    trained = next(c for c in committed if c.cross_machine_rtol and c.value != 0 and c.status == "new")
    moved = [Claim(**{**c.to_json(), "value": c.value * (1 + 3 * trained.cross_machine_rtol)}) if c.id == trained.id
             else c for c in committed]
    assert main(["ledger", "--compare", str(write_ledger(moved, tmp_path / "moved.json"))]) == 1


def test_every_claim_declares_a_cross_machine_tolerance(repo_root):
    from attention_dynamics.ledger.claims import claim_tolerance

    missing = [c.id for c in load_ledger(repo_root / "book" / "claims.json") if claim_tolerance(c) is None]
    assert missing == []


def test_measure_spread_updates_the_chapters_it_was_given_and_keeps_the_rest(tmp_path):
    from attention_dynamics.book.ledger_commands import measure_spread_command

    (tmp_path / "book").mkdir()
    committed = [_claim(id="six.a", value=1.0, expected=None, tolerance=None, status="new"),
                 _claim(id="two.b", value=2.0, expected=None, tolerance=None, status="new")]
    write_ledger(committed, tmp_path / "book" / "claims.json")
    stored = {"runs": ["build/runs/seed-1"], "claims": {"two.b": {"rtol": 0.05, "values": [2.0, 2.1], "sd": 0.07},
                                                          "gone.c": {"rtol": 0.5, "values": [1, 2], "sd": 0.7}}}
    (tmp_path / "book" / "claim_tolerances.json").write_text(json.dumps(stored))
    run = tmp_path / "seed-9"
    run.mkdir()
    write_ledger([_claim(id="six.a", value=1.2, expected=None, tolerance=None, status="new")], run / "claims.json")
    assert measure_spread_command(tmp_path, [run]) == 0
    result = json.loads((tmp_path / "book" / "claim_tolerances.json").read_text())["claims"]
    assert set(result) == {"six.a", "two.b"}, "a claim no longer in the ledger must go, the others stay"
    assert result["two.b"] == stored["claims"]["two.b"]
    sd = float(np.std([1.0, 1.2], ddof=1))
    assert_book_close(result["six.a"]["rtol"], 3 * sd / 1.1, rtol=1e-2)
    assert result["six.a"]["runs"] == [str(run)]


def test_measure_tolerances_takes_the_spread_across_machines_where_seeds_do_not_vary_a_claim():
    from attention_dynamics.ledger.claims import measure_tolerances

    ref = [_trained(id="a.fixed", value=2.0), _trained(id="a.seeded", value=1.0)]
    seeds = [[_trained(id="a.fixed", value=2.0), _trained(id="a.seeded", value=1.2)],
             [_trained(id="a.fixed", value=2.0), _trained(id="a.seeded", value=0.8)]]
    moved = [[_trained(id="a.fixed", value=2.02), _trained(id="a.seeded", value=1.001)]]
    out = measure_tolerances(ref, seeds, perturbed=moved)
    assert_book_close(out["a.fixed"]["rtol"], 3 * 0.02 / 2.005, rtol=1e-2)  # seeds alone: zero spread
    assert_book_close(out["a.seeded"]["rtol"], 3 * 0.2 / 1.0003, rtol=1e-2)  # the seed spread is larger
    assert out["a.fixed"]["perturbed_values"] == [2.02]
    only_seeds = measure_tolerances(ref, seeds)
    assert only_seeds["a.fixed"]["rtol"] == 1e-6 and "perturbed_values" not in only_seeds["a.fixed"]


def test_a_claim_that_cannot_be_decided_carries_its_reason_and_passes_the_ledger_check():
    from attention_dynamics.ledger.claims import ledger_problems, record

    claim = record("chapter.vacuous", 0.9, unit="", description="a row its control cannot decide", lower=0.5,
                   undecided_because="the positive control fails at this budget")
    assert claim.status == "undecided" and claim.explanation == "the positive control fails at this budget"
    assert ledger_problems([claim]) == []
    forged = {**claim.to_json(), "undecided_because": None}
    assert any("stored status" in p for p in ledger_problems([forged]))


def test_recorded_claims_are_kept_for_the_chapter_that_records_them():
    from attention_dynamics.ledger import claims as c

    first = c.record("test.kept_a", 1.0, description="d", unit="", lower=0.0)
    c.record("test.kept_b", 2.0, description="d", unit="")
    again = c.record("test.kept_a", -1.0, description="d", unit="", lower=0.0, explanation="below")
    kept = {x.id: x for x in c.recorded_claims()}
    assert kept["test.kept_a"] is again and kept["test.kept_a"] is not first and kept["test.kept_a"].status == "fail"
    assert "test.kept_b" in kept
