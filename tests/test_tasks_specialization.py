"""The content-addressed recall task: its ground truth, the head's loss on it (science.recall_head) and that one head
can solve it."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from attention_dynamics.book.nbcompare import assert_book_close
from attention_dynamics.science import recall_head as rh
from attention_dynamics.science.attention import SingleHeadParams, init_single_head, single_head_forward
from attention_dynamics.science.gradients import advantage_routing_gradient, responsibility_weighted_value_gradient
from attention_dynamics.tasks import specialization as sp

SIZES = dict(n_sources=4, n_queries=5, n_tags=6, n_labels=7)


@pytest.fixture(autouse=True)
def _one_thread():
    """Tiny tensors: extra threads only add overhead (conftest restores the thread count)."""
    torch.set_num_threads(1)


def _batch(seed=0, n=16, dtype=torch.float64, **kw):
    return sp.sample_specialization_batch(n, generator=torch.Generator().manual_seed(seed), dtype=dtype,
                                          **{**SIZES, **kw})


def test_ground_truth_is_consistent_with_the_inputs():
    b = _batch()
    K, Q, n = b.n_sources, b.n_queries, b.n_tags
    assert b.x.shape == (16, K + Q, sp.input_dim(n, b.n_labels))
    tag_block, request_block, label_block = b.x[..., :n], b.x[..., n:2 * n], b.x[..., 2 * n:]
    # Sources carry a tag and a label and no request; queries only a request.
    assert torch.equal(tag_block[:, :K].argmax(-1), b.source_tags)
    assert torch.equal(label_block[:, :K].argmax(-1), b.source_labels)
    assert request_block[:, :K].abs().sum() == 0 and tag_block[:, K:].abs().sum() == 0
    assert label_block[:, K:].abs().sum() == 0
    assert torch.equal(request_block[:, K:].argmax(-1), b.requests)
    for s in range(len(b)):
        assert len(set(b.source_tags[s].tolist())) == K  # distinct tags: exactly one source matches
        assert len(set(b.source_labels[s].tolist())) == K
        for q in range(Q):
            j = int(b.correct_source[s, q])
            assert b.source_tags[s, j] == b.requests[s, q]
            assert b.source_labels[s, j] == b.targets[s, q]
    resp = b.responsibility
    assert resp.shape == (16, Q, K + Q)
    assert_book_close(resp.sum(-1), torch.ones(16, Q, dtype=resp.dtype))
    assert torch.equal(b.query_positions, torch.arange(K, K + Q))


def test_sampling_is_seeded_and_validated():
    assert torch.equal(_batch(3).x, _batch(3).x)
    assert not torch.equal(_batch(3).x, _batch(4).x)
    with pytest.raises(ValueError, match="distinct tags"):
        sp.sample_specialization_batch(2, n_sources=5, n_tags=4, n_labels=8)
    with pytest.raises(ValueError, match="distinct labels"):
        sp.sample_specialization_batch(2, n_sources=5, n_tags=8, n_labels=4)
    with pytest.raises(ValueError, match="at least 2"):
        sp.sample_specialization_batch(2, n_sources=1)
    with pytest.raises(ValueError, match="target_smoothing"):
        sp.sample_specialization_batch(2, target_smoothing=1.0)
    with pytest.raises(ValueError, match="n_sequences"):
        sp.sample_specialization_batch(0)


def test_a_task_batch_has_everything_the_science_layer_reads():
    """The head's loss and the dynamics' measures type their batch as a protocol; the task's batch fulfils it."""
    b = _batch()
    for name in [*rh.RecallBatch.__annotations__, "n_sources", "responsibility", "target_distribution"]:
        assert hasattr(b, name), name


@pytest.mark.parametrize("smoothing", [0.0, 0.3])
def test_query_forward_loss_and_error_signal_match_autograd(smoothing):
    b = _batch(1, target_smoothing=smoothing)
    params = init_single_head(b.x.shape[-1], 3, 5, b.n_labels, std=0.8,
                              generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    fwd = rh.query_forward(params, b)
    # Loss: the mean over query positions of −Σ_c t_c log p_c, written out by hand.
    logp = torch.log_softmax(fwd.logits[:, b.n_sources:], -1)
    expected = -(b.target_distribution * logp).sum(-1).mean()
    assert_book_close(fwd.loss, expected, rtol=0)
    # u = ∂L/∂g by autograd, zero on source rows.
    g = fwd.g.detach().requires_grad_(True)
    loss = rh.query_cross_entropy((g @ params.W_O)[:, b.n_sources:], b)
    (u_auto,) = torch.autograd.grad(loss, g)
    assert_book_close(fwd.u, u_auto, rtol=0)
    assert fwd.u[:, : b.n_sources].abs().max() == 0
    assert_book_close(fwd.b, fwd.u @ fwd.v.transpose(-1, -2))
    assert_book_close(rh.query_loss(params, b), fwd.loss)


def test_the_paper_laws_hold_for_the_query_loss():
    """Value law and routing law against autograd through the scores and the values."""
    b = _batch(2)
    params = init_single_head(b.x.shape[-1], 4, 4, b.n_labels, std=0.9,
                              generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    fwd = rh.query_forward(params, b)
    scores = fwd.scores.detach().requires_grad_(True)
    v = fwd.v.detach().requires_grad_(True)
    logits = (torch.softmax(scores, -1) @ v) @ params.W_O
    loss = rh.query_cross_entropy(logits[:, b.n_sources:], b)
    d_scores, d_v = torch.autograd.grad(loss, (scores, v))
    assert_book_close(d_v, responsibility_weighted_value_gradient(fwd.alpha, fwd.u), rtol=0)
    assert_book_close(torch.nan_to_num(d_scores), advantage_routing_gradient(fwd.alpha, fwd.b), rtol=0)


def _constructed_head(n_tags, n_labels, *, match_gain, readout_gain, route=True):
    """A head built by hand: requests match their tag (if ``route``), values copy labels, W_O reads them."""
    d_in = sp.input_dim(n_tags, n_labels)
    W_Q = torch.zeros(d_in, n_tags, dtype=torch.float64)
    W_K = torch.zeros(d_in, n_tags, dtype=torch.float64)
    if route:
        W_Q[n_tags:2 * n_tags] = torch.eye(n_tags, dtype=torch.float64) * match_gain  # request r → e_r
        W_K[:n_tags] = torch.eye(n_tags, dtype=torch.float64) * match_gain  # tag r → e_r
    W_V = torch.zeros(d_in, n_labels, dtype=torch.float64)
    W_V[2 * n_tags:] = torch.eye(n_labels, dtype=torch.float64)  # value = the label one-hot
    W_O = torch.eye(n_labels, dtype=torch.float64) * readout_gain
    return SingleHeadParams(W_Q=W_Q, W_K=W_K, W_V=W_V, W_O=W_O)


def test_one_head_solves_the_task_and_a_routing_blind_head_reaches_ln_K():
    b = _batch(5, n=64)
    solver = _constructed_head(b.n_tags, b.n_labels, match_gain=6.0, readout_gain=40.0)
    assert float(rh.query_loss(solver, b)) < 1e-3 + sp.bayes_floor_nats()
    # Uniform attention over everything visible: the context holds the K present labels equally
    # (queries add nothing), so with a large readout the prediction is uniform over them.
    blind = _constructed_head(b.n_tags, b.n_labels, match_gain=0.0, readout_gain=200.0, route=False)
    assert_book_close(float(rh.query_loss(blind, b)), sp.routing_blind_floor_nats(b.n_sources), rtol=0, atol=1e-6)
    assert_book_close(sp.routing_blind_floor_nats(4), math.log(4))
    assert_book_close(sp.chance_loss_nats(8), math.log(8))


def test_bayes_floor_is_the_entropy_of_the_target_distribution():
    b = _batch(6, target_smoothing=0.2)
    t = b.target_distribution
    entropy = float(-(t * t.log()).sum(-1).mean())
    assert_book_close(sp.bayes_floor_nats(0.2, b.n_labels), entropy, rtol=0)
    # A predictor that outputs the target distribution exactly reaches the floor.
    logits = torch.log(t)
    assert_book_close(float(rh.query_cross_entropy(logits, b)), entropy, rtol=0)
    assert sp.bayes_floor_nats() == 0.0


def test_batch_moves_and_keeps_its_ground_truth():
    b = _batch(7, target_smoothing=0.1)
    c = b.to(torch.float32)
    assert c.x.dtype == torch.float32 and torch.equal(c.correct_source, b.correct_source)
    assert c.target_smoothing == 0.1 and c.n_tags == b.n_tags and len(c) == len(b)
    assert single_head_forward(c.x, init_single_head(c.x.shape[-1], 2, 2, c.n_labels)).alpha.shape[-1] == c.x.shape[1]
    assert_book_close(c.target_distribution.sum(-1), 1.0)
    assert F.one_hot(c.targets, c.n_labels).shape == c.target_distribution.shape
