"""Chapter 6's long tier (chapters.bayesian_manifolds.long_tier): the runs regenerate at the fast scale through
``compute``, the stored weights load with ``weights_only=True`` and reproduce the measurements stored along the run,
a run continues from its saved state, and the committed files are what the specs say."""

from __future__ import annotations

import contextlib
import io
import json

import numpy as np
import pytest
import torch

from attention_dynamics.book import compute
from attention_dynamics.book.nbcompare import assert_book_close
from attention_dynamics.chapters.bayesian_manifolds import long_tier
from attention_dynamics.training import wind_tunnels as wt


def _compute(root, messages):
    """Run ``compute long_tier --scale fast`` in this process; return its folder and what the runs printed."""
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        folder = compute.compute("long_tier", "fast", root=root, processes=1, log=messages.append)
    return folder, printed.getvalue()


@pytest.fixture(scope="module")
def fast_runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("compute")
    messages: list[str] = []
    folder, printed = _compute(root, messages)
    return root, folder, printed, messages


def _measured_again(run: long_tier.LongRun, step: int) -> dict[str, float]:
    s = run.settings
    record = long_tier.measure(s, run.results["seed"], s.n_measure)
    with torch.no_grad():
        return record(step, run.run.model(step))


def test_the_fast_scale_writes_weights_and_results_that_load_with_weights_only(fast_runs):
    root, folder, printed, messages = fast_runs
    assert folder == root / "long_tier" / "fast"
    out = folder / long_tier.DATA_FOLDER
    for tunnel in long_tier.TUNNELS:
        assert (out / f"{tunnel}.pt").exists()
        stored = json.loads((out / f"{tunnel}.json").read_text())
        assert len(stored["loss_curve_nats"]) == min(long_tier.CURVE_POINTS, stored["steps"])
        assert stored["settings"] == long_tier.SPECS["fast"][tunnel].to_json()
        assert stored["scale"] == "fast" and stored["seed"] == 0
        assert "provenance" in stored and [r["step"] for r in stored["curve"]][:2] == [0, stored["settings"]["save_every"]]
        loaded = long_tier.LONG_TIER.load(tunnel, folder=out)
        # the loaded weights give the final measurement stored by the run, and checkpoint 0 (rebuilt from the seed)
        # gives the measurement the run took before its first update: untrained_state is the trainers' initialisation
        for step, row in ((stored["steps"], stored["final"]), (0, stored["curve"][0])):
            again = _measured_again(loaded, step)
            for k, v in again.items():
                assert_book_close(v, row[k], rtol=1e-6, atol=1e-9, what=(tunnel, step, k))
    assert "step 20/60" in printed
    assert any("2 job(s), 0 already done, 2 to run" in m for m in messages)
    assert set(long_tier.LONG_TIER.files) == {f"{long_tier.DATA_FOLDER}/{t}.{e}" for t in long_tier.TUNNELS
                                              for e in ("json", "pt")}


def test_a_finished_computation_is_not_rerun_and_a_run_resumes_from_its_saved_state(fast_runs):
    root, folder, _, _ = fast_runs
    out = folder / long_tier.DATA_FOLDER
    before = torch.load(out / "hmm_long.pt", weights_only=True)
    messages: list[str] = []
    _, printed = _compute(root, messages)
    assert any("2 already done, 0 to run" in m for m in messages) and printed == ""
    # the job's output removed: the job runs again, and continues from the state its run saved at the end
    (folder / "jobs" / "hmm_long.json").unlink()
    messages = []
    _, printed = _compute(root, messages)
    assert any("1 already done, 1 to run" in m for m in messages)
    assert "resuming at step 60 of 60" in printed and "step 20/60" not in printed
    after = torch.load(out / "hmm_long.pt", weights_only=True)
    assert all(torch.equal(before[k], after[k]) for k in before)


def test_the_fast_scale_reproduces_the_plain_trainer(fast_runs):
    folder = fast_runs[1]
    plain = wt.train_bijection(long_tier.SPECS["fast"]["bijection_v20"].tunnel, seed=0)
    stored = torch.load(folder / long_tier.DATA_FOLDER / "bijection_v20.pt", weights_only=True)
    assert all(torch.equal(plain.state_dict[k], stored[k]) for k in stored)


def test_bad_arguments_are_refused_with_the_choices(tmp_path):
    with pytest.raises(ValueError, match="long_tier has scales fast, paper"):
        compute.compute("long_tier", "book", root=tmp_path)
    with pytest.raises(ValueError, match="one seed per tunnel"):
        long_tier.long_tier_jobs("fast", [0, 1])
    with pytest.raises(ValueError, match="choose from bijection_v20, hmm_long"):
        long_tier.LONG_TIER.load("hmm", folder=tmp_path)
    with pytest.raises(FileNotFoundError, match="python -m attention_dynamics compute long_tier"):
        long_tier.LONG_TIER.load("hmm_long", folder=tmp_path)


def test_a_spec_survives_its_json_form():
    for specs in long_tier.SPECS.values():
        for spec in specs.values():
            assert long_tier.LongTierSpec.from_json(json.loads(json.dumps(spec.to_json()))) == spec
    with pytest.raises(ValueError, match="save_every must be a positive integer"):
        long_tier.LongTierSpec(wt.HMM_TUNNELS["fast"], n_eval=10, n_probe=10, save_every=0, n_measure=10)


def test_the_long_settings_are_paper_is_bijection_size_and_a_longer_hmm_run_than_the_book_scale():
    bij = long_tier.SPECS["paper"]["bijection_v20"].tunnel
    assert (bij.V, bij.L) == (20, 19)
    h, book = long_tier.SPECS["paper"]["hmm_long"].tunnel, wt.HMM_TUNNELS["book"]
    assert h.steps >= 4 * book.steps and h.test_lengths == (20, 30, 50)


@pytest.mark.parametrize("tunnel", list(long_tier.TUNNELS))
def test_the_committed_runs_are_the_long_settings_and_their_weights_give_the_stored_measurements(tunnel):
    run = long_tier.LONG_TIER.load(tunnel)  # the committed files (data/long_tier/), loaded with weights_only=True
    stored = run.results
    assert stored["scale"] == long_tier.LONG_TIER.committed_scale == "paper"
    assert stored["settings"] == long_tier.SPECS["paper"][tunnel].to_json()
    steps = [r["step"] for r in stored["curve"]]
    assert steps == list(range(0, stored["steps"] + 1, stored["settings"]["save_every"]))
    assert np.all(np.diff([r["cpu_seconds"] for r in stored["curve"]]) > 0)
    again = _measured_again(run, stored["steps"])
    for k, v in again.items():
        assert_book_close(v, stored["final"][k], rtol=1e-4, atol=1e-6, what=k)
