"""Chapter 6's experiment module: schedules, determinism, and the measurements on a tiny run."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from attention_dynamics import calibration
from attention_dynamics.experiments import wind_tunnel
from attention_dynamics.tasks import bijection

TINY = {**wind_tunnel.SETTINGS["fast"], "bij_steps": 40, "hmm_steps": 30, "n_checkpoints": 6, "n_eval": 64, "n_probe": 32}


def test_settings_tables_share_their_keys_and_paper_scale_is_paper_one():
    keys = set(wind_tunnel.SETTINGS["book"])
    assert all(set(s) == keys for s in wind_tunnel.SETTINGS.values())
    paper = wind_tunnel.SETTINGS["paper"]
    assert (paper["V"], paper["L"], paper["bij_n_layers"], paper["bij_n_heads"], paper["bij_d_model"]) == (20, 19, 6, 6, 192)
    assert paper["bijection_target"] == "sampled" and paper["bij_lr"] == 3e-4
    assert wind_tunnel.SETTINGS["book"]["V"] == wind_tunnel.SETTINGS["book"]["L"] == 10


def test_checkpoint_schedule_and_warmup_cosine():
    at = wind_tunnel.checkpoint_schedule(1000, 20)
    assert at[0] == 0 and at[-1] == 1000 and at == sorted(set(at)) and 15 <= len(at) <= 21
    opt = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=1.0)
    sched = wind_tunnel.warmup_cosine(opt, 100, 10)
    lrs = []
    for _ in range(100):
        lrs.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    assert lrs[0] == pytest.approx(0.1) and lrs[9] == pytest.approx(0.5 * (1 + math.cos(math.pi * 9 / 100)))
    assert lrs[50] == pytest.approx(0.5) and lrs[-1] == pytest.approx(0.5 * (1 + math.cos(math.pi * 0.99)))


def test_posterior_target_has_the_sampled_targets_expected_gradient():
    """Cross-entropy is linear in the target: Σ_y p(y) ∇CE(z, y) = ∇CE(z, p) for every context."""
    batch = bijection.sample_bijection_batch(4, 5, 5, generator=torch.Generator().manual_seed(0))
    logits = torch.randn(4, 5, 5, dtype=torch.float64, requires_grad=True)
    (soft_grad,) = torch.autograd.grad(calibration.soft_cross_entropy_nats(logits, batch.posterior), logits)
    expected = torch.zeros_like(logits)
    for y in range(5):  # enumerate every possible sampled value, weighted by its posterior probability
        target = torch.full((4, 5), y)
        per_position = F.cross_entropy(logits.reshape(-1, 5), target.reshape(-1), reduction="none").reshape(4, 5)
        (g,) = torch.autograd.grad((batch.posterior[..., y] * per_position).mean(), logits)
        expected += g
    torch.testing.assert_close(soft_grad, expected, rtol=0, atol=1e-14)


@pytest.fixture(scope="module")
def tiny_run():
    return wind_tunnel.train_bijection(TINY, seed=3)


def test_training_is_deterministic_and_checkpoints_do_not_change_it(tiny_run):
    again = wind_tunnel.train_bijection(TINY, seed=3, checkpoints=False)
    np.testing.assert_array_equal(again.losses, tiny_run.losses)
    for name, tensor in tiny_run.state_dict.items():
        torch.testing.assert_close(again.state_dict[name], tensor, rtol=0, atol=0)
    assert sorted(tiny_run.checkpoints) == wind_tunnel.checkpoint_schedule(40, 6)
    for name, tensor in tiny_run.checkpoints[40].items():  # the last checkpoint is the final model
        torch.testing.assert_close(tensor, tiny_run.state_dict[name], rtol=0, atol=0)
    assert tiny_run.losses.shape == (40,) and tiny_run.losses[-5:].mean() < tiny_run.losses[:5].mean()


def test_sampled_target_trains_too():
    run = wind_tunnel.train_bijection({**TINY, "bijection_target": "sampled"}, seed=3, checkpoints=False)
    assert np.isfinite(run.losses).all()
    with pytest.raises(ValueError, match="bijection_target"):
        wind_tunnel.train_bijection({**TINY, "bijection_target": "oracle"}, seed=3)


def test_frame_precision_and_geometry_measurements(tiny_run):
    probe = wind_tunnel.bijection_batch_for_eval(TINY, seed=3, n=32)
    fp = wind_tunnel.frame_precision(tiny_run, probe)
    n_ckpt = len(tiny_run.checkpoints)
    assert fp.attention_similarity.shape == (n_ckpt, TINY["bij_n_layers"])
    np.testing.assert_allclose(fp.attention_similarity[-1], 1.0)  # the final model is its own reference
    assert fp.entropy_mae_bits.shape == fp.kl_bits.shape == (n_ckpt,)
    assert fp.value_pcs.shape == (n_ckpt, 32 * TINY["L"], 2)
    assert fp.frame_settle_step in fp.steps and fp.calibration_settle_step in fp.steps
    # the checkpoint metrics agree with a direct evaluation of the final model
    rep = calibration.calibration_report(probe.posterior, wind_tunnel.bijection_log_probs(tiny_run.model(), probe))
    assert fp.entropy_mae_bits[-1] == pytest.approx(rep.entropy_mae_bits, rel=1e-6)
    geo = wind_tunnel.bijection_geometry(tiny_run.model(), probe)
    assert geo.key_abs_cos.shape == geo.attention_entropy_bits.shape == (TINY["bij_n_layers"],)
    assert 0 <= geo.value_pc1_entropy_spearman <= 1 and geo.value_ratios[0] >= geo.value_ratios[1]
    T = bijection.sequence_length(TINY["L"])
    assert geo.key_cosines.shape == (T, T) and list(geo.key_token_types[:3]) == ["key", "value", "key"]
    np.testing.assert_allclose(np.diag(geo.key_cosines), 1.0)
    assert {row["representation"] for row in geo.manifold_table} >= {"values v_j", "attention output g_i"}
    last_output = [r for r in geo.manifold_table if r["representation"] == "attention output g_i"][-1]
    assert last_output["spearman"] == pytest.approx(geo.value_pc1_entropy_spearman)
    assert last_output["pc1_ratio"] == pytest.approx(geo.value_ratios[0])
    # the value manifold of the final checkpoint is the geometry report's, up to the sign of PC2
    np.testing.assert_allclose(fp.value_pcs[-1][:, 0], geo.value_scores[:, 0], atol=1e-8)
    # (ranks of near-equal scores may swap under rounding, hence the loose tolerance)
    assert fp.value_pc1_spearman[-1] == pytest.approx(geo.value_pc1_entropy_spearman, abs=1e-3)
    assert (geo.attention_entropy_bits <= geo.attention_entropy_uniform_bits + 1e-9).all()  # ≤ log2(visible)


def test_hmm_training_and_length_generalisation_evaluation():
    run = wind_tunnel.train_hmm(TINY, seed=4)
    model = run.model()
    batch = wind_tunnel.hmm_batch_for_eval(TINY, 8, seed=4, n=16)
    manifold = wind_tunnel.hmm_manifold(model, batch)
    assert manifold.scores.shape == (16 * 8, 2) and 0 <= manifold.spearman <= 1
    assert -1 <= manifold.within_position_spearman <= 1
    last_output = [r for r in manifold.manifold_table if r["representation"] == "attention output g_i"][-1]
    assert last_output["spearman"] == pytest.approx(manifold.spearman)
    assert last_output["pc1_ratio"] == pytest.approx(manifold.ratios[0])
    for length in (8, 20):
        batch = wind_tunnel.hmm_batch_for_eval(TINY, length, seed=4, n=16)
        log_probs = wind_tunnel.hmm_log_probs(model, batch)
        assert log_probs.shape == (16, length, 5)
        torch.testing.assert_close(log_probs.exp().sum(-1), torch.ones(16, length, dtype=torch.float64))


def test_trained_bijection_transformer_rebuilds_the_chapters_model(monkeypatch):
    monkeypatch.setitem(wind_tunnel.SETTINGS, "fast", TINY)
    wind_tunnel._trained_bijection.cache_clear()
    model = wind_tunnel.trained_bijection_transformer("fast", seed=3)
    reference = wind_tunnel.train_bijection(TINY, seed=3, checkpoints=False).model()
    x = wind_tunnel.bijection_batch_for_eval(TINY, seed=3, n=8).tokens
    torch.testing.assert_close(model(x), reference(x), rtol=0, atol=0)
    wind_tunnel._trained_bijection.cache_clear()


@pytest.mark.slow
def test_parallel_training_equals_in_process_training():
    bij, hmm_run = wind_tunnel.train_both(TINY, seed=5)
    for run, direct in ((bij, wind_tunnel.train_bijection(TINY, seed=5)), (hmm_run, wind_tunnel.train_hmm(TINY, seed=5))):
        np.testing.assert_array_equal(run.losses, direct.losses)


def test_geometry_nulls_untrained_is_the_initialisation_and_control_keeps_positions(tiny_run):
    probe = wind_tunnel.bijection_probe_batch(TINY, seed=3)
    scrambled = wind_tunnel.bijection_scrambled_probe(TINY, seed=3)
    V = TINY["V"]
    # the control keeps the keys and the token types, and its values are no longer a bijection's
    torch.testing.assert_close(scrambled.tokens[:, 0::2], probe.tokens[:, 0::2], rtol=0, atol=0)
    assert ((scrambled.tokens[:, 1::2] >= V) & (scrambled.tokens[:, 1::2] < 2 * V)).all()
    repeats = [len(set(row.tolist())) < len(row) for row in scrambled.tokens[:, 1::2]]
    assert any(repeats)
    nulls = wind_tunnel.bijection_geometry_nulls(tiny_run, probe, scrambled)
    assert set(nulls) == {"trained", "untrained", "scrambled values"}
    # the untrained column is a freshly initialised model of the same size and seed, measured independently
    torch.manual_seed(3)
    fresh = wind_tunnel.make_bijection_transformer(V, TINY["L"], d_model=TINY["bij_d_model"],
                                                   n_layers=TINY["bij_n_layers"], n_heads=TINY["bij_n_heads"]).eval()
    geo = wind_tunnel.bijection_geometry(fresh, probe)
    assert nulls["untrained"]["key |cos|, layer 0, all positions"] == pytest.approx(geo.key_abs_cos[0], rel=1e-9)
    assert nulls["untrained"]["key |cos|, layer 0, key tokens"] == pytest.approx(geo.key_abs_cos_key_tokens[0], rel=1e-9)
    reduction = 1 - geo.attention_entropy_bits[-1] / geo.attention_entropy_bits[0]
    assert nulls["untrained"]["attention entropy reduction, first → last layer"] == pytest.approx(reduction, rel=1e-9)
    # the trained column is the final model's; the curve through training ends on it and starts untrained
    curve = wind_tunnel.bijection_geometry_through_training(tiny_run, probe)
    np.testing.assert_array_equal(curve["step"], sorted(tiny_run.checkpoints))
    for name, value in nulls["trained"].items():
        assert curve[name][-1] == pytest.approx(value, rel=1e-9, abs=1e-12)
        assert curve[name][0] == pytest.approx(nulls["untrained"][name], rel=1e-9, abs=1e-12)
    assert nulls["scrambled values"]["value PC1 share"] != nulls["trained"]["value PC1 share"]


def test_hmm_checkpoints_and_the_kl_curve_against_the_context_blind_level():
    run = wind_tunnel.train_hmm(TINY, seed=4)
    plain = wind_tunnel.train_hmm(TINY, seed=4, checkpoints=False)
    np.testing.assert_array_equal(run.losses, plain.losses)  # keeping checkpoints changes nothing
    assert sorted(run.checkpoints) == wind_tunnel.checkpoint_schedule(30, 6) and not plain.checkpoints
    batches = {K: wind_tunnel.hmm_batch_for_eval(TINY, K, seed=4, n=16) for K in (8, 20)}
    curve = wind_tunnel.hmm_kl_through_training(run, batches)
    for K, b in batches.items():
        # independent computation: KL(filter ‖ model) and KL(filter ‖ current observation only), by hand
        p = b.posterior
        q = wind_tunnel.hmm_log_probs(run.model(), b).exp()
        kl = (p * (p.log() - q.log())).sum(-1).mean() / math.log(2)
        assert curve.kl_bits[K][-1] == pytest.approx(float(kl), rel=1e-9)
        prior = torch.full((16, 5), 0.2, dtype=torch.float64)
        blind = []
        for t in range(K):
            r = prior * b.emission[torch.arange(16), :, b.observations[:, t]]
            blind.append(r / r.sum(-1, keepdim=True))
            prior = torch.einsum("bs,bst->bt", prior, b.transition)
        blind = torch.stack(blind, 1)
        expected = (p * (p.log() - blind.log())).sum(-1).mean() / math.log(2)
        assert curve.context_blind_kl_bits[K] == pytest.approx(float(expected), rel=1e-9)
        np.testing.assert_allclose(curve.ratio(K), curve.kl_bits[K] / float(expected), rtol=1e-9)
    assert curve.kl_bits[8].shape == (len(run.checkpoints),)
    with pytest.raises(ValueError, match="checkpoints"):
        wind_tunnel.hmm_kl_through_training(plain, batches)


def test_hmm_fused_adamw_follows_plain_adamw():
    # the fused optimiser kernel is a speed-up only: the same run with PyTorch's reference AdamW
    fused = wind_tunnel.train_hmm({**TINY, "hmm_fused_adamw": True}, seed=6, checkpoints=False)
    plain = wind_tunnel.train_hmm({**TINY, "hmm_fused_adamw": False}, seed=6, checkpoints=False)
    np.testing.assert_allclose(fused.losses, plain.losses, rtol=1e-4)
    for name, value in plain.state_dict.items():
        torch.testing.assert_close(fused.state_dict[name], value, rtol=1e-3, atol=1e-4)
    model = wind_tunnel.make_hmm_transformer(5, 5, d_model=16, n_layers=1, n_heads=2)
    assert wind_tunnel._optimizer(model, 1e-3, fused=True).defaults["fused"] is True
    assert not wind_tunnel._optimizer(model, 1e-3).defaults["fused"]
