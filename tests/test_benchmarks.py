"""The benchmark scripts' measuring parts (not their timings): agreement, determinism and memory records."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from attention_dynamics.book.nbcompare import assert_book_close

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))


def test_protocol_reimplementation_trains_the_same_head_as_the_engine():
    """The authors'-protocol timing loop and the engine follow the same loss curve (same head, data, schedule)."""
    import sticky_chain as bench

    from attention_dynamics.tasks import sticky_chain

    data = sticky_chain.make_sticky_chain_data(42, length=300)
    protocol, _ = bench._protocol_run(data, 5)
    engine, _ = bench._fit_run(data, 5, "engine")
    dense, _ = bench._fit_run(data, 5, "dense")
    assert_book_close(protocol, engine, rtol=0, atol=1e-6)
    assert_book_close(dense, engine, rtol=0, atol=1e-6)
    assert engine[-1] < engine[0]


def test_peak_memory_sees_an_allocation():
    import sticky_chain as bench
    import torch

    held = []
    mb = bench.peak_memory_increase_mb(lambda: held.append(torch.ones(64, 1024, 1024)))  # 256 MB, touched
    assert 200 < mb < 400


@pytest.mark.slow
def test_wind_tunnel_case_records_agreement_and_rerun():
    import wind_tunnels as bench

    case = bench.chapter7_cases("fast", 2, ["transformer"], ["hmm"])[0]
    r = bench.run_case(case, ["eager", "fused"], rounds=1, steps_per_round=1, agreement_steps=4)
    assert r["max_abs_loss_difference_vs_eager"]["fused"] < 1e-5
    assert r["max_abs_loss_difference_run_to_run"]["fused"] == 0.0
    assert r["peak_rss_mb"] > 0 and set(r["ms_per_step"]) == {"eager", "fused"}
