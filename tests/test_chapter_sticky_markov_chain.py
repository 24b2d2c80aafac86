"""Chapter 5 (chapters.sticky_markov_chain): the report's claims and glue against independent computations, and the
figures."""

from __future__ import annotations

import math
from types import SimpleNamespace

import matplotlib

matplotlib.use("Agg")
import numpy as np
import pytest
from scipy.stats import entropy

from attention_dynamics.book.nbcompare import assert_book_close
from attention_dynamics.chapters.sticky_markov_chain import figures, lr_surface, paper_scale, report, runs, settings
from attention_dynamics.core import plotting
from attention_dynamics.ledger import claims
from attention_dynamics.models.single_head import initial_head
from attention_dynamics.tasks import sticky_chain


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    import matplotlib.pyplot as plt

    plt.close("all")


@pytest.fixture
def captured(monkeypatch):
    """Claims and glue the report writes, by name (claims keep their value)."""
    out = {}
    monkeypatch.setattr(claims, "record", lambda cid, value, **kw: out.setdefault(cid, SimpleNamespace(value=value, **kw)))
    monkeypatch.setattr(claims, "glue", lambda name, value: out.__setitem__(name, value))
    return out


@pytest.fixture(scope="module")
def heavy():
    return paper_scale.PAPER_SCALE.load()


def _script_matrix(n: int = 8, self_prob: float = 0.3) -> np.ndarray:
    """The reference script's construction, written out: 0.3 and 1/d, row-normalised, × 0.7, + 0.3 on the diagonal."""
    i, j = np.indices((n, n))
    d = np.minimum(np.abs(i - j), n - np.abs(i - j)).astype(float)
    m = np.where(d == 0, self_prob, 1.0 / np.maximum(d, 1))
    return (1 - self_prob) * m / m.sum(1, keepdims=True) + self_prob * np.eye(n)


def test_record_chains_matches_the_script_construction(captured):
    P = report.record_chains()
    expected = _script_matrix()
    assert_book_close(P["reference"].numpy(), expected)
    assert_book_close(captured["sticky.effective_self_prob_reference"].value, expected[0, 0], rtol=0)
    assert_book_close(captured["sticky.self_prob_nominal"], 0.3, rtol=0)
    assert captured["sticky.stationary_max_deviation"] < 1e-10


def test_record_floors_are_mean_row_entropies(captured):
    P = report.record_chains()
    floors = report.record_floors(P, 5_000, seed=0)
    for kind, p in P.items():
        assert_book_close(floors[kind], np.mean([entropy(row) for row in p.numpy()]), rtol=0, atol=1e-10)
        assert_book_close(captured[f"sticky.hmin_bits_{kind}"], floors[kind] / math.log(2), rtol=0, atol=1e-10)
    assert_book_close(captured["sticky.ln8"], math.log(8))


def test_plot_transition_rows_draws_both_chains():
    fig = figures.plot_transition_rows({k: sticky_chain.transition_matrix(k) for k in sticky_chain.CHAIN_KINDS})
    ax = fig.axes[0]
    assert len(ax.containers) == 2 and all(len(c) == sticky_chain.N_SYMBOLS for c in ax.containers)
    assert len(ax.get_legend().get_texts()) == 2


def test_engine_gradient_check_is_tiny_against_autograd(captured):
    data = sticky_chain.make_sticky_chain_data(42, length=60)
    assert report.engine_gradient_check(data, 42) < 1e-10
    assert captured["sticky.engine_loss_abs_err"] < 1e-12


def _fake_runs(finals: dict[str, list[float]], steps: int = 20):
    runs = {}
    for name, values in finals.items():
        for seed, final in zip((1, 2, 3), values):
            losses = np.linspace(math.log(8), final, steps)
            runs[(name, seed)] = SimpleNamespace(final={"loss": final}, losses=losses)
    return runs


def test_record_protocol_against_hand_computed_summaries(captured):
    runs = _fake_runs({"sgd": [2.0, 1.9, 2.1], "em_like": [1.5, 1.4, 1.6]})
    protocol = {"speedup": {"speedup": 2.0, "threshold": 2.0, "mean_first_step": 10.0, "first_steps": [8, 10, 12]},
                "paired_test": {"mean_difference": -0.5, "t": -9.0, "t_pvalue": 0.01, "wilcoxon_pvalue": 0.25}}
    cfg = settings.resolve("fast", device="cpu", seeds=(1, 2, 3), steps=20, length=100)
    hmin = 1.0
    report.record_protocol(runs, protocol, cfg, hmin)
    assert_book_close(captured["sticky.final_loss_sgd"].value, 2.0)
    assert_book_close(captured["sticky.final_loss_sgd_sd"], 0.1)
    assert_book_close(captured["sticky.final_loss_em"].value, 1.5)
    assert_book_close(captured["sticky.final_loss_em"].lower, (math.log(8) + 1.0) / 2)
    assert_book_close(captured["sticky.gap_covered_em_like"], (math.log(8) - 1.5) / (math.log(8) - 1.0))
    assert captured["sticky.first_step_min"] == 8 and captured["sticky.first_step_max"] == 12
    fig = figures.plot_protocol(runs, cfg.seeds, protocol["speedup"])
    ax = fig.axes[0]
    assert len(ax.lines) == 2 + 3  # two mean curves; threshold, ln 8, mean first step
    assert ax.get_legend() is None and len(fig.legends) == 1  # the legend below, off the reference lines
    plotting.check_figure(fig)
    assert len(ax.collections) == 2  # the seeds' ranges


def test_matched_control_and_interval_read_the_stored_first_steps(captured, heavy):
    report.record_matched_control(heavy)
    block = heavy["ci"]["reference"]
    matched = block["em_like_speedup_over"]["sgd_matched"]
    ratio = np.mean(matched["control_first_steps"]) / np.mean(matched["em_like_first_steps"])
    assert_book_close(captured["sticky.speedup_vs_matched_lr"].value, ratio, rtol=1e-9)
    ci = report.record_speedup_interval(heavy)
    assert captured["sticky.speedup_ci95_low"].value <= ci["point"] <= captured["sticky.speedup_ci95_high"].value
    steps = heavy["config"]["steps"]
    assert_book_close(block["speedup"]["em_like"]["speedup"],
                      steps / np.mean(block["speedup"]["em_like"]["first_steps"]))


def test_record_surface_verdict_follows_the_intervals(captured):
    def cond(speedup, low, high):
        return {"speedup": speedup, "ci": {"low": low, "high": high}, "ratios": [1, 10, 1], "first_steps": [1, 2]}

    five = {"seeds": [1, 2], "conditions": {"sgd": cond(1.1, 1.0, 1.2), "values_only": cond(3.0, 2.8, 3.2),
                                            "readout_only": cond(2.0, 1.8, 2.2), "routing_only": cond(2.5, 2.3, 2.7),
                                            "values_readout": cond(4.0, 3.5, 4.5)}}
    surface = {"paper_seeds": five, "twenty_seeds": {"seeds": [], "conditions": {}},
               "baseline_source": {"max_abs_difference_where_both": 0.0},
               "config": {"steps": 100, "bootstrap_resamples": 10}}
    assert report.record_surface(surface) is True
    assert captured["sticky.speedup_values_only"].value == 3.0 and captured["sticky.surface_sgd_self"] == 1.1
    five["conditions"]["routing_only"] = cond(2.5, 2.3, 2.9)  # now overlaps values only
    assert report.record_surface(surface) is False


def test_record_deep_and_long_runs_against_the_stored_runs(captured, heavy):
    test = report.record_deep(heavy)
    deep = heavy["deep"]
    assert_book_close(test["loss"], sum(r["test"]["loss"] for r in deep["runs"]) / len(deep["runs"]))
    curve = deep["runs"][0]["test_curve"]
    assert captured["sticky.deep_best_test_loss"] == min(curve["loss"])
    table = report.record_long_runs(heavy)
    for name, short in (("sgd", "sgd"), ("em_like", "em")):
        best = np.mean([min(r["heldout_curve"]["loss"]) for r in heavy["long_run"]["runs"][name]])
        gap = captured[f"sticky.long_run_gap_to_hmin_{short}"].value
        assert_book_close(gap, best - heavy["long_run"]["hmin_nats"], rtol=0, atol=1e-4)  # the table rounds to 4 digits
    assert len(table) >= 2


def test_long_run_and_deep_figures(heavy):
    fig = figures.plot_long_runs(heavy, 1.9, 1000)
    axes = fig.axes
    n = len(heavy["long_run"]["runs"])
    assert len(axes[0].lines) == n + 3 and len(axes[1].lines) == n + 4  # + H_min, ln 8, protocol end (+ filter)
    plotting.check_figure(fig)
    fig = figures.plot_deep(heavy)
    ax = fig.axes[0]
    assert len(ax.lines) == 3 and ax.get_yscale() == "log"
    plotting.check_figure(fig)


def test_plot_value_trajectories_draws_every_prototype():
    rng = np.random.default_rng(0)
    runs = {(name, 7): SimpleNamespace(value_prototypes=rng.normal(size=(5, sticky_chain.N_SYMBOLS, 15)))
            for name in settings.SCHEDULE_PAIR}
    fig = figures.plot_value_trajectories(runs, 7, 40)
    axes = fig.axes
    for ax in axes:
        assert len(ax.lines) == 2 * sticky_chain.N_SYMBOLS + 1  # path and end per prototype; the origin


def test_trajectory_length_and_coherence():
    steps = np.linspace(0, 1, 11)[:, None, None]
    line = np.concatenate([steps * np.array([3.0, 4.0]), steps * np.array([0.0, 1.0])], axis=1)  # (11, 2, 2)
    assert_book_close(runs.trajectory_length(line), (5.0 + 1.0) / 2)
    assert_book_close(runs.trajectory_coherence(line), 1.0)
    angles = np.linspace(0, 2 * np.pi, 201)
    loop = np.stack([np.cos(angles), np.sin(angles)], axis=1)[:, None, :]  # a closed unit circle
    assert_book_close(runs.trajectory_length(loop), 2 * np.pi, rtol=1e-3)
    assert_book_close(runs.trajectory_coherence(loop), 0.0, rtol=0)


def test_between_symbol_share():
    labels = np.repeat(np.arange(4), 50)
    separated = np.eye(4)[labels] * 10.0
    assert_book_close(runs.between_symbol_share(separated, labels), 1.0)
    noise = np.random.default_rng(0).standard_normal((200, 3))
    assert runs.between_symbol_share(noise, labels) < 0.05  # expected (4 − 1)/(200 − 1) ≈ 0.015


def test_trajectory_pca_shares_axes():
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((5, 8, 15)), rng.standard_normal((7, 8, 15))
    projected, ratios = runs.trajectory_pca({"a": a, "b": b})
    assert projected["a"].shape == (5, 8, 2) and projected["b"].shape == (7, 8, 2)
    assert ratios[0] >= ratios[1] > 0


@pytest.mark.slow
def test_runs_share_data_and_initialisation_across_schedules_and_are_reproducible():
    sgd = runs.train_sticky_head(3, "sgd", steps=5, length=80, snapshot_every=2)
    em = runs.train_sticky_head(3, "em_like", steps=5, length=80)
    again = runs.train_sticky_head(3, "sgd", steps=5, length=80, snapshot_every=2)
    assert sgd.losses[0] == em.losses[0]  # same data, same initial weights
    assert sgd.initial == em.initial
    np.testing.assert_array_equal(sgd.losses, again.losses)
    assert sgd.value_prototypes.shape == (4, 8, 15)  # steps 0, 2, 4 and the end
    assert list(sgd.snapshot_steps) == [0, 2, 4, 5]
    data = sticky_chain.make_sticky_chain_data(3, length=80)
    init = initial_head(3)
    assert_book_close(sgd.value_prototypes[0], (data.mu @ init.W_V).numpy(), rtol=1e-6)


@pytest.mark.slow
def test_run_grid_in_parallel_equals_in_process():
    parallel = runs.run_grid([1, 2], ["sgd"], steps=3, length=60, processes=2)
    serial = runs.run_grid([1, 2], ["sgd"], steps=3, length=60, processes=1)
    for key in serial:
        np.testing.assert_array_equal(parallel[key].losses, serial[key].losses)


@pytest.mark.slow
def test_paper_protocol_summary_tables():
    grid = runs.run_grid([1, 2, 3], ["sgd", "em_like"], steps=4, length=60, processes=1)
    out = runs.paper_protocol_summary(grid)
    assert out["seeds"] == [1, 2, 3]
    assert list(out["per_seed"].index) == [1, 2, 3]
    assert_book_close(out["summary"].loc[("sgd", "loss"), "mean"],
                      np.mean([grid[("sgd", s)].final["loss"] for s in (1, 2, 3)]), rtol=0, atol=1e-4)


def test_describe_machine_names_what_the_benchmark_recorded():
    machine = {"cpu_count": 2, "platform": "Linux-6-x86_64", "processor": "", "cpu_model": "AMD EPYC"}
    assert report.describe_machine(machine) == "2 cores, AMD EPYC, Linux-6-x86_64"
    assert report.describe_machine({"cpu_count": 4, "platform": "macOS-14-arm64", "processor": "arm"}) == (
        "4 cores, arm, macOS-14-arm64")
    assert report.describe_machine({}) == "an unrecorded machine"


def test_the_engine_timing_is_not_a_ledger_claim():
    """Timings depend on the machine; the ledger holds only what any machine reproduces."""
    from attention_dynamics.core.paths import CLAIMS_PATH
    from attention_dynamics.ledger.claims import load_ledger

    ids = {claim.id for claim in load_ledger(CLAIMS_PATH)}
    assert "runs.engine_speedup_vs_autograd" not in ids
    assert not any("ms_per_step" in claim_id or "speedup_vs_autograd" in claim_id for claim_id in ids)


def test_values_only_run_is_the_em_like_run():
    a = runs.train_sticky_head(3, "em_like", steps=6, length=60)
    b = runs.train_sticky_head(3, lr_surface.condition_schedule(lr_surface.CONDITIONS["values_only"]),
                                 steps=6, length=60)
    np.testing.assert_array_equal(a.losses, b.losses)
    c = runs.train_sticky_head(3, lr_surface.condition_schedule((1, 1, 10)), steps=6, length=60)
    assert not np.array_equal(a.losses, c.losses)


def test_settings_are_the_papers_protocol_and_reject_bad_values():
    book = settings.SETTINGS["book"]
    assert book.seeds == tuple(sticky_chain.PAPER_SEEDS) and book.steps == 1000
    assert book.length == sticky_chain.SEQUENCE_LENGTH == 2000
    assert settings.SETTINGS["paper"].seeds == book.seeds  # the paper's scale is the book's protocol
    with pytest.raises(ValueError, match="length must be at least 2"):
        settings.resolve("fast", length=1)
    with pytest.raises(ValueError, match="seeds must not be empty"):
        settings.resolve("fast", seeds=())
    assert report.protocol_params(settings.resolve("fast", device="cpu"))["seeds"] == (42, 2024)
