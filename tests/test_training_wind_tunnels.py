"""The wind-tunnel trainers (training.wind_tunnels): typed settings, schedules, determinism, targets, the HMM curve."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from attention_dynamics.book.nbcompare import assert_book_close
from attention_dynamics.core.settings import SCALES
from attention_dynamics.science import calibration
from attention_dynamics.tasks import bijection
from attention_dynamics.training import wind_tunnels as wt

BIJ = wt.BIJECTION_TUNNELS["fast"].replace(steps=40)
HMM = wt.HMM_TUNNELS["fast"].replace(steps=30)
N_CHECKPOINTS = 6


def test_tunnel_tables_cover_every_scale_and_paper_scale_is_paper_one():
    assert set(wt.BIJECTION_TUNNELS) == set(wt.HMM_TUNNELS) == set(SCALES)
    assert all(isinstance(s, wt.BijectionTraining) for s in wt.BIJECTION_TUNNELS.values())
    assert all(isinstance(s, wt.HMMTraining) for s in wt.HMM_TUNNELS.values())
    paper = wt.BIJECTION_TUNNELS["paper"]
    assert (paper.V, paper.L, paper.n_layers, paper.n_heads, paper.d_model) == (20, 19, 6, 6, 192)
    assert paper.target == "sampled" and paper.lr == 3e-4
    assert wt.BIJECTION_TUNNELS["book"].V == wt.BIJECTION_TUNNELS["book"].L == 10
    assert wt.HMM_TUNNELS["paper"].grid == 0.01


@pytest.mark.parametrize("changes, message", [
    ({"steps": 0}, "steps must be a positive integer"),
    ({"lr": 0.0}, "lr must be positive"),
    ({"target": "oracle"}, "target must be one of"),
    ({"V": 2.5}, "V must be an integer"),
])
def test_bijection_settings_reject_bad_values(changes, message):
    with pytest.raises(ValueError, match=message):
        BIJ.replace(**changes)


def test_hmm_settings_reject_a_test_set_without_the_training_length():
    with pytest.raises(ValueError, match="must include the training length"):
        HMM.replace(test_lengths=(12, 20))
    with pytest.raises(ValueError, match="lr must be positive"):
        HMM.replace(lr=-1.0)
    assert HMM.replace(test_lengths=[8, 30]).test_lengths == (8, 30)  # stored as a tuple


def test_trainers_refuse_the_other_tunnels_settings():
    with pytest.raises(TypeError, match="expected BijectionTraining"):
        wt.train_bijection(HMM, seed=0)
    with pytest.raises(TypeError, match="expected HMMTraining"):
        wt.train_hmm(BIJ, seed=0)


def test_checkpoint_schedule():
    at = wt.checkpoint_schedule(1000, 20)
    assert at[0] == 0 and at[-1] == 1000 and at == sorted(set(at)) and 15 <= len(at) <= 21


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
    assert_book_close(soft_grad, expected, rtol=0)


@pytest.fixture(scope="module")
def tiny_run():
    return wt.train_bijection(BIJ, seed=3, checkpoints=N_CHECKPOINTS)


def test_training_is_deterministic_and_checkpoints_do_not_change_it(tiny_run):
    again = wt.train_bijection(BIJ, seed=3)
    assert not again.checkpoints  # checkpoints=0: none kept
    np.testing.assert_array_equal(again.losses, tiny_run.losses)
    for name, tensor in tiny_run.state_dict.items():
        assert torch.equal(again.state_dict[name], tensor)
    assert sorted(tiny_run.checkpoints) == wt.checkpoint_schedule(40, N_CHECKPOINTS)
    for name, tensor in tiny_run.checkpoints[40].items():  # the last checkpoint is the final model
        assert torch.equal(tensor, tiny_run.state_dict[name])
    assert tiny_run.losses.shape == (40,) and tiny_run.losses[-5:].mean() < tiny_run.losses[:5].mean()
    assert tiny_run.task == "bijection" and tiny_run.settings == BIJ


def test_a_run_starts_from_the_untrained_model_of_its_seed(tiny_run):
    fresh = wt.untrained_model(BIJ, seed=3)
    for name, tensor in fresh.state_dict().items():
        assert torch.equal(tiny_run.checkpoints[0][name], tensor)


def test_sampled_target_trains_too():
    run = wt.train_bijection(BIJ.replace(target="sampled"), seed=3)
    assert np.isfinite(run.losses).all()


def test_eval_and_probe_batches_are_separate_streams_of_the_requested_size():
    eval_batch = wt.bijection_batch_for_eval(BIJ, seed=3, n=16)
    probe = wt.bijection_probe_batch(BIJ, seed=3, n=16)
    assert eval_batch.tokens.shape == probe.tokens.shape == (16, bijection.sequence_length(BIJ.L))
    assert not torch.equal(eval_batch.tokens, probe.tokens)
    assert torch.equal(wt.bijection_probe_batch(BIJ, seed=3, n=16).tokens, probe.tokens)
    short, long = wt.hmm_batch_for_eval(HMM, 8, seed=3, n=5), wt.hmm_batch_for_eval(HMM, 12, seed=3, n=5)
    assert short.observations.shape == (5, 8) and long.observations.shape == (5, 12)


def test_hmm_training_and_length_generalisation_evaluation():
    run = wt.train_hmm(HMM, seed=4)
    model = run.model()
    assert run.task == "hmm"
    for length in (8, 20):
        batch = wt.hmm_batch_for_eval(HMM, length, seed=4, n=16)
        log_probs = wt.hmm_log_probs(model, batch)
        assert log_probs.shape == (16, length, 5)
        assert_book_close(log_probs.exp().sum(-1), torch.ones(16, length, dtype=torch.float64))


def test_trained_bijection_transformer_rebuilds_the_chapters_model():
    wt._trained_bijection.cache_clear()
    model = wt.trained_bijection_transformer(BIJ, seed=3)
    reference = wt.train_bijection(BIJ, seed=3).model()
    x = wt.bijection_batch_for_eval(BIJ, seed=3, n=8).tokens
    assert torch.equal(model(x), reference(x))
    with pytest.raises(TypeError, match="expected BijectionTraining"):
        wt.trained_bijection_transformer("fast", seed=3)
    wt._trained_bijection.cache_clear()


@pytest.mark.slow
def test_parallel_training_equals_in_process_training():
    bij, hmm_run = wt.train_both(BIJ, HMM, seed=5)
    for run, direct in ((bij, wt.train_bijection(BIJ, seed=5)), (hmm_run, wt.train_hmm(HMM, seed=5))):
        np.testing.assert_array_equal(run.losses, direct.losses)


def test_hmm_checkpoints_and_the_kl_curve_against_the_context_blind_level():
    run = wt.train_hmm(HMM, seed=4, checkpoints=N_CHECKPOINTS)
    plain = wt.train_hmm(HMM, seed=4)
    np.testing.assert_array_equal(run.losses, plain.losses)  # keeping checkpoints changes nothing
    assert sorted(run.checkpoints) == wt.checkpoint_schedule(30, N_CHECKPOINTS) and not plain.checkpoints
    batches = {K: wt.hmm_batch_for_eval(HMM, K, seed=4, n=16) for K in (8, 20)}
    curve = wt.hmm_kl_through_training(run, batches)
    for K, b in batches.items():
        # independent computation: KL(filter ‖ model) and KL(filter ‖ current observation only), by hand
        p = b.posterior
        q = wt.hmm_log_probs(run.model(), b).exp()
        kl = (p * (p.log() - q.log())).sum(-1).mean() / math.log(2)
        assert_book_close(curve.kl_bits[K][-1], float(kl), rtol=1e-9)
        prior = torch.full((16, 5), 0.2, dtype=torch.float64)
        blind = []
        for t in range(K):
            r = prior * b.emission[torch.arange(16), :, b.observations[:, t]]
            blind.append(r / r.sum(-1, keepdim=True))
            prior = torch.einsum("bs,bst->bt", prior, b.transition)
        blind = torch.stack(blind, 1)
        expected = (p * (p.log() - blind.log())).sum(-1).mean() / math.log(2)
        assert_book_close(curve.context_blind_kl_bits[K], float(expected), rtol=1e-9)
        assert_book_close(curve.ratio(K), curve.kl_bits[K] / float(expected), rtol=1e-9)
    assert curve.kl_bits[8].shape == (len(run.checkpoints),)
    with pytest.raises(ValueError, match="checkpoints"):
        wt.hmm_kl_through_training(plain, batches)


def test_hmm_fused_adamw_follows_plain_adamw():
    # the fused optimiser kernel is a speed-up only: the same run with PyTorch's reference AdamW
    fused = wt.train_hmm(HMM.replace(fused_adamw=True), seed=6)
    plain = wt.train_hmm(HMM.replace(fused_adamw=False), seed=6)
    assert_book_close(fused.losses, plain.losses, rtol=1e-4)
    for name, value in plain.state_dict.items():
        assert_book_close(fused.state_dict[name], value, rtol=1e-3, atol=1e-4)
    model = wt.make_hmm_transformer(5, 5, d_model=16, n_layers=1, n_heads=2)
    assert wt._optimizer(model, 1e-3, fused=True).defaults["fused"] is True
    assert not wt._optimizer(model, 1e-3).defaults["fused"]


def test_tunnel_freeze_keeps_query_and_key_weights_and_trains_the_rest():
    s = wt.BIJECTION_TUNNELS["fast"].replace(steps=30)
    t = [c for c in wt.checkpoint_schedule(30, 4) if 0 < c < 30][-1]
    run = wt.train_bijection(s, seed=0, checkpoints=4, freeze_routing_at=t)
    D = s.d_model
    for name in (k for k in run.state_dict if k.endswith("attn.qkv.weight")):
        at_t, final = run.checkpoints[t][name], run.state_dict[name]
        assert torch.equal(final[: 2 * D], at_t[: 2 * D])
        assert not torch.equal(final[2 * D:], at_t[2 * D:])
        assert not torch.equal(run.checkpoints[0][name][: 2 * D], at_t[: 2 * D])
    free = wt.train_bijection(s, seed=0)
    np.testing.assert_array_equal(free.losses[:t], run.losses[:t])


# --- routing controls, the value learning-rate factor and the binding tunnel ------------------------------------

def _qk_and_v(state, n_layers):
    """Every layer's (query+key rows, value rows) of the fused qkv weight in a state dict."""
    out = []
    for layer in range(n_layers):
        w = state[f"blocks.{layer}.attn.qkv.weight"]
        D = w.shape[1]
        out.append((w[: 2 * D], w[2 * D:]))
    return out


@pytest.mark.parametrize("routing", ["frozen", "uniform"])
def test_routing_controls_keep_query_and_key_where_they_were_set(routing):
    s = wt.BINDING_TUNNELS["fast"].replace(steps=30)
    run = wt.train_binding(s, seed=0, routing=routing, checkpoints=4)
    start = wt.untrained_model(s, 0).state_dict()
    for (qk_end, v_end), (qk_start, v_start) in zip(_qk_and_v(run.state_dict, s.n_layers), _qk_and_v(start, s.n_layers)):
        assert torch.equal(qk_end, torch.zeros_like(qk_start) if routing == "uniform" else qk_start)
        assert not torch.equal(v_end, v_start)  # everything else trains
    for step, state in run.checkpoints.items():  # the kept checkpoints hold the frozen rows too
        for (qk, _), (qk0, _) in zip(_qk_and_v(state, s.n_layers), _qk_and_v(start, s.n_layers)):
            assert torch.equal(qk, torch.zeros_like(qk0) if routing == "uniform" else qk0), step


def test_uniform_routing_attends_uniformly_to_every_visible_position():
    from attention_dynamics.models.transformer import probe_activations

    s = wt.BINDING_TUNNELS["fast"].replace(steps=5)
    run = wt.train_binding(s, seed=1, routing="uniform")
    batch = wt.binding_batch_for_eval(s, seed=1, n=4)
    _, layers = probe_activations(run.model(), batch.tokens)
    T = batch.tokens.shape[1]
    expected = torch.tril(torch.ones(T, T)) / torch.arange(1, T + 1)[:, None]
    for layer in layers:
        assert torch.allclose(layer["attn_weights"], expected.expand_as(layer["attn_weights"]), atol=1e-6)  # tolerance: float32 softmax of zeros


def test_value_lr_factor_multiplies_the_value_step_and_nothing_else():
    s = wt.BINDING_TUNNELS["fast"].replace(steps=1, warmup_steps=1)
    start = wt.untrained_model(s, 2).state_dict()
    plain = wt.train_binding(s, seed=2).state_dict
    scaled = wt.train_binding(s, seed=2, value_lr_factor=10.0).state_dict
    for (qk0, v0), (qk1, v1), (qk10, v10) in zip(*(_qk_and_v(x, s.n_layers) for x in (start, plain, scaled))):
        assert torch.allclose(v10 - v0, 10.0 * (v1 - v0), atol=1e-6, rtol=1e-5)  # tolerance: float32 step arithmetic
        assert torch.equal(qk10, qk1)
    for name in start:
        if "qkv" not in name:
            assert torch.equal(plain[name], scaled[name]), name


def test_binding_tunnel_learns_and_refuses_bad_controls():
    s = wt.BINDING_TUNNELS["fast"]
    run = wt.train_binding(s, seed=0)
    assert run.task == "binding" and run.losses[-20:].mean() < run.losses[:20].mean()
    batch = wt.binding_batch_for_eval(s, seed=0, n=8)
    logp = wt.binding_log_probs(run.model(), batch)
    assert logp.shape == (8, s.L, s.V)
    assert_book_close(logp.exp().sum(-1), 1.0)
    with pytest.raises(ValueError, match="routing"):
        wt.train_binding(s, seed=0, routing="random")
    with pytest.raises(ValueError, match="learned routing only"):
        wt.train_binding(s, seed=0, routing="uniform", freeze_routing_at=3)
    with pytest.raises(ValueError, match="value_lr_factor"):
        wt.train_binding(s, seed=0, value_lr_factor=0.0)
    with pytest.raises(ValueError, match="layout"):
        s.replace(layout="triple")
