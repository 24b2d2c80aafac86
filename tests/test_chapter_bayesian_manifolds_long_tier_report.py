"""Chapter 6's long-tier section (chapters.bayesian_manifolds.long_tier_report): its claims against independent computations on runs regenerated at the fast
scale, the verdict rules (a bound missed while the curve still moves is not decided), and its figure."""

from __future__ import annotations

import contextlib
import copy
import io

import matplotlib

matplotlib.use("Agg")

import numpy as np
import pytest
import torch

from attention_dynamics.book import compute
from attention_dynamics.book.nbcompare import assert_book_close
from attention_dynamics.chapters.bayesian_manifolds import figures, long_tier, long_tier_report as report, settings
from attention_dynamics.core import plotting
from attention_dynamics.tasks import bijection, hmm
from attention_dynamics.training import wind_tunnels as wt


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("compute")
    with contextlib.redirect_stdout(io.StringIO()):
        folder = compute.compute("long_tier", "fast", root=root, processes=1, log=lambda m: None)
    return report.load_runs(folder / long_tier.DATA_FOLDER)


def _kl_bits(p: torch.Tensor, log_q: torch.Tensor) -> float:
    """KL(p ‖ q) in bits, mean over sequences and positions, written out."""
    p = p.double()
    terms = torch.where(p > 0, p * (torch.log(p) - log_q.double()), torch.zeros_like(p))
    return float(terms.sum(-1).mean() / np.log(2))


def test_bijection_claims_against_the_closed_form_and_a_direct_kl(runs):
    lr = runs["bijection_v20"]
    out = report.record_bijection_v20(lr)
    V, L = lr.settings.tunnel.V, lr.settings.tunnel.L
    blind = out.claims["bijection_v20.context_blind_entropy_mae_bits"]
    assert blind.status == "pass"
    assert_book_close(blind.value, bijection.context_blind_entropy_error_bits(V, L), rtol=0, atol=1e-9)
    batch = wt.bijection_batch_for_eval(lr.settings.tunnel, seed=0, n=lr.settings.n_eval)
    direct = _kl_bits(batch.posterior, wt.bijection_log_probs(lr.run.model(), batch))
    assert_book_close(out.claims["bijection_v20.kl_bits"].value, direct, rtol=1e-9)
    assert out.claims["bijection_v20.entropy_mae_bits"].upper == settings.BIJECTION_TARGET_BITS


def test_hmm_bounds_are_multiples_of_the_context_blind_level_computed_directly(runs):
    lr = runs["hmm_long"]
    out = report.record_hmm_long(lr)
    K_train, K_mid, K_long = lr.settings.tunnel.test_lengths
    for K, claim_id, fraction in ((K_train, "hmm_long.kl_bits", report.LONG_TRANSPORT_FRACTION),
                                  (K_mid, f"hmm_long.length_gen_kl_bits_{K_mid}", settings.TRANSPORT_FRACTION),
                                  (K_long, f"hmm_long.length_gen_kl_bits_{K_long}", settings.TRANSPORT_FRACTION)):
        b = wt.hmm_batch_for_eval(lr.settings.tunnel, K, seed=0, n=lr.settings.n_eval)
        blind = _kl_bits(b.posterior, hmm.context_blind_posterior(b.transition, b.emission, b.observations).log())
        model = _kl_bits(b.posterior, wt.hmm_log_probs(lr.run.model(), b))
        c = out.claims[claim_id]
        assert_book_close(c.upper, fraction * blind, rtol=1e-9)
        assert_book_close(c.value, model, rtol=1e-9)
        assert_book_close(out.ratio(K), model / blind, rtol=1e-9)
    assert out.claims["hmm_long.entropy_mae_bits"].upper == settings.HMM_ENTROPY_BOUND_BITS


def _with_curve(lr: long_tier.LongRun, name: str, values) -> long_tier.LongRun:
    """The run with measurement ``name`` replaced along a curve of ten saves."""
    lr = copy.deepcopy(lr)
    steps = np.linspace(0, lr.results["steps"], len(values)).round().astype(int)
    row = lr.results["curve"][-1]
    lr.results["curve"] = [{**row, "step": int(s), name: float(v)} for s, v in zip(steps, values)]
    return lr


@pytest.mark.parametrize("late, expected", [(0.5, "undecided"), (0.0, "fail")])
def test_a_missed_hmm_bound_is_a_fail_only_on_a_plateau(runs, late, expected):
    # the fast run is far above 0.3x the context-blind level: its verdict rests on the curve's last 20 %
    lr = runs["hmm_long"]
    K = lr.settings.tunnel.length
    curve = [10.0] * 8 + [10.0 + late, 10.0]
    out = report.record_hmm_long(_with_curve(lr, f"kl_ratio_K{K}", curve))
    assert out.claims["hmm_long.kl_bits"].status == expected


@pytest.mark.parametrize("late, expected", [(0.1, "undecided"), (0.0, "fail")])
def test_a_missed_bijection_target_is_a_fail_only_on_a_plateau(runs, late, expected):
    lr = runs["bijection_v20"]
    out = report.record_bijection_v20(_with_curve(lr, "entropy_mae_bits", [1.0] * 8 + [1.0 + late, 1.0]))
    assert out.claims["bijection_v20.entropy_mae_bits"].status == expected


def test_geometry_claims_put_the_nulls_beside_the_trained_value(runs):
    out = report.record_long_geometry(runs["bijection_v20"], runs["hmm_long"])
    table = out.bijection_table()
    assert list(table.columns) == ["trained", "untrained", "scrambled values"]
    c = out.claims["geometry_v20.key_abs_cos_layer0_key_tokens"]
    assert_book_close(c.value, out.bijection["trained"]["key |cos|, layer 0, key tokens"])
    assert f"untrained {out.bijection['untrained']['key |cos|, layer 0, key tokens']:.3f}" in c.description
    # the untrained column is the model at its initialisation: a different model from the trained one
    assert out.bijection["untrained"]["value PC1 share"] != out.bijection["trained"]["value PC1 share"]
    assert list(out.hmm_table().columns) == ["trained", "untrained"]
    assert set(out.late_change) == {"key |cos|, layer 0, key tokens", "attention entropy reduction, first → last layer",
                                    "value PC1 share", "ρ(value PC1, entropy)"}


def test_runs_table_and_figure(runs):
    table = report.runs_table(runs)
    assert list(table.columns) == list(long_tier.TUNNELS) and table.loc["steps", "hmm_long"] == 60
    fig = figures.plot_long_curves(runs["bijection_v20"], runs["hmm_long"])
    plotting.check_figure(fig)
    axes = fig.axes
    assert len(axes[0].lines) == 3 and len(axes[1].lines) == 3 + 3  # the model + 2 levels; 3 lengths + 3 levels
    assert axes[1].get_yscale() == "log"
    import matplotlib.pyplot as plt

    plt.close(fig)
    with pytest.raises(KeyError, match="stored no measurement"):
        report.curve(runs["hmm_long"], "nothing")
