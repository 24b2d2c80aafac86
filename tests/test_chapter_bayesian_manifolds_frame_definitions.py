"""Chapter 6's stored result ``bijection_frame_definitions`` (chapters.bayesian_manifolds.frame_definitions) and its
claims (frame_definitions_report): the runs are chapter 6's transformer, the function and similarity definitions by
brute force from the stored curves, the committed file against the book spec, the intervention re-read from the
freeze runs, and the result regenerated at reduced size through ``compute``."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from attention_dynamics.book import compute
from attention_dynamics.chapters.bayesian_manifolds import (
    frame_definitions as tf,
    frame_definitions_report as report,
    settings as chapter_settings,
)
from attention_dynamics.core.paths import data_path
from attention_dynamics.diagnostics.frame_order import freeze_frame_summary
from attention_dynamics.ledger import claims, verdicts
from attention_dynamics.ledger.frame_results import load_frame_freeze
from attention_dynamics.training.wind_tunnels import BIJECTION_TUNNELS, BijectionTraining

TUNNEL_IDS = {"frame_precision.tunnel_order_path_adam", "frame_precision.tunnel_order_function_adam",
              "frame_precision.tunnel_order_similarity_adam", "frame_precision.tunnel_order_intervention_adam"}


def test_settings_refuse_what_cannot_be_read():
    with pytest.raises(ValueError, match="n_checkpoints"):
        tf.TunnelFrameSettings(n_checkpoints=2)
    with pytest.raises(ValueError, match="BijectionTraining"):
        tf.TunnelFrameSettings(tunnel=3)
    with pytest.raises(ValueError, match="scale"):
        tf.bijection_frame_definitions_jobs("huge")
    # from JSON: the tunnel's fields as a dict give the typed tunnel back
    s = tf.TunnelFrameSettings(**json.loads(json.dumps(dataclasses.asdict(tf.SETTINGS["book"]))))
    assert s == tf.SETTINGS["book"] and isinstance(s.tunnel, BijectionTraining)


def test_the_book_tunnel_is_chapter_6s():
    assert tf.SETTINGS["book"].tunnel == chapter_settings.SETTINGS["book"].bijection == BIJECTION_TUNNELS["book"]
    assert tf.SETTINGS["book"].n_probe == chapter_settings.SETTINGS["book"].n_probe


def _first_within_for_good(steps, values, fraction):
    values = np.asarray(values, dtype=float)
    band = fraction * abs(values[0] - values[-1])
    for i in range(len(values)):
        if all(abs(v - values[-1]) <= band for v in values[i:]):
            return int(steps[i])


def _check_definitions_by_brute_force(result):
    """The function and similarity steps of every stored run, recomputed from its stored curves."""
    fraction = result["settings"]["fraction"]
    for k, run in enumerate(result["runs"]):
        steps = np.array(run["steps"])
        function, similarity = result["definitions"]["function"], result["definitions"]["similarity"]
        assert function["frame"][k] == _first_within_for_good(steps, run["attention_entropy_bits"], fraction)
        assert function["precision"][k] == _first_within_for_good(steps, np.log10(run["kl_bits"]), fraction)
        assert similarity["precision"][k] == _first_within_for_good(steps, np.log10(run["entropy_mae_bits"]),
                                                                    fraction)
        above = np.array(run["min_similarity"]) >= 0.95
        first = next((int(steps[i]) for i in range(len(steps)) if above[i:].all()), int(steps[-1]))
        assert similarity["frame"][k] == first
    for row in result["definitions"].values():
        assert row["share"] == np.mean(np.array(row["frame"]) < np.array(row["precision"]))


def test_committed_file_is_the_book_spec():
    committed = tf.BIJECTION_FRAME_DEFINITIONS.load()
    assert tf.BIJECTION_FRAME_DEFINITIONS.committed_scale == "book" and tf.BIJECTION_FRAME_DEFINITIONS.files == (tf.FILE,)
    assert committed == json.loads(data_path(tf.FILE).read_text())
    assert committed["settings"] == json.loads(json.dumps(dataclasses.asdict(tf.SETTINGS["book"])))
    assert committed["seeds"] == list(range(6)) and list(committed["definitions"]) == list(tf.TUNNEL_DEFINITIONS)
    assert [r["seed"] for r in committed["runs"]] == committed["seeds"]
    _check_definitions_by_brute_force(committed)


def test_the_claims_decide_the_tunnel_row():
    recorded = report.record_tunnel_order_claims(tf.BIJECTION_FRAME_DEFINITIONS.load(), load_frame_freeze())
    assert set(recorded) == TUNNEL_IDS
    row = next(pc for pc in verdicts.PAPER_CLAIMS if pc.id == "frame_precision_wind_tunnel")
    # chapter 6's readings and chapter 9's on the binding tunnel; chapter 6's are gated by whether its tunnel needs routing
    assert set(row.deciding) == TUNNEL_IDS | {"binding.kl_fall_after_free_freeze", "binding.order_function",
                                              "binding.order_path", "binding.order_similarity"}
    assert {g.requires_routing for g in row.definitions if set(g.evidence) <= TUNNEL_IDS} == {
        ("routing_need.bijection.uniform_kl_ratio",)}
    # the intervention: freezing at initialisation already costs less than the margin, so it cannot time the frame
    summary = freeze_frame_summary(load_frame_freeze()["tunnel"], 0.01)
    intervention = recorded["frame_precision.tunnel_order_intervention_adam"]
    assert (summary["freeze_frame_step"] == 0) == (intervention.status == "undecided" and intervention.value == 1.0)
    report.glue_tunnel_frame_definitions(tf.BIJECTION_FRAME_DEFINITIONS.load(), claims.recorded_claims())
    assert len(report.tunnel_order_table(tf.BIJECTION_FRAME_DEFINITIONS.load())) == len(tf.TUNNEL_DEFINITIONS)


def test_the_fast_scale_regenerates_through_compute(tmp_path):
    folder = compute.compute("bijection_frame_definitions", "fast", root=tmp_path, processes=1, log=lambda m: None)
    result = json.loads((folder / tf.FILE).read_text())
    committed = tf.BIJECTION_FRAME_DEFINITIONS.load()
    assert set(result) == set(committed) and result["scale"] == "fast"
    assert result["seeds"] == list(tf.SETTINGS["fast"].seeds)
    assert len(result["runs"][0]["steps"]) >= 4 and result["runs"][0]["steps"][-1] == tf.SETTINGS["fast"].tunnel.steps
    _check_definitions_by_brute_force(result)
    recorded = report.record_tunnel_order_claims(result, load_frame_freeze())
    assert set(recorded) == TUNNEL_IDS
