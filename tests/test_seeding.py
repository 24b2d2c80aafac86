"""Determinism: one seeding function; the same seed gives the same results, a different seed does not."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attention_dynamics.core.seeding import seed_everything, torch_generator
from attention_dynamics.models import CausalTransformer
from attention_dynamics.science.attention import init_single_head, single_head_forward
from attention_dynamics.training import fit


def _chapter_one_computation(seed: int):
    """The worked example of chapter 1: draw a head and inputs, run the head."""
    g = seed_everything(seed)
    params = init_single_head(4, 3, 3, 3, std=1.0, generator=g, dtype=torch.float64)
    x = torch.randn(6, 4, generator=g, dtype=torch.float64)
    y = torch.randint(0, 3, (6,), generator=g)
    fwd = single_head_forward(x, params, y)
    return torch.cat([fwd.alpha.flatten(), fwd.b.flatten(), fwd.loss.reshape(1)])


def _short_training_run(seed: int) -> np.ndarray:
    """Train a small transformer for a few steps with fresh random batches (uses the global RNG too)."""
    seed_everything(seed)
    model = CausalTransformer(n_out=5, vocab_size=5, d_model=16, n_layers=1, n_heads=2, max_len=8)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)

    def batches(step):
        x = torch.randint(0, 5, (8, 8))
        return x, torch.roll(x, 1, dims=1)

    def loss_fn(m, batch):
        x, y = batch
        return torch.nn.functional.cross_entropy(m(x).reshape(-1, 5), y.reshape(-1))

    return fit(model, batches, steps=15, optimizer=opt, loss_fn=loss_fn).losses


def test_same_seed_same_chapter_results():
    assert torch.equal(_chapter_one_computation(3), _chapter_one_computation(3))
    assert not torch.equal(_chapter_one_computation(3), _chapter_one_computation(4))


def test_same_seed_same_training_losses():
    a, b = _short_training_run(11), _short_training_run(11)
    assert np.array_equal(a, b)
    assert not np.array_equal(a, _short_training_run(12))


@pytest.mark.parametrize("bad", [-1, 1.5, "3", True])
def test_seed_everything_rejects_bad_seeds(bad):
    with pytest.raises((TypeError, ValueError)):
        seed_everything(bad)


def test_streams_are_the_offsets_the_results_were_computed_with_and_distinct():
    from attention_dynamics.core.seeding import STREAMS, stream

    assert stream(5, "init") == 5 and stream(5, "train") == 1_005 and stream(5, "heldout", 3) == 10_008
    wide = {name: offset for name, offset in STREAMS.items() if offset >= 1_000}
    assert len(set(wide.values())) == len(wide)  # chapter 6's streams never share a seed
    a = torch.rand(4, generator=torch_generator(stream(0, "train")))
    b = torch.rand(4, generator=torch_generator(stream(0, "eval")))
    assert not torch.equal(a, b)


@pytest.mark.parametrize("name, index", [("nope", 0), ("data", -1)])
def test_stream_rejects_unknown_names_and_negative_indices(name, index):
    from attention_dynamics.core.seeding import stream

    with pytest.raises(ValueError):
        stream(0, name, index)
