"""The single head's forward pass and error signal against independent computations (the paper's §2)."""

from __future__ import annotations

import math

import jaxtyping
import pytest
import torch
import torch.nn.functional as F

from attention_dynamics.book.nbcompare import assert_book_close
from attention_dynamics.core.shapes import CHECK_SHAPES
from attention_dynamics.science import gradients as G
from attention_dynamics.science.attention import (
    SingleHeadParams,
    autograd_upstream_gradient,
    causal_mask,
    init_single_head,
    sdpa_context,
    single_head_forward,
)

SHAPES = [  # (batch dims, T, d_in, d_k, d_v, C)
    ((), 1, 3, 2, 2, 2),
    ((), 7, 5, 3, 4, 3),
    ((4,), 6, 20, 10, 15, 8),
    ((2, 3), 5, 4, 4, 2, 5),
]


def _example(batch, T, d_in, d_k, d_v, C, seed=0):
    g = torch.Generator().manual_seed(seed)
    params = init_single_head(d_in, d_k, d_v, C, std=0.7, generator=g, dtype=torch.float64)
    x = torch.randn(*batch, T, d_in, generator=g, dtype=torch.float64)
    y = torch.randint(0, C, (*batch, T), generator=g)
    return params, x, y


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("causal", [True, False])
def test_forward_matches_scaled_dot_product_attention(shape, causal):
    params, x, y = _example(*shape)
    fwd = single_head_forward(x, params, y, causal=causal)
    assert_book_close(fwd.g, sdpa_context(x, params, causal=causal), rtol=0)


@pytest.mark.parametrize("shape", SHAPES)
def test_forward_matches_hand_written_softmax_attention(shape):
    """Against a transparent loop over queries, independent of the vectorised code."""
    params, x, y = _example(*shape)
    fwd = single_head_forward(x, params, y)
    xs = x.reshape(-1, x.shape[-2], x.shape[-1])
    gs = fwd.g.reshape(-1, *fwd.g.shape[-2:])
    for b in range(xs.shape[0]):
        for i in range(xs.shape[1]):
            q = xs[b, i] @ params.W_Q
            keys = xs[b, : i + 1] @ params.W_K
            vals = xs[b, : i + 1] @ params.W_V
            w = torch.softmax(keys @ q / math.sqrt(params.d_k), dim=0)
            assert_book_close(gs[b, i], w @ vals, rtol=0)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_upstream_gradient_matches_autograd(shape, reduction):
    params, x, y = _example(*shape)
    fwd = single_head_forward(x, params, y, reduction=reduction)
    assert_book_close(fwd.u, autograd_upstream_gradient(x, params, y, reduction=reduction), rtol=0)


def test_upstream_gradient_through_the_whole_graph():
    """u from the package equals ∂L/∂g obtained by retaining g's grad in a full autograd pass."""
    params, x, y = _example((3,), 6, 5, 3, 4, 3)
    p = params.clone().requires_grad_()
    fwd = single_head_forward(x, p, y)
    fwd.g.retain_grad()
    fwd.loss.backward()
    assert_book_close(fwd.u, fwd.g.grad, rtol=0)


def test_loss_matches_functional_cross_entropy():
    params, x, y = _example((2,), 5, 4, 3, 3, 4)
    fwd = single_head_forward(x, params, y)
    expected = F.cross_entropy(fwd.logits.reshape(-1, 4), y.reshape(-1))
    assert_book_close(fwd.loss, expected, rtol=0)
    assert_book_close(fwd.p, torch.softmax(fwd.logits, -1))


def test_compatibility_and_expected_compatibility_identity():
    params, x, y = _example((2,), 6, 4, 3, 3, 4)
    fwd = single_head_forward(x, params, y)
    assert_book_close(fwd.b, torch.einsum("...id,...jd->...ij", fwd.u, fwd.v), rtol=0)
    # E_alpha[b] = u·g (the paper's §2)
    assert_book_close((fwd.alpha * fwd.b).sum(-1), (fwd.u * fwd.g).sum(-1), rtol=0)


def test_causal_mask_and_attention_rows():
    params, x, y = _example((), 6, 4, 3, 3, 4)
    fwd = single_head_forward(x, params, y)
    mask = causal_mask(6)
    assert torch.all(fwd.alpha[~mask] == 0)
    assert_book_close(fwd.alpha.sum(-1), torch.ones(6, dtype=torch.float64))
    assert torch.all(torch.isinf(fwd.scores[~mask]))
    assert fwd.alpha[0, 0] == 1.0  # the first query can only see itself


def test_paper_head_shapes_and_init_scale():
    g = torch.Generator().manual_seed(1)
    params = init_single_head(generator=g)
    shapes = {n: tuple(t.shape) for n, t in params.as_dict().items()}
    assert shapes == {"W_Q": (20, 10), "W_K": (20, 10), "W_V": (20, 15), "W_O": (15, 8)}
    allw = torch.cat([t.flatten() for t in params.as_dict().values()])
    assert abs(allw.std().item() - 0.1) < 0.01


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"d_in": 0}, "d_in must be a positive integer"),
        ({"d_k": -1}, "d_k must be a positive integer"),
        ({"n_classes": 2.5}, "n_classes must be a positive integer"),
        ({"std": 0.0}, "std must be positive"),
    ],
)
def test_init_rejects_bad_parameters(kwargs, match):
    with pytest.raises(ValueError, match=match):
        init_single_head(**kwargs)


def test_forward_rejects_mismatched_shapes():
    params = init_single_head(4, 3, 3, 2)
    # the function's own checks (what a reader meets when shapes are not checked at run time) ...
    unchecked = getattr(single_head_forward, "__wrapped__", single_head_forward)
    with pytest.raises(ValueError, match="x must be"):
        unchecked(torch.randn(5, 3), params)
    with pytest.raises(ValueError, match="targets must have shape"):
        unchecked(torch.randn(5, 4), params, torch.zeros(4, dtype=torch.long))
    with pytest.raises(ValueError, match="W_K must have"):
        SingleHeadParams(torch.zeros(4, 3), torch.zeros(4, 2), torch.zeros(4, 3), torch.zeros(3, 2))


@pytest.mark.skipif(not CHECK_SHAPES, reason="shape annotations are checked only with ATTENTION_DYNAMICS_CHECK_SHAPES=1")
def test_shape_annotations_are_checked_at_run_time():
    """The public API's jaxtyping annotations catch what disagrees with them, dimension names consistent in a call."""
    params = init_single_head(4, 3, 3, 2)
    with pytest.raises(jaxtyping.TypeCheckError, match="targets"):  # T = 5 positions, 4 targets
        single_head_forward(torch.randn(5, 4), params, torch.zeros(4, dtype=torch.long))
    with pytest.raises(jaxtyping.TypeCheckError):  # float targets where class indices are annotated
        single_head_forward(torch.randn(5, 4), params, torch.zeros(5))
    alpha = torch.softmax(torch.randn(3, 4, 4), -1)
    with pytest.raises(jaxtyping.TypeCheckError):  # b of another shape than alpha
        G.advantage(alpha, torch.randn(3, 4, 5))
    with pytest.raises(jaxtyping.TypeCheckError):  # u's queries disagree with alpha's
        G.responsibility_weighted_value_gradient(alpha, torch.randn(3, 5, 2))
    assert G.advantage(alpha, torch.randn(3, 4, 4)).shape == (3, 4, 4)  # and a right shape passes
