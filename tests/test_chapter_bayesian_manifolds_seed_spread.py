"""The seed-spread runs: the interval arithmetic against scipy, the runs against the chapters' own training."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy import stats

from attention_dynamics.experiments import seed_spread
from attention_dynamics.paths import data_path


def test_t_interval_matches_scipy():
    values = [0.77, 0.885, 0.873, 0.81, 0.9]
    ci = seed_spread.t_interval(values)
    low, high = stats.t.interval(0.95, df=4, loc=np.mean(values), scale=stats.sem(values))
    assert ci["low"] == pytest.approx(low, rel=1e-12) and ci["high"] == pytest.approx(high, rel=1e-12)
    assert ci["mean"] == pytest.approx(np.mean(values)) and ci["n"] == 5 and ci["sd"] == pytest.approx(np.std(values, ddof=1))
    assert seed_spread.t_interval([1.0, 1.0])["low"] == seed_spread.t_interval([1.0, 1.0])["high"] == 1.0


@pytest.mark.parametrize("values, confidence, message", [([1.0], 0.95, "at least two"), ([1.0, 2.0], 1.0, "confidence")])
def test_t_interval_rejects_bad_input(values, confidence, message):
    with pytest.raises(ValueError, match=message):
        seed_spread.t_interval(values, confidence)


def test_compute_rejects_bad_seeds():
    with pytest.raises(ValueError, match="at least two distinct"):
        seed_spread.compute("fast", [3])
    with pytest.raises(ValueError, match="at least two distinct"):
        seed_spread.compute("fast", [1, 1])


def test_committed_file_is_consistent_with_its_runs_and_the_chapters_settings():
    from attention_dynamics.experiments import architectures as arch
    from attention_dynamics.experiments import wind_tunnel

    stored = json.loads(data_path(seed_spread.SPREAD_FILE).read_text(encoding="utf-8"))
    assert stored["scale"] == "book" and stored["seeds"] == list(seed_spread.SEEDS)
    bij = wind_tunnel.bijection_settings(wind_tunnel.SETTINGS["book"])
    assert stored["settings"]["geometry"] == json.loads(json.dumps(bij))
    assert "bij_steps" in bij and not any(k.startswith("hmm_") for k in bij)
    assert stored["settings"]["binding"] == json.loads(json.dumps({**arch.SETTINGS["book"], "family": "mamba"}))
    runs = stored["runs"]
    for name, key, group in (("value_pc1_ratio", "value_pc1_ratio", "geometry"),
                             ("value_pc1_entropy_spearman", "value_pc1_entropy_spearman", "geometry"),
                             ("binding_accuracy_mamba", "accuracy", "binding_mamba")):
        values = [r[key] for r in runs[group]]
        assert [r["seed"] for r in runs[group]] == stored["seeds"]
        low, high = stats.t.interval(0.95, df=len(values) - 1, loc=np.mean(values), scale=stats.sem(values))
        assert stored["intervals"][name]["low"] == pytest.approx(low) and stored["intervals"][name]["high"] == pytest.approx(high)
    if "binding_mamba_longer" in runs:  # binding 4x as long: same seeds and settings, only the steps differ
        steps = seed_spread.LONGER_FACTOR * arch.SETTINGS["book"]["steps"]
        base = {k: v for k, v in stored["settings"]["binding"].items() if k != "family"}
        families = stored["settings"]["binding_longer"].pop("families")
        assert stored["settings"]["binding_longer"] == {**base, "steps": steps} and "mamba" in families
        for family in families:
            for group, key, n_steps in ((f"binding_{family}", f"binding_accuracy_{family}", None),
                                        (f"binding_{family}_longer", f"binding_accuracy_{family}_longer", steps)):
                values = [r["accuracy"] for r in runs[group]]
                assert [r["seed"] for r in runs[group]] == stored["seeds"]
                low, high = stats.t.interval(0.95, df=len(values) - 1, loc=np.mean(values), scale=stats.sem(values))
                ci = stored["intervals"][key]
                assert ci["low"] == pytest.approx(low) and ci["high"] == pytest.approx(high)
                if n_steps is not None:
                    assert {r["steps"] for r in runs[group]} == {steps}
                    assert all(len(r["loss_curve"]) == seed_spread.CURVE_POINTS for r in runs[group])


@pytest.mark.slow
def test_the_runs_are_the_chapters_models_at_the_fast_scale():
    """Seed s of the spread runs is the model chapter 6 / chapter 7 trains with seed=s."""
    from attention_dynamics.experiments import architectures as arch
    from attention_dynamics.experiments import wind_tunnel
    from attention_dynamics.settings import chapter_settings

    result = seed_spread.compute("fast", [0, 1], processes=1)
    cfg = chapter_settings(wind_tunnel.SETTINGS, "fast", device="cpu")
    run = wind_tunnel.train_bijection(cfg, seed=1, checkpoints=True)  # as chapter 6 trains it (with checkpoints)
    geo = wind_tunnel.bijection_geometry(run.model(), wind_tunnel.bijection_probe_batch(cfg, seed=1))
    assert result["runs"]["geometry"][1]["value_pc1_ratio"] == pytest.approx(float(geo.value_ratios[0]), rel=1e-6)
    acfg = chapter_settings(arch.SETTINGS, "fast", device="cpu")
    grid = arch.compare_architectures(arch.book_tasks(acfg), families=("mamba",), target_params=acfg.target_params,
                                      steps=acfg.steps, batch_size=acfg.batch_size, lr=acfg.lr, seed=0,
                                      eval_sequences=acfg.eval_sequences, processes=1)
    assert result["runs"]["binding_mamba"][0]["accuracy"] == pytest.approx(grid[("mamba", "binding")].metrics["accuracy"])
    assert set(result["intervals"]) == {"value_pc1_ratio", "value_pc1_entropy_spearman", "binding_accuracy_mamba"}


@pytest.mark.slow
def test_the_longer_binding_runs_are_the_chapters_model_trained_longer_at_the_fast_scale():
    from attention_dynamics.experiments import architectures as arch

    stored = {"scale": "fast", "seeds": [0, 1], "settings": {"binding": {**arch.SETTINGS["fast"], "family": "mamba"}},
              "runs": {}, "intervals": {}, "provenance": {"torch": "x"}}
    with pytest.raises(ValueError, match="unknown model families"):
        seed_spread.compute_longer_binding(stored, ["gru"])
    result = seed_spread.compute_longer_binding(stored, ["mamba", "lstm"], processes=1, log=lambda *_: None)
    assert result["runs"]["binding_lstm"][0] == seed_spread.binding_seed("fast", 0, "lstm")  # the chapter's length too
    assert result["settings"]["binding_longer"]["families"] == ["mamba", "lstm"]
    again = seed_spread.compute_longer_binding(result, ["lstm"], log=lambda *_: None)  # stored runs are not repeated
    assert again["runs"] == result["runs"]
    steps = seed_spread.LONGER_FACTOR * arch.SETTINGS["fast"]["steps"]
    direct = seed_spread.binding_seed("fast", 1, "mamba", steps=steps)
    timeless = lambda run: {k: v for k, v in run.items() if k != "cpu_seconds"}
    assert timeless(result["runs"]["binding_mamba_longer"][1]) == timeless(direct) and direct["steps"] == steps
    assert len(direct["loss_curve"]) == min(seed_spread.CURVE_POINTS, steps)
    assert result["settings"]["binding_longer"]["steps"] == steps
    assert result["provenance_of_earlier_runs"] == {"torch": "x"}
    assert result["intervals"]["binding_accuracy_mamba_longer"] == seed_spread.t_interval(
        [r["accuracy"] for r in result["runs"]["binding_mamba_longer"]])
    assert "loss_curve" not in seed_spread.binding_seed("fast", 1, "mamba")  # the chapter's length: as stored before
