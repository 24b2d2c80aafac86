"""Chapter 3 (chapters.routing_content_feedback): its runs' summaries, claims and figures, against independent
computations."""

from __future__ import annotations

from types import SimpleNamespace

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch

from attention_dynamics.book.nbcompare import assert_book_close
from attention_dynamics.chapters.routing_content_feedback import figures, report, runs, settings
from attention_dynamics.core import plotting
from attention_dynamics.ledger import claims
from attention_dynamics.science import dynamics
from attention_dynamics.tasks import specialization as recall
from attention_dynamics.training.recall_head import train_specialization_head


def panels(fig):
    """The figure's panels, without its colour bars."""
    return [ax for ax in fig.axes if ax.get_label() != "<colorbar>"]


@pytest.fixture
def glued(monkeypatch):
    """Capture what the report glues: name → value."""
    out = {}
    monkeypatch.setattr(claims, "glue", lambda name, value: out.__setitem__(name, value))
    return out


@pytest.fixture(scope="module")
def tiny_run():
    """A short real run (60 steps, 16 sequences) and a float64 check batch."""
    run = train_specialization_head(0, steps=60, n_train=16, n_probe=16, record_every=20, settle_window=20)
    check = recall.sample_specialization_batch(8, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    return run, check


def fake_run(n=11, T=8, K=4, n_tags=8):
    """A run-shaped object with made-up curves (for the summaries and figures)."""
    steps = np.arange(n) * 20
    rise = np.linspace(0.0, 1.0, n) ** 2
    return SimpleNamespace(
        steps=steps, probe_loss=2.0 - 1.9 * rise, correct_mass=0.25 + 0.7 * rise, source_mass=0.5 + 0.4 * rise,
        alignment=np.linspace(0.1, 0.95, n), precision_nats=2.0 - rise, purity=0.2 + 0.7 * rise,
        attention_snapshots=np.full((n, 2, T, T), 1.0 / T), specialization=np.full((n, n_tags, n_tags), 0.1),
        shown_sequences={"correct_source": np.array([[2, 0, 3, 1], [0, 1, 2, 3]])}, label_prototypes=None)


def test_glue_task_reports_sizes_and_reference_levels(glued):
    example = recall.sample_specialization_batch(1, generator=torch.Generator().manual_seed(0))
    table = report.glue_task(example)
    K, C = example.source_tags.shape[1], example.n_labels
    assert table == {"sources K": K, "queries Q": example.requests.shape[1], "tags": example.n_tags,
                     "labels C": C, "input width": example.x.shape[-1]}
    assert_book_close(glued["recall.blind_floor"], np.log(K))
    assert_book_close(glued["recall.chance"], np.log(C))
    assert glued["recall.T"] == K + example.requests.shape[1]


def test_correct_responsibilities_put_one_on_the_requested_tag():
    example = recall.sample_specialization_batch(1, generator=torch.Generator().manual_seed(3))
    truth = runs.correct_responsibilities(example)
    K = example.source_tags.shape[1]
    assert truth[:K].sum() == 0
    for q, request in enumerate(example.requests[0].tolist()):
        row = truth[K + q]
        assert row.sum() == 1
        assert example.source_tags[0, int(row.argmax())] == request  # the source whose tag the query asks for


def test_plot_recall_example_draws_inputs_and_truth():
    example = recall.sample_specialization_batch(1, generator=torch.Generator().manual_seed(0))
    fig = figures.plot_recall_example(example)
    axes = panels(fig)
    assert len(axes) == 2 and all(len(ax.images) == 1 for ax in axes)
    assert [t.get_text() for t in axes[0].get_yticklabels()] == ["tag", "request", "label"]
    assert "sources 0–3" in fig._suptitle.get_text()
    plt.close(fig)


def test_first_step_reaching_is_the_first_crossing():
    run = fake_run()
    curve = np.array([0.1, 0.5, 0.3, 0.9, 0.95, 0.2, 0.9, 0.9, 0.9, 0.9, 0.9])
    brute = next(int(s) for s, c in zip(run.steps, curve) if c >= 0.9)
    assert runs.first_step_reaching(run, curve, 0.9) == brute == 60
    assert runs.first_step_reaching(run, curve, 0.99) is None


def test_run_summary_and_moments(glued):
    run = fake_run()
    advantage = np.sin(np.linspace(0, np.pi, 11))  # peaks in the middle
    summary = report.run_summary(run, advantage)
    progress = (run.correct_mass - run.correct_mass[0]) / (run.correct_mass[-1] - run.correct_mass[0])
    middle = next(i for i, p in enumerate(progress) if p >= 0.5)
    assert summary["ch3.transition_step"] == run.steps[middle]
    assert runs.moments(run) == {"initialisation": 0, "routing transition": middle, "end of training": 10}
    assert summary["ch3.peak_advantage_step"] == 100
    assert summary["ch3.routed_step"] == next(s for s, m in zip(run.steps, run.correct_mass) if m >= 0.5)
    assert summary["ch3.aligned_step"] == next(s for s, a in zip(run.steps, run.alignment) if a >= 0.9)
    never = fake_run()
    never.alignment = np.full(11, 0.5)
    assert report.run_summary(never, advantage)["ch3.aligned_step"] == -1  # a threshold never reached
    assert glued["ch3.final_purity"] == run.purity[-1]


def test_plot_learning_curves_marks_the_milestones():
    run = fake_run()
    fig = figures.plot_learning_curves(run, np.zeros(11), n_sources=4, n_labels=8)
    axes = np.array(fig.axes[:4]).reshape(2, 2)  # the 2 × 2 grid; the precision's twin axis comes after
    assert len(axes[0, 1].get_lines()) == 3 + 3  # three curves, three milestones
    assert len(axes[0, 0].get_lines()) == 3 + 3  # the loss, ln C, ln K and the milestones
    assert all(ax.get_legend() is None for ax in fig.axes) and len(fig.legends) == 1  # one legend, below
    plotting.check_figure(fig)
    plt.close(fig)


def test_plot_attention_snapshots_has_a_column_per_moment():
    fig = figures.plot_attention_snapshots(fake_run())
    axes = np.array(panels(fig)).reshape(2, 5)
    assert all(len(ax.images) == 1 for ax in axes.flat)
    assert len(axes[0, 0].collections) == 1  # the white squares on the correct sources
    assert len(fig.axes) == 10 + 1  # one colour bar for all panels
    plotting.check_figure(fig)
    plt.close(fig)


def test_plot_prototype_trajectories_one_path_per_label():
    coords = np.cumsum(np.ones((11, 8, 2)), axis=0)
    fig = figures.plot_prototype_trajectories(fake_run(), coords, np.array([0.6, 0.3]))
    ax = fig.axes[0]
    assert len(ax.get_lines()) == 8 and len(ax.texts) == 8
    assert "60%" in ax.get_xlabel()
    plt.close(fig)


def test_plot_frozen_runs_and_value_step_ratios():
    variants = {name: fake_run() for name in settings.VARIANTS}
    fig = figures.plot_frozen_runs(variants, n_sources=4)
    axes = fig.axes
    assert len(axes[0].get_lines()) == 4 and len(axes[1].get_lines()) == 3
    plotting.check_figure(fig)
    plt.close(fig)
    etas = np.logspace(-2, 0, 5)
    curves = {name: 1 - etas * 0.1 for name in ("a", "b", "c")}
    fig = figures.plot_value_step_ratios(etas, curves, {"a": 1.0, "b": 1.0, "c": 1.0})
    axes = fig.axes
    assert len(axes[0].get_lines()) == 3 + 1 and len(axes[1].get_lines()) == 6
    plt.close(fig)


def test_value_step_ratios_stay_inside_the_taylor_bound(tiny_run):
    run, check = tiny_run
    etas = np.array([1e-2, 1.0])
    curves, bounds = runs.value_step_ratios(run, check, etas)
    assert list(curves) == ["initialisation", "routing transition", "end of training"]
    for name, ratio in curves.items():
        # 0 ≤ 1 − ratio ≤ ηλ/2 (convexity and the curvature bound); 1e-9 for the rounding of ΔL
        assert np.all(1 - ratio >= -1e-9) and np.all(1 - ratio <= etas * bounds[name] / 2 + 1e-9)


def test_compatibility_change_claim_and_glue(tiny_run, glued):
    run, check = tiny_run
    changes, curve = runs.compatibility_changes(run, check, 1e-2)
    assert len(curve) == len(run.steps)
    claim = report.record_compatibility_change(run, changes, curve, eta=1e-2, common={"seed": 0}, scale="fast",
                                               n_check=8)
    direct = dynamics.compatibility_change_after_value_step(run.head_at(0), check, 1e-2).relative_error
    assert_book_close(claim.value, direct, rtol=1e-12)
    above = [s for s, e in zip(run.steps, curve) if e > 0.1]
    assert glued["ch3.db_err_below_10pct_until"] == (above[0] if above else run.steps[-1])
    fig = figures.plot_compatibility_changes(run, changes, curve, eta=1e-2, n_positions=check.targets.numel())
    axes = panels(fig)
    assert len(axes) == 3 and len(axes[0].collections) == 1 and len(axes[2].get_lines()) == 1 + 3
    plt.close(fig)


def test_advantage_change_errors_are_round_off_and_the_claim_can_fail(tiny_run):
    run, check = tiny_run
    errors, scales = runs.advantage_change_errors(run, check)
    assert len(errors) == len(run.steps)
    assert report.record_advantage_change(errors, scales, common={}, n_check=8).status == "pass"
    assert report.record_advantage_change([1e-3], [1.0], common={}, n_check=8).status == "fail"


def test_glue_advantage_trace_reads_the_peak(glued):
    trace = {k: np.linspace(0, 1, 5) for k in ("gain_correct", "gain_other_source", "rule_agreement",
                                                "correct_rich", "self_share")}
    trace["rule_agreement"] = np.array([0.5, np.nan, 0.2, 0.9, 0.1])
    report.glue_advantage_trace(trace, np.array([0.0, 1.0, 3.0, 2.0, 0.0]))
    assert glued["ch3.adv_gain_correct_at_peak"] == 0.5 and glued["ch3.adv_rule_at_peak"] == 0.2
    assert glued["ch3.adv_rule_agreement_max"] == 0.9 and glued["ch3.adv_rule_agreement_min"] == 0.1
    assert glued["ch3.adv_self_share_end"] == 1.0


def test_run_settings_are_the_chapters_and_the_settling_window_is_five_records():
    cfg = settings.resolve("fast", device="cpu", steps=60)
    common = runs.run_settings(cfg, seed=7)
    assert common == {"seed": 7, "steps": 60, "lr": cfg.lr, "n_train": cfg.n_train, "n_probe": cfg.n_probe,
                      "record_every": cfg.record_every, "settle_window": 5 * cfg.record_every}
    assert list(settings.VARIANTS) == ["full", "values frozen", "routing frozen"]


def test_train_variants_freezes_each_variants_matrices(monkeypatch):
    monkeypatch.setattr(runs, "map_parallel", lambda fn, jobs: [job["frozen"] for job in jobs])
    out = runs.train_variants({"seed": 0})
    assert out == {"full": (), "values frozen": ("W_V",), "routing frozen": ("W_Q", "W_K")}


def test_plot_advantage_change_keeps_its_legends_beside_the_panels():
    steps = np.arange(0, 110, 10)
    trace = {"steps": steps, **{k: np.linspace(0.0, 1.0, len(steps)) for k in (
        "gain_correct", "gain_other_source", "gain_query_key", "rule_agreement", "correct_rich", "self_share")}}
    fig = figures.plot_advantage_change(trace)
    top, bottom = fig.axes
    assert len(top.get_lines()) == 3 and len(bottom.get_lines()) == 3 + 1  # three measures and the coin's 0.5
    plotting.check_figure(fig)  # no legend over the 0.5 line, no text under 8 pt
    plt.close(fig)
