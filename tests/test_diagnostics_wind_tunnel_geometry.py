"""The measures of a trained wind-tunnel transformer (diagnostics.wind_tunnel_geometry) on tiny runs."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attention_dynamics.book.nbcompare import assert_book_close
from attention_dynamics.core.seeding import stream
from attention_dynamics.diagnostics import wind_tunnel_geometry as wg
from attention_dynamics.science import calibration
from attention_dynamics.tasks import bijection
from attention_dynamics.training import wind_tunnels as wt

BIJ = wt.BIJECTION_TUNNELS["fast"].replace(steps=40)
HMM = wt.HMM_TUNNELS["fast"].replace(steps=30)
N_CHECKPOINTS = 6
N_PROBE = 32


@pytest.fixture(scope="module")
def tiny_run():
    return wt.train_bijection(BIJ, seed=3, checkpoints=N_CHECKPOINTS)


def test_frame_and_calibration_and_geometry_measurements(tiny_run):
    probe = wt.bijection_batch_for_eval(BIJ, seed=3, n=N_PROBE)
    fp = wg.frame_and_calibration(tiny_run, probe)
    n_ckpt = len(tiny_run.checkpoints)
    assert fp.attention_similarity.shape == (n_ckpt, BIJ.n_layers)
    assert_book_close(fp.attention_similarity[-1], 1.0)  # the final model is its own reference
    assert fp.entropy_mae_bits.shape == fp.kl_bits.shape == (n_ckpt,)
    assert fp.value_pcs.shape == (n_ckpt, N_PROBE * BIJ.L, 2)
    assert fp.frame_settle_step in fp.steps and fp.calibration_settle_step in fp.steps
    # the checkpoint metrics agree with a direct evaluation of the final model
    rep = calibration.calibration_report(probe.posterior, wt.bijection_log_probs(tiny_run.model(), probe))
    assert_book_close(fp.entropy_mae_bits[-1], rep.entropy_mae_bits, rtol=1e-6)
    geo = wg.bijection_geometry(tiny_run.model(), probe)
    assert geo.key_abs_cos.shape == geo.attention_entropy_bits.shape == (BIJ.n_layers,)
    assert 0 <= geo.value_pc1_entropy_spearman <= 1 and geo.value_ratios[0] >= geo.value_ratios[1]
    T = bijection.sequence_length(BIJ.L)
    assert geo.key_cosines.shape == (T, T) and list(geo.key_token_types[:3]) == ["key", "value", "key"]
    assert_book_close(np.diag(geo.key_cosines), 1.0)
    assert {row["representation"] for row in geo.manifold_table} >= {"values v_j", "attention output g_i"}
    last_output = [r for r in geo.manifold_table if r["representation"] == "attention output g_i"][-1]
    assert_book_close(last_output["spearman"], geo.value_pc1_entropy_spearman)
    assert_book_close(last_output["pc1_ratio"], geo.value_ratios[0])
    # the value manifold of the final checkpoint is the geometry report's, up to the sign of PC2
    assert_book_close(fp.value_pcs[-1][:, 0], geo.value_scores[:, 0], rtol=1e-7, atol=1e-8)
    # (ranks of near-equal scores may swap under rounding, hence the loose tolerance)
    assert_book_close(fp.value_pc1_spearman[-1], geo.value_pc1_entropy_spearman, rtol=0, atol=1e-3)
    assert (geo.attention_entropy_bits <= geo.attention_entropy_uniform_bits + 1e-9).all()  # ≤ log2(visible)


def test_frame_and_calibration_needs_checkpoints():
    run = wt.train_bijection(BIJ.replace(steps=5), seed=3)
    with pytest.raises(ValueError, match="checkpoints"):
        wg.frame_and_calibration(run, wt.bijection_probe_batch(BIJ, seed=3, n=4))


def test_hmm_manifold():
    run = wt.train_hmm(HMM, seed=4)
    batch = wt.hmm_batch_for_eval(HMM, 8, seed=4, n=16)
    manifold = wg.hmm_manifold(run.model(), batch)
    assert manifold.scores.shape == (16 * 8, 2) and 0 <= manifold.spearman <= 1
    assert -1 <= manifold.within_position_spearman <= 1
    last_output = [r for r in manifold.manifold_table if r["representation"] == "attention output g_i"][-1]
    assert_book_close(last_output["spearman"], manifold.spearman)
    assert_book_close(last_output["pc1_ratio"], manifold.ratios[0])


def test_geometry_nulls_untrained_is_the_initialisation_and_control_keeps_positions(tiny_run):
    probe = wt.bijection_probe_batch(BIJ, seed=3, n=N_PROBE)
    scrambled = wg.bijection_scrambled_probe(BIJ, seed=3, n=N_PROBE)
    V = BIJ.V
    # the control keeps the keys and the token types, and its values are no longer a bijection's
    assert torch.equal(scrambled.tokens[:, 0::2], probe.tokens[:, 0::2])
    assert ((scrambled.tokens[:, 1::2] >= V) & (scrambled.tokens[:, 1::2] < 2 * V)).all()
    repeats = [len(set(row.tolist())) < len(row) for row in scrambled.tokens[:, 1::2]]
    assert any(repeats)
    nulls = wg.bijection_geometry_nulls(tiny_run, probe, scrambled)
    assert set(nulls) == {"trained", "untrained", "scrambled values"}
    # the untrained column is a freshly initialised model of the same size and seed, measured independently
    torch.manual_seed(stream(3, "init"))
    fresh = wt.make_bijection_transformer(V, BIJ.L, d_model=BIJ.d_model, n_layers=BIJ.n_layers,
                                          n_heads=BIJ.n_heads).eval()
    geo = wg.bijection_geometry(fresh, probe)
    assert_book_close(nulls["untrained"]["key |cos|, layer 0, all positions"], geo.key_abs_cos[0], rtol=1e-9)
    assert_book_close(nulls["untrained"]["key |cos|, layer 0, key tokens"], geo.key_abs_cos_key_tokens[0], rtol=1e-9)
    reduction = 1 - geo.attention_entropy_bits[-1] / geo.attention_entropy_bits[0]
    assert_book_close(nulls["untrained"]["attention entropy reduction, first → last layer"], reduction, rtol=1e-9)
    # the trained column is the final model's; the curve through training ends on it and starts untrained
    curve = wg.bijection_geometry_through_training(tiny_run, probe)
    np.testing.assert_array_equal(curve["step"], sorted(tiny_run.checkpoints))
    for name, value in nulls["trained"].items():
        assert_book_close(curve[name][-1], value, rtol=1e-9)
        assert_book_close(curve[name][0], nulls["untrained"][name], rtol=1e-9)
    assert nulls["scrambled values"]["value PC1 share"] != nulls["trained"]["value PC1 share"]


def test_geometry_summary_names_every_layer(tiny_run):
    geo = wg.bijection_geometry(tiny_run.model(), wt.bijection_probe_batch(BIJ, seed=3, n=8), table=False)
    summary = wg.geometry_summary(geo)
    assert [k for k in summary if k.startswith("attention entropy, layer")] == [
        f"attention entropy, layer {l} (bits)" for l in range(BIJ.n_layers)]
    assert_book_close(summary["value PC1 share"], float(geo.value_ratios[0]))
