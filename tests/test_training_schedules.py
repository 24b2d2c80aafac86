"""The training schedules: learning rates per matrix, and the closed-form M-step against numerical minimisers."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.optimize
import torch

from attention_dynamics.book.nbcompare import assert_book_close
from attention_dynamics.science.attention import init_single_head, single_head_forward
from attention_dynamics.training import fit
from attention_dynamics.training.head_engine import SingleHeadModule, autograd_head_loss, closed_form_head_pass
from attention_dynamics.training.schedules import (
    SCHEDULES,
    get_schedule,
    m_step_objective,
    make_backward,
    make_optimizer,
    responsibility_weighted_input_moment,
    value_m_step,
)


def _example(T=12, d_in=5, d_k=3, d_v=4, C=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    params = init_single_head(d_in, d_k, d_v, C, std=0.7, generator=g, dtype=torch.float64)
    x = torch.randn(T, d_in, generator=g, dtype=torch.float64)
    y = torch.randint(0, C, (T,), generator=g)
    return params, x, y


@pytest.mark.parametrize("name,lrs", [
    ("sgd", {"W_Q": 0.01, "W_K": 0.01, "W_V": 0.01, "W_O": 0.01}),
    ("em_like", {"W_Q": 0.01, "W_K": 0.01, "W_V": 0.1, "W_O": 0.01}),
    ("sgd_matched", {"W_Q": 0.1, "W_K": 0.1, "W_V": 0.1, "W_O": 0.1}),
])
def test_gradient_schedules_take_the_papers_steps(name, lrs):
    """One fit step of each gradient schedule is W ← W − lr ∇L with the paper's lr per matrix (∇ by autograd)."""
    params, x, y = _example()
    reference = SingleHeadModule(params)
    autograd_head_loss(reference, (x, y)).backward()
    model = SingleHeadModule(params)
    fit(model, lambda s: (x, y), steps=1, optimizer=make_optimizer(model, name), backward=make_backward(name))
    for matrix, lr in lrs.items():
        expected = getattr(params, matrix) - lr * getattr(reference, matrix).grad
        assert_book_close(getattr(model, matrix).detach(), expected, rtol=0)


def test_unknown_schedule_raises():
    with pytest.raises(ValueError, match="unknown schedule"):
        get_schedule("adam")
    with pytest.raises(ValueError, match="no M-step"):
        SCHEDULES["sgd"].with_rho(1.0)


def _m_step_ingredients(seed=0, T=12):
    params, x, y = _example(T=T, seed=seed)
    fwd = single_head_forward(x, params, y)
    u_per_position = fwd.u * T  # ū_i = W_O(p_i − e_{y_i}), the error of position i
    grad_W_V = x.T @ (fwd.alpha.T @ fwd.u)  # ∇_{W_V} of the mean loss
    return params, x, y, fwd, u_per_position, grad_W_V


@pytest.mark.parametrize("rho", [0.1, 1.0, 4.0])
def test_m_step_is_the_minimiser_of_its_objective(rho):
    """Closed form vs L-BFGS on J(W) = Σ_ij alpha_ij ‖Wᵀx_j − (v_j − rho ū_i)‖²."""
    params, x, y, fwd, u_bar, grad_W_V = _m_step_ingredients(seed=int(rho * 10))
    closed = value_m_step(x, params.W_V, grad_W_V, fwd.alpha.sum(0), rho)
    shape = params.W_V.shape

    def objective(w):
        W = torch.tensor(w.reshape(shape), requires_grad=True)
        J = m_step_objective(W, x, fwd.alpha, fwd.v, u_bar, rho)
        (grad,) = torch.autograd.grad(J, W)
        return float(J.detach()), grad.numpy().ravel()

    numeric = scipy.optimize.minimize(objective, np.zeros(shape).ravel(), jac=True, method="L-BFGS-B",
                                      options={"gtol": 1e-12, "ftol": 1e-15, "maxiter": 10_000})
    assert_book_close(closed.numpy(), numeric.x.reshape(shape), rtol=0, atol=1e-6)
    assert float(m_step_objective(closed, x, fwd.alpha, fwd.v, u_bar, rho)) <= numeric.fun + 1e-9


def test_m_step_with_free_values_is_the_mixture_m_step():
    """One-hot inputs make every value free: v_j ← v_j − rho Σ_i alpha_ij ū_i / N_j (Xu & Jordan's form)."""
    T, rho = 9, 0.7
    params, _, y = _example(T=T, d_in=T, seed=5)
    x = torch.eye(T, dtype=torch.float64)  # v_j = W_V[j]
    fwd = single_head_forward(x, params, y)
    soft_counts = fwd.alpha.sum(0)  # N_j
    grad_W_V = x.T @ (fwd.alpha.T @ fwd.u)
    new_values = x @ value_m_step(x, params.W_V, grad_W_V, soft_counts, rho)
    expected = fwd.v - rho * (fwd.alpha.T @ (fwd.u * T)) / soft_counts[:, None]
    assert_book_close(new_values, expected, rtol=0)


def test_m_step_schedule_performs_the_closed_form_m_step():
    """One fit step of the M-step schedule: W_V becomes value_m_step, the other matrices take an SGD step of 0.01."""
    params, x, y = _example(T=15, seed=7)
    rho = SCHEDULES["m_step"].value_lr
    result = closed_form_head_pass(x, params, y)
    expected_W_V = value_m_step(x, params.W_V, result.grads["W_V"], result.soft_counts, rho)
    model = SingleHeadModule(params)
    fit(model, lambda s: (x, y), steps=1, optimizer=make_optimizer(model, "m_step"), backward=make_backward("m_step"))
    assert_book_close(model.W_V.detach(), expected_W_V, rtol=0)
    for matrix in ("W_Q", "W_K", "W_O"):
        expected = getattr(params, matrix) - 0.01 * result.grads[matrix]
        assert_book_close(getattr(model, matrix).detach(), expected, rtol=0)


def test_responsibility_weighted_moment_against_a_loop():
    params, x, y, fwd, *_ = _m_step_ingredients(seed=3)
    counts = fwd.alpha.sum(0)
    S = sum(counts[j] * torch.outer(x[j], x[j]) for j in range(x.shape[0])) / counts.sum()
    assert_book_close(responsibility_weighted_input_moment(x, counts), S, rtol=1e-13)


def test_warmup_cosine_is_linear_then_a_half_cosine_to_zero():
    import math

    from attention_dynamics.training.schedules import warmup_cosine

    opt = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=1.0)
    sched = warmup_cosine(opt, 100, 10)
    lrs = []
    for _ in range(100):
        lrs.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    assert_book_close(lrs[0], 0.1)
    assert_book_close(lrs[9], 0.5 * (1 + math.cos(math.pi * 9 / 100)))
    assert_book_close(lrs[50], 0.5)
    assert_book_close(lrs[-1], 0.5 * (1 + math.cos(math.pi * 0.99)))
    with pytest.raises(ValueError, match="warmup_steps must be a positive integer"):
        warmup_cosine(opt, 100, 0)


# ---------------------------------------------------------------------------------------------
# The exact M-step over W_V, and the linearised one matched to a gradient step
# ---------------------------------------------------------------------------------------------


def _m_step_problem(T=60, d_in=5, d_k=3, d_v=4, C=3, seed=1):
    from attention_dynamics.training.schedules import attended_inputs

    params, x, y = _example(T=T, d_in=d_in, d_k=d_k, d_v=d_v, C=C, seed=seed)
    return params, x, y, attended_inputs(x, params)


def test_attended_inputs_are_the_heads_attention_applied_to_the_inputs():
    """x̄ W_V equals the head's context g (the dense reference forward pass)."""
    params, x, y, xbar = _m_step_problem()
    fwd = single_head_forward(x, params, y)
    assert_book_close(xbar @ params.W_V, fwd.g, rtol=0)


def test_exact_m_step_reaches_the_minimiser():
    """The inner solve ends where the gradient (by autograd) vanishes, below every perturbation tried, and at the
    minimum an independent solver (scipy's L-BFGS from zero, in M = W_V W_O) finds."""
    from attention_dynamics.training.schedules import exact_value_m_step, value_cross_entropy

    params, x, y, xbar = _m_step_problem()
    target, info = exact_value_m_step(xbar, params.W_V, params.W_O, y)
    W = target.clone().requires_grad_(True)
    loss = value_cross_entropy(W, xbar, params.W_O, y)
    (grad,) = torch.autograd.grad(loss, W)
    assert float(grad.abs().max()) < 1e-9 and info["grad_max"] < 1e-9
    assert float(loss.detach()) < float(value_cross_entropy(params.W_V, xbar, params.W_O, y))
    g = torch.Generator().manual_seed(3)
    for scale in (1e-3, 1e-1, 1.0):
        for _ in range(20):
            moved = target + scale * torch.randn(target.shape, generator=g, dtype=torch.float64)
            assert float(value_cross_entropy(moved, xbar, params.W_O, y)) >= float(loss.detach()) - 1e-12
    C = params.W_O.shape[1]

    def f(m):
        M = torch.as_tensor(m.reshape(xbar.shape[1], C))
        return float(torch.nn.functional.cross_entropy(xbar @ M, y))

    best = scipy.optimize.minimize(f, np.zeros(xbar.shape[1] * C), method="L-BFGS-B", options={"gtol": 1e-12, "ftol": 1e-15})
    assert abs(best.fun - float(loss.detach())) < 1e-8


def test_the_m_step_objective_is_convex_along_random_lines():
    """Second differences of the cross-entropy in W_V (attention and W_O fixed) are never negative."""
    from attention_dynamics.training.schedules import value_cross_entropy

    params, x, y, xbar = _m_step_problem()
    g = torch.Generator().manual_seed(5)
    for _ in range(20):
        start = torch.randn(params.W_V.shape, generator=g, dtype=torch.float64)
        direction = torch.randn(params.W_V.shape, generator=g, dtype=torch.float64)
        values = np.array([float(value_cross_entropy(start + t * direction, xbar, params.W_O, y))
                           for t in np.linspace(-2, 2, 41)])
        assert (values[:-2] - 2 * values[1:-1] + values[2:]).min() > -1e-12


def test_exact_m_step_schedule_lands_on_the_minimiser():
    """One fit step of ``exact_m_step``: W_V becomes the exact minimiser, W_Q, W_K, W_O take SGD's 0.01 step."""
    from attention_dynamics.training.schedules import exact_value_m_step

    params, x, y, xbar = _m_step_problem()
    reference = SingleHeadModule(params)
    autograd_head_loss(reference, (x, y)).backward()
    target, _ = exact_value_m_step(xbar, params.W_V, params.W_O, y)
    model = SingleHeadModule(params)
    fit(model, lambda s: (x, y), steps=1, optimizer=make_optimizer(model, "exact_m_step"),
        backward=make_backward("exact_m_step"))
    assert_book_close(model.W_V.detach(), target, rtol=0)
    for matrix in ("W_Q", "W_K", "W_O"):
        expected = getattr(params, matrix) - 0.01 * getattr(reference, matrix).grad
        assert_book_close(getattr(model, matrix).detach(), expected, rtol=0)


def test_m_step_matched_to_a_gradient_step_by_norm_and_by_first_order_decrease():
    """ρ by norm makes the two first steps equally long; ρ by decrease makes ⟨∇L, step⟩ equal; their ratio is 1/cos."""
    from attention_dynamics.training.schedules import m_step_direction, m_step_matched_rho

    params, x, y = _example(T=40)
    result = closed_form_head_pass(x, params, y)
    grad, counts = result.grads["W_V"], result.soft_counts
    direction = m_step_direction(x, grad, counts)
    by_norm = m_step_matched_rho(x, grad, counts, 0.1, match="norm")
    by_decrease = m_step_matched_rho(x, grad, counts, 0.1, match="decrease")
    assert abs(float(torch.linalg.norm(by_norm * direction)) - float(torch.linalg.norm(0.1 * grad))) < 1e-12
    assert abs(float((grad * by_decrease * direction).sum()) - float(0.1 * (grad * grad).sum())) < 1e-14
    cosine = float((grad * direction).sum() / (torch.linalg.norm(grad) * torch.linalg.norm(direction)))
    assert_book_close(by_decrease, by_norm / cosine, rtol=1e-12)
    with pytest.raises(ValueError):
        m_step_matched_rho(x, grad, counts, 0.1, match="size")
