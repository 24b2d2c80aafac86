"""The LSTM sequence model against the LSTM equations written out by hand."""

from __future__ import annotations

import pytest
import torch

from attention_dynamics.book.nbcompare import assert_book_close
from attention_dynamics.models.recurrent import LSTMSequenceModel


def _lstm_by_hand(lstm: torch.nn.LSTM, e: torch.Tensor) -> torch.Tensor:
    """Return the hidden states of a one-layer LSTM from its equations (gates i, f, g, o)."""
    W_ih, W_hh, b = lstm.weight_ih_l0, lstm.weight_hh_l0, lstm.bias_ih_l0 + lstm.bias_hh_l0
    B, T, _ = e.shape
    H = lstm.hidden_size
    h, c = torch.zeros(B, H, dtype=e.dtype), torch.zeros(B, H, dtype=e.dtype)
    out = []
    for t in range(T):
        gates = e[:, t] @ W_ih.T + h @ W_hh.T + b
        i, f, g, o = gates.split(H, dim=-1)
        c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
        h = torch.sigmoid(o) * torch.tanh(c)
        out.append(h)
    return torch.stack(out, dim=1)


def test_states_follow_the_lstm_equations():
    torch.manual_seed(0)
    model = LSTMSequenceModel(n_out=4, vocab_size=9, hidden_size=6, d_embed=5).double()
    x = torch.randint(0, 9, (3, 7), generator=torch.Generator().manual_seed(1))
    expected = _lstm_by_hand(model.lstm, model.embed(x))
    assert_book_close(model.final_states(x), expected, rtol=1e-10)
    assert_book_close(model(x), model.head(expected), rtol=1e-10)


def test_causal_and_feature_inputs():
    torch.manual_seed(2)
    model = LSTMSequenceModel(n_out=3, input_dim=4, hidden_size=8, n_layers=2)
    x = torch.randn(2, 6, 4)
    x2 = x.clone()
    x2[:, 4:] += 1.0
    assert_book_close(model(x)[:, :4], model(x2)[:, :4])
    assert model(x).shape == (2, 6, 3)


def test_bad_arguments_are_rejected():
    with pytest.raises(ValueError, match="exactly one"):
        LSTMSequenceModel(n_out=3)
    with pytest.raises(ValueError, match="hidden_size"):
        LSTMSequenceModel(n_out=3, vocab_size=4, hidden_size=-1)
