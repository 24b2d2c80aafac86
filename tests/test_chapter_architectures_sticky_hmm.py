"""Chapter 7's sticky-HMM tunnel (chapters.architectures.sticky_hmm, sticky_report): the task, its training-curve KL against an independent computation, the
verdict thresholds, and the committed results against a recomputation of what can be recomputed cheaply."""

from __future__ import annotations

import json

import matplotlib

matplotlib.use("Agg")

import numpy as np
import pytest
import torch

from attention_dynamics.book import compute
from attention_dynamics.book.nbcompare import assert_book_close
from attention_dynamics.chapters.architectures import figures, runs, sticky_hmm, sticky_report as report
from attention_dynamics.chapters.architectures.hmm_tunnel import HMMTunnelSpec
from attention_dynamics.core import plotting
from attention_dynamics.core.paths import data_path
from attention_dynamics.core.seeding import stream, torch_generator
from attention_dynamics.models.factory import FAMILIES, build_model
from attention_dynamics.models.registry import family_label
from attention_dynamics.science import calibration
from attention_dynamics.tasks import hmm, wind_tunnels as tunnels


def test_sticky_task_samples_sticky_hmms_with_their_exact_filter():
    task = tunnels.WindTunnel.make("hmm_sticky", n_states=3, n_symbols=4, length=5)
    plain = tunnels.WindTunnel.make("hmm", n_states=3, n_symbols=4, length=5)
    assert (task.input_dim, task.n_out, task.sequence_length) == (plain.input_dim, plain.n_out, plain.sequence_length)
    assert task.self_transition == tunnels.STICKY_SELF_TRANSITION and plain.self_transition == 0.0
    batch = task.sample(6, generator=torch.Generator().manual_seed(0))
    T, E, obs = batch.extra["transition"], batch.extra["emission"], batch.extra["observations"]
    assert bool((torch.diagonal(T, dim1=-2, dim2=-1) >= tunnels.STICKY_SELF_TRANSITION).all())
    assert_book_close(batch.posterior, hmm.forward_filter(T, E, obs))
    # the same draws as the plain task, mixed with the identity
    base = plain.sample(6, generator=torch.Generator().manual_seed(0)).extra["transition"]
    m = tunnels.STICKY_SELF_TRANSITION
    assert_book_close(T, (1 - m) * base + m * torch.eye(3, dtype=torch.float64), rtol=0)


def test_sticky_threshold_is_a_fifth_of_the_context_blind_level_and_carries_paper_is_transport_verdict():
    levels = runs.ReferenceLevels(bayes={"hmm_sticky": {"kl_bits": 0.0}},
                                  context_blind={"hmm_sticky": {"kl_bits": 0.19, "entropy_mae_bits": 0.26}})
    assert_book_close(runs.realised_threshold("hmm_sticky", "kl_bits", levels), 0.2 * 0.19)
    transformer = runs.paper_verdict_bounds("transformer", "hmm_sticky", levels)
    assert set(transformer) == {"lower", "upper"} and transformer["lower"] is None
    assert_book_close(transformer["upper"], 0.038)
    lstm = runs.paper_verdict_bounds("lstm", "hmm_sticky", levels)
    assert set(lstm) == {"lower", "upper"} and lstm["upper"] is None
    assert_book_close(lstm["lower"], 0.038)
    assert runs.paper_verdict_bounds("mlp_window", "hmm_sticky", levels) == {"lower": None, "upper": None}


def test_kl_curve_is_the_kl_on_each_training_batch():
    """The curve from the losses equals the KL of the same model on the batches drawn again independently."""
    task = tunnels.WindTunnel.make("hmm_sticky", n_states=3, n_symbols=3, length=4)
    torch.manual_seed(0)
    model = build_model("transformer", task, 8).eval()
    data = torch_generator(stream(5, "data"))
    losses, direct = [], []
    with torch.no_grad():
        for _ in range(3):
            batch = task.sample(7, generator=data)
            logits = tunnels.prediction_logits(model, batch)
            losses.append(float(tunnels.task_loss(model, batch)))
            direct.append(calibration.calibration_report(batch.posterior, torch.log_softmax(logits.double(), -1)).kl_bits)
    assert_book_close(sticky_hmm.kl_curve_bits(losses, task, batch_size=7, seed=5), direct, rtol=1e-5, atol=1e-7)


def _check_file(stored, scale: str) -> None:
    """The file's settings are the spec of ``scale``; every run is as long as the spec says, and consistent."""
    spec = sticky_hmm.SPECS[scale]
    assert stored["scale"] == scale and stored["settings"] == {**json.loads(json.dumps(spec.to_json()))}
    assert stored["settings"]["self_transition"] == tunnels.STICKY_SELF_TRANSITION
    assert list(stored["runs"]) == list(FAMILIES) and sorted(stored["longer"]) == sorted(sticky_hmm.LONGER_FAMILIES)
    for family, run in stored["runs"].items():
        assert run["steps"] == spec.family_steps(family)
        assert len(run["kl_curve_bits"]) == min(sticky_hmm.CURVE_POINTS, run["steps"])
        assert len(run["kl_by_position"]) == spec.hmm_length
        assert_book_close(np.mean(run["kl_by_position"]), run["metrics"]["kl_bits"], rtol=1e-9)
    for family, run in stored["longer"].items():
        assert run["steps"] == sticky_hmm.LONGER_FACTOR * spec.family_steps(family) and run["family"] == family


def test_committed_results_match_the_settings_and_a_recomputed_reference():
    stored = json.loads(data_path(sticky_hmm.RESULTS_FILE).read_text(encoding="utf-8"))
    assert sticky_hmm.STICKY_HMM_RUNS.committed_scale == "book"
    _check_file(stored, "book")
    ref = sticky_hmm.reference("book", stored["seed"])
    assert_book_close(stored["reference"]["context_blind"]["kl_bits"], ref["context_blind"]["kl_bits"], rtol=1e-9)
    assert_book_close(stored["reference"]["floor_nats"], ref["floor_nats"], rtol=1e-9)
    # the context-blind MLP cannot beat the exact context-blind predictor (up to estimation noise)
    assert stored["runs"]["mlp_blind"]["metrics"]["kl_bits"] > 0.95 * stored["reference"]["context_blind"]["kl_bits"]


def test_jobs_and_scales():
    jobs = sticky_hmm.sticky_jobs("book")
    assert [j.key for j in jobs] == [f"run-{f}" for f in FAMILIES] + [f"longer-{f}" for f in sticky_hmm.LONGER_FAMILIES]
    assert jobs[-1].kwargs == {"scale": "book", "family": "lstm", "seed": 0,
                               "steps": sticky_hmm.LONGER_FACTOR * sticky_hmm.SPECS["book"].steps}
    with pytest.raises(ValueError, match="one seed"):
        sticky_hmm.sticky_jobs("fast", [0, 1])
    with pytest.raises(ValueError, match="scales fast, book"):
        sticky_hmm.run_family("paper", "transformer")
    with pytest.raises(ValueError, match="sticky_hmm has scales fast, book"):
        compute.compute("sticky_hmm", "paper")
    with pytest.raises(ValueError, match="steps_mamba must be a positive integer"):
        HMMTunnelSpec(hmm_states=5, hmm_symbols=5, hmm_length=8, target_params=6000, steps=40, batch_size=16,
                      lr=2e-3, eval_sequences=64, steps_by_family={"mamba": 0})


@pytest.mark.slow
def test_the_fast_scale_regenerates_through_compute_with_the_committed_shape_and_resumes(tmp_path):
    messages = []
    folder = compute.compute("sticky_hmm", "fast", root=tmp_path, processes=1, log=messages.append)
    out = folder / sticky_hmm.RESULTS_FILE
    stored = json.loads(out.read_text())
    committed = sticky_hmm.STICKY_HMM_RUNS.load()
    assert set(stored) == set(committed) and set(stored["runs"]["lstm"]) == set(committed["runs"]["lstm"])
    _check_file(stored, "fast")
    assert np.isfinite(stored["runs"]["lstm"]["kl_curve_bits"]).all() and "provenance" in stored
    # the transformer's job is the chapter's run_family, in this process too (on one thread, as a job runs)
    torch.set_num_threads(1)
    direct = sticky_hmm.run_family("fast", "transformer")
    timeless = lambda run: {k: v for k, v in run.items() if k != "cpu_seconds"}  # noqa: E731
    assert timeless(stored["runs"]["transformer"]) == timeless(direct)
    compute.compute("sticky_hmm", "fast", root=tmp_path, processes=1, log=messages.append)
    assert any("7 already done, 0 to run" in m for m in messages)


def _stored(kl: dict[str, float], *, late: float = 0.5) -> dict:
    """A stored result with the given final KL per family and a KL curve that falls by about ``late`` at its end."""
    curve = lambda v: [v * (1 + late)] * 80 + [v * (1 + late)] * 10 + [v] * 10  # noqa: E731
    runs = {f: {"metrics": {"kl_bits": v}, "steps": 1000, "n_params": 100, "width": 8, "kl_curve_bits": curve(v),
                "loss_curve_nats": [1.0 + x for x in curve(v)]} for f, v in kl.items()}
    return {"seed": 0, "scale": "book", "settings": {**sticky_hmm.SPECS["book"].to_json(), "steps": 1000},
            "reference": {"context_blind": {"kl_bits": 0.2, "entropy_mae_bits": 0.3},
                          "context_blind_kl_by_position": [0.0, 0.2], "floor_nats": 1.0}, "runs": runs}


@pytest.mark.parametrize("transformer_kl, expected", [
    (0.03, {"transformer": "pass", "mamba": "undecided", "lstm": "undecided", "mlp_window": "new", "mlp_blind": "pass"}),
    (0.10, {"transformer": "undecided", "mamba": "undecided", "lstm": "undecided", "mlp_window": "new",
            "mlp_blind": "undecided"}),
])
def test_sticky_claims_follow_the_verdict_rules(transformer_kl, expected):
    stored = _stored({"transformer": transformer_kl, "mamba": 0.08, "lstm": 0.15, "mlp_window": 0.1, "mlp_blind": 0.21})
    table = report.record_sticky_claims(stored)
    assert dict(table["status"].drop("context-blind (exact best)")) == {
        family_label(f): s for f, s in expected.items()}
    assert_book_close(table.loc["Transformer", "× context-blind"], transformer_kl / 0.2, rtol=0, atol=1e-3)


def test_an_lstm_below_the_threshold_fails_paper_is_verdict_for_good():
    table = report.record_sticky_claims(_stored({"transformer": 0.03, "lstm": 0.02}))
    assert table.loc["LSTM", "status"] == "fail"


def test_sticky_curve_figure_draws_every_family_and_both_levels():
    stored = _stored({f: 0.1 for f in FAMILIES})
    stored["longer"] = {"lstm": stored["runs"]["lstm"]}
    fig = figures.plot_sticky_kl_curves(stored)
    plotting.check_figure(fig)  # the legend stays clear of the two levels
    ax = fig.axes[0]
    assert len(ax.get_lines()) == 2 * len(FAMILIES) + 3 and ax.get_yscale() == "log"


@pytest.mark.parametrize("long_kl, expected", [(None, "undecided"), (0.05, "pass"), (0.02, "fail")])
def test_an_lstm_pass_below_the_blind_level_is_decided_only_by_a_longer_run(long_kl, expected):
    stored = _stored({"transformer": 0.03, "lstm": 0.045})
    if long_kl is not None:
        stored["longer"] = {"lstm": {**stored["runs"]["lstm"], "steps": 4000, "metrics": {"kl_bits": long_kl}}}
    assert report.record_sticky_claims(stored).loc["LSTM", "status"] == expected


@pytest.mark.parametrize("long_kl, expected", [(0.09, "fail"), (0.03, "pass")])
def test_a_longer_run_states_the_claim_so_a_missed_realises_bound_fails_only_if_it_misses_too(long_kl, expected):
    stored = _stored({"transformer": 0.03, "mamba": 0.1})
    stored["longer"] = {"mamba": {**stored["runs"]["mamba"], "steps": 4000, "metrics": {"kl_bits": long_kl}}}
    assert report.record_sticky_claims(stored).loc["Mamba", "status"] == expected
