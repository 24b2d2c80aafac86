"""The closed-form, block-wise engine against autograd, the dense laws and a dense forward pass."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attention_dynamics.book.nbcompare import assert_book_close
from attention_dynamics.science.attention import init_single_head, single_head_forward
from attention_dynamics.science.gradients import single_head_parameter_gradients
from attention_dynamics.tasks import sticky_chain
from attention_dynamics.training import fit
from attention_dynamics.training.head_engine import (
    SingleHeadModule,
    autograd_head_loss,
    closed_form_backward,
    closed_form_head_pass,
    head_metrics,
)

CASES = [  # (T, d_in, d_k, d_v, C, block_size)
    (1, 3, 2, 2, 2, 4),
    (7, 5, 3, 4, 3, 1),
    (50, 20, 10, 15, 8, 7),
    (64, 6, 4, 5, 3, 64),
    (130, 20, 10, 15, 8, 128),
    (33, 4, 2, 3, 5, 1000),
]


def _example(T, d_in, d_k, d_v, C, seed=0, std=0.8):
    g = torch.Generator().manual_seed(seed)
    params = init_single_head(d_in, d_k, d_v, C, std=std, generator=g, dtype=torch.float64)
    x = torch.randn(T, d_in, generator=g, dtype=torch.float64)
    y = torch.randint(0, C, (T,), generator=g)
    return params, x, y


@pytest.mark.parametrize("case", CASES)
def test_engine_gradients_equal_autograd(case):
    *shape, block = case
    params, x, y = _example(*shape)
    model = SingleHeadModule(params)
    loss = autograd_head_loss(model, (x, y))
    loss.backward()
    result = closed_form_head_pass(x, params, y, block_size=block)
    assert_book_close(result.loss, loss.detach(), rtol=0)
    for name, grad in result.grads.items():
        assert_book_close(grad, getattr(model, name).grad, rtol=1e-10, what=name)


@pytest.mark.parametrize("case", CASES[1:4])
def test_engine_equals_the_dense_laws(case):
    """The block-wise engine and the whole-matrix laws of attention_dynamics.science.gradients agree."""
    *shape, block = case
    params, x, y = _example(*shape, seed=1)
    loss, grads = single_head_parameter_gradients(x, params, y)
    result = closed_form_head_pass(x, params, y, block_size=block)
    assert_book_close(result.loss, loss, rtol=0)
    for name in grads:
        assert_book_close(result.grads[name], grads[name], rtol=1e-10)


def test_soft_counts_and_value_gradient_against_the_dense_attention():
    params, x, y = _example(40, 6, 3, 4, 3, seed=2)
    fwd = single_head_forward(x, params, y)
    result = closed_form_head_pass(x, params, y, block_size=9)
    assert_book_close(result.soft_counts, fwd.alpha.sum(0), rtol=0)
    assert_book_close(float(result.soft_counts.sum()), 40.0, rtol=0, atol=1e-10)
    assert_book_close(result.grad_values, fwd.alpha.T @ fwd.u, rtol=0)


def test_engine_is_stable_for_large_scores():
    """Scores in the hundreds: the row-wise softmax must not overflow."""
    params, x, y = _example(30, 5, 3, 3, 4, seed=3, std=6.0)
    model = SingleHeadModule(params)
    autograd_head_loss(model, (x, y)).backward()
    result = closed_form_head_pass(x, params, y, block_size=8)
    assert torch.isfinite(result.loss)
    for name, grad in result.grads.items():
        assert_book_close(grad, getattr(model, name).grad, rtol=1e-9)


def test_invalid_inputs_raise():
    params, x, y = _example(5, 3, 2, 2, 2)
    with pytest.raises(ValueError, match="one sequence"):
        closed_form_head_pass(x[None], params, y)
    with pytest.raises(ValueError, match="targets"):
        closed_form_head_pass(x, params, y[:-1])
    with pytest.raises(ValueError, match="block_size"):
        closed_form_head_pass(x, params, y, block_size=0)


@pytest.mark.slow
def test_training_losses_equal_autograd_and_the_dense_laws_over_100_steps():
    """float32, the paper's head and data (T = 2000), EM-like learning rates: the block-wise engine's
    losses agree within 1e-6 with autograd's and with the dense closed form's (the laws on the whole matrix)."""
    data = sticky_chain.make_sticky_chain_data(42)
    init = init_single_head(generator=torch.Generator().manual_seed(42))

    def train(**how):
        model = SingleHeadModule(init)
        groups = [{"params": [model.W_Q, model.W_K, model.W_O], "lr": 0.01}, {"params": [model.W_V], "lr": 0.1}]
        return fit(model, lambda step: (data.x, data.y), steps=100, optimizer=torch.optim.SGD(groups), **how).losses

    def dense_laws(model, batch):
        loss, grads = single_head_parameter_gradients(batch[0], model.head_params(), batch[1])
        for name, grad in grads.items():
            getattr(model, name).grad = grad
        return loss

    engine = train(backward=closed_form_backward())
    autograd = train(loss_fn=autograd_head_loss)
    dense = train(backward=dense_laws)
    assert np.max(np.abs(engine - autograd)) < 1e-6
    assert np.max(np.abs(engine - dense)) < 1e-6
    assert autograd[-1] < autograd[0] - 1e-3  # the run moved: the comparison is not between two constants


def test_head_metrics_against_direct_computation():
    params, x, y = _example(25, 4, 3, 3, 4, seed=4)
    symbols = torch.randint(0, 3, (25,), generator=torch.Generator().manual_seed(9))
    m = head_metrics(x, params, y, symbols)
    fwd = single_head_forward(x, params, y)
    p = fwd.p
    assert_book_close(m["loss"], float(-torch.log(p[torch.arange(25), y]).mean()), rtol=1e-12)
    assert_book_close(m["entropy"], float(-(p * p.log()).sum(-1).mean()), rtol=1e-12)
    assert_book_close(m["accuracy"], float((p.argmax(-1) == y).double().mean()), rtol=0)
    same = [sum(float(fwd.alpha[i, j]) for j in range(i + 1) if symbols[j] == symbols[i]) for i in range(25)]
    assert_book_close(m["same_symbol_attention"], np.mean(same), rtol=1e-12)
    chance = [np.mean([symbols[j] == symbols[i] for j in range(i + 1)]) for i in range(25)]
    assert_book_close(m["same_symbol_chance"], np.mean(chance), rtol=1e-12)


@pytest.mark.parametrize("workers", [1, 2, 3])
def test_engine_threads_share_the_blocks_without_changing_the_result(workers):
    """Any number of worker threads gives autograd's loss and gradients and the exact soft counts."""
    params, x, y = _example(200, 20, 10, 15, 8, seed=5)
    model = SingleHeadModule(params)
    loss = autograd_head_loss(model, (x, y))
    loss.backward()
    alpha = single_head_forward(x, params).alpha  # (T, T) causal attention of the dense head
    many = closed_form_head_pass(x, params, y, block_size=16, workers=workers)
    assert_book_close(many.loss, loss.detach(), rtol=0)
    for name in many.grads:
        assert_book_close(many.grads[name], getattr(model, name).grad, rtol=1e-10)
    assert_book_close(many.soft_counts, alpha.sum(0), rtol=0)
