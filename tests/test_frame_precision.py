"""Frame versus precision: the unit-free settling criterion and the freeze-the-frame intervention."""

from __future__ import annotations

import types

import numpy as np
import pytest
import torch

from attention_dynamics import settling
from attention_dynamics.experiments import frame_precision as fp
from attention_dynamics.experiments import wind_tunnel


def test_path_settling_step_on_a_known_path():
    steps = np.arange(0, 11)
    inc = np.array([4, 3, 1, 1, 0.5, 0.25, 0.125, 0.125, 0, 0], dtype=float)  # total 10
    # remaining at steps 0..: 1, .6, .3, .2, .1, .05, .025, .0125, 0, 0, 0
    assert settling.path_settling_step(steps, inc, 0.5) == 2
    assert settling.path_settling_step(steps, inc, 0.1) == 4
    assert settling.path_settling_step(steps, inc, 0.01) == 8
    # unit-free: scaling the increments changes nothing
    assert settling.path_settling_step(steps, 1e3 * inc, 0.1) == 4
    with pytest.raises(ValueError):
        settling.path_settling_step(steps[:-1], inc, 0.1)


def _fake_run(frame_rate, value_rate, n=50):
    steps = np.arange(n + 1) * 2
    t = np.arange(n)
    return types.SimpleNamespace(path_steps=steps, frame_path=np.exp(-frame_rate * t),
                                 value_path=np.exp(-value_rate * t))


def test_settling_comparison_decides_only_with_a_clear_paired_difference():
    fast_frame = [_fake_run(0.5 + 0.01 * k, 0.1 + 0.005 * k) for k in range(5)]
    out = fp.settling_comparison(fast_frame, [0.1, 0.01])
    assert all(r["verdict"] == "frame first" for r in out["rows"])
    assert out["resolution"] == 2
    flipped = fp.settling_comparison([_fake_run(0.1, 0.5), _fake_run(0.12, 0.45), _fake_run(0.11, 0.6)], [0.1])
    assert flipped["rows"][0]["verdict"] == "values first"
    mixed = fp.settling_comparison([_fake_run(0.5, 0.1), _fake_run(0.1, 0.5), _fake_run(0.3, 0.31)], [0.1])
    assert mixed["rows"][0]["verdict"] == "undecided"


def _result(kind, finals, unfrozen, initial, steps):
    runs = []
    for s, (row, u, i) in enumerate(zip(finals, unfrozen, initial)):
        runs.append({"seed": s, "freeze_at": None, "initial": i, "final": u})
        runs += [{"seed": s, "freeze_at": t, "initial": i, "final": f} for t, f in zip(steps, row)]
    return {"kind": kind, "settings": {"steps": 100}, "seeds": list(range(len(finals))), "freeze_steps": steps,
            "runs": runs}


def test_freeze_frame_step_is_the_first_step_from_which_every_seed_is_within_the_margin():
    steps = [0, 10, 20, 40]
    # gap 1.0 per seed, margin 0.01
    res = _result("tunnel", [[0.9, 0.05, 0.005, 0.0], [0.8, 0.005, 0.02, 0.001]], [0.0, 0.0], [1.0, 1.0], steps)
    assert fp.freeze_frame_step(res, 0.01) == 40  # seed 1 leaves the margin again at 20
    assert fp.freeze_frame_step(res, 0.1) == 10
    assert fp.freeze_frame_step(_result("tunnel", [[0.5, 0.5, 0.5, 0.5]], [0.0], [1.0], steps), 0.01) is None
    s = fp.freeze_frame_summary(res, 0.01)
    assert s["cost_mean_bits"][0] == pytest.approx(0.85)
    head = fp.freeze_frame_summary(_result("head", [[np.log(2)] * 4], [0.0], [2 * np.log(2)], steps), 0.01)
    assert head["cost_mean_bits"][0] == pytest.approx(1.0)  # nats → bits


def test_tunnel_freeze_keeps_query_and_key_weights_and_trains_the_rest():
    s = dict(wind_tunnel.SETTINGS["fast"], bij_steps=30, n_checkpoints=4)
    t = [c for c in wind_tunnel.checkpoint_schedule(30, 4) if 0 < c < 30][-1]
    run = wind_tunnel.train_bijection(s, seed=0, checkpoints=True, freeze_routing_at=t)
    D = s["bij_d_model"]
    for name in (k for k in run.state_dict if k.endswith("attn.qkv.weight")):
        at10, final = run.checkpoints[t][name], run.state_dict[name]
        torch.testing.assert_close(final[: 2 * D], at10[: 2 * D], rtol=0, atol=0)
        assert not torch.equal(final[2 * D:], at10[2 * D:])
        assert not torch.equal(run.checkpoints[0][name][: 2 * D], at10[: 2 * D])
    free = wind_tunnel.train_bijection(s, seed=0, checkpoints=False)
    np.testing.assert_array_equal(free.losses[:t], run.losses[:t])


def test_reduced_freeze_experiment_regenerates_the_committed_kinds(tmp_path):
    """A reduced version of the committed computation: same code path, small budget; and the JSON's shape."""
    heavy = {"head": {"settings": {"steps": 40, "lr": 1.0, "n_train": 16, "n_probe": 8}, "seeds": [0, 1],
                      "freeze_steps": [0, 20]},
             "tunnel": {"settings": dict(fp.HEAVY_SETTINGS["tunnel"]["settings"], V=4, L=4, bij_d_model=16,
                                         bij_n_layers=1, bij_steps=20, warmup_steps=5, n_eval=32),
                        "seeds": [0, 1], "freeze_steps": [0, 10]}}
    out = fp.compute(heavy, cache_dir=tmp_path, log=lambda m: None)
    again = fp.compute(heavy, cache_dir=tmp_path, log=lambda m: None)  # from the cache
    assert out["head"]["runs"] == again["head"]["runs"]
    for kind in ("head", "tunnel"):
        s = fp.freeze_frame_summary(out[kind], 0.01)
        assert len(s["cost_mean_bits"]) == 2 and s["n_seeds"] == 2
        # freezing the frame at initialisation costs something: the frame matters
        assert s["cost_mean_bits"][0] > 0
    committed = fp.load_freeze_results()
    for kind in ("head", "tunnel"):
        assert committed[kind]["settings"] == fp.HEAVY_SETTINGS[kind]["settings"]
        assert committed[kind]["freeze_steps"] == fp.HEAVY_SETTINGS[kind]["freeze_steps"]
        assert len(committed[kind]["runs"]) == len(committed[kind]["seeds"]) * (1 + len(committed[kind]["freeze_steps"]))


def test_order_statistics_intervals():
    row = {"frame": [10, 20, 30, 40, 50, 60], "values": [20, 30, 40, 50, 60, 70]}
    out = fp.order_statistics(row)
    assert out["frame_first_fraction"] == 1.0
    lo, hi = out["fraction_interval"]
    assert hi == 1.0 and lo == pytest.approx(0.025 ** (1 / 6), rel=1e-9)  # Clopper–Pearson, k = n
    assert out["ratio_interval"][0] > 1.0
    half = fp.order_statistics({"frame": [10, 20, 30, 40], "values": [20, 10, 40, 30]})
    assert half["fraction_interval"][0] < 0.5 < half["fraction_interval"][1]
