"""Chapter 6 (chapters.bayesian_manifolds): settings, runs, the recorded claims against independent computations,
the figures' contents."""

from __future__ import annotations

import math

import matplotlib

matplotlib.use("Agg")

import numpy as np
import pytest
import torch

from attention_dynamics.book.nbcompare import assert_book_close
from attention_dynamics.chapters.bayesian_manifolds import figures, report, runs as chapter_runs, settings
from attention_dynamics.core import plotting
from attention_dynamics.diagnostics import wind_tunnel_geometry as wg
from attention_dynamics.ledger import claims
from attention_dynamics.tasks import hmm
from attention_dynamics.training import wind_tunnels as wt

TINY = dict(bij_steps=40, hmm_steps=30, n_checkpoints=6, n_eval=64, n_probe=32)
LN2 = math.log(2.0)


@pytest.fixture(scope="module")
def cfg():
    return settings.resolve("fast", device="cpu", **TINY)


@pytest.fixture(scope="module")
def runs(cfg):
    return (wt.train_bijection(cfg.bijection, seed=3, checkpoints=cfg.n_checkpoints),
            wt.train_hmm(cfg.hmm, seed=3, checkpoints=cfg.n_checkpoints))


@pytest.fixture
def recorded(monkeypatch):
    """Capture every claim recorded and every number glued: ``{"claims": id → Claim, "glue": name → value}``."""
    out = {"claims": {}, "glue": {}}
    record = claims.record

    def capture(claim_id, value, **kwargs):
        out["claims"][claim_id] = claim = record(claim_id, value, **kwargs)
        return claim

    monkeypatch.setattr(report.claims, "record", capture)
    monkeypatch.setattr(report.claims, "glue", lambda name, value: out["glue"].__setitem__(name, value))
    return out


def _kl_bits(p: np.ndarray, log_q: np.ndarray) -> float:
    """Mean over all but the last axis of Σ p (ln p − ln q) / ln 2, with 0 ln 0 = 0."""
    terms = np.where(p > 0, p * (np.log(np.where(p > 0, p, 1.0)) - log_q), 0.0)
    return float(terms.sum(-1).mean() / LN2)


def _entropy_bits(p: np.ndarray) -> np.ndarray:
    return -np.where(p > 0, p * np.log2(np.where(p > 0, p, 1.0)), 0.0).sum(-1)


# --------------------------------------------------------------------------------------------
# Parameters and reference levels
# --------------------------------------------------------------------------------------------


def test_settings_take_the_library_tunnels_and_the_notebooks_step_overrides(cfg):
    fast = settings.SETTINGS["fast"]
    assert fast.bijection == wt.BIJECTION_TUNNELS["fast"] and fast.hmm == wt.HMM_TUNNELS["fast"]
    assert settings.SETTINGS["book"].bijection == wt.BIJECTION_TUNNELS["book"]
    assert cfg.bijection == wt.BIJECTION_TUNNELS["fast"].replace(steps=40)
    assert cfg.hmm == wt.HMM_TUNNELS["fast"].replace(steps=30)
    assert (cfg.n_checkpoints, cfg.n_eval, cfg.n_probe, cfg.scale) == (6, 64, 32, "fast")
    table = settings.scales_table()
    assert list(table.columns) == ["fast", "book", "paper"]
    assert table.loc[settings.SETTING_LABELS["bijection.steps"], "book"] == str(wt.BIJECTION_TUNNELS["book"].steps)
    assert table.loc[settings.SETTING_LABELS["hmm.test_lengths"], "paper"] == "20, 30, 50"
    assert not any("." in label or "_" in label for label in table.index)  # every setting has a human label


def test_params_are_read_from_the_settings(cfg):
    p = report.bijection_params(cfg, seed=5)
    b = cfg.bijection
    assert (p["V"], p["L"], p["n_sequences"], p["seed"]) == (b.V, b.L, TINY["n_eval"], 5)
    assert (p["d_model"], p["steps"], p["lr"], p["scale"]) == (b.d_model, 40, b.lr, "fast")
    h = report.hmm_params(cfg, seed=5)
    assert h["train_length"] == cfg.hmm.length and h["test_lengths"] == list(cfg.hmm.test_lengths)
    assert h["steps"] == 30 and h["n_sequences"] == TINY["n_eval"]
    g = report.geometry_params(cfg, seed=5)
    assert g["d_head"] * b.n_heads == b.d_model and g["n_probe"] == TINY["n_probe"]


def test_reference_levels_match_their_closed_forms(cfg, recorded):
    V, L = cfg.bijection.V, cfg.bijection.L
    out = report.record_reference_levels(cfg, wt.bijection_batch_for_eval(cfg.bijection, seed=1, n=cfg.n_eval), seed=1)
    remaining = V - np.arange(L)  # values still possible after t pairs
    assert_book_close(out["bijection.bayes_ce_floor_nats"].value, np.mean(np.log(remaining)), rtol=0)
    assert_book_close(out["bijection.bayes_top1_accuracy"].value, np.mean(1 / remaining), rtol=0)
    blind = np.mean(np.log2(V) - np.log2(remaining))
    assert_book_close(out["bijection.context_blind_entropy_mae_bits"].value, blind, rtol=0)
    # The uniform predictor's KL to a posterior uniform over the remaining values is the same number.
    assert_book_close(recorded["glue"]["manifolds.blind_kl_bits"], blind, rtol=0)
    assert_book_close(recorded["glue"]["manifolds.blind_paper_sizes_bits"],
                      np.mean(np.log2(20) - np.log2(20 - np.arange(19))), rtol=0)
    assert all(c.status == "pass" for c in out.values())
    assert set(recorded["claims"]) == set(out)


def test_bijection_example_and_hmm_example(cfg):
    text = chapter_runs.bijection_example_text(cfg, torch.Generator().manual_seed(0))
    pairs, entropy = text.splitlines()
    L, V = cfg.bijection.L, cfg.bijection.V
    assert pairs.count("→") == L and pairs.endswith("→?") and pairs.count("→v") == L - 1
    assert entropy.startswith("posterior entropy") and str(round(math.log2(V), 3)) in entropy
    batch = chapter_runs.hmm_example_batch(cfg, torch.Generator().manual_seed(0))
    assert batch.posterior.shape == (1, cfg.hmm.length, cfg.hmm.n_states)
    batches = chapter_runs.hmm_eval_batches(cfg, seed=0)
    assert set(batches) == set(cfg.hmm.test_lengths)
    assert all(b.observations.shape == (cfg.n_eval, K) for K, b in batches.items())


def test_glue_training_counts_the_parameters(cfg, runs, recorded):
    bij_model, hmm_model = runs[0].model(), runs[1].model()
    out = report.glue_training(cfg, bij_model, hmm_model)
    assert out["manifolds.bij_parameters"] == sum(p.numel() for p in bij_model.parameters() if p.requires_grad)
    assert out["manifolds.hmm_steps"] == 30 and recorded["glue"] == out


# --------------------------------------------------------------------------------------------
# Calibration
# --------------------------------------------------------------------------------------------


def test_bijection_calibration_against_a_direct_computation(cfg, runs, recorded):
    batch = wt.bijection_batch_for_eval(cfg.bijection, seed=2, n=cfg.n_eval)
    out = report.record_bijection_calibration(cfg, runs[0].model(), batch, seed=2)
    log_q = out.log_probs.numpy()
    post = batch.posterior.numpy()
    h_model = _entropy_bits(np.exp(log_q))
    h_bayes = np.log2(cfg.bijection.V - np.arange(cfg.bijection.L))
    assert_book_close(out.claims["bijection.entropy_mae_bits"].value, np.abs(h_model - h_bayes).mean(), rtol=1e-9)
    assert_book_close(out.claims["bijection.kl_bits"].value, _kl_bits(post, log_q), rtol=1e-9)
    g = recorded["glue"]
    assert_book_close(g["manifolds.bij_curve_mae_bits"], np.abs(h_model.mean(0) - h_bayes).mean(), rtol=1e-9)
    targets = batch.targets.numpy()
    true_lp = np.take_along_axis(log_q, targets[..., None], -1)
    assert_book_close(g["manifolds.bij_model_ce_nats"], -true_lp.mean(), rtol=1e-9)
    guesses = log_q.argmax(-1)
    assert_book_close(g["manifolds.bij_model_top1"], (guesses == targets).mean())
    assert_book_close(g["manifolds.bij_sampled_top1_bayes"], np.take_along_axis(post, guesses[..., None], -1).mean())


def test_hmm_calibration_against_a_direct_computation(cfg, runs, recorded):
    batches = chapter_runs.hmm_eval_batches(cfg, seed=4)
    out = report.record_hmm_calibration(cfg, runs[1], batches, seed=4)
    K_train, _, K_long = cfg.hmm.test_lengths
    model = runs[1].model()
    for K in (K_train, K_long):
        b = batches[K]
        blind = hmm.context_blind_posterior(b.transition, b.emission, b.observations).numpy()
        assert_book_close(out.blind_reports[K].kl_bits, _kl_bits(b.posterior.numpy(), np.log(blind)), rtol=1e-9)
        model_kl = _kl_bits(b.posterior.numpy(), wt.hmm_log_probs(model, b).numpy())
        assert_book_close(out.reports[K].kl_bits, model_kl, rtol=1e-9)
    c = out.claims
    assert_book_close(c["hmm.context_blind_kl_bits"].value, out.blind_reports[K_train].kl_bits)
    assert_book_close(c["hmm.kl_bits"].upper, settings.TRANSPORT_FRACTION * c["hmm.context_blind_kl_bits"].value)
    assert_book_close(c["hmm.length_gen_kl_bits"].upper, c["hmm.context_blind_kl_bits_long"].value)
    assert c["hmm.length_gen_kl_bits"].params["length"] == K_long
    # The late change: max − min of the KL ratio over the checkpoints in the last 20 % of training.
    for K in (K_train, K_long):
        steps = out.curve.steps
        late = out.curve.ratio(K)[steps >= 0.8 * steps[-1]]
        assert_book_close(out.late_change[K], late.max() - late.min())
    if c["hmm.kl_bits"].status != "pass":
        assert f"moved by {out.late_change[K_train]:.3f}" in c["hmm.kl_bits"].explanation
    # The per-sample entropy error above its bound is not decided (no plateau evidence), never a bare fail.
    mae = c["hmm.entropy_mae_bits"]
    assert_book_close(mae.value, out.reports[K_train].entropy_mae_bits)
    assert mae.status == ("pass" if mae.value <= settings.HMM_ENTROPY_BOUND_BITS else "undecided")
    g = recorded["glue"]
    assert_book_close(g["manifolds.hmm_kl_ratio_long"], out.reports[K_long].kl_bits / out.blind_reports[K_long].kl_bits)
    assert_book_close(g["manifolds.hmm_kl_first_step"], out.reports[K_train].kl_by_position[0])


# --------------------------------------------------------------------------------------------
# Geometry and frame–precision
# --------------------------------------------------------------------------------------------


def _spread(pc1: tuple[float, float, float], rho: tuple[float, float, float]) -> dict:
    """A stored seed-spread result with the given (mean, low, high) of the two value-manifold numbers."""
    interval = lambda m: {"mean": m[0], "low": m[1], "high": m[2], "n": 3}  # noqa: E731
    return {"seeds": [0, 1, 2], "intervals": {"value_pc1_ratio": interval(pc1), "value_pc1_entropy_spearman": interval(rho)},
            "runs": {"geometry": [{"value_pc1_ratio": v} for v in (0.7, 0.9, 0.85)]}}


def test_plateau_note_says_which_side_of_the_amount():
    amount = settings.GEOMETRY_PLATEAU[settings.KEYS_ALL]
    assert "has plateaued" in report.plateau_note(settings.KEYS_ALL, amount / 2)
    assert "not decided" in report.plateau_note(settings.KEYS_ALL, amount * 2)


def test_bijection_geometry_claims(cfg, runs, recorded):
    probe = wt.bijection_probe_batch(cfg.bijection, seed=3, n=cfg.n_probe)
    out = report.record_bijection_geometry(cfg, runs[0], probe, seed=3, generator=torch.Generator().manual_seed(0),
                                           spread=_spread((0.82, 0.75, 0.89), (0.95, 0.92, 0.97)))
    c = out.claims
    # The untrained null is the run's step-0 model measured on the same probe.
    untrained = wg.bijection_geometry(runs[0].model(0), probe, table=False)
    assert_book_close(c["geometry.key_abs_cos_layer0_untrained"].value, untrained.key_abs_cos[0])
    assert_book_close(c["geometry.attention_entropy_reduction_untrained"].value,
                      1 - untrained.attention_entropy_bits[-1] / untrained.attention_entropy_bits[0])
    # The Monte Carlo baseline against E|cos| of two isotropic vectors in d dimensions.
    d = cfg.bijection.d_model // cfg.bijection.n_heads
    closed = math.exp(math.lgamma(d / 2) - math.lgamma((d + 1) / 2)) / math.sqrt(math.pi)
    assert_book_close(c["geometry.key_abs_cos_random_baseline"].value, closed, rtol=0, atol=0.002)
    # Over seeds: the mean with its interval, decided by the interval against the bound.
    pc1 = c["geometry.value_pc1_ratio"]
    assert pc1.value == 0.82 and pc1.interval == [0.75, 0.89] and pc1.status != "pass"
    assert "0.70 to 0.90" in pc1.explanation  # the smallest and largest seed
    assert c["geometry.value_pc1_entropy_spearman"].status == "pass"
    for name in settings.GEOMETRY_PLATEAU:
        late = out.curve[name][out.curve["step"] >= 0.8 * out.curve["step"][-1]]
        assert_book_close(out.late_change[name], late.max() - late.min())
    g = recorded["glue"]
    assert g["manifolds.value_pc1_ratio_seed_min"] == 0.7 and g["manifolds.value_pc1_ratio_seed_max"] == 0.9
    assert_book_close(g["manifolds.attn_entropy_last"], out.report.attention_entropy_bits[-1])
    frame = report.manifold_frame(out.report.manifold_table)
    assert frame.index.names == ["layer", "representation"] and len(frame) == len(out.report.manifold_table)


def test_hmm_manifold_glue(cfg, runs, recorded):
    geo = report.glue_hmm_manifold(cfg, runs[1].model(), seed=3)
    assert geo.scores.shape == (cfg.n_probe * cfg.hmm.length, 2)
    assert_book_close(recorded["glue"]["manifolds.hmm_max_abs_spearman"],
                      max(abs(r["spearman"]) for r in geo.manifold_table))


def test_frame_and_calibration_claims(cfg, runs, recorded):
    fp = report.record_frame_and_calibration(cfg, runs[0], wt.bijection_probe_batch(cfg.bijection, seed=3, n=cfg.n_probe),
                                             seed=3)
    c, g = recorded["claims"], recorded["glue"]
    assert c["frame_precision.frame_settle_step"].value == fp.frame_settle_step
    assert c["frame_precision.calibration_settle_step"].lower == fp.frame_settle_step + 1
    i = list(fp.steps).index(fp.frame_settle_step)
    assert_book_close(g["manifolds.mae_improvement_after_frame"], fp.entropy_mae_bits[i] / fp.entropy_mae_bits[-1])
    assert_book_close(g["manifolds.min_similarity_at_init"], min(fp.attention_similarity[0, 1:]))
    assert g["manifolds.n_checkpoints"] == len(fp.steps) == len(c["frame_precision.frame_settle_step"].params["checkpoints"])


# --------------------------------------------------------------------------------------------
# Figures
# --------------------------------------------------------------------------------------------


def test_hmm_floor_is_the_mean_filter_entropy_in_nats():
    batch = wt.hmm_batch_for_eval(settings.SETTINGS["fast"].hmm, 8, seed=0, n=8)
    p = batch.posterior.numpy()
    assert_book_close(figures.hmm_floor_nats(batch), float(-(p * np.log(p)).sum(-1).mean()))


def _close(fig):
    import matplotlib.pyplot as plt

    plt.close(fig)


def test_figures_draw_their_panels(cfg, runs):
    bij_run, hmm_run = runs
    n_states = cfg.hmm.n_states
    fig = figures.plot_hmm_posterior(chapter_runs.hmm_example_batch(cfg, torch.Generator().manual_seed(0)))
    plotting.check_figure(fig)
    ax = fig.axes[0]
    assert len(ax.collections) == n_states + 1 and len(ax.get_legend().get_texts()) == n_states
    _close(fig)
    batches = chapter_runs.hmm_eval_batches(cfg, seed=0)
    fig = figures.plot_training_losses(cfg, bij_run, hmm_run, batches[cfg.hmm.length], window=5)
    plotting.check_figure(fig)
    axes = fig.axes
    line = axes[0].get_lines()[0]
    assert len(line.get_xdata()) == cfg.bijection.steps - 4 and len(axes[1].get_lines()) == 2
    V, L = cfg.bijection.V, cfg.bijection.L
    assert_book_close(axes[0].get_lines()[1].get_ydata()[0], np.mean(np.log(V - np.arange(L))))
    _close(fig)
    bij_batch = wt.bijection_batch_for_eval(cfg.bijection, seed=0, n=cfg.n_eval)
    cal = report.record_bijection_calibration(cfg, bij_run.model(), bij_batch, seed=0)
    fig = figures.plot_bijection_calibration(cfg, cal.report, cal.log_probs)
    plotting.check_figure(fig)
    axes = fig.axes
    assert len(axes[0].get_lines()) == 2 and len(axes[0].collections) == 1 and len(axes[1].get_lines()) == 3
    _close(fig)
    hmm_cal = report.record_hmm_calibration(cfg, hmm_run, batches, seed=0)
    fig = figures.plot_hmm_calibration(hmm_cal.reports, hmm_cal.blind_reports)
    plotting.check_figure(fig)
    axes = fig.axes
    n = len(cfg.hmm.test_lengths)
    assert len(axes[0].get_lines()) == 2 * n + 1 and len(axes[1].get_lines()) == n + 2
    _close(fig)
    fig = figures.figure_hmm_kl_through_training(hmm_cal.curve)
    plotting.check_figure(fig)
    ax = fig.axes[0]
    assert len(ax.get_lines()) == 2 + 2 and ax.get_title()
    _close(fig)


def test_geometry_figures_draw_their_panels(cfg, runs):
    bij_run, hmm_run = runs
    probe = wt.bijection_probe_batch(cfg.bijection, seed=0, n=cfg.n_probe)
    out = report.record_bijection_geometry(cfg, bij_run, probe, seed=0, generator=torch.Generator().manual_seed(0),
                                           spread=_spread((0.85, 0.81, 0.89), (0.95, 0.92, 0.97)), baseline_draws=50)
    n_layers = cfg.bijection.n_layers
    fig = figures.plot_geometry(out.report)
    plotting.check_figure(fig)
    axes = np.array(fig.axes[:4]).reshape(2, 2)  # the four panels; the colour bar comes last
    assert len(axes[0, 1].patches) == 3 * n_layers and len(axes[1, 0].patches) == n_layers
    assert len(axes[1, 1].get_lines()) == 2 and len(axes[0, 0].images) == 1
    _close(fig)
    fig = figures.figure_geometry_through_training(out.curve, out.nulls)
    plotting.check_figure(fig)
    assert [ax.get_title() for ax in fig.axes] == [n for n, _ in figures.GEOMETRY_PANELS]
    _close(fig)
    hmm_geo = report.glue_hmm_manifold(cfg, hmm_run.model(), seed=0)
    fig = figures.plot_value_manifolds(out.report, hmm_geo)
    plotting.check_figure(fig)
    axes = fig.axes[:2]  # the two panels; their colour bars come after
    assert [len(ax.collections[0].get_offsets()) for ax in axes] == [len(out.report.value_scores), len(hmm_geo.scores)]
    _close(fig)
    fp = wg.frame_and_calibration(bij_run, probe)
    fig = figures.plot_frame_and_calibration(fp)
    plotting.check_figure(fig)
    # one line per layer, the entropy error, the threshold and the two settling steps
    assert len(fig.axes) == 2 and len(fig.legends[0].get_texts()) == n_layers + 4
    _close(fig)
    picks = figures.manifold_checkpoints(fp)
    assert picks[0] == 0 and picks[-1] == len(fp.steps) - 1
    assert fp.steps[picks[2]] == fp.frame_settle_step
    fig = figures.plot_manifold_through_training(fp)
    plotting.check_figure(fig)
    axes = fig.axes[:4]  # the colour bar comes last
    assert len(axes) == 4 and [ax.get_title().split("\n")[0] for ax in axes] == [f"step {fp.steps[i]}" for i in picks]
    _close(fig)
