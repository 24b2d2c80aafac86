"""Chapter 6's memory ladder and mechanism controls: the claims they record, ids written out, against the ladder's
own levels and the controls' direct computations."""

from __future__ import annotations

import pytest
import torch

from attention_dynamics.book.nbcompare import assert_book_close
from attention_dynamics.chapters.bayesian_manifolds import mechanism_report, memory_report
from attention_dynamics.diagnostics import mechanism_controls
from attention_dynamics.tasks import bijection
from attention_dynamics.training.wind_tunnels import HMM_TUNNELS, hmm_batch_for_eval, make_bijection_transformer


def test_chapter6_memory_claims_state_the_memory_each_length_matches_and_the_window_levels():
    t = HMM_TUNNELS["fast"]
    eval_hmm = {K: hmm_batch_for_eval(t, K, seed=0, n=40) for K in t.test_lengths}
    ladders = memory_report.chapter6_ladders(eval_hmm)
    assert all(ladder.length == min(K, memory_report.MAX_WINDOW) for K, ladder in ladders.items())
    with pytest.raises(ValueError, match="lengths"):  # the three lengths are read by role
        memory_report.record_chapter6_memory({8: ladders[8]}, {8: 0.0}, model="chapter6", params={})
    K20, K30, K50 = sorted(ladders)
    kl = {K20: ladders[K20].level(3) * 0.9, K30: 10.0, K50: 10.0}  # a 4-step memory; worse than context-blind
    got = memory_report.record_chapter6_memory(ladders, kl, model="chapter6", params={}, eval_hmm=eval_hmm)
    assert got["hmm.memory_steps_transformer"].value == ladders[K20].memory_steps(kl[K20]) <= 4
    assert got["hmm.memory_steps_transformer_len30"].value == 1
    assert got["hmm.memory_steps_transformer_len30"].status == "undecided"  # no longer run of the book model
    for k, claim_id in memory_report.WINDOW_CLAIM_IDS.items():
        assert_book_close(got[claim_id].value, ladders[K20].level(k))
        assert got[claim_id].status == "pass"
    ladders = {20: ladders[K20], 30: ladders[K30], 50: ladders[K50]}
    long_tier = memory_report.record_chapter6_memory(ladders, {20: 10.0, 30: 10.0, 50: 10.0}, model="long_tier",
                                                     params={}, ratio_late_change={20: 0.01, 30: 0.2, 50: 0.2})
    assert long_tier["hmm_long.memory_steps"].status == "fail"  # a plateaued miss is a finding
    assert long_tier["hmm_long.memory_steps_len30"].status == "undecided"  # still moving


def test_chapter6_ladder_glue_names_are_the_ones_written_out(monkeypatch):
    from attention_dynamics.ledger import claims

    glued = {}
    monkeypatch.setattr(claims, "glue", lambda name, value: glued.__setitem__(name, value))
    t = HMM_TUNNELS["fast"]
    ladders = memory_report.chapter6_ladders({K: hmm_batch_for_eval(t, K, seed=0, n=20) for K in t.test_lengths})
    memory_report.glue_chapter6_ladders(ladders, {K: ladder.level(2) for K, ladder in ladders.items()})
    assert set(glued) == set(memory_report.LADDER_GLUE_NAMES)
    assert glued["manifolds.hmm_train_memory_steps"] == 2


def test_mechanism_claims_are_the_controls_own_numbers():
    torch.manual_seed(0)
    V, L = 5, 4
    trained = make_bijection_transformer(V, L, d_model=8, n_layers=2, n_heads=2).eval()
    untrained = make_bijection_transformer(V, L, d_model=8, n_layers=2, n_heads=2).eval()
    keys = mechanism_report.record_paper_key_metric("geometry", trained, untrained, V, params={}, model_text="m")
    assert_book_close(keys["claims"]["geometry.key_signed_cos_value_tokens"].value,
                      mechanism_controls.paper_key_orthogonality(trained, V)["signed"])
    # stated on the book-scale model (one seed moves across the bound), decided at Paper I's size
    assert keys["claims"]["geometry.key_signed_cos_value_tokens"].upper is None
    assert keys["claims"]["geometry.key_signed_cos_value_tokens"].status == "new"
    v20 = mechanism_report.record_paper_key_metric("geometry_v20", trained, untrained, V, params={}, model_text="m")
    assert v20["claims"]["geometry_v20.key_signed_cos_value_tokens"].upper == mechanism_report.PAPER_KEY_BOUND
    assert mechanism_report.key_metric_reading(0.05, 0.01).startswith("both below")
    assert mechanism_report.key_metric_reading(0.2, 0.01).startswith("the untrained model below")
    batch = bijection.sample_bijection_batch(16, V, L, generator=torch.Generator().manual_seed(1))
    ablation = mechanism_report.record_layer_ablation("geometry_v20", trained, batch, params={}, model_text="m")
    assert set(ablation["claims"]) == {"geometry_v20.layer_ablation_kl_bits_layer0",
                                       "geometry_v20.layer_ablation_kl_bits_layer1"}  # a 2-layer model
    direct = mechanism_controls.layer_ablation(trained, batch)
    assert_book_close(ablation["claims"]["geometry_v20.layer_ablation_kl_bits_layer1"].value,
                      direct["ablated"][1]["kl_bits"])
    table = mechanism_report.ablation_table(ablation)
    assert list(table.index) == ["layer 0 ablated", "layer 1 ablated", "intact", "context-blind"]
    assert list(table.columns) == ["KL to the exact posterior (bits)", "entropy error (bits)"]


def test_long_tier_ladders_reuse_the_chapters_only_on_the_same_sequences():
    from types import SimpleNamespace

    t = HMM_TUNNELS["fast"]
    lr = SimpleNamespace(settings=SimpleNamespace(tunnel=t, n_eval=20), results={"seed": 0})
    same = {K: hmm_batch_for_eval(t, K, seed=0, n=20) for K in t.test_lengths}
    sentinel = {K: "chapter's" for K in same}
    assert memory_report.long_tier_ladders(lr, chapter_batches=same, chapter_ladders=sentinel) == sentinel
    other = {K: hmm_batch_for_eval(t, K, seed=1, n=20) for K in t.test_lengths}
    own = memory_report.long_tier_ladders(lr, chapter_batches=other, chapter_ladders=sentinel)
    assert set(own) == set(t.test_lengths)
    assert_book_close(own[t.length].context_blind_kl_bits, memory_report.chapter6_ladders(same)[t.length].level(1))


def _freeze_result(finals: dict[int, tuple[float, float]], initial: float = 1.0) -> dict:
    runs = []
    for seed, (unfrozen, frozen) in finals.items():
        runs += [{"seed": seed, "freeze_at": None, "initial": initial, "final": unfrozen},
                 {"seed": seed, "freeze_at": 0, "initial": initial, "final": frozen}]
    return {"settings": {"tunnel": {"steps": 2000}}, "runs": runs}


def test_freeze_cost_claim_is_the_frozen_over_the_trained_kl_against_the_free_ratio():
    # the frozen runs' final KL over the unfrozen ones': 1.009, 1.008, 1.018; shares of the untrained gap (0.9, 0.8,
    # 0.9): 0.001, 0.002, 0.002
    result = _freeze_result({0: (0.1, 0.1009), 1: (0.2, 0.2016), 2: (0.1, 0.1018)})
    got = mechanism_report.record_freeze_frame_cost(result, ratio=1.25, stored_steps=500, source="x")
    assert_book_close(got["per_seed"], [1.009, 1.008, 1.018])
    assert_book_close(got["claim"].value, (1.009 * 1.008 * 1.018) ** (1 / 3))
    assert got["claim"].lower == 1.25
    assert got["claim"].status == "fail"  # the whole interval within 1.25 times: freezing costs nothing
    assert_book_close(got["gap_share"], [0.001, 0.002, 0.002])
    big = mechanism_report.record_freeze_frame_cost(_freeze_result({0: (0.1, 0.2), 1: (0.1, 0.21), 2: (0.1, 0.19)}),
                                                    ratio=1.25, stored_steps=500, source="x")
    assert big["claim"].status == "pass"  # freezing doubles the KL: the frame is needed
    mixed = mechanism_report.record_freeze_frame_cost(_freeze_result({0: (0.1, 0.1), 1: (0.1, 0.3)}),
                                                      ratio=1.25, stored_steps=500, source="x")
    assert mixed["claim"].status == "undecided"
    for status in ("pass", "fail", "undecided"):
        assert mechanism_report.freeze_cost_reading(status)
    with pytest.raises(ValueError, match="two seeds"):
        mechanism_report.record_freeze_frame_cost(_freeze_result({0: (0.1, 0.2)}), ratio=1.25,
                                                  stored_steps=500, source="x")
