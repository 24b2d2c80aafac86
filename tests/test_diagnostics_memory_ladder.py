"""The memory ladder (windows of the exact posterior): the memory a KL matches, the window rule of transport, the
ladder's ends against the context-blind posterior, the filter and path enumeration, and the claims it records."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attention_dynamics.book.nbcompare import assert_book_close
from attention_dynamics.diagnostics import memory_ladder as ml
from attention_dynamics.ledger import memory_claims as mc
from attention_dynamics.science import calibration
from attention_dynamics.tasks import hmm, wind_tunnels as tunnels


def _ladder(levels):
    levels = np.asarray(levels, dtype=float)
    return ml.MemoryLadder(kl_bits=levels, entropy_mae_bits=levels, kl_by_position={}, n_sequences=1)


def test_memory_steps_is_the_smallest_window_at_or_below_the_kl():
    ladder = _ladder([1.0, 0.5, 0.2, 0.1, 0.05, 0.02, 0.01, 0.0])
    assert ladder.memory_steps(2.0) == 1 and ladder.memory_steps(1.0) == 1
    assert ladder.memory_steps(0.3) == 3 and ladder.memory_steps(0.2) == 3 and ladder.memory_steps(0.19) == 4
    assert ladder.memory_steps(0.0) == 8
    assert ladder.memory_text(0.3) == "between a 2- and a 3-step window"
    assert ladder.memory_text(1.5).startswith("above the context-blind level")
    assert ladder.memory_text(1.0) == "at the context-blind level"
    assert ladder.memory_text(0.001) == "between a 7- and an 8-step window"
    short = ml.MemoryLadder(kl_bits=[1.0, 0.5], entropy_mae_bits=[1.0, 0.5], kl_by_position={}, n_sequences=1,
                            sequence_length=20)  # computed up to 2 steps of 20
    assert short.memory_steps(0.1) == 3 and short.memory_text(0.1) == "below every window up to 2 steps"
    assert short.level(20) == 0.0
    with pytest.raises(ValueError, match="computed up to"):
        short.level(5)


def test_rule_window_is_the_longest_window_up_to_eight_still_a_percent_of_the_context_blind_level():
    far = _ladder([1.0, 0.8, 0.6, 0.5, 0.4, 0.35, 0.3, 0.26, 0.2, 0.1, 0.0])
    assert far.rule_window == 8
    assert_book_close(far.rule_level, 0.26)
    near = _ladder([1.0, 0.12, 0.018, 0.0033, 0.001, 0.0002, 0.0, 0.0, 0.0])  # Paper I's random HMMs
    assert near.rule_window == 3
    realises, misses = ml.transport_bounds(True, near), ml.transport_bounds(False, near)
    assert set(realises) == set(misses) == {"lower", "upper"} and realises["lower"] is None and misses["upper"] is None
    assert_book_close(realises["upper"], 0.018)
    assert_book_close(misses["lower"], 0.018)
    assert ml.transport_bounds(None, near) == {"lower": None, "upper": None}


def test_ladder_ends_are_the_context_blind_posterior_and_the_filter_and_levels_fall():
    batch = hmm.sample_hmm_batch(300, 7, self_transition=0.7, generator=torch.Generator().manual_seed(4))
    ladder = ml.memory_ladder(batch.transition, batch.emission, batch.observations, batch.posterior)
    blind = calibration.calibration_report(
        batch.posterior, hmm.context_blind_posterior(batch.transition, batch.emission, batch.observations).log())
    assert_book_close(ladder.context_blind_kl_bits, blind.kl_bits, rtol=1e-12)
    assert_book_close(ladder.level(7), 0.0, rtol=0)
    assert ladder.level(50) == ladder.level(7)
    assert np.all(np.diff(ladder.kl_bits) <= 1e-12)
    # each level is the KL of the window posterior, computed here by enumerating the window's hidden paths
    q3 = hmm.window_posterior_by_path_enumeration(batch.transition, batch.emission, batch.observations, 3)
    assert_book_close(ladder.level(3), calibration.calibration_report(batch.posterior, q3.log()).kl_bits, rtol=1e-10)
    stored = ml.MemoryLadder.from_json(ladder.to_json())
    np.testing.assert_array_equal(stored.kl_bits, ladder.kl_bits)
    assert torch.get_num_threads() >= 1  # the ladder restores the thread count it changed


def test_longmem_design_keeps_the_eight_step_window_far_from_the_filter():
    """The design's promise, on fresh sequences: the 8-step window stays above a fifth of the context-blind level."""
    task = tunnels.WindTunnel.make("hmm_longmem", n_states=5, n_symbols=5, length=32)
    batch = task.sample(200, generator=torch.Generator().manual_seed(1))
    ladder = ml.ladder_of_batch(batch, max_window=8)
    assert ladder.level(8) > 0.2 * ladder.context_blind_kl_bits and ladder.rule_window == 8
    assert ladder.memory_steps(0.0) == 9 and ladder.level(32) == 0.0
    e = batch.extra
    q24 = hmm.window_posterior(e["transition"], e["emission"], e["observations"], 24)
    level24 = calibration.calibration_report(batch.posterior, q24.log()).kl_bits
    assert level24 < 0.05 * ladder.context_blind_kl_bits  # a long enough memory does reach the filter


def test_window_claims_are_checked_against_path_enumeration():
    batch = hmm.sample_hmm_batch(60, 6, generator=torch.Generator().manual_seed(2))
    ladder = ml.ladder_of_batch(batch)
    got = mc.window_claims({2: "test.window_kl_bits_k2", 3: "test.window_kl_bits_k3"}, batch.transition,
                           batch.emission, batch.observations, batch.posterior, ladder, params={}, tunnel_text="test")
    for k, claim_id in ((2, "test.window_kl_bits_k2"), (3, "test.window_kl_bits_k3")):
        assert_book_close(got[claim_id].value, ladder.level(k))
        assert got[claim_id].status == "pass"


def test_memory_claim_over_seeds_states_the_memory_of_the_mean_with_its_interval():
    ladder = _ladder([1.0, 0.5, 0.2, 0.1, 0.05, 0.02, 0.01, 0.005, 0.0])
    claim = mc.memory_claim("test.memory_steps", [0.04, 0.06, 0.05], ladder, model="m", realises=True, params={},
                            tunnel_text="t")
    assert claim.value == 5 and claim.lower == ladder.rule_window + 1
    assert claim.status in ("fail", "undecided")  # 5 steps is not more than the rule window (8)


@pytest.mark.parametrize("status,realises,control,longer,expected", [
    ("pass", False, False, False, "positive control"),  # not realising means nothing while the control fails
    ("pass", False, True, False, None),
    ("fail", False, False, False, None),  # below the level: a finding whatever the control
    ("fail", True, None, False, "no run"),
    ("fail", True, None, True, None),
])
def test_verdict_reason_follows_the_two_rules(status, realises, control, longer, expected):
    reason = ml.verdict_reason("lstm" if realises is False else "transformer", status, realises,
                               control_realises=control, longer=longer, late_drop=0.1, longer_factor=4)
    assert (reason is None) if expected is None else (expected in reason)
