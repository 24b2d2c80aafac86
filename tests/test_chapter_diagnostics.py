"""Chapter 8 (chapters.diagnostics): its settings, its runs (the jobs, the targets, chapter 6's transformer diagnosed
at its checkpoints), the alarm reading and the tunnel's parameters."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attention_dynamics import diagnostics as D
from attention_dynamics.book.nbcompare import assert_book_close
from attention_dynamics.chapters.diagnostics import report, runs, settings
from attention_dynamics.ledger import claims
from attention_dynamics.training import wind_tunnels as wt


def test_bijection_training_targets():
    tokens = torch.tensor([[1, 5, 0, 6, 2]])  # V = 4: keys 1, 0, 2; revealed values 1, 2
    full = runs.bijection_training_targets(tokens, torch.tensor([[1, 2, 3]]))
    assert full.tolist() == [[1, -100, 2, -100, 3]]


def test_run_experiment_rejects_unknown_names():
    with pytest.raises(ValueError, match="unknown experiment"):
        runs.run_experiment("nope")


def test_read_alarm_gives_the_alarm_and_the_step_the_loss_falls_behind_for_good():
    def trace(losses, entropies):
        metrics = [[{"normalized_attention_entropy": e, "starved_fraction": 0.0}] for e in entropies]
        return D.DiagnosticsTrace(label="", losses=np.array(losses, dtype=float), steps=np.arange(len(entropies)),
                                  metrics=metrics, kept={})

    healthy = trace([3, 2, 1, 0.5], [0.9, 0.8, 0.7, 0.6])
    broken = trace([3, 1.5, 1.2, 0.9], [0.9, 0.05, 0.04, 0.03])  # ahead at step 1, behind from step 2 on
    reading = runs.read_alarm(healthy, broken, steps=4)
    assert (reading.alarm, reading.behind_or_end) == (1, 2)
    never_behind = trace([3, 1, 0.5, 0.1], [0.9, 0.9, 0.9, 0.9])
    reading = runs.read_alarm(healthy, never_behind, steps=4)
    assert (reading.alarm, reading.behind_or_end) == (None, 4)


@pytest.mark.parametrize("overrides, message", [
    ({"mid_step": 40}, "mid_step must lie before the last step"),
    ({"tunnel_scale": "huge"}, "unknown scale 'huge'"),
    ({"early_track": (1, 0)}, "early step must be a positive integer"),
    ({"tunnel_seed": -1}, "tunnel_seed must be a non-negative integer"),
    ({"window": 0}, "window must be a positive integer"),
])
def test_settings_reject_bad_values(overrides, message):
    with pytest.raises(ValueError, match=message):
        settings.resolve("fast", **overrides)


def test_chapter_jobs_are_the_chapters_runs():
    cfg = settings.resolve("fast", device="cpu")
    jobs = runs.chapter_jobs(cfg, seed=42)
    assert list(jobs) == ["healthy", "broken", "tunnel", "sgd", "em_like", "encoder"]
    assert {j["kind"] for j in jobs.values()} <= set(runs.EXPERIMENTS)
    tracked = sorted(set(cfg.early_track) | set(range(0, cfg.steps, cfg.track_every)))
    assert jobs["healthy"]["track_steps"] == jobs["broken"]["track_steps"] == tracked
    assert jobs["broken"]["schedule"].query_key_lr == cfg.broken_routing_lr
    assert jobs["sgd"]["keep_steps"] == [0, cfg.mid_step, cfg.steps]
    assert jobs["tunnel"] == {"kind": "wind_tunnel", "scale": cfg.tunnel_scale, "seed": cfg.tunnel_seed,
                              "checkpoints": cfg.tunnel_checkpoints, "n_probe": cfg.tunnel_probe}


def test_the_tunnel_trace_diagnoses_chapter_6s_model_at_its_checkpoints():
    trace = runs.wind_tunnel_trace("fast", seed=1, checkpoints=3, n_probe=8)
    tunnel = wt.BIJECTION_TUNNELS["fast"]
    run = wt.train_bijection(tunnel, seed=1, checkpoints=3)  # chapter 6's training of the same tunnel
    np.testing.assert_array_equal(trace.losses, run.losses)
    np.testing.assert_array_equal(trace.steps, sorted(run.checkpoints))
    probe = wt.bijection_probe_batch(tunnel, seed=1, n=8)
    for step in (0, tunnel.steps):  # the diagnosed loss is the soft cross-entropy at the key positions, recomputed
        log_q = wt.bijection_log_probs(run.model(step), probe)
        expected = float(-(probe.posterior * log_q).sum(-1).mean())
        assert_book_close(trace.metric("loss")[list(trace.steps).index(step)], expected, rtol=1e-5)
    assert sorted(trace.kept) == [trace.steps[0], trace.steps[len(trace.steps) // 2], trace.steps[-1]]


def test_tunnel_params_are_chapter_6s_tunnel(monkeypatch):
    glued = {}
    monkeypatch.setattr(claims, "glue", lambda name, value: glued.__setitem__(name, value))
    cfg = settings.resolve("fast", device="cpu")
    params = report.tunnel_params(cfg, 64)
    tunnel = wt.BIJECTION_TUNNELS[cfg.tunnel_scale]
    assert (params["V"], params["L"], params["bij_steps"], params["probe_sequences"]) == (tunnel.V, tunnel.L,
                                                                                           tunnel.steps, 64)
    assert glued["diagnostics.tunnel_vocab"] == 2 * tunnel.V and glued["diagnostics.tunnel_layers"] == tunnel.n_layers
