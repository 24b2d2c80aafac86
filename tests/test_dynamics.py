"""The paper's first-order predictions, the E/M-step measures and the settling times (the paper's §3, results 4–5)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from attention_dynamics.book.nbcompare import ROUNDOFF_FLOOR, assert_book_close
from attention_dynamics.chapters.routing_content_feedback import runs as routing_runs
from attention_dynamics.chapters.two_timescale_em import runs as two_timescale_runs
from attention_dynamics.science import dynamics, gradients as G, recall_head as rh, settling
from attention_dynamics.science.attention import init_single_head
from attention_dynamics.tasks import specialization as sp
from attention_dynamics.training import recall_head

SIZES = dict(n_sources=3, n_queries=4, n_tags=5, n_labels=6)


@pytest.fixture(autouse=True)
def _one_thread():
    """Tiny tensors: extra threads only add overhead (conftest restores the thread count)."""
    torch.set_num_threads(1)


def _setup(seed=0, std=0.6, n=12, smoothing=0.0):
    g = torch.Generator().manual_seed(seed)
    batch = sp.sample_specialization_batch(n, generator=g, dtype=torch.float64, target_smoothing=smoothing, **SIZES)
    params = init_single_head(batch.x.shape[-1], 4, 5, batch.n_labels, std=std, generator=g, dtype=torch.float64)
    return params, batch


def _loss_gradient_wrt_values(params, batch):
    """∂L/∂v for every value vector of the batch, by autograd (independent of the value law)."""
    fwd = rh.query_forward(params, batch)
    v = fwd.v.detach().requires_grad_(True)
    loss = rh.query_cross_entropy(((fwd.alpha.detach() @ v) @ params.W_O)[:, batch.n_sources:], batch)
    (grad,) = torch.autograd.grad(loss, v)
    return grad


# --- First-order prediction 1: the loss change of a value-only step ----------------------------


@pytest.mark.parametrize("seed,smoothing", [(0, 0.0), (1, 0.0), (2, 0.25)])
def test_value_step_loss_change_tends_to_the_first_order_prediction(seed, smoothing):
    params, batch = _setup(seed, smoothing=smoothing)
    etas = np.logspace(-3, 1, 9)
    actual, predicted = dynamics.value_step_loss_change(params, batch, etas)
    # The prediction is −eta ||∂L/∂v||², with the gradient from autograd.
    grad = _loss_gradient_wrt_values(params, batch)
    assert_book_close(predicted, -etas * float((grad ** 2).sum()), rtol=1e-12)
    ratio = actual / predicted
    # Convexity in the values and the Hessian bound: 0 ≤ 1 − ratio ≤ eta λ / 2.
    lam = dynamics.value_step_curvature_bound(params, batch)
    deviation = 1 - ratio
    assert np.all(deviation >= -1e-7)
    assert np.all(deviation <= etas * lam / 2 + 1e-7)
    # And the deviation is first order in eta: halving eta halves it (within 5%) at small eta.
    small = dynamics.value_step_ratio_curve(params, batch, [1e-2, 5e-3])
    assert_book_close((1 - small[1]) / (1 - small[0]), 0.5, rtol=0.05)


def test_a_wrong_value_law_would_fail_the_check():
    """Stepping along twice the law's direction gives a ratio near 2, not 1: the check can fail."""
    params, batch = _setup(3)
    fwd = rh.query_forward(params, batch)
    law = fwd.alpha.transpose(-1, -2) @ fwd.u  # Σ_i alpha_ij u_i, (B, T, d_v)
    eta = 1e-3
    stepped = rh.query_cross_entropy(((fwd.alpha @ (fwd.v - eta * 2.0 * law)) @ params.W_O)[:, batch.n_sources:], batch)
    ratio = (float(stepped) - float(fwd.loss)) / (-eta * float((law ** 2).sum()))
    assert_book_close(ratio, 2.0, rtol=1e-2)


# --- First-order prediction 2: the change of the compatibilities -------------------------------


def test_compatibility_change_decomposes_exactly():
    params, batch = _setup(4)
    change = dynamics.compatibility_change_after_value_step(params, batch, eta=0.5)
    # With the error signal held fixed the prediction is exact: b changes by u_i·Δv_j.
    assert change.frozen_error_signal_residual < 1e-10
    # And the full change is recomputed from scratch independently here.
    fwd = rh.query_forward(params, batch)
    grad = _loss_gradient_wrt_values(params, batch)
    v_new = fwd.v - 0.5 * grad
    g_new = (fwd.alpha @ v_new).requires_grad_(True)
    loss = rh.query_cross_entropy((g_new @ params.W_O)[:, batch.n_sources:], batch)
    (u_new,) = torch.autograd.grad(loss, g_new)
    b_new = u_new @ v_new.transpose(-1, -2)
    K = batch.n_sources
    assert_book_close(change.actual, (b_new - fwd.b)[:, K:], rtol=0)
    assert change.mask.shape == (batch.n_queries, K + batch.n_queries)
    assert change.mask[0, K] and not change.mask[0, K + 1]


def test_compatibility_prediction_error_is_the_linear_response_of_the_error_signal():
    """As eta → 0 the relative error tends to that of the linearised u-response (a first-order term)."""
    params, batch = _setup(5, std=1.0)
    fwd = rh.query_forward(params, batch)
    K = batch.n_sources
    grad = _loss_gradient_wrt_values(params, batch)

    def u_of_values(v):
        p = torch.softmax(((fwd.alpha @ v) @ params.W_O)[:, K:], -1)  # (B, Q, C)
        return F.pad(rh.query_output_error(p, batch) @ params.W_O.transpose(0, 1), (0, 0, K, 0))  # (B, T, d_v)

    # Directional derivative of u along −∂L/∂v, by forward-mode autodiff.
    _, du = torch.autograd.functional.jvp(u_of_values, fwd.v, -grad)
    predicted_per_eta = -(fwd.u @ fwd.u.transpose(-1, -2) @ fwd.alpha)
    linear_actual = predicted_per_eta + du @ fwd.v.transpose(-1, -2)
    mask = torch.ones(K + batch.n_queries, K + batch.n_queries, dtype=torch.bool).tril()[K:].expand(len(batch), -1, -1)
    linear_rel = float((linear_actual - predicted_per_eta)[:, K:][mask].norm() / linear_actual[:, K:][mask].norm())
    errs = [dynamics.compatibility_change_after_value_step(params, batch, eta).relative_error for eta in (1e-2, 1e-4)]
    assert_book_close(errs[1], linear_rel, rtol=1e-3)
    assert abs(errs[0] - linear_rel) > abs(errs[1] - linear_rel)  # converges as eta shrinks
    assert linear_rel > 1e-3  # the neglected term is genuinely first order here, not a rounding error


# --- E-step / M-step quality -------------------------------------------------------------------


def _perfect_and_uniform_alpha(batch):
    T = batch.x.shape[1]
    K = batch.n_sources
    perfect = torch.zeros(len(batch), T, T, dtype=batch.x.dtype)
    perfect[:, :K] = torch.eye(T, dtype=batch.x.dtype)[:K]
    perfect[:, K:] = batch.responsibility
    uniform = torch.ones(T, T, dtype=batch.x.dtype).tril()
    uniform = (uniform / uniform.sum(-1, keepdim=True)).expand(len(batch), T, T)
    return perfect, uniform


def test_e_step_measures_on_perfect_and_uniform_routing():
    _, batch = _setup(6, n=40)
    perfect, uniform = _perfect_and_uniform_alpha(batch)
    K, Q = batch.n_sources, batch.n_queries
    assert_book_close(dynamics.attention_on_correct_source(perfect, batch), 1.0)
    expected_uniform = float(np.mean([1.0 / (K + m + 1) for m in range(Q)]))
    assert_book_close(dynamics.attention_on_correct_source(uniform, batch), expected_uniform)
    assert_book_close(dynamics.attention_on_sources(uniform, batch),
                      float(np.mean([K / (K + m + 1) for m in range(Q)])))
    assert_book_close(dynamics.responsibility_purity(perfect, batch), 1.0)
    S = dynamics.specialization_matrix(perfect, batch)
    seen = ~np.isnan(S)
    assert_book_close(S[seen], np.eye(batch.n_tags)[seen])
    # Uniform routing: every visible source gets the same share, so purity is the share of asked queries.
    S_u = dynamics.specialization_matrix(uniform, batch)
    assert np.nanstd(np.where(np.eye(batch.n_tags, dtype=bool), np.nan, S_u)) < np.nanmean(S_u)
    assert dynamics.responsibility_purity(uniform, batch) < 0.8


def test_ideal_prototype_is_the_steepest_ascent_direction_of_the_label_log_likelihood():
    g = torch.Generator().manual_seed(7)
    W_O = torch.randn(5, 6, generator=g, dtype=torch.float64)
    protos = dynamics.ideal_prototypes(W_O)
    for y in range(6):
        v = torch.zeros(5, dtype=torch.float64, requires_grad=True)  # uniform prediction
        (grad,) = torch.autograd.grad(torch.log_softmax(v @ W_O, -1)[y], v)
        assert_book_close(protos[y], grad)


def test_m_step_measures():
    params, batch = _setup(8)
    fwd = rh.query_forward(params, batch)
    K = batch.n_sources
    logits = fwd.v[:, :K] @ params.W_O
    expected = float(F.cross_entropy(logits.reshape(-1, batch.n_labels), batch.source_labels.reshape(-1)))
    assert_book_close(dynamics.value_precision_nats(fwd.v, params.W_O, batch), expected)
    # Values equal to their ideal prototypes are perfectly aligned.
    ideal = fwd.v.clone()
    ideal[:, :K] = 3.0 * dynamics.ideal_prototypes(params.W_O)[batch.source_labels]
    assert_book_close(dynamics.value_prototype_alignment(ideal, params.W_O, batch), 1.0)
    assert_book_close(dynamics.value_prototype_alignment(-ideal, params.W_O, batch), -1.0)


# --- Settling times -----------------------------------------------------------------------------


def test_quiescence_step_on_a_known_decay():
    steps = np.arange(0, 1000, 10)
    change = np.exp(-steps / 100.0)  # below 0.01 from step 100 ln 100 ≈ 460.5 on
    step, settled = settling.quiescence_step(steps, change, 0.01)
    assert settled and step == 470
    # A late bump above the threshold resets the clock.
    bumped = change.copy()
    bumped[70] = 0.02
    assert settling.quiescence_step(steps, bumped, 0.01) == (710, True)
    # Never settled: censored at the end.
    assert settling.quiescence_step(steps, np.ones_like(change), 0.01) == (1000, False)
    assert settling.quiescence_step(steps, np.zeros_like(change), 0.01) == (0, True)
    with pytest.raises(ValueError):
        settling.quiescence_step(steps, change[:-1], 0.01)


def test_settling_step_by_distance_to_final():
    steps = np.arange(0, 101)
    distance = np.linspace(1.0, 0.0, 101)  # within 10% of the start from step 90 on
    assert settling.settle_step(steps, distance, fraction=0.1) == 90
    with pytest.raises(ValueError):
        settling.settle_step(steps, distance, fraction=1.5)


def test_frame_precision_summary_counts_orders_and_ratios():
    def fake(frame_at, value_at):
        steps = np.arange(0, 1000, 20)
        return recall_head.SpecializationRun(
            settings={}, steps=steps, train_loss=np.zeros(3), probe_loss=np.zeros(len(steps)),
            correct_mass=np.zeros(len(steps)), source_mass=np.zeros(len(steps)), alignment=np.zeros(len(steps)),
            precision_nats=np.zeros(len(steps)), purity=np.zeros(len(steps)),
            frame_change=np.where(steps < frame_at, 1.0, 0.0), value_change=np.where(steps < value_at, 1.0, 0.0),
            frame_distance=np.zeros(len(steps)), value_distance=np.zeros(len(steps)),
            attention_snapshots=np.zeros(1), label_prototypes=np.zeros(1), specialization=np.zeros(1))

    summary = two_timescale_runs.rate_settling_summary([fake(200, 400), fake(300, 300), fake(500, 250)], threshold=0.5)
    np.testing.assert_array_equal(summary["frame_steps"], [200, 300, 500])
    np.testing.assert_array_equal(summary["value_steps"], [400, 300, 260])
    assert_book_close(summary["frame_first_fraction"], 1 / 3)
    assert_book_close(summary["median_time_ratio"], 1.0)
    assert summary["unsettled"] == 0


# --- Training -----------------------------------------------------------------------------------


@pytest.mark.slow
def test_training_learns_to_route_and_is_reproducible():
    kw = dict(steps=400, lr=1.0, n_train=128, n_probe=64, record_every=20, settle_window=100)
    run = recall_head.train_specialization_head(0, **kw)
    again = recall_head.train_specialization_head(0, **kw)
    np.testing.assert_array_equal(run.train_loss, again.train_loss)
    assert run.steps[0] == 0 and run.steps[-1] == 400 and len(run.steps) == 21
    assert run.probe_loss[-1] < 0.5 * run.probe_loss[0]
    assert run.correct_mass[-1] > 2 * run.correct_mass[0]
    assert run.purity[-1] > run.purity[0]
    assert len(run.frame_change) == len(run.steps) - 5
    assert run.attention_snapshots.shape[1:] == (2, 8, 8)
    head = run.head_at(-1)
    assert head.W_V.shape == (24, 8)
    assert math.isfinite(dynamics.value_step_curvature_bound(head, sp.sample_specialization_batch(4)
                                                             .to(torch.float64)))


def test_frozen_matrices_do_not_move():
    run = recall_head.train_specialization_head(1, steps=40, lr=1.0, n_train=32, n_probe=16, record_every=20,
                                             settle_window=20, frozen=("W_Q", "W_K"))
    for name in ("W_Q", "W_K"):
        np.testing.assert_array_equal(run.param_history[name][0], run.param_history[name][-1])
    assert not np.array_equal(run.param_history["W_V"][0], run.param_history["W_V"][-1])
    with pytest.raises(ValueError, match="unknown matrices"):
        recall_head.train_specialization_head(1, steps=40, record_every=20, settle_window=20, frozen=("W_X",))
    with pytest.raises(ValueError, match="multiples"):
        recall_head.train_specialization_head(1, steps=45, record_every=20)


# --- Helpers the chapters use ------------------------------------------------------------------


def test_correct_source_advantage_matches_autograd_routing_gradient():
    """The advantage is −(∂L/∂s_ij)/alpha_ij (routing law); the scores' gradient comes from autograd here."""
    params, batch = _setup(9)
    fwd = rh.query_forward(params, batch)
    scores = fwd.scores.detach().requires_grad_(True)
    logits = (torch.softmax(scores, -1) @ fwd.v.detach()) @ params.W_O
    (d_scores,) = torch.autograd.grad(rh.query_cross_entropy(logits[:, batch.n_sources:], batch), scores)
    K = batch.n_sources
    at_source = (-d_scores[:, K:] / fwd.alpha[:, K:]).gather(2, batch.correct_source.unsqueeze(-1))
    expected = float(at_source.mean()) * batch.targets.numel()
    assert_book_close(dynamics.correct_source_advantage(params, batch), expected, rtol=1e-10)


def test_milestone_indices():
    curve = np.array([0.0, 0.1, 0.3, 0.6, 0.9, 1.0])
    assert routing_runs.milestone_indices(curve, [0.25, 0.5, 0.75]) == [2, 3, 4]
    assert routing_runs.milestone_indices(-curve, [0.5]) == [3]  # a falling curve: progress toward its end
    assert routing_runs.milestone_indices(np.ones(4), [0.5]) == [0]


def test_prototype_trajectories_preserve_the_final_geometry():
    steps = np.arange(3)
    g = np.random.default_rng(0)
    protos = g.normal(size=(3, 4, 3))  # (n_ckpt, C, d_v)
    run = recall_head.SpecializationRun(
        settings={}, steps=steps, train_loss=np.zeros(3), probe_loss=np.zeros(3), correct_mass=np.zeros(3),
        source_mass=np.zeros(3), alignment=np.zeros(3), precision_nats=np.zeros(3), purity=np.zeros(3),
        frame_change=np.zeros(2), value_change=np.zeros(2), frame_distance=np.zeros(3), value_distance=np.zeros(3),
        attention_snapshots=np.zeros(1), label_prototypes=protos, specialization=np.zeros(1))
    coords, explained = routing_runs.prototype_trajectories(run, n_components=3)
    assert coords.shape == (3, 4, 3)
    assert_book_close(explained.sum(), 1.0)
    # With as many axes as dimensions the projection is a rigid motion: distances are kept.
    d_before = np.linalg.norm(protos[:, :, None] - protos[:, None], axis=-1)
    d_after = np.linalg.norm(coords[:, :, None] - coords[:, None], axis=-1)
    assert_book_close(d_after, d_before, rtol=1e-10)


# --- The rich-get-richer threshold (the advantage's change under a value step) ----------------


@pytest.mark.parametrize("seed,smoothing", [(3, 0.0), (4, 0.2)])
def test_advantage_change_rate_equals_forward_mode_autograd(seed, smoothing):
    """The closed form (self + cross + response terms) equals d/deta of the advantage through a real step."""
    params, batch = _setup(seed, smoothing=smoothing)
    closed = dynamics.advantage_change_rate(params, batch)
    exact = dynamics.advantage_change_autograd(params, batch)
    scale = float(exact.abs().max())
    assert scale > 0
    assert_book_close(closed.total, exact, rtol=0, atol=max(1e-12 * scale, ROUNDOFF_FLOOR))
    # leaving out the error signal's response (the u-fixed picture) is visibly wrong
    assert float((closed.total - closed.response_term - exact).abs().max()) > 1e-3 * scale


def _advantage_after_value_step(params, batch, eta: float) -> torch.Tensor:
    """Return the query rows' advantages ``(B, Q, T)`` after a real value-only step of size ``eta``.

    Independent of :func:`dynamics.advantage_change_rate`: the error signal after the step is recomputed by
    autograd of the query loss with respect to the mixtures g (attention held).
    """
    with torch.no_grad():
        fwd = rh.query_forward(params, batch)
        K = batch.n_sources
        v_new = fwd.v - eta * G.responsibility_weighted_value_gradient(fwd.alpha, fwd.u)
    with torch.enable_grad():
        g_new = (fwd.alpha @ v_new).requires_grad_(True)
        loss = rh.query_cross_entropy(g_new[:, K:] @ params.W_O, batch)
        (u_new,) = torch.autograd.grad(loss, g_new)
    return G.advantage(fwd.alpha[:, K:], G.compatibility(u_new[:, K:], v_new)).detach()


def test_advantage_change_rate_is_the_first_order_term_of_a_finite_step():
    """(A(eta) − A(0))/eta − dA/deta shrinks like eta: halving eta halves the gap."""
    params, batch = _setup(5)
    rate = dynamics.advantage_change_rate(params, batch)
    gaps = []
    for eta in (1e-2, 5e-3):
        finite = (_advantage_after_value_step(params, batch, eta) - rate.advantage) / eta
        gaps.append(float((finite - rate.total).abs().max()))
    assert_book_close(gaps[1], gaps[0] / 2, rtol=0.05)


def test_self_term_is_the_rich_get_richer_threshold():
    """The self term is |u_i|² (alpha_ij − Σ alpha²): positive exactly above the threshold, written out here."""
    params, batch = _setup(6)
    ch = dynamics.advantage_change_rate(params, batch)
    fwd = rh.query_forward(params, batch)
    K = batch.n_sources
    a = fwd.alpha[:, K:]
    u2 = (fwd.u[:, K:] ** 2).sum(-1, keepdim=True)
    expected = torch.where(a > 0, u2 * (a - (a * a).sum(-1, keepdim=True)), torch.zeros(()))
    assert_book_close(ch.self_term, expected, rtol=0)
    # a single query (Q = 1) has no cross term
    g = torch.Generator().manual_seed(1)
    one = sp.sample_specialization_batch(1, generator=g, dtype=torch.float64, n_sources=3, n_queries=1,
                                         n_tags=5, n_labels=6)
    assert float(dynamics.advantage_change_rate(params, one).cross_term.abs().max()) < 1e-15


def test_advantage_change_along_training_reports_fractions():
    run = recall_head.train_specialization_head(0, steps=60, lr=1.0, n_train=32, n_probe=16, record_every=20,
                                             settle_window=20, task_sizes=SIZES)
    g = torch.Generator().manual_seed(2)
    batch = sp.sample_specialization_batch(8, generator=g, dtype=torch.float64, **SIZES)
    trace = routing_runs.advantage_change_along_training(run, batch)
    assert len(trace["steps"]) == 4
    for key in ("gain_correct", "gain_other_source", "rule_agreement", "correct_rich", "self_share"):
        assert np.all((trace[key] >= 0) & (trace[key] <= 1))


# --- Freezing the frame and the fine path record ------------------------------------------------


def test_freezing_routing_later_keeps_it_from_that_step_and_path_is_recorded():
    kw = dict(steps=60, lr=1.0, n_train=32, n_probe=16, record_every=20, settle_window=20, path_every=2)
    run = recall_head.train_specialization_head(1, freeze_routing_at=20, **kw)
    Wq = run.param_history["W_Q"]  # checkpoints at 0, 20, 40, 60
    assert not np.array_equal(Wq[0], Wq[1])
    np.testing.assert_array_equal(Wq[1], Wq[-1])
    assert not np.array_equal(run.param_history["W_V"][1], run.param_history["W_V"][-1])
    free = recall_head.train_specialization_head(1, **kw)
    np.testing.assert_array_equal(free.train_loss[:20], run.train_loss[:20])
    assert list(run.path_steps) == list(range(0, 62, 2))
    assert run.frame_path.shape == run.value_path.shape == (30,)
    # the recorded increments are the distances between the heavy checkpoints' neighbours too
    assert np.all(run.frame_path >= 0) and run.value_path[:10].sum() > 0
