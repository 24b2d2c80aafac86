"""Chapter 4's stored result ``frame_freeze`` (chapters.two_timescale_em.freeze): the freeze-the-frame step and its
costs on known results, the committed file against the specs, and a fast regeneration through ``compute``."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from attention_dynamics.book import compute
from attention_dynamics.book.nbcompare import assert_book_close
from attention_dynamics.chapters.two_timescale_em import freeze
from attention_dynamics.core.paths import data_path
from attention_dynamics.training import wind_tunnels


def _result(kind, finals, unfrozen, initial, steps):
    runs = []
    for s, (row, u, i) in enumerate(zip(finals, unfrozen, initial)):
        runs.append({"seed": s, "freeze_at": None, "initial": i, "final": u})
        runs += [{"seed": s, "freeze_at": t, "initial": i, "final": f} for t, f in zip(steps, row)]
    return {"kind": kind, "settings": {"steps": 100}, "seeds": list(range(len(finals))), "freeze_steps": steps,
            "runs": runs}


def test_freeze_frame_step_is_the_first_step_from_which_every_seed_is_within_the_bound():
    steps = [0, 10, 20, 40]
    # unfrozen finals 0.1 and 0.2: the frozen runs' ratios are 9, 1.1, 1.05, 1 and 4, 1.05, 1.5, 1
    res = _result("tunnel", [[0.9, 0.11, 0.105, 0.1], [0.8, 0.21, 0.3, 0.2]], [0.1, 0.2], [1.0, 1.0], steps)
    assert freeze.freeze_frame_step(res, 1.25) == 40  # seed 1 leaves the bound again at 20
    assert freeze.freeze_frame_step(res, 2000.0) == 0  # two seeds: the interval at step 0 reaches about 1035
    one_seed = _result("tunnel", [[0.5, 0.5, 0.5, 0.5]], [0.1], [1.0], steps)
    assert freeze.freeze_frame_step(one_seed, 1.25) is None  # five times the trained error: never free
    s = freeze.freeze_frame_summary(res, 1.25)
    assert_book_close(s["cost_mean_bits"][0], (0.8 + 0.6) / 2)
    assert_book_close(s["ratio_point"][0], np.sqrt(9 * 4))  # the geometric mean over seeds
    assert s["total_steps"] == 100
    assert s["n_seeds"] == 2
    head = freeze.freeze_frame_summary(_result("head", [[np.log(2)] * 4], [np.log(2) / 2], [2 * np.log(2)], steps))
    assert_book_close(head["cost_mean_bits"][0], 0.5)  # nats → bits
    assert_book_close(head["ratio_point"][0], 2.0)


def test_jobs_cover_every_kind_seed_and_freeze_step_with_the_unfrozen_reference():
    for scale in freeze.FRAME_FREEZE.scales:
        jobs = freeze.freeze_jobs(scale)
        expected = {(kind, seed, t) for kind, spec in freeze.SPECS[scale].items() for seed in spec["seeds"]
                    for t in [None, *spec["freeze_steps"]]}
        assert {(j.kwargs["kind"], j.kwargs["seed"], j.kwargs["freeze_at"]) for j in jobs} == expected
        assert len(jobs) == len(expected)
    with pytest.raises(ValueError, match="unknown kind"):
        freeze.freeze_run("grid", 0, None, {})


def _check_file(stored, scale: str) -> None:
    """Each kind of the file holds the spec's settings, seeds and freeze steps, and one run per (seed, step)."""
    for kind, spec in freeze.SPECS[scale].items():
        got = stored[kind]
        assert got["settings"] == json.loads(json.dumps(spec["settings"]))
        assert got["seeds"] == spec["seeds"] and got["freeze_steps"] == spec["freeze_steps"]
        assert len(got["runs"]) == len(got["seeds"]) * (1 + len(got["freeze_steps"]))
        assert {(r["seed"], r["freeze_at"]) for r in got["runs"]} == {
            (s, t) for s in spec["seeds"] for t in [None, *spec["freeze_steps"]]}
    tunnel = wind_tunnels.BijectionTraining(**stored["tunnel"]["settings"]["tunnel"])  # a valid tunnel
    assert tunnel.steps == freeze.total_steps(stored["tunnel"])


def test_committed_file_is_the_book_spec():
    committed = freeze.FRAME_FREEZE.load()
    assert freeze.FRAME_FREEZE.committed_scale == "book" and freeze.FRAME_FREEZE.files == (freeze.FILE,)
    assert committed == json.loads(data_path(freeze.FILE).read_text())
    _check_file(committed, "book")
    # the tunnel is chapter 6's book-scale model, for a quarter of its steps
    tunnel = committed["tunnel"]["settings"]["tunnel"]
    book = wind_tunnels.BIJECTION_TUNNELS["book"]
    assert {k: v for k, v in tunnel.items() if k not in ("steps", "warmup_steps")} == {
        k: v for k, v in book.__dict__.items() if k not in ("steps", "warmup_steps")}
    assert tunnel["steps"] == book.steps // 4


def test_the_fast_scale_regenerates_through_compute_with_the_committed_shape(tmp_path):
    """A reduced version of the committed computation: same code path, small budget; and the JSON's shape."""
    messages: list[str] = []
    folder = compute.compute("frame_freeze", "fast", root=tmp_path, processes=1, log=messages.append)
    out = json.loads((folder / freeze.FILE).read_text())
    committed = freeze.FRAME_FREEZE.load()
    assert set(committed) <= set(out) and out["scale"] == "fast" and "provenance" in out
    _check_file(out, "fast")
    for kind in ("head", "tunnel"):
        assert set(out[kind]) == set(committed[kind])
        s = freeze.freeze_frame_summary(out[kind], 0.01)
        assert len(s["cost_mean_bits"]) == 2 and s["n_seeds"] == len(freeze.SPECS["fast"][kind]["seeds"])
        # freezing the frame at initialisation costs something: the frame matters
        assert s["cost_mean_bits"][0] > 0
    # the jobs are the chapter's runs: one of them again, directly
    spec = freeze.SPECS["fast"]["head"]
    torch.set_num_threads(1)  # as a job runs
    direct = freeze.freeze_run("head", 1, 30, spec["settings"])
    assert direct in out["head"]["runs"]
    again: list[str] = []
    compute.compute("frame_freeze", "fast", root=tmp_path, processes=1, log=again.append)  # from the stored jobs
    assert any("9 already done, 0 to run" in m for m in again)
    assert json.loads((folder / freeze.FILE).read_text())["head"] == out["head"]


def test_full_budget_freeze_is_chapter6s_book_tunnel_and_regenerates_through_compute(tmp_path):
    """The causal definition's runs: chapter 6's book tunnel at its full budget, unfrozen and frozen at step 0; the
    fast scale through compute, one of its runs again directly."""
    for scale in freeze.FRAME_FREEZE_FULL.scales:
        keys = {j.key for j in freeze.full_budget_jobs(scale)}
        seeds = freeze.FULL_SPECS[scale]["tunnel"]["seeds"]
        assert keys == {f"tunnel-seed{s}-freeze{t}" for s in seeds for t in ("none", 0)}
    book = freeze.FULL_SPECS["book"]["tunnel"]["settings"]["tunnel"]
    assert book == wind_tunnels.BIJECTION_TUNNELS["book"].__dict__  # the full budget, not a quarter
    assert book["steps"] == 4 * freeze.SPECS["book"]["tunnel"]["settings"]["tunnel"]["steps"]
    folder = compute.compute("frame_freeze_full", "fast", root=tmp_path, processes=1, log=[].append)
    out = json.loads((folder / freeze.FULL_FILE).read_text())
    assert set(out) >= {"tunnel", "scale", "provenance"} and "head" not in out
    torch.set_num_threads(1)
    direct = freeze.freeze_run("tunnel", 0, 0, freeze.FULL_SPECS["fast"]["tunnel"]["settings"])
    assert direct in out["tunnel"]["runs"]


def test_committed_full_budget_file_is_the_book_spec():
    from attention_dynamics.ledger import frame_results

    committed = frame_results.load_frame_freeze_full()
    assert committed["scale"] == "book" and committed["tunnel"]["settings"] == freeze.FULL_SPECS["book"]["tunnel"]["settings"]
    runs = committed["tunnel"]["runs"]
    assert sorted((r["seed"], r["freeze_at"] is None) for r in runs) == sorted(
        (s, f) for s in freeze.FULL_SPECS["book"]["tunnel"]["seeds"] for f in (True, False))
    for r in runs:  # the untrained model's gap is the same for the frozen and unfrozen run of a seed
        twin = next(o for o in runs if o["seed"] == r["seed"] and o is not r)
        assert r["initial"] == twin["initial"] and r["final"] < r["initial"]
