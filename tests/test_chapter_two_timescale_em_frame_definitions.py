"""Chapter 4's stored result ``frame_definitions`` (chapters.two_timescale_em.frame_definitions) and its claims
(frame_definitions_report): each definition against an independent computation (chapter 4's own measurement, brute
force, independently frozen runs), the committed file against the book spec and chapter 4's ledger, and the result
regenerated at reduced size through ``compute``."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
import torch

from attention_dynamics.book import compute
from attention_dynamics.book.nbcompare import assert_book_close
from attention_dynamics.chapters.two_timescale_em import (
    figures,
    frame_definitions as fd,
    frame_definitions_report as report,
    settings as chapter_settings,
)
from attention_dynamics.chapters.two_timescale_em.runs import settling_comparison
from attention_dynamics.core import plotting
from attention_dynamics.core.paths import CLAIMS_PATH, data_path
from attention_dynamics.ledger import verdicts
from attention_dynamics.ledger.frame_results import TOY_ORDER_CLAIMS, frame_row_verdict, load_frame_definitions
from attention_dynamics.training.recall_head import train_specialization_head

FAST = fd.SETTINGS["fast"]


@pytest.fixture(scope="module")
def sgd_run():
    torch.set_num_threads(1)
    return fd.head_run(0, "sgd", FAST)


def test_settings_refuse_what_cannot_be_read():
    with pytest.raises(ValueError, match="horizons"):
        fd.RecallHeadFrameSettings(horizons=(200, 100))
    with pytest.raises(ValueError, match="multiple"):
        fd.RecallHeadFrameSettings(horizons=(105,))
    with pytest.raises(ValueError, match="freeze_grid"):
        fd.RecallHeadFrameSettings(horizons=(100, 200), freeze_grid=(0, 250))
    with pytest.raises(ValueError, match="optimiser"):
        FAST.lr("rmsprop")
    with pytest.raises(ValueError, match="scale"):
        fd.frame_definitions_jobs("huge")


def test_the_sgd_heads_are_chapter_4s():
    """The book runs are chapter 4's heads: its learning rate, sizes, seeds and run length (the middle horizon)."""
    book, chapter = fd.SETTINGS["book"], chapter_settings.SETTINGS["book"]
    assert book.sgd_lr == chapter.lr and (book.n_train, book.n_probe) == (chapter.n_train, chapter.n_probe)
    assert book.seeds == chapter.seeds and book.path_every == chapter.path_every
    assert book.horizons[len(book.horizons) // 2] == chapter.steps
    assert book.fraction == chapter_settings.CLAIM_FRACTION and chapter_settings.FREE_FREEZE_RATIO == 1.25


def test_path_definition_is_chapter_4s_on_chapter_4s_runs(sgd_run):
    """Trained independently by chapter 4's trainer at each horizon, the path settling steps (chapter 4's
    settling_comparison) equal the ones read from the one long run."""
    for h in FAST.horizons:
        runs = [train_specialization_head(seed, steps=h, lr=FAST.sgd_lr, n_train=FAST.n_train, n_probe=FAST.n_probe,
                                          record_every=FAST.record_every, settle_window=FAST.record_every,
                                          path_every=FAST.path_every) for seed in (0, 1)]
        row = settling_comparison(runs, (FAST.fraction,))["rows"][0]
        assert sgd_run["settle"][str(h)]["path"] == {"frame": row["frame"][0], "precision": row["values"][0]}


def _first_within_for_good(steps, values, fraction):
    values = np.asarray(values, dtype=float)
    band = fraction * abs(values[0] - values[-1])
    for i in range(len(values)):
        if all(abs(v - values[-1]) <= band for v in values[i:]):
            return int(steps[i])


def test_function_definitions_by_brute_force(sgd_run):
    steps = np.array(sgd_run["steps"])
    for h in FAST.horizons:
        n = int(np.searchsorted(steps, h)) + 1
        mass = np.array(sgd_run["correct_mass"][:n])
        loss = np.array(sgd_run["probe_loss"][:n])
        settle = sgd_run["settle"][str(h)]
        assert settle["function"]["frame"] == _first_within_for_good(steps[:n], mass, FAST.fraction)
        assert settle["function"]["precision"] == _first_within_for_good(steps[:n], np.log10(loss), FAST.fraction)
        assert settle["function_log"]["frame"] == _first_within_for_good(steps[:n], np.log10(1 - mass), FAST.fraction)


def test_intervention_against_independently_frozen_runs(sgd_run):
    """A frozen continuation's loss equals chapter 4's trainer with W_Q, W_K frozen from the same step, and the
    intervention's frame step is the first evaluated freeze step after the last one that costs more than the margin."""
    steps = np.array(sgd_run["steps"])
    loss = np.array(sgd_run["probe_loss"])
    h = FAST.horizons[-1]
    frozen = {int(t): v for t, v in sgd_run["freeze"][str(h)].items()}
    t = max(frozen)
    run = train_specialization_head(0, steps=h, lr=FAST.sgd_lr, n_train=FAST.n_train, n_probe=FAST.n_probe,
                                    record_every=FAST.record_every, settle_window=FAST.record_every,
                                    freeze_routing_at=t)
    assert_book_close(run.probe_loss[-1], frozen[t], rtol=1e-5)
    i_h = int(np.searchsorted(steps, h))
    margin = FAST.margin_fraction * (loss[0] - loss[i_h])
    passes = {tt: v - loss[i_h] <= margin for tt, v in frozen.items()}
    step = sgd_run["settle"][str(h)]["intervention"]["frame"]
    assert all(ok for tt, ok in passes.items() if tt >= step)
    failing = [tt for tt, ok in passes.items() if not ok]
    assert step == (min(tt for tt in passes if tt > max(failing)) if failing and max(failing) < max(passes)
                    else h if failing else min(passes))
    precision = sgd_run["settle"][str(h)]["intervention"]["precision"]
    assert (loss[: i_h + 1][steps[: i_h + 1] >= precision] - loss[i_h] <= margin).all()


def test_adam_runs_record_every_definition():
    out = fd.frame_definitions_job("adam", 1, dataclasses.asdict(FAST))
    assert out["lr"] == FAST.adam_lr and out["optimiser"] == "adam"
    assert set(out["settle"][str(FAST.horizons[0])]) == set(fd.DEFINITIONS)


def test_the_fast_scale_regenerates_through_compute(tmp_path):
    """A reduced version of the committed computation through the same jobs; its claims, glue, table and figure."""
    folder = compute.compute("frame_definitions", "fast", root=tmp_path, processes=1, log=lambda m: None)
    result = json.loads((folder / fd.FILE).read_text())
    committed = load_frame_definitions()
    assert set(result) == set(committed) and result["scale"] == "fast"
    assert set(result["toy"]) == set(fd.OPTIMISERS)
    for opt in fd.OPTIMISERS:
        assert set(result["toy"][opt]["horizons"]) == {str(h) for h in FAST.horizons}
        assert set(result["toy"][opt]) == set(committed["toy"][opt])
    report.glue_frame_definitions(result)
    recorded = report.record_frame_definition_claims(result)
    growth = {f"frame_precision.path_gap_horizon_ratio_{o}" for o in fd.OPTIMISERS
              if result["toy"][o]["gap_horizon_ratio"]["path"]["point"] is not None}
    assert set(recorded) == {cid for cid, _, _ in TOY_ORDER_CLAIMS} | growth
    assert all(c.status in ("pass", "fail", "undecided") for c in recorded.values() if c.interval is not None)
    # a chapter that does not own the claims states the same verdict as the one that records them
    assert frame_row_verdict(result).verdict == verdicts.verdict_of("frame_precision_toy",
                                                                    list(recorded.values())).verdict
    assert len(report.order_table(result)) == len(fd.OPTIMISERS) * len(fd.DEFINITIONS)
    fig = figures.plot_frame_definitions(result)
    plotting.check_figure(fig)
    plotting.plt.close(fig)
    # a job's stored output is that job run again in this process
    torch.set_num_threads(1)
    record = json.loads((folder / "jobs" / "sgd-seed1.json").read_text())
    assert record["output"] == json.loads(json.dumps(fd.frame_definitions_job("sgd", 1, dataclasses.asdict(FAST))))


def test_the_claims_are_the_frame_rows_definitions():
    """Every definition of the frame row is decided by one claim chapter 4 records."""
    row = next(pc for pc in verdicts.PAPER_CLAIMS if pc.id == "frame_precision_toy")
    assert set(row.deciding) == {cid for cid, _, _ in TOY_ORDER_CLAIMS}
    recorded = report.record_frame_definition_claims(load_frame_definitions())
    assert set(row.deciding) <= set(recorded)


def test_committed_file_is_the_book_spec():
    committed = load_frame_definitions()
    assert fd.FRAME_DEFINITIONS.committed_scale == "book" and fd.FRAME_DEFINITIONS.files == (fd.FILE,)
    assert committed == json.loads(data_path(fd.FILE).read_text())
    assert committed["settings"] == json.loads(json.dumps(dataclasses.asdict(fd.SETTINGS["book"])))
    assert committed["definitions"] == list(fd.DEFINITIONS) and committed["main_horizon"] == 2000
    for opt in fd.OPTIMISERS:
        block = committed["toy"][opt]
        assert block["seeds"] == list(range(10)) and block["lr"] == fd.SETTINGS["book"].lr(opt)
        for rows in block["horizons"].values():
            for row in rows.values():
                assert len(row["frame"]) == len(row["precision"]) == 10
                assert row["share"] == np.mean(np.array(row["frame"]) < np.array(row["precision"]))


def test_stored_result_agrees_with_chapter_4s_ledger():
    """The stored SGD path order at chapter 4's run length is chapter 4's committed claim (same seeds, same runs)."""
    result = load_frame_definitions()
    ledger = {c["id"]: c for c in json.loads(CLAIMS_PATH.read_text())["claims"]}
    row = result["toy"]["sgd"]["horizons"][str(result["main_horizon"])]["path"]
    assert_book_close(row["share"], ledger["dynamics.frame_settles_first_fraction"]["value"])
    ratios = np.array(row["precision"]) / np.maximum(row["frame"], 1)
    assert_book_close(np.median(ratios), ledger["dynamics.precision_to_frame_time_ratio"]["value"], rtol=1e-9)


def test_horizon_stability_in_words():
    same = {"definitions": ["path"], "toy": {"sgd": {"horizons": {"1": {"path": {"verdict": "frame first"}},
                                                                   "2": {"path": {"verdict": "frame first"}}}}}}
    assert report.horizon_stability(same).startswith("every definition")
    same["toy"]["sgd"]["horizons"]["2"]["path"]["verdict"] = "undecided"
    assert report.horizon_stability(same) == ("the order changes with the run length only for the parameter path "
                                              "under plain SGD")
