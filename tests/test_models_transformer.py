"""The causal transformer: explicit attention vs the fused kernel, ALiBi, causality, probes."""

from __future__ import annotations

import math

import pytest
import torch

from attention_dynamics.book.nbcompare import assert_book_close, book_close
from attention_dynamics.models.transformer import CausalTransformer, probe_activations


def _model(positional, tokens=True, seed=0, n_heads=2):
    torch.manual_seed(seed)
    kwargs = dict(vocab_size=7) if tokens else dict(input_dim=5)
    return CausalTransformer(n_out=3, d_model=16, n_layers=2, n_heads=n_heads, max_len=12, positional=positional,
                             **kwargs).double()


def _inputs(tokens, B=3, T=9, seed=1):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, 7, (B, T), generator=g) if tokens else torch.randn(B, T, 5, generator=g, dtype=torch.float64)


@pytest.mark.parametrize("positional", ["learned", "sinusoidal", "alibi", "none"])
@pytest.mark.parametrize("tokens", [True, False])
def test_explicit_attention_matches_fused_kernel(positional, tokens):
    model, x = _model(positional, tokens), _inputs(tokens)
    explicit = model(x)
    for attn in model.attention_modules():
        attn.fused = True
    assert_book_close(model(x), explicit, rtol=0)


@pytest.mark.parametrize("positional", ["learned", "sinusoidal", "alibi", "none"])
def test_outputs_are_causal(positional):
    model, x = _model(positional), _inputs(True)
    changed = x.clone()
    changed[:, 5:] = (changed[:, 5:] + 1) % 7  # change only the future of position 4
    assert torch.equal(model(changed)[:, :5], model(x)[:, :5])
    assert not book_close(model(changed)[:, 5:], model(x)[:, 5:]).all()


def test_alibi_weights_equal_softmax_of_scores_minus_slope_times_distance():
    model, x = _model("alibi", n_heads=4), _inputs(True)
    _, layers = probe_activations(model, x)
    slopes = [2 ** (-8 * (h + 1) / 4) for h in range(4)]  # Press et al. (2022): 2^-2, 2^-4, 2^-6, 2^-8
    T = x.shape[1]
    for lay in layers:
        q, k = lay["queries"], lay["keys"]
        for h, m in enumerate(slopes):
            scores = q[:, h] @ k[:, h].transpose(-1, -2) / math.sqrt(q.shape[-1])
            for i in range(T):
                for j in range(i + 1):
                    scores[:, i, j] -= m * (i - j)
            alpha = torch.softmax(scores.masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), -math.inf), -1)
            assert_book_close(lay["attn_weights"][:, h], alpha, rtol=0)


def test_alibi_and_sinusoidal_run_beyond_max_len_learned_does_not():
    for positional in ("alibi", "sinusoidal", "none"):
        assert _model(positional)(_inputs(True, T=20)).shape == (3, 20, 3)
    with pytest.raises(ValueError):
        _model("learned")(_inputs(True, T=20))


def test_probe_activations_shapes_consistency_and_restored_state():
    model, x = _model("learned"), _inputs(True)
    for attn in model.attention_modules():
        attn.fused = True
    model.train()
    logits, layers = probe_activations(model, x)
    assert model.training and all(a.fused for a in model.attention_modules())
    assert_book_close(logits, model.eval()(x), rtol=0)
    assert len(layers) == 2
    for lay in layers:
        for name in ("queries", "keys", "values", "context"):
            assert lay[name].shape == (3, 2, 9, 8)
        assert lay["attn_weights"].shape == (3, 2, 9, 9)
        assert lay["residual"].shape == (3, 9, 16)
        assert_book_close(lay["context"], lay["attn_weights"] @ lay["values"], rtol=0)
        assert_book_close(lay["attn_weights"].sum(-1), torch.ones(3, 2, 9, dtype=torch.float64))
    # the residual stream after the last block, through the read-out, gives the logits
    assert_book_close(model.head(model.ln_final(layers[-1]["residual_out"])), logits, rtol=0)
    # and the stream entering layer 1 is layer 0's output
    assert_book_close(model.blocks[0](layers[0]["residual"]), layers[1]["residual"], rtol=0)


def test_invalid_positional_is_rejected():
    with pytest.raises(ValueError, match="positional"):
        CausalTransformer(n_out=2, vocab_size=3, positional="rotary")
