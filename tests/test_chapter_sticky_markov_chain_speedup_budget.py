"""Chapter 5's stored result ``sticky_chain_speedup_budget`` (chapters.sticky_markov_chain.speedup_budget) and its
claims (speedup_budget_report): runs read at several budgets against independent runs of each budget, the loss
levels, the matched M-steps, the committed file against chapter 5's ledger, the direction phrases, and the result
regenerated at reduced size through ``compute``."""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pytest

from attention_dynamics.book import compute
from attention_dynamics.book.nbcompare import assert_book_close
from attention_dynamics.chapters.sticky_markov_chain import (
    figures,
    speedup_budget as sb,
    speedup_budget_report as report,
)
from attention_dynamics.chapters.sticky_markov_chain.runs import train_sticky_head
from attention_dynamics.core import plotting
from attention_dynamics.core.paths import CLAIMS_PATH, data_path
from attention_dynamics.ledger import claims, verdicts
from attention_dynamics.science.speedup import paper_speedup

FAST = sb.SETTINGS["fast"]


def test_settings_refuse_what_cannot_be_read():
    with pytest.raises(ValueError, match="budgets"):
        sb.SpeedupBudgetSettings(budgets=(100, 50))
    with pytest.raises(ValueError, match="protocol"):
        sb.SpeedupBudgetSettings(budgets=(500, 2000))
    with pytest.raises(ValueError, match="two seeds"):
        sb.SpeedupBudgetSettings(seeds=(42,))
    with pytest.raises(ValueError, match="scale"):
        sb.speedup_budget_jobs("huge")
    with pytest.raises(ValueError, match="kind"):
        sb.speedup_budget_job("grid", "sgd", 42, dataclasses.asdict(FAST))


def test_time_to_level():
    assert sb.time_to_level([3.0, 2.5, 1.9, 2.1], 2.0) == 2
    assert sb.time_to_level([3.0, 2.5], 2.0) is None


def test_a_budget_read_from_a_long_run_is_a_run_of_that_budget():
    """With a constant learning rate the first B steps of a long run are a B-step run (trained independently)."""
    long = sb.sticky_run(2024, "em_like", 41, FAST)
    short = train_sticky_head(2024, "em_like", steps=20, length=FAST.length)
    assert_book_close(long["losses"][:20], short.losses, rtol=0, atol=1e-6)
    assert_book_close(long["losses"][20], short.final["loss"], rtol=0, atol=1e-6)  # the loss after 20 updates


def test_trajectory_snapshots_cover_the_protocol():
    run = sb.sticky_run(42, "sgd", 41, FAST, snapshots=True)
    assert run["snapshot_steps"] == list(range(0, FAST.protocol_steps + 1, FAST.snapshot_every))
    assert 0 <= run["initial_specialization"] <= 1 and 0 <= run["protocol_specialization"] <= 1


@pytest.fixture(scope="module")
def fast_folder(tmp_path_factory):
    return compute.compute("sticky_chain_speedup_budget", "fast", root=tmp_path_factory.mktemp("speedup"),
                           processes=1, log=lambda m: None)


@pytest.fixture(scope="module")
def fast_result(fast_folder):
    return json.loads((fast_folder / sb.FILE).read_text())


def test_regenerated_at_reduced_size(fast_result):
    committed = sb.SPEEDUP_BUDGET.load()
    assert set(fast_result) == set(committed) and fast_result["scale"] == "fast"
    assert set(fast_result["budgets"]) == {str(b) for b in FAST.budgets}
    assert set(fast_result["levels"]) == {"10pct", "25pct", "50pct", "75pct"}
    for name in ("equal_decrease", "equal_norm", "exact"):
        assert name in fast_result["m_step"]
    # the matched steps: by decrease the step is longer, by 1 / cos
    dec, norm = fast_result["m_step"]["equal_decrease"], fast_result["m_step"]["equal_norm"]
    for rd, rn, cos in zip(dec["rho"], norm["rho"], dec["cosine"]):
        assert_book_close(rd, rn / cos, rtol=1e-9)
        assert 0 < cos < 1


def test_budget_metric_against_the_papers_metric_on_the_same_runs(fast_result, fast_folder):
    """Each budget's speed-up is the library's paper_speedup with SGD's loss after that budget as the baseline."""
    def losses(name):
        return np.array([json.loads((fast_folder / "jobs" / f"long-{name}-seed{s}.json").read_text())["output"]["losses"]
                         for s in FAST.seeds])

    sgd, em = losses("sgd"), losses("em_like")
    for B in FAST.budgets:
        expected = paper_speedup(sgd[:, B], em[:, :B])["speedup"]
        assert_book_close(fast_result["budgets"][str(B)]["em_like"]["speedup"], expected)


def test_claims_glue_and_figure_from_the_reduced_result(fast_result):
    report.glue_speedup_budget(fast_result)  # every glue the prose names can be built from the result
    out = report.record_speedup_budget_claims(fast_result)
    assert "sticky.speedup_budget_8000" not in out  # a reduced result has other budgets
    for claim in out.values():
        assert claim.status in claims.STATUSES
    fig = figures.plot_speedup_budget(fast_result)
    plotting.check_figure(fig)
    plotting.plt.close(fig)


def test_committed_file_is_the_book_spec_and_agrees_with_chapter_5s_ledger():
    """At the paper's 1000-step budget the stored long runs give chapter 5's speed-up on the same five seeds."""
    result = sb.SPEEDUP_BUDGET.load()
    assert sb.SPEEDUP_BUDGET.committed_scale == "book" and sb.SPEEDUP_BUDGET.files == (sb.FILE,)
    assert result == json.loads(data_path(sb.FILE).read_text())
    assert result["settings"] == json.loads(json.dumps(dataclasses.asdict(sb.SETTINGS["book"])))
    ledger = {c["id"]: c for c in json.loads(CLAIMS_PATH.read_text())["claims"]}
    assert result["seeds"] == [42, 2024, 1337, 7777, 9999]
    assert_book_close(result["budgets"]["1000"]["em_like"]["speedup"],
                      ledger["sticky.speedup_paper_protocol"]["value"], rtol=2e-3)
    recorded = report.record_speedup_budget_claims(result)
    for name in ("500", "2000", "4000", "8000"):
        assert f"sticky.speedup_budget_{name}" in recorded
    # the 1000-step budget is the protocol: one number, one claim (chapter 5's sticky.speedup_paper_protocol)
    assert "sticky.speedup_budget_1000" not in recorded
    assert math.isfinite(recorded["sticky.exact_m_step_final_loss"].value)
    # every claim of the three rows chapter 5 records from this result is recorded here or already in the ledger
    for name in ("sticky_speedup", "sticky_m_step_on_values", "sticky_trajectories"):
        row = next(pc for pc in verdicts.PAPER_CLAIMS if pc.id == name)
        assert set(row.deciding) <= set(recorded) | set(ledger), name


def test_directions_follow_the_claims_statuses():
    """Each direction phrase is the one its claim's status selects (recomputed from the stored result)."""
    recorded = report.record_speedup_budget_claims(sb.SPEEDUP_BUDGET.load())
    out = report.glue_speedup_directions(list(recorded.values()))
    pair = recorded["sticky.routing_only_over_values_readout"]
    expected = {"pass": "the routing weights give more", "fail": "values and readout give more",
                "undecided": "the two are not told apart"}[pair.status]
    assert out["sticky.pair_phrase"].startswith(expected)
    flipped = [claims.Claim(**{**c.to_json(), "status": "fail"}) if c.id == pair.id else c for c in recorded.values()]
    assert report.glue_speedup_directions(flipped)["sticky.pair_phrase"] == "values and readout give more"
