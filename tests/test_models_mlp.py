"""The two MLPs: what each position can see, checked by perturbing inputs and by brute force."""

from __future__ import annotations

import pytest
import torch

from attention_dynamics.book.nbcompare import assert_book_close, book_close
from attention_dynamics.models.mlp import ContextBlindMLP, WindowMLP, mlp_stack


def test_context_blind_mlp_sees_only_the_current_position():
    torch.manual_seed(0)
    model = ContextBlindMLP(n_out=4, vocab_size=10, d_embed=8, hidden=16)
    x = torch.randint(0, 10, (3, 9), generator=torch.Generator().manual_seed(1))
    out = model(x)
    for t in range(9):
        x2 = torch.randint(0, 10, (3, 9), generator=torch.Generator().manual_seed(10 + t))
        x2[:, t] = x[:, t]  # everything else changes
        assert_book_close(model(x2)[:, t], out[:, t])


def test_window_is_the_left_padded_flattened_history():
    torch.manual_seed(2)
    W, d = 4, 3
    model = WindowMLP(n_out=2, vocab_size=7, window=W, d_embed=d, hidden=5)
    with torch.no_grad():
        model.pad.copy_(torch.tensor([9.0, 8.0, 7.0]))
    x = torch.randint(0, 7, (2, 6), generator=torch.Generator().manual_seed(3))
    win = model.windows(x)  # (B, T, W·d)
    e = model.embed(x)
    for t in range(6):
        slots = [e[:, s] if s >= 0 else model.pad.expand(2, d) for s in range(t - W + 1, t + 1)]
        assert_book_close(win[:, t], torch.cat(slots, dim=-1))
    assert_book_close(model(x), model.mlp(win))


def test_window_mlp_is_causal_and_forgets_beyond_its_window():
    torch.manual_seed(4)
    model = WindowMLP(n_out=3, input_dim=5, window=3, d_embed=4, hidden=8)
    x = torch.randn(2, 8, 5)
    x2 = x.clone()
    x2[:, 0] += 1.0  # older than the window for t ≥ 3
    x2[:, 6:] += 1.0  # the future of t ≤ 5
    out, out2 = model(x), model(x2)
    assert_book_close(out[:, 3:6], out2[:, 3:6])
    assert not book_close(out[:, 0], out2[:, 0]).all()


def test_mlp_stack_shape_and_validation():
    net = mlp_stack(6, 10, 2, 3)
    assert net(torch.randn(4, 6)).shape == (4, 3)
    assert sum(isinstance(m, torch.nn.Linear) for m in net) == 3
    with pytest.raises(ValueError, match="hidden"):
        mlp_stack(6, 0, 1, 3)
    with pytest.raises(ValueError, match="window"):
        WindowMLP(n_out=2, vocab_size=3, window=0)
