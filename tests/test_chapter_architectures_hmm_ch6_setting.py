"""Chapter 7's random-HMM rows at chapter 6's setting: the evaluation set is chapter 6's, the settings are chapter
6's, the committed runs record their claims, and the stored result regenerates at the fast scale through
``compute``."""

from __future__ import annotations

import json

import pytest
import torch

from attention_dynamics.book import compute
from attention_dynamics.chapters.architectures import formats_report, hmm_ch6_setting
from attention_dynamics.chapters.architectures.hmm_tunnel import HMMTunnelSpec
from attention_dynamics.training.wind_tunnels import HMM_TUNNELS, hmm_batch_for_eval


def test_evaluation_set_is_chapter_6s_held_out_set_at_the_training_length():
    got = hmm_ch6_setting.ch6_evaluation_set("fast")
    t = HMM_TUNNELS["fast"]
    ref = hmm_batch_for_eval(t, t.length, seed=0, n=hmm_ch6_setting.HMM_CH6_SETTING.spec("fast").eval_sequences)
    assert torch.equal(got.inputs, ref.inputs) and torch.equal(got.posterior, ref.posterior)
    assert torch.equal(got.positions, torch.arange(t.length))
    book = hmm_ch6_setting.HMM_CH6_SETTING.spec("book")
    assert hmm_ch6_setting.ch6_task("book").sequence_length == 20
    assert book.lr == HMM_TUNNELS["book"].lr and book.steps == HMM_TUNNELS["book"].steps
    with pytest.raises(ValueError, match="ch6_scale"):
        HMMTunnelSpec(**{**book.__dict__, "ch6_scale": "huge"})


def test_committed_runs_match_their_settings_and_record_their_claims():
    stored = hmm_ch6_setting.HMM_CH6_SETTING.load()
    assert stored["settings"] == hmm_ch6_setting.HMM_CH6_SETTING.spec("book").to_json()
    recorded = formats_report.record_ch6_setting_claims(stored)
    for family in stored["runs"]:
        assert formats_report.CH6_SETTING_KL_CLAIM_IDS[family] in recorded["claims"]
        assert formats_report.CH6_SETTING_MEMORY_CLAIM_IDS[family] in recorded["claims"]
    # chapter 6's setting gives the positive control: the transformer passes chapter 7's transport bound
    assert recorded["claims"]["architectures.hmm_kl_bits_transformer_long"].status == "pass"
    for claim in recorded["claims"].values():
        assert claim.status not in ("fail", "undecided") or claim.explanation


@pytest.mark.slow
def test_the_fast_scale_regenerates_through_compute_and_records_its_claims(tmp_path):
    folder = compute.compute("hmm_ch6_setting", "fast", root=tmp_path, processes=1, log=lambda m: None)
    payload = json.loads((folder / hmm_ch6_setting.RESULT_FILE).read_text())
    recorded = formats_report.record_ch6_setting_claims(payload)
    assert set(recorded["claims"]) == set(formats_report.CH6_SETTING_KL_CLAIM_IDS.values()) | \
        set(formats_report.CH6_SETTING_MEMORY_CLAIM_IDS.values())
    for claim in recorded["claims"].values():
        assert claim.status not in ("fail", "undecided") or claim.explanation
