"""Chapter 6's long tier: the runs regenerate at the fast scale through the same code, the stored weights load
with ``weights_only=True`` and reproduce the measurements stored along the run, and the committed files are
what the settings say."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from attention_dynamics.experiments import long_tier, wind_tunnel


@pytest.fixture(scope="module")
def fast_runs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("long_tier")
    messages: list[str] = []
    results = {t: long_tier.train("fast", t, out=folder / "out", cache=folder / "cache", log=messages.append)
               for t in long_tier.TUNNELS}
    return folder, results, messages


def _measured_again(run: long_tier.LongRun, step: int) -> dict[str, float]:
    s = run.settings
    record = long_tier.measure(run.run.task, s, run.results["seed"], s["n_measure"])
    with torch.no_grad():
        return record(step, run.run.model(step))


def test_the_fast_scale_writes_weights_and_results_that_load_with_weights_only(fast_runs):
    folder, results, messages = fast_runs
    for tunnel, res in results.items():
        assert (folder / "out" / f"{tunnel}.pt").exists()
        assert len(res["loss_curve_nats"]) == min(long_tier.CURVE_POINTS, res["steps"])
        stored = json.loads((folder / "out" / f"{tunnel}.json").read_text())
        assert stored["settings"] == json.loads(json.dumps(long_tier.tunnel_settings("fast", tunnel)))
        assert "provenance" in stored and [r["step"] for r in stored["curve"]][:2] == [0, stored["settings"]["save_every"]]
        loaded = long_tier.load(tunnel, folder=folder / "out")
        # the loaded weights give the final measurement stored by the run, and checkpoint 0 (rebuilt from the seed)
        # gives the measurement the run took before its first update: untrained_state is the trainers' initialisation
        for step, row in ((stored["steps"], stored["final"]), (0, stored["curve"][0])):
            again = _measured_again(loaded, step)
            for k, v in again.items():
                assert v == pytest.approx(row[k], rel=1e-6, abs=1e-9), (tunnel, step, k)
    assert any("step 20/60" in m for m in messages)


def test_a_finished_run_is_not_retrained_and_gives_the_same_weights(fast_runs):
    folder = fast_runs[0]
    messages: list[str] = []
    before = torch.load(folder / "out" / "hmm_long.pt", weights_only=True)
    long_tier.train("fast", "hmm_long", out=folder / "again", cache=folder / "cache", log=messages.append)
    assert any("resuming at step 60 of 60" in m for m in messages) and not any("step 20/60" in m for m in messages)
    after = torch.load(folder / "again" / "hmm_long.pt", weights_only=True)
    assert all(torch.equal(before[k], after[k]) for k in before)


def test_the_fast_scale_reproduces_the_plain_trainer(fast_runs):
    folder = fast_runs[0]
    s = long_tier.tunnel_settings("fast", "bijection_v20")
    plain = wind_tunnel.train_bijection(s, seed=0, checkpoints=False)
    stored = torch.load(folder / "out" / "bijection_v20.pt", weights_only=True)
    assert all(torch.equal(plain.state_dict[k], stored[k]) for k in stored)


def test_bad_arguments_are_refused_with_the_choices(tmp_path):
    with pytest.raises(ValueError, match="scales fast, long"):
        long_tier.tunnel_settings("book", "hmm_long")
    with pytest.raises(ValueError, match="choose from bijection_v20, hmm_long"):
        long_tier.tunnel_settings("long", "hmm")
    with pytest.raises(FileNotFoundError, match="python -m attention_dynamics.experiments.long_tier --tunnels hmm_long"):
        long_tier.load("hmm_long", folder=tmp_path)


def test_the_long_settings_are_paper_is_bijection_size_and_a_longer_hmm_run_than_the_book_scale():
    bij = long_tier.tunnel_settings("long", "bijection_v20")
    assert (bij["V"], bij["L"]) == (20, 19)
    h, book = long_tier.tunnel_settings("long", "hmm_long"), wind_tunnel.SETTINGS["book"]
    assert h["hmm_steps"] >= 4 * book["hmm_steps"] and h["hmm_test_lengths"] == (20, 30, 50)


@pytest.mark.parametrize("tunnel", list(long_tier.TUNNELS))
def test_the_committed_runs_are_the_long_settings_and_their_weights_give_the_stored_measurements(tunnel):
    run = long_tier.load(tunnel)  # the committed files (data/long_tier/), loaded with weights_only=True
    stored = run.results
    assert stored["scale"] == "long"
    assert stored["settings"] == json.loads(json.dumps(long_tier.tunnel_settings("long", tunnel)))
    steps = [r["step"] for r in stored["curve"]]
    assert steps == list(range(0, stored["steps"] + 1, stored["settings"]["save_every"]))
    assert np.all(np.diff([r["cpu_seconds"] for r in stored["curve"]]) > 0)
    again = _measured_again(run, stored["steps"])
    for k, v in again.items():
        assert v == pytest.approx(stored["final"][k], rel=1e-4, abs=1e-6), k
