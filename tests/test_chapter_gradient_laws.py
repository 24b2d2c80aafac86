"""Chapter 2 (chapters.gradient_laws): its draws, its claims and its figures, against independent computations."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import numpy as np
import pytest
import torch

from attention_dynamics.book.nbcompare import assert_book_close
from attention_dynamics.chapters.gradient_laws import figures, report, runs, settings
from attention_dynamics.ledger import claims
from attention_dynamics.science import attention, gradients

SMALL = settings.resolve("fast", device="cpu", n_draws=2, batch=2, T=6, fd_T=3, sweep_T=6, n_temperatures=7,
                         log10_beta_max=3, ws_steps=4, ws_every=2)


@pytest.fixture
def glued(monkeypatch):
    """Capture what the report glues: name → value."""
    out = {}
    monkeypatch.setattr(claims, "glue", lambda name, value: out.__setitem__(name, value))
    return out


def test_random_problem_draws_head_inputs_targets_in_that_order():
    x, params, y = runs.random_problem(torch.Generator().manual_seed(3), 0.5, (2, 5))
    g = torch.Generator().manual_seed(3)
    ref = attention.init_single_head(20, 10, 15, 8, std=0.5, generator=g, dtype=torch.float64)
    assert torch.equal(params.W_Q, ref.W_Q) and torch.equal(params.W_O, ref.W_O)
    assert torch.equal(x, torch.randn(2, 5, 20, generator=g, dtype=torch.float64))
    assert torch.equal(y, torch.randint(0, 8, (2, 5), generator=g))


def test_worked_example_is_the_advantage_gated_by_attention():
    ex = runs.worked_example(torch.Generator().manual_seed(0))
    alpha, b = ex.forward.alpha, ex.forward.b
    T = alpha.shape[-1]
    for i in range(T):  # the advantage by its definition, entry by entry
        mean_b = sum(alpha[i, j] * b[i, j] for j in range(i + 1))
        for j in range(i + 1):
            assert_book_close(ex.advantage[i, j].item(), (mean_b - b[i, j]).item(), rtol=0)
            assert_book_close(ex.score_grad[i, j].item(), -(alpha[i, j] * ex.advantage[i, j]).item(), rtol=0)
    q, k = ex.best_pair()
    brute = max(((i, j) for i in range(T) for j in range(T)), key=lambda ij: ex.advantage[ij].item())
    assert (q, k) == brute


def test_plot_worked_example_draws_four_matrices():
    import matplotlib.pyplot as plt

    fig = figures.plot_worked_example(runs.worked_example(torch.Generator().manual_seed(0)))
    axes = [ax for ax in fig.axes if ax.get_label() != "<colorbar>"]
    assert len(axes) == 4
    assert all(len(ax.images) == 1 for ax in axes)
    assert "T = 8" in fig._suptitle.get_text()
    plt.close(fig)


def test_worst_is_the_largest_error_and_scale_over_checks_and_heads():
    draws = [{"a": (1.0, 5.0), "b": (3.0, 2.0)}, {"a": (2.0, 1.0), "b": (0.5, 7.0)}]
    assert runs.worst(draws, "a") == (2.0, 5.0)
    assert runs.worst(draws, "a", "b") == (3.0, 7.0)


def test_law_claims_pass_on_real_heads_and_fail_on_a_wrong_law(glued):
    draws = runs.law_check_draws(SMALL, torch.Generator().manual_seed(0))
    assert len(draws) == SMALL.n_draws
    recorded = report.record_law_claims(draws, report.verification_params(SMALL, 0))
    assert [c.status for c in recorded.values()] == ["pass"] * len(report.LAW_CLAIMS)
    for claim_id, value in recorded.items():
        assert_book_close(glued[claim_id + "_relative"], value.value / value.params["gradient_scale"])
    broken = [{c: (1e-6, 1.0) for d in draws for c in d}]  # an error of 1e-6 of the gradient's scale
    assert all(c.status == "fail" for c in report.record_law_claims(broken, {}).values())


def test_structure_claims_are_zero_on_real_heads(glued):
    draws = runs.law_check_draws(SMALL, torch.Generator().manual_seed(1))
    row_error, row_scale, masked = report.record_structure_claims(draws, {})
    assert masked == 0.0 and row_error <= 1e-12 * row_scale
    assert glued["gradients.row_sum_term_scale"] == row_scale


def test_finite_difference_check_covers_the_eight_gradients(monkeypatch):
    recorded = {}
    real_record = claims.record
    monkeypatch.setattr(claims, "record", lambda cid, v, **kw: recorded.setdefault(cid, real_record(cid, v, **kw)))
    relative = runs.finite_difference_errors(SMALL, torch.Generator().manual_seed(0))
    assert set(relative) == set(gradients.GRADIENT_NAMES) and len(relative) == 8
    assert max(relative.values()) < 1e-7
    report.record_finite_difference(relative, SMALL, seed=0)
    claim = recorded["gradients.finite_difference_max_rel_err"]
    assert claim.value == max(relative.values()) and claim.status == "pass" and claim.params["T"] == SMALL.fd_T


def test_sweep_temperatures_always_include_one():
    betas = runs.sweep_temperatures(SMALL.replace(n_temperatures=4, log10_beta_max=2))  # 1e-2, 1e-1/3, ..., 1e2
    assert_book_close(betas[0], 1e-2)
    assert_book_close(betas[-1], 1e2)
    assert 1.0 in betas and np.all(np.diff(betas) > 0) and len(betas) == 5


def test_sweep_claims_read_the_sweep_at_the_right_temperatures(glued, monkeypatch):
    recorded = {}
    real_record = claims.record
    monkeypatch.setattr(claims, "record", lambda cid, v, **kw: recorded.setdefault(cid, real_record(cid, v, **kw)))
    cfg = SMALL.replace(log10_beta_max=2)  # on 6 positions β = 1e3 rounds the entropy (and its bound) to 0
    x, params, y = runs.random_problem(torch.Generator().manual_seed(2), 0.5, (cfg.sweep_T,))
    sweep = gradients.inverse_temperature_sweep(x, params, y, runs.sweep_temperatures(cfg))
    report.record_sweep_claims(sweep, cfg, seed=0)
    # independently: the value gradient at β = 1 and at β_max, from two separate one-point sweeps
    at_one = gradients.inverse_temperature_sweep(x, params, y, [1.0]).value_grad_norm[0]
    at_max = gradients.inverse_temperature_sweep(x, params, y, [1e2]).value_grad_norm[0]
    assert_book_close(recorded["gradients.one_hot_value_grad_ratio"].value, at_max / at_one, rtol=1e-12)
    assert recorded["gradients.entropy_bound_max_ratio"].value <= 1.0  # the lemma
    assert_book_close(glued["gradients.sweep_beta_max"], 1e2)
    assert glued["gradients.sweep_entropy_max"] <= np.log(cfg.sweep_T) + 1e-12
    # the chapter's own sweep draws the same head from the same generator state
    again = runs.temperature_sweep(cfg, torch.Generator().manual_seed(2))
    np.testing.assert_array_equal(again.value_grad_norm, sweep.value_grad_norm)


def test_plot_temperature_sweep_draws_entropy_and_three_gradient_curves():
    import matplotlib.pyplot as plt

    x, params, y = runs.random_problem(torch.Generator().manual_seed(2), 0.5, (6,))
    fig = figures.plot_temperature_sweep(gradients.inverse_temperature_sweep(x, params, y, [0.1, 1.0, 10.0]))
    axes = fig.axes
    assert len(axes[0].get_lines()) == 2 and len(axes[1].get_lines()) == 3
    assert axes[1].get_xscale() == "log" and axes[1].get_yscale() == "log" and axes[1].xaxis_inverted()
    plt.close(fig)


def test_weight_step_claims_take_the_worst_head_and_return_the_sticky_measures(glued):
    sticky = {"value_err": 1e-16, "value_scale": 1.0, "score_err": 1e-17, "score_scale": 0.1,
              "sign_agreement": 0.6, "value_cosine": 0.3}
    random = [dict(sticky, value_err=5e-16, sign_agreement=0.8, value_cosine=0.5),
              dict(sticky, score_err=1.0, value_cosine=0.9)]  # a score step far off: its claim must fail
    measures = report.record_weight_step_claims(sticky, random, SMALL, seed=0)
    assert measures == {"sign_agreement": 0.6, "value_cosine": 0.3}
    assert_book_close(glued["gradients.ws_random_cosine_mean"], 0.7)
    assert glued["gradients.ws_random_cosine_min"] == 0.5 and glued["gradients.ws_random_cosine_max"] == 0.9


def test_weight_step_claims_fail_when_a_formula_is_off(monkeypatch, glued):
    recorded = {}
    real_record = claims.record
    monkeypatch.setattr(claims, "record", lambda cid, v, **kw: recorded.setdefault(cid, real_record(cid, v, **kw)))
    sticky = {"value_err": 1e-16, "value_scale": 1.0, "score_err": 1e-17, "score_scale": 0.1,
              "sign_agreement": 0.6, "value_cosine": 0.3}
    report.record_weight_step_claims(sticky, [dict(sticky, score_err=1.0)], SMALL, seed=0)
    assert recorded["gradients.weight_step_value_max_abs_err"].status == "pass"
    assert recorded["gradients.weight_step_score_max_abs_err"].status == "fail"
    assert recorded["gradients.weight_step_score_max_abs_err"].value == 1.0


def test_glue_weight_step_traces_ranges(glued):
    traces = {"sgd": {"sign_agreement": [0.5, 0.7], "value_cosine": [0.2, 0.1], "loss": [2.0, 1.5],
                      "ref_sign_agreement": [0.6, 0.65], "ref_value_cosine": [1.0, 1 - 1e-9]},
              "em_like": {"sign_agreement": [0.4, 0.55], "value_cosine": [0.3, 0.35], "loss": [2.0, 1.9],
                          "ref_sign_agreement": [0.55, 0.7], "ref_value_cosine": [1 + 2e-9, 1.0]}}
    report.glue_weight_step_traces(traces, SMALL)
    assert glued["ch2.ws_sgd_sign_min"] == 0.5 and glued["ch2.ws_em_like_cosine_max"] == 0.35
    assert glued["ch2.ws_sgd_loss_end"] == 1.5
    assert (glued["ch2.ws_ref_sign_min"], glued["ch2.ws_ref_sign_max"]) == (0.55, 0.7)
    assert_book_close(glued["ch2.ws_ref_cosine_err"], 2e-9)


def test_entropy_bound_ratio_at_one_hot_attention_is_defined():
    from attention_dynamics.chapters.gradient_laws.runs import entropy_bound_max_ratio

    assert entropy_bound_max_ratio([0.5, 0.0], [1.0, 0.0]) == 0.5  # 0/0 at the one-hot end: no violation
    assert entropy_bound_max_ratio([0.5, 1e-3], [1.0, 0.0]) == float("inf")  # a gradient with zero bound violates
    assert entropy_bound_max_ratio([0.5, 0.9], [1.0, 0.6]) == 1.5


def test_plot_weight_step_along_training_colours_schedules_and_keeps_the_legend_off_the_half_line():
    import matplotlib.pyplot as plt

    from attention_dynamics.core import plotting

    trace = {"steps": [0, 2, 4], "sign_agreement": [0.55, 0.56, 0.57], "ref_sign_agreement": [0.8, 0.8, 0.82],
             "value_cosine": [0.4, 0.38, 0.35], "ref_value_cosine": [1.0, 1.0, 1.0]}
    fig = figures.plot_weight_step_along_training({"sgd": trace, "em_like": trace})
    left, right = fig.axes[:2]
    assert len(left.get_lines()) == 4 + 1 and len(right.get_lines()) == 4  # two schedules × two inputs; the 0.5 line
    assert left.get_lines()[0].get_color() == plotting.schedule_color("sgd")
    assert len(fig.legends) == 1 and left.get_legend() is None
    plotting.check_figure(fig)  # legible, within the column, no legend over the 0.5 line
    plt.close(fig)
