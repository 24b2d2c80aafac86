"""Chapter 3's stored result ``feedback_predictions`` (chapters.routing_content_feedback.feedback_predictions) and
its claims (report.record_feedback_claims): the moments are chapter 3's, the committed file is the book spec, the
claims and phrases follow the stored numbers, and a fast regeneration through ``compute``."""

from __future__ import annotations

import dataclasses
import json

import pytest
import torch

from attention_dynamics.book import compute
from attention_dynamics.book.nbcompare import assert_book_close
from attention_dynamics.chapters.routing_content_feedback import (
    feedback_predictions as fp,
    report,
    runs,
    settings as chapter_settings,
)
from attention_dynamics.core.paths import data_path
from attention_dynamics.ledger import claims
from attention_dynamics.training.recall_head import train_specialization_head

FEEDBACK_IDS = {"dynamics.db_prediction_rel_err_init", "dynamics.db_prediction_rel_err_transition",
                "dynamics.feedback_gain_margin_init", "dynamics.feedback_gain_margin_end",
                "dynamics.weight_step_value_cosine_seeds", "dynamics.weight_step_sign_agreement_seeds"}


def test_settings_refuse_what_cannot_be_read():
    with pytest.raises(ValueError, match="multiple of record_every"):
        fp.FeedbackSettings(steps=110, record_every=20)
    with pytest.raises(ValueError, match="two seeds"):
        fp.FeedbackSettings(seeds=(0,))
    with pytest.raises(ValueError, match="positive"):
        fp.FeedbackSettings(eta=0.0)
    with pytest.raises(ValueError, match="scale"):
        fp.feedback_jobs("huge")


@pytest.mark.parametrize("scale", ["fast", "book"])
def test_the_heads_are_chapter_3s_at_each_scale(scale):
    """The recall heads are trained with chapter 3's own settings of the same scale."""
    ours, chapter = fp.SETTINGS[scale], chapter_settings.SETTINGS[scale]
    for field in ("steps", "lr", "n_train", "n_probe", "record_every", "n_check"):
        assert getattr(ours, field) == getattr(chapter, field), field


def test_the_transition_is_chapter_3s():
    """The middle of the routing transition is the moment chapter 3's runs name (independent code)."""
    s = fp.SETTINGS["fast"]
    out = fp.feedback_job("recall", 0, dataclasses.asdict(s))
    run = train_specialization_head(0, steps=s.steps, lr=s.lr, n_train=s.n_train, n_probe=s.n_probe,
                                    record_every=s.record_every, settle_window=5 * s.record_every)
    assert out["steps"]["transition"] == int(run.steps[runs.moments(run)["routing transition"]])
    assert out["init"]["db_rel_err"] < out["transition"]["db_rel_err"]  # the readout's response grows with training
    assert_book_close(out["init"]["loss_ratio"], 1.0, rtol=0, atol=1e-3)
    with pytest.raises(ValueError, match="kind"):
        fp.feedback_job("grid", 0, dataclasses.asdict(s))


def test_committed_file_is_the_book_spec():
    committed = fp.FEEDBACK_PREDICTIONS.load()
    assert fp.FEEDBACK_PREDICTIONS.committed_scale == "book" and fp.FEEDBACK_PREDICTIONS.files == (fp.FILE,)
    assert committed == json.loads(data_path(fp.FILE).read_text())
    assert committed["settings"] == json.loads(json.dumps(dataclasses.asdict(fp.SETTINGS["book"])))
    assert committed["seeds"] == [0, 1, 2, 3, 4] and committed["sticky_seeds"] == [42, 2024, 1337, 7777, 9999]
    assert set(committed["moments"]) == set(fp.MOMENTS)
    for m in committed["moments"].values():
        assert len(m["db_rel_err"]["values"]) == 5 and m["db_rel_err"]["low"] <= m["db_rel_err"]["mean"]


def test_stored_result_decides_every_part():
    recorded = report.record_feedback_claims(fp.FEEDBACK_PREDICTIONS.load())
    assert set(recorded) == FEEDBACK_IDS
    assert all(c.status in ("pass", "fail", "undecided") for c in recorded.values())
    margin = recorded["dynamics.feedback_gain_margin_end"]
    stored = fp.FEEDBACK_PREDICTIONS.load()["moments"]["end"]["gain_margin"]
    assert margin.value == stored["mean"] and tuple(margin.interval) == (stored["low"], stored["high"])


def test_directions_follow_the_claims_statuses():
    recorded = report.record_feedback_claims(fp.FEEDBACK_PREDICTIONS.load())
    out = report.glue_feedback_directions(list(recorded.values()))
    status = recorded["dynamics.db_prediction_rel_err_transition"].status
    assert out["ch3.fb_db_transition_phrase"] == {"pass": "still holds", "fail": "no longer holds",
                                                  "undecided": "is not decided"}[status]
    claim = recorded["dynamics.feedback_gain_margin_init"]
    flipped = [claims.Claim(**{**c.to_json(), "status": "pass"}) if c.id == claim.id else c for c in recorded.values()]
    assert report.glue_feedback_directions(flipped)["ch3.fb_margin_init_phrase"].startswith("a value step favours "
                                                                                           "the answer's source")


def test_the_fast_scale_regenerates_through_compute(tmp_path):
    """A reduced version of the committed computation through the same jobs, with the committed file's shape."""
    folder = compute.compute("feedback_predictions", "fast", root=tmp_path, processes=1, log=lambda m: None)
    out = json.loads((folder / fp.FILE).read_text())
    committed = fp.FEEDBACK_PREDICTIONS.load()
    assert set(out) == set(committed) and out["scale"] == "fast"
    assert out["seeds"] == list(fp.SETTINGS["fast"].seeds)
    report.glue_feedback(out)
    recorded = report.record_feedback_claims(out)
    assert set(recorded) == FEEDBACK_IDS
    m = out["moments"]["init"]
    assert_book_close(m["gain_margin"]["mean"], m["gain_correct"]["mean"] - m["gain_other_source"]["mean"])
    torch.set_num_threads(1)  # as a job runs
    direct = fp.feedback_job("weight_step", 2024, dataclasses.asdict(fp.SETTINGS["fast"]))
    assert direct["value_cosine"] == out["weight_step"]["value_cosine"]["values"][1]
