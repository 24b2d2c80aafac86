"""Mamba: the selective scan written as routing weights reproduces mambapy's own scan."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from attention_dynamics.book.nbcompare import assert_book_close
from attention_dynamics.models import count_parameters
from attention_dynamics.models.mamba import (
    MambaSequenceModel,
    block_output_from_routing,
    forward_with_explicit_routing,
    routed_scan_output,
    selective_scan_routing,
)


def _model(seed: int = 0, **kw) -> MambaSequenceModel:
    torch.manual_seed(seed)
    model = MambaSequenceModel(n_out=5, vocab_size=11, d_model=16, n_layers=2, d_state=4, **kw).double()
    with torch.no_grad():  # Δ of order 1 (not mambapy's tiny initial steps), so the decays matter in the test
        for block in model.blocks():
            block.dt_proj.bias.uniform_(-1.0, 1.0)
            block.x_proj.weight.mul_(4.0)
    return model


def _block_input(model, x, layer):
    h = model.embed(x)
    for residual in model.backbone.layers[:layer]:
        h = residual(h)
    return model.backbone.layers[layer].norm(h)


@pytest.mark.parametrize("layer", [0, 1])
def test_routing_weights_reproduce_mambapy_parallel_and_sequential_scans(layer):
    model = _model()
    x = torch.randint(0, 11, (3, 13), generator=torch.Generator().manual_seed(1))
    block = model.blocks()[layer]
    inp = _block_input(model, x, layer)
    routing = selective_scan_routing(block, inp)
    # mambapy's own ssm on the same inner inputs, in both of its modes
    expected = {}
    for pscan in (True, False):
        block.config.pscan = pscan
        expected[pscan] = block.ssm(routing.inputs, routing.gate)
    block.config.pscan = True
    got = routed_scan_output(routing)
    assert got.abs().max() > 0.1  # a non-trivial output
    assert_book_close(got, expected[False], rtol=1e-10)
    assert_book_close(got, expected[True], rtol=1e-9, atol=1e-10)
    assert_book_close(block_output_from_routing(block, routing), block(inp), rtol=1e-10)


def test_routing_weights_are_causal_and_decay_with_distance():
    model = _model()
    x = torch.randint(0, 11, (2, 9), generator=torch.Generator().manual_seed(2))
    w = selective_scan_routing(model.blocks()[0], _block_input(model, x, 0)).weights  # (B, ED, T, T)
    assert w.shape == (2, 32, 9, 9)
    assert torch.all(w.triu(1) == 0)
    assert w.tril().abs().sum() > 0


@pytest.mark.parametrize("layer", [0, 1])
def test_explicit_routing_forward_equals_model_and_its_gradient_is_the_compatibility(layer):
    """∂L/∂w_ij[c] = u_i[c] · x_j[c] with u = ∂L/∂y: the scalar compatibility of the paper's b_ij."""
    model = _model(3)
    x = torch.randint(0, 11, (2, 7), generator=torch.Generator().manual_seed(4))
    y = torch.randint(0, 5, (2, 7), generator=torch.Generator().manual_seed(5))
    logits, routing = forward_with_explicit_routing(model, x, layer)
    assert_book_close(logits, model(x), rtol=1e-10)
    scan_out = routed_scan_output(routing)  # the same y, recomputed so that we can differentiate with respect to it
    out = model.backbone.layers[layer].mixer.out_proj(scan_out * F.silu(routing.gate))
    # rebuild the loss from scan_out to read u = ∂L/∂y
    h = model.embed(x)
    for idx, residual in enumerate(model.backbone.layers):
        h = h + out if idx == layer else residual(h)
    loss = F.cross_entropy(model.head(model.norm_final(h)).reshape(-1, 5), y.reshape(-1))
    grad_w, u = torch.autograd.grad(loss, [routing.weights, scan_out])
    compat = torch.einsum("bic,bjc->bcij", u, routing.inputs)  # (B, ED, T, T), every i, j (masked w_ij = 0 still has a slope)
    assert_book_close(grad_w, compat, rtol=1e-10)


def test_model_is_causal_and_accepts_features():
    model = _model()
    x = torch.randint(0, 11, (2, 8), generator=torch.Generator().manual_seed(6))
    x2 = x.clone()
    x2[:, 5:] = (x2[:, 5:] + 1) % 11  # change the future
    assert_book_close(model(x)[:, :5], model(x2)[:, :5])
    feat = MambaSequenceModel(n_out=3, input_dim=7, d_model=8, n_layers=1)
    out = feat(torch.randn(4, 6, 7))
    assert out.shape == (4, 6, 3)
    assert feat.final_states(torch.randn(4, 6, 7)).shape == (4, 6, 8)
    assert count_parameters(feat) > 0


def test_bad_arguments_are_rejected():
    with pytest.raises(ValueError, match="exactly one"):
        MambaSequenceModel(n_out=3, vocab_size=4, input_dim=4)
    with pytest.raises(ValueError, match="d_model"):
        MambaSequenceModel(n_out=3, vocab_size=4, d_model=0)
    with pytest.raises(ValueError, match="layer"):
        forward_with_explicit_routing(_model(), torch.zeros(1, 3, dtype=torch.long), 2)
