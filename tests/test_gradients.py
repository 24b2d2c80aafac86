"""The paper's gradient laws (the paper's §3) verified four ways.

1. Against autograd in float64, property-based over random shapes, batch sizes, seeds, masks and
   reductions: every gradient within 1e-12 of autograd's, relative to the gradient's scale.
2. Against central finite differences of the loss (no derivative code involved at all).
3. Against the backward pass of PyTorch's fused ``scaled_dot_product_attention`` kernel.
4. Structural properties: rows of ∂L/∂s sum to zero, zero attention gets zero gradient, the
   routing gradient is a covariance, it is bounded by the attention entropy and vanishes in the
   one-hot limit while the value gradient tends to the hard-attention value gradient.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings, strategies as st
from scipy.stats import entropy as scipy_entropy

from attention_dynamics.book.nbcompare import ROUNDOFF_FLOOR, assert_book_close
from attention_dynamics.science import gradients as G, stats
from attention_dynamics.science.attention import causal_mask, init_single_head, single_head_forward

RELATIVE_TOL = 1e-12  # float64, relative to the largest entry of the reference gradient
# Near one-hot attention, ∂L/∂s_ij = alpha_ij b_ij − alpha_ij E[b] is a difference of nearly equal
# terms, and any two exact routes differ by the rounding of those terms, not of their tiny
# difference (a gradient that is exactly zero, e.g. with a single key, comes out of autograd as
# ~1e-17 residue). So an error also passes when it is below ~5 ulps of the magnitude of the terms
# being summed (the standard backward-error criterion); for well-conditioned cases this floor is
# far below the 1e-12 relative bound.
ROUNDING_FLOOR = 1e-15
PROPERTY = settings(max_examples=60, deadline=None, database=None, derandomize=True)


def _relative_error(ours: torch.Tensor, reference: torch.Tensor, *, terms: float = 0.0) -> float:
    """Max |ours − reference| / max |reference|, with errors under ROUNDING_FLOOR · terms counting as zero."""
    err = (ours - reference).abs().max().item() if reference.numel() else 0.0
    if err <= ROUNDING_FLOOR * terms:
        return 0.0
    scale = reference.abs().max().item()
    return err / scale if scale > 0 else math.inf


def _term_magnitudes(alpha, b, q, k, u, scale, x=None, g=None, delta=None) -> dict[str, float]:
    """For each gradient, the largest sum of |terms| that forms one of its entries (the laws with |·|)."""
    terms = alpha * (b.abs() + (alpha * b).sum(-1, keepdim=True).abs())  # (..., Tq, Tk)
    out = {
        "scores": terms,
        "q": scale * terms @ k.abs(),
        "k": scale * terms.transpose(-1, -2) @ q.abs(),
        "v": alpha.transpose(-1, -2) @ u.abs(),
    }
    if x is not None:
        rows = x.abs().reshape(-1, x.shape[-1]).T  # (d_in, positions)
        out["W_Q"] = rows @ out["q"].reshape(-1, q.shape[-1])
        out["W_K"] = rows @ out["k"].reshape(-1, k.shape[-1])
        out["W_V"] = rows @ out["v"].reshape(-1, u.shape[-1])
        out["W_O"] = g.abs().reshape(-1, g.shape[-1]).T @ delta.abs().reshape(-1, delta.shape[-1])
    return {name: t.max().item() if t.numel() else 0.0 for name, t in out.items()}


def _head_term_magnitudes(x, params, y, *, causal=True, reduction="mean") -> dict[str, float]:
    fwd = single_head_forward(x, params, y, causal=causal, reduction=reduction)
    delta = G.output_error(fwd.p, y, reduction=reduction)
    return _term_magnitudes(fwd.alpha, fwd.b, fwd.q, fwd.k, fwd.u, fwd.scale, x=x, g=fwd.g, delta=delta)


def _example(batch, T, d_in, d_k, d_v, C, seed=0, std=1.0):
    gen = torch.Generator().manual_seed(seed)
    params = init_single_head(d_in, d_k, d_v, C, std=std, generator=gen, dtype=torch.float64)
    x = torch.randn(*batch, T, d_in, generator=gen, dtype=torch.float64)
    y = torch.randint(0, C, (*batch, T), generator=gen)
    return params, x, y


head_shapes = st.tuples(
    st.lists(st.integers(1, 3), min_size=0, max_size=2).map(tuple),  # leading batch dims
    st.integers(1, 9),  # T
    st.integers(1, 7),  # d_in
    st.integers(1, 5),  # d_k
    st.integers(1, 5),  # d_v
    st.integers(2, 6),  # classes
)


# --------------------------------------------------------------------------------------------
# 1. autograd
# --------------------------------------------------------------------------------------------


@PROPERTY
@given(
    shape=head_shapes,
    seed=st.integers(0, 2**31 - 1),
    std=st.sampled_from([0.1, 0.5, 1.0, 2.0]),
    causal=st.booleans(),
    reduction=st.sampled_from(["mean", "sum"]),
)
def test_every_law_matches_autograd(shape, seed, std, causal, reduction):
    params, x, y = _example(*shape, seed=seed, std=std)
    loss, ours = G.closed_form_head_gradients(x, params, y, causal=causal, reduction=reduction)
    ref_loss, reference = G.autograd_head_gradients(x, params, y, causal=causal, reduction=reduction)
    assert_book_close(loss.item(), ref_loss.item(), rtol=1e-14)
    terms = _head_term_magnitudes(x, params, y, causal=causal, reduction=reduction)
    for name in G.GRADIENT_NAMES:
        assert ours[name].shape == reference[name].shape, name
        assert _relative_error(ours[name], reference[name], terms=terms[name]) <= RELATIVE_TOL, name


@settings(PROPERTY, max_examples=25)
@given(shape=head_shapes, seed=st.integers(0, 2**31 - 1))
def test_parameter_gradients_match_autograd_through_plain_backward(shape, seed):
    """single_head_parameter_gradients against .grad of a plain loss.backward() (no retained intermediates)."""
    params, x, y = _example(*shape, seed=seed)
    _, ours = G.single_head_parameter_gradients(x, params, y)
    leaf = params.clone().requires_grad_(True)
    single_head_forward(x, leaf, y).loss.backward()
    terms = _head_term_magnitudes(x, params, y)
    for name, tensor in leaf.as_dict().items():
        assert _relative_error(ours[name], tensor.grad, terms=terms[name]) <= RELATIVE_TOL, name


def test_laws_take_any_batch_dimensions():
    """The laws on a (2, 3)-batch equal the laws applied to each sequence separately."""
    params, x, y = _example((2, 3), 5, 4, 3, 2, 3, seed=1)
    fwd = single_head_forward(x, params, y, reduction="sum")
    batched = G.advantage_routing_gradient(fwd.alpha, fwd.b)  # (2, 3, T, T)
    value = G.responsibility_weighted_value_gradient(fwd.alpha, fwd.u)  # (2, 3, T, dv)
    for i in range(2):
        for j in range(3):
            one = single_head_forward(x[i, j], params, y[i, j], reduction="sum")
            assert_book_close(batched[i, j], G.advantage_routing_gradient(one.alpha, one.b), rtol=1e-12)
            assert_book_close(value[i, j], G.responsibility_weighted_value_gradient(one.alpha, one.u), rtol=1e-12)


def test_mean_and_sum_reductions_differ_by_the_number_of_positions():
    params, x, y = _example((3,), 6, 4, 3, 3, 4, seed=2)
    _, mean = G.closed_form_head_gradients(x, params, y, reduction="mean")
    _, total = G.closed_form_head_gradients(x, params, y, reduction="sum")
    for name in G.GRADIENT_NAMES:
        assert_book_close(total[name], mean[name] * y.numel(), rtol=1e-13)


# --------------------------------------------------------------------------------------------
# 2. central finite differences
# --------------------------------------------------------------------------------------------

FD_TOL = 1e-7  # relative; fourth-order stencil at h = 1e-3: truncation O(h⁴), rounding O(ε|L|/h) ≈ 1e-13·|L|


@pytest.mark.parametrize("order, step, atol", [(2, 1e-6, 1e-9), (4, 1e-3, 1e-11)])
def test_central_difference_gradient_of_a_known_function(order, step, atol):
    point = torch.tensor([[0.3, -1.2], [2.0, 0.7]], dtype=torch.float64)
    numeric = G.central_difference_gradient(lambda t: (torch.sin(t) * t**2).sum(), point, step=step, order=order)
    exact = torch.cos(point) * point**2 + 2 * point * torch.sin(point)
    assert_book_close(numeric, exact, rtol=0, atol=atol)  # the truncation error of each difference scheme


def test_fourth_order_stencil_is_exact_for_quartics():
    """The five-point stencil has no truncation error up to degree 4 (a check of its weights)."""
    point = torch.tensor([0.7, -1.3], dtype=torch.float64)
    numeric = G.central_difference_gradient(lambda t: (t**4 - 2 * t**3 + t).sum(), point, step=0.1, order=4)
    assert_book_close(numeric, 4 * point**3 - 6 * point**2 + 1, rtol=0)


def test_central_difference_rejects_bad_arguments():
    with pytest.raises(ValueError, match="order"):
        G.central_difference_gradient(lambda t: t.sum(), torch.zeros(2), order=3)
    with pytest.raises(ValueError, match="step"):
        G.central_difference_gradient(lambda t: t.sum(), torch.zeros(2), step=0.0)


@pytest.mark.parametrize("shape", [((), 5, 4, 3, 3, 3), ((2,), 4, 3, 2, 4, 5), ((), 6, 5, 4, 2, 2)])
@pytest.mark.parametrize("causal", [True, False])
def test_laws_match_central_differences(shape, causal):
    params, x, y = _example(*shape, seed=3)
    _, laws = G.closed_form_head_gradients(x, params, y, causal=causal)
    numeric = G.finite_difference_head_gradients(x, params, y, causal=causal)
    for name in G.GRADIENT_NAMES:
        assert _relative_error(laws[name], numeric[name]) <= FD_TOL, name


def test_finite_difference_route_perturbs_what_it_says():
    """Each numeric gradient is a gradient of the same loss: scores, q/k/v and weights agree with autograd."""
    params, x, y = _example((), 4, 3, 2, 2, 3, seed=8)
    numeric = G.finite_difference_head_gradients(x, params, y, reduction="sum")
    _, reference = G.autograd_head_gradients(x, params, y, reduction="sum")
    for name in G.GRADIENT_NAMES:
        assert _relative_error(numeric[name], reference[name]) <= FD_TOL, name


def test_central_difference_skips_masked_scores():
    scores = torch.tensor([[0.5, -math.inf], [0.1, 0.2]], dtype=torch.float64)
    numeric = G.central_difference_gradient(lambda s: torch.softmax(s, -1)[1, 0], scores)
    assert numeric[0, 1] == 0.0 and torch.isfinite(numeric).all()


# --------------------------------------------------------------------------------------------
# 3. PyTorch's fused attention kernel
# --------------------------------------------------------------------------------------------


@PROPERTY
@given(
    batch=st.lists(st.integers(1, 3), min_size=0, max_size=2).map(tuple),
    T=st.integers(1, 9),
    d_k=st.integers(1, 6),
    d_v=st.integers(1, 6),
    seed=st.integers(0, 2**31 - 1),
    causal=st.booleans(),
    backend=st.sampled_from(["flash", "math"]),
)
def test_laws_match_fused_attention_backward(batch, T, d_k, d_v, seed, causal, backend):
    gen = torch.Generator().manual_seed(seed)
    q, k = (torch.randn(*batch, T, d_k, generator=gen, dtype=torch.float64) for _ in range(2))
    v = torch.randn(*batch, T, d_v, generator=gen, dtype=torch.float64)
    u = torch.randn(*batch, T, d_v, generator=gen, dtype=torch.float64)  # any upstream gradient
    scale = 1 / math.sqrt(d_k)
    scores = (q @ k.transpose(-1, -2)) * scale
    if causal:
        scores = scores.masked_fill(~causal_mask(T), float("-inf"))
    alpha = torch.softmax(scores, -1)
    b = G.compatibility(u, v)
    fused = G.fused_attention_gradients(q, k, v, u, causal=causal, backend=backend)
    laws = (
        G.query_gradient(alpha, b, k, scale),
        G.key_gradient(alpha, b, q, scale),
        G.responsibility_weighted_value_gradient(alpha, u),
    )
    terms = _term_magnitudes(alpha, b, q, k, u, scale)
    for name, law, reference in zip("qkv", laws, fused):
        assert _relative_error(law, reference, terms=terms[name]) <= RELATIVE_TOL, name


def test_flash_backend_really_is_the_fused_kernel():
    """The 'flash' route goes through PyTorch's fused CPU kernel, not the composite math path."""
    q = torch.randn(1, 1, 4, 3, dtype=torch.float64, requires_grad=True)
    from torch.nn.attention import SDPBackend, sdpa_kernel

    with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
        out = torch.nn.functional.scaled_dot_product_attention(q, q, q, is_causal=True)
    assert "Flash" in type(out.grad_fn).__name__


def test_fused_attention_gradients_rejects_unknown_backend():
    t = torch.zeros(2, 3)
    with pytest.raises(ValueError, match="backend"):
        G.fused_attention_gradients(t, t, t, t, backend="cudnn")


# --------------------------------------------------------------------------------------------
# 4. structural properties
# --------------------------------------------------------------------------------------------


@st.composite
def attention_and_compatibility(draw):
    """A random attention matrix (with random zero entries, as a mask gives) and compatibility."""
    T_q, T_k = draw(st.integers(1, 8)), draw(st.integers(1, 8))
    seed = draw(st.integers(0, 2**31 - 1))
    temperature = draw(st.sampled_from([0.1, 1.0, 5.0, 30.0]))
    gen = torch.Generator().manual_seed(seed)
    scores = torch.randn(T_q, T_k, generator=gen, dtype=torch.float64) * temperature
    keep = torch.rand(T_q, T_k, generator=gen) < 0.7
    keep[torch.arange(T_q), torch.randint(0, T_k, (T_q,), generator=gen)] = True  # every row attends somewhere
    alpha = torch.softmax(scores.masked_fill(~keep, float("-inf")), -1)
    b = torch.randn(T_q, T_k, generator=gen, dtype=torch.float64) * draw(st.sampled_from([1e-3, 1.0, 1e3]))
    return alpha, b


@PROPERTY
@given(attention_and_compatibility())
def test_routing_gradient_rows_sum_to_zero(pair):
    alpha, b = pair
    grad = G.advantage_routing_gradient(alpha, b)
    scale = (alpha * b.abs()).sum(-1)  # the size of each row's terms
    assert torch.all(grad.sum(-1).abs() <= 1e-14 * scale + 1e-300)


@PROPERTY
@given(attention_and_compatibility())
def test_zero_attention_gets_zero_gradient(pair):
    alpha, b = pair
    grad = G.advantage_routing_gradient(alpha, b)
    assert torch.all(grad[alpha == 0] == 0)
    assert torch.all(G.advantage(alpha, b)[alpha == 0] == 0)
    # a key no query attends to gets no value gradient and no key gradient
    alpha = alpha.clone()
    alpha[:, 0] = 0.0
    u = torch.randn(alpha.shape[0], 3, dtype=torch.float64)
    q = torch.randn(alpha.shape[0], 2, dtype=torch.float64)
    assert torch.all(G.responsibility_weighted_value_gradient(alpha, u)[0] == 0)
    assert torch.all(G.key_gradient(alpha, b, q, 0.5)[0] == 0)


@PROPERTY
@given(attention_and_compatibility(), st.integers(0, 2**31 - 1))
def test_routing_gradient_is_a_covariance_under_attention(pair, seed):
    """Σ_j ∂L/∂s_ij w_j = Cov_{alpha_i}(b_i·, w) for any w (computed independently with NumPy)."""
    alpha, b = pair
    w = np.random.default_rng(seed).normal(size=alpha.shape[-1])
    a, bb = alpha.numpy(), b.numpy()
    covariance = np.array([np.cov(bb[i], w, aweights=a[i], bias=True)[0, 1] for i in range(a.shape[0])])
    got = (G.advantage_routing_gradient(alpha, b) @ torch.from_numpy(w)).numpy()
    assert_book_close(got, covariance, rtol=1e-9, atol=max(1e-12 * np.abs(bb).max(), ROUNDOFF_FLOOR))


def test_routing_gradient_is_minus_attention_times_advantage():
    alpha, b = torch.softmax(torch.randn(4, 5, dtype=torch.float64), -1), torch.randn(4, 5, dtype=torch.float64)
    assert_book_close(G.advantage_routing_gradient(alpha, b), -alpha * G.advantage(alpha, b), rtol=0)


def test_expected_compatibility_is_u_dot_g():
    params, x, y = _example((2,), 5, 4, 3, 3, 3, seed=4)
    fwd = single_head_forward(x, params, y)
    assert_book_close(G.expected_compatibility(fwd.alpha, fwd.b).squeeze(-1), (fwd.u * fwd.g).sum(-1), rtol=0)


def test_descending_the_routing_gradient_raises_advantaged_scores_and_lowers_the_loss():
    """A step s ← s − η ∂L/∂s = s + η alpha ⊙ advantage raises exactly the scores with positive advantage,
    and lowers the loss by η‖∂L/∂s‖² to first order (checked against the loss itself)."""
    params, x, y = _example((), 6, 4, 3, 3, 3, seed=5)
    fwd = single_head_forward(x, params, y)
    grad = G.advantage_routing_gradient(fwd.alpha, fwd.b)
    adv = G.advantage(fwd.alpha, fwd.b)
    attended = fwd.alpha > 0
    assert torch.equal(torch.sign(-grad[attended]), torch.sign(adv[attended]))
    eta = 1e-4 / grad.abs().max()
    before = G.loss_from_scores(fwd.scores, fwd.v, params.W_O, y)
    after = G.loss_from_scores(fwd.scores - eta * grad, fwd.v, params.W_O, y)
    assert_book_close((after - before).item(), -(eta * grad.pow(2).sum()).item(), rtol=1e-3)


def test_attention_entropy_matches_scipy():
    alpha = torch.softmax(torch.randn(5, 6, dtype=torch.float64), -1)
    alpha[0] = torch.tensor([1.0, 0, 0, 0, 0, 0], dtype=torch.float64)  # 0 ln 0 = 0
    assert_book_close(stats.entropy(alpha).numpy(), scipy_entropy(alpha.numpy(), axis=-1), rtol=1e-13)


@PROPERTY
@given(attention_and_compatibility())
def test_score_gradient_is_bounded_by_attention_entropy(pair):
    alpha, b = pair
    row_l1 = G.advantage_routing_gradient(alpha, b).abs().sum(-1)
    bound = G.score_gradient_entropy_bound(alpha, b)
    assert torch.all(row_l1 <= bound * (1 + 1e-12) + 1e-15 * b.abs().max())


def _hard_attention_value_gradient(x, params, y):
    """∂L/∂v in the one-hot limit, by hand: each query copies the value of its highest-scoring key."""
    q, k, v = x @ params.W_Q, x @ params.W_K, x @ params.W_V
    T = x.shape[0]
    scores = (q @ k.T).masked_fill(~causal_mask(T), float("-inf"))
    chosen = scores.argmax(-1)  # (T,)
    logits = v[chosen] @ params.W_O
    p = torch.softmax(logits, -1)
    u = (p - torch.nn.functional.one_hot(y, p.shape[-1]).double()) @ params.W_O.T / T  # (T, dv)
    grad_v = torch.zeros_like(v)
    grad_v.index_add_(0, chosen, u)
    return grad_v


def test_one_hot_limit_freezes_routing_but_not_values():
    params, x, y = _example((), 8, 5, 3, 4, 4, seed=6)
    betas = [0.0, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 100.0, 1000.0]
    sweep = G.inverse_temperature_sweep(x, params, y, betas)
    # the attention entropy of softmax(β s) never increases with β and reaches zero
    assert np.all(np.diff(sweep.attention_entropy) <= 1e-12)
    assert sweep.attention_entropy[-1] < 1e-6
    # the score gradient vanishes; the bound holds at every β
    assert sweep.score_grad_norm[-1] < 1e-8 * sweep.score_grad_norm.max()
    assert np.all(sweep.score_grad_l1 <= sweep.score_grad_bound * (1 + 1e-12))
    # the value gradient tends to the hard-attention value gradient, which is not zero
    hard = _hard_attention_value_gradient(x, params, y)
    assert hard.norm() > 0.1 * sweep.value_grad_norm.max()
    assert_book_close(sweep.value_grad_norm[-1], hard.norm().item(), rtol=1e-9)


def test_sweep_at_one_is_the_plain_head():
    params, x, y = _example((2,), 5, 4, 3, 3, 3, seed=7)
    sweep = G.inverse_temperature_sweep(x, params, y, [1.0])
    _, ref = G.autograd_head_gradients(x, params, y)
    assert_book_close(sweep.score_grad_norm[0], ref["scores"].norm().item(), rtol=1e-12)
    assert_book_close(sweep.value_grad_norm[0], ref["v"].norm().item(), rtol=1e-12)


def test_sweep_rejects_bad_temperatures():
    params, x, y = _example((), 3, 2, 2, 2, 2)
    for bad in ([], [-1.0], [math.inf]):
        with pytest.raises(ValueError, match="inverse temperatures"):
            G.inverse_temperature_sweep(x, params, y, bad)


def test_non_finite_compatibility_in_masked_entries_is_harmless():
    alpha = torch.tensor([[1.0, 0.0], [0.4, 0.6]], dtype=torch.float64)
    b = torch.tensor([[2.0, math.inf], [1.0, -1.0]], dtype=torch.float64)
    grad = G.advantage_routing_gradient(alpha, b)
    assert torch.isfinite(grad).all() and grad[0].eq(0).all()
    assert_book_close(grad[1], torch.tensor([0.4 * 1.2, 0.6 * -0.8], dtype=torch.float64))


def test_bad_reduction_is_rejected():
    params, x, y = _example((), 3, 2, 2, 2, 2)
    with pytest.raises(ValueError, match="reduction"):
        G.closed_form_head_gradients(x, params, y, reduction="max")


def test_law_discrepancies_reports_small_errors_for_the_laws():
    params, x, y = _example((2,), 5, 4, 3, 3, 4, seed=9)
    report = G.law_discrepancies(x, params, y, finite_differences=True)
    expected_checks = {f"{route}/{n}" for route in ("autograd", "finite_difference") for n in G.GRADIENT_NAMES}
    assert set(report) == expected_checks | {"fused/q", "fused/k", "fused/v", "row_sum", "masked_scores"}
    for check, (error, scale) in report.items():
        tol = FD_TOL if check.startswith("finite_difference") else RELATIVE_TOL
        assert scale > 0 and error <= tol * scale, check
    assert report["masked_scores"][0] == 0.0


def test_law_discrepancies_can_fail(monkeypatch):
    """A routing law that is off by 1e-9 of itself is caught by every route that depends on it."""
    params, x, y = _example((), 5, 4, 3, 3, 4, seed=10)
    exact = G.advantage_routing_gradient
    monkeypatch.setattr(G, "advantage_routing_gradient", lambda alpha, b: exact(alpha, b) * (1 + 1e-9))
    report = G.law_discrepancies(x, params, y)
    for check in ("autograd/scores", "autograd/q", "autograd/W_K", "fused/q", "fused/k"):
        error, scale = report[check]
        assert error > RELATIVE_TOL * scale, check


# --------------------------------------------------------------------------------------------- weight space


def _weight_step_example(T=9, d_in=6, seed=0, std=0.7, orthonormal=False):
    from attention_dynamics.science.attention import init_single_head, single_head_forward

    g = torch.Generator().manual_seed(seed)
    params = init_single_head(d_in, 4, 5, 3, std=std, generator=g, dtype=torch.float64)
    if orthonormal:  # rows of x orthonormal (needs d_in >= T)
        x = torch.linalg.qr(torch.randn(d_in, d_in, generator=g, dtype=torch.float64))[0][:T]
    else:
        x = torch.randn(T, d_in, generator=g, dtype=torch.float64)
    y = torch.randint(0, 3, (T,), generator=g)
    return params, x, y, single_head_forward(x, params, y)


def _actual_step(params, x, y, eta):
    """Scores and values after one autograd step of size eta on W_Q, W_K, W_V (W_O fixed)."""
    from attention_dynamics.science.attention import SingleHeadParams, single_head_forward

    W = {n: t.detach().clone().requires_grad_(True) for n, t in params.as_dict().items()}
    single_head_forward(x, SingleHeadParams(**W), y).loss.backward()
    moved = SingleHeadParams(**{n: (W[n] - eta * W[n].grad if n != "W_O" else W[n]).detach() for n in W})
    return single_head_forward(x, moved, y)


def test_the_weight_step_formulas_equal_an_autograd_step():
    """Δv through W_V and Δs through W_Q, W_K, as derived, equal what one real step does (to round-off)."""
    from attention_dynamics.science.weight_space import weight_space_step

    params, x, y, fwd = _weight_step_example()
    eta = 0.3
    step = weight_space_step(x, fwd.q, fwd.k, fwd.v, fwd.alpha, fwd.u, scale=fwd.scale, eta=eta)
    after = _actual_step(params, x, y, eta)
    assert_book_close(step.value_step, after.v - fwd.v, rtol=0)
    visible = step.visible
    assert_book_close(step.score_step[visible], (after.scores - fwd.scores)[visible], rtol=0)
    # the first-order part is off by the second-order term, which shrinks as eta²
    errors = []
    for h in (0.1, 0.05):
        small = weight_space_step(x, fwd.q, fwd.k, fwd.v, fwd.alpha, fwd.u, scale=fwd.scale, eta=h)
        errors.append(float((small.score_step - small.score_step_first).abs().max()))
    assert_book_close(errors[0] / errors[1], 4.0, rtol=1e-6)


def test_with_orthonormal_inputs_the_values_move_as_if_free():
    from attention_dynamics.science.weight_space import score_sign_agreement, value_step_cosine, weight_space_step

    params, x, y, fwd = _weight_step_example(T=6, d_in=8, orthonormal=True)
    step = weight_space_step(x, fwd.q, fwd.k, fwd.v, fwd.alpha, fwd.u, scale=fwd.scale, eta=0.1)
    assert_book_close(step.value_step, step.value_law, rtol=0)
    assert_book_close(value_step_cosine(step), 1.0, rtol=0)
    # generic inputs mix the values across positions: the cosine is below 1
    params, x, y, fwd = _weight_step_example(T=30, d_in=4, seed=2)
    mixed = weight_space_step(x, fwd.q, fwd.k, fwd.v, fwd.alpha, fwd.u, scale=fwd.scale, eta=0.1)
    assert value_step_cosine(mixed) < 0.99
    assert 0.0 <= score_sign_agreement(mixed, fwd.alpha) <= 1.0


def test_score_sign_agreement_is_one_for_the_free_law_itself():
    from attention_dynamics.science.weight_space import WeightStep, score_sign_agreement, weight_space_step

    params, x, y, fwd = _weight_step_example(T=12, seed=4)
    step = weight_space_step(x, fwd.q, fwd.k, fwd.v, fwd.alpha, fwd.u, scale=fwd.scale, eta=0.1)
    free = WeightStep(**{**step.__dict__, "score_step": step.score_law})
    assert score_sign_agreement(free, fwd.alpha) == 1.0
    flipped = WeightStep(**{**step.__dict__, "score_step": -step.score_law})
    assert score_sign_agreement(flipped, fwd.alpha) == 0.0
