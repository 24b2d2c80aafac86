"""Chapter 7's long-memory tunnel: its settings, the committed runs against their settings and a recomputed ladder,
the claims it records under the window rule, its figure, and the stored result regenerated at the fast scale
through ``compute``."""

from __future__ import annotations

import copy

import numpy as np
import pytest

from attention_dynamics.book import compute
from attention_dynamics.book.nbcompare import assert_book_close
from attention_dynamics.chapters.architectures import figures, hmm_longmem, memory_report
from attention_dynamics.core import plotting
from attention_dynamics.diagnostics.memory_ladder import MemoryLadder, ladder_of_batch
from attention_dynamics.models.factory import FAMILIES


def _ladder(levels):
    levels = np.asarray(levels, dtype=float)
    return MemoryLadder(kl_bits=levels, entropy_mae_bits=levels, kl_by_position={}, n_sequences=1)


def test_spec_is_validated_and_names_its_scales():
    with pytest.raises(ValueError, match="scales"):
        hmm_longmem.HMM_LONGMEM.spec("huge")
    with pytest.raises(ValueError, match="seeds"):
        hmm_longmem.SPECS["fast"].__class__(**{**hmm_longmem.SPECS["fast"].__dict__, "seeds": (0, 0)})
    with pytest.raises(ValueError, match="families"):
        hmm_longmem.SPECS["fast"].__class__(**{**hmm_longmem.SPECS["fast"].__dict__, "families": ("gru",)})
    keys = [j.key for j in hmm_longmem.longmem_jobs("fast", longer=("lstm",))]
    assert keys[:2] == ["transformer_seed0", "transformer_seed1"] and "lstm_seed1_x4" in keys
    assert hmm_longmem.HMM_LONGMEM.name in compute.registry()
    with pytest.raises(ValueError, match="longer"):
        hmm_longmem.SPECS["fast"].__class__(**{**hmm_longmem.SPECS["fast"].__dict__, "families": ("lstm",),
                                               "longer": ("transformer",)})
    book = [j for j in hmm_longmem.longmem_jobs("book") if j.key.endswith("_x4")]  # the spec's longer runs
    assert [j.key for j in book] == ["transformer_seed0_x4", "transformer_seed1_x4", "transformer_seed2_x4"]
    assert all(j.kwargs["steps"] == 4 * hmm_longmem.HMM_LONGMEM.spec("book").steps for j in book)


def test_committed_longmem_results_match_their_settings_and_a_recomputed_ladder():
    stored = hmm_longmem.HMM_LONGMEM.load()
    assert stored["settings"] == hmm_longmem.HMM_LONGMEM.spec("book").to_json()
    ladder = ladder_of_batch(hmm_longmem.longmem_evaluation_set("book"))
    assert_book_close(stored["ladder"]["kl_bits"], ladder.kl_bits, rtol=1e-9)  # the last entry is round-off on either machine
    assert set(stored["runs"]) <= set(hmm_longmem.HMM_LONGMEM.spec("book").families)
    for family, runs in stored["runs"].items():
        assert sorted(runs) == ["0", "1", "2"], family
        assert all(r["steps"] == hmm_longmem.HMM_LONGMEM.spec("book").family_steps(family) for r in runs.values())


def test_longmem_claims_from_the_committed_file_say_why_a_row_fails_or_is_undecided():
    recorded = memory_report.record_longmem_claims()
    ids = set(recorded["claims"])
    assert {"hmm_longmem.context_blind_kl_bits", "hmm_longmem.window_kl_bits_k8"} <= ids
    stored = hmm_longmem.HMM_LONGMEM.load()
    for family in stored["runs"]:
        assert memory_report.LONGMEM_KL_CLAIM_IDS[family] in ids and memory_report.LONGMEM_MEMORY_CLAIM_IDS[family] in ids
    for claim in recorded["claims"].values():
        assert claim.status not in ("fail", "undecided") or claim.explanation


def test_chapter7_memory_claims_follow_paper_is_verdicts_and_the_positive_control():
    ladder = _ladder([0.2, 0.08, 0.036, 0.017, 0.009, 0.0045, 0.0019, 0.0012, 0.0005, 0.0])
    assert ladder.rule_window == 6
    got = memory_report.record_chapter7_memory("hmm_sticky", ladder,
                                               {"transformer": 0.033, "lstm": 0.0085, "mlp_blind": 0.21},
                                               params={}, longer={"lstm": True})
    assert got["hmm_sticky.memory_steps_transformer"].value == 4
    assert got["hmm_sticky.memory_steps_transformer"].status == "undecided"  # a miss without a longer run
    assert got["hmm_sticky.memory_steps_lstm"].value == 6
    # the transformer misses the rule, so "the LSTM does not realise it" cannot be decided by the rule
    assert got["hmm_sticky.memory_steps_lstm"].status == "undecided"
    assert got["hmm_sticky.memory_steps_mlp_blind"].value == 1


def test_seed_curve_figure_draws_every_family_and_both_levels():
    stored = hmm_longmem.HMM_LONGMEM.load()
    fig = figures.plot_seed_curves(stored, MemoryLadder.from_json(stored["ladder"]), title="long-memory tunnel")
    plotting.check_figure(fig)
    labels = fig.axes[0].get_legend_handles_labels()[1]
    assert any("context-blind" in s for s in labels) and any("-step window" in s for s in labels)
    assert len(fig.axes[0].lines) == len(stored["runs"]) + len(stored["longer"]) + 2  # longer runs dashed


@pytest.mark.slow
def test_the_fast_scale_regenerates_through_compute_and_records_its_claims(tmp_path):
    folder = compute.compute("hmm_longmem", "fast", root=tmp_path, processes=1, log=lambda m: None)
    payload = __import__("json").loads((folder / hmm_longmem.RESULT_FILE).read_text())
    assert set(payload["runs"]) == set(FAMILIES) and all(len(r) == 2 for r in payload["runs"].values())
    assert payload["settings"] == hmm_longmem.HMM_LONGMEM.spec("fast").to_json() and "provenance" in payload
    recorded = memory_report.record_longmem_claims(payload)
    ids = set(recorded["claims"])
    assert set(memory_report.LONGMEM_KL_CLAIM_IDS.values()) | set(memory_report.LONGMEM_MEMORY_CLAIM_IDS.values()) <= ids
    for claim in recorded["claims"].values():
        assert claim.status not in ("fail", "undecided") or claim.explanation


def test_longmem_readings_follow_the_claim_status():
    read = memory_report.longmem_reading
    assert read("pass", True, 8).startswith("carries the belief beyond the 8-step window, as Paper I")
    assert read("fail", True, 8).startswith("a short memory even in a run four times as long")
    assert read("undecided", True, 8, longer=True) == "open at this scale: its seeds disagree"
    assert read("undecided", True, 8) == "open at this scale"
    assert read("fail", False, 8).startswith("carries the belief beyond the 8-step window")
    assert "positive control" in read("undecided", False, 8)
    assert read("new", None, 8) == "not tested in Paper I"
    recorded = memory_report.record_longmem_claims()  # the glued reading is the recorded claim's, not the raw status
    control = recorded["claims"]["hmm_longmem.kl_bits_transformer"].interval[1] <= recorded["ladder"].rule_level
    # the context-blind MLP's "does not realise" is decided only when the transformer, the positive control, realises
    assert recorded["claims"]["hmm_longmem.kl_bits_mlp_blind"].status == ("pass" if control else "undecided")
    stored = copy.deepcopy(hmm_longmem.HMM_LONGMEM.load())  # the same file with the transformer far above the level
    for run in stored["longer"]["transformer"].values():
        run["metrics"]["kl_bits"] = 0.3
    failed_control = memory_report.record_longmem_claims(stored)["claims"]
    assert failed_control["hmm_longmem.kl_bits_transformer"].status == "fail"
    assert failed_control["hmm_longmem.kl_bits_mlp_blind"].status == "undecided"
    memory_report.record_longmem_claims()  # the committed file's claims back in the ledger
