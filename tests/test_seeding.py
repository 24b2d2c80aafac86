"""Determinism: one seeding function; the same seed gives the same results, a different seed does not."""

from __future__ import annotations

from pathlib import Path

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


def test_legacy_streams_keep_the_numbers_the_stored_results_were_computed_with():
    from attention_dynamics.core.seeding import stream

    assert stream(5, "init") == 5 and stream(5, "train") == 1_005 and stream(3, "eval", 20) == 2_023
    assert stream(5, "probe") == 3_005 and stream(42, "heldout", 3) == 10_045
    a = torch.rand(4, generator=torch_generator(stream(0, "train")))
    b = torch.rand(4, generator=torch_generator(stream(0, "eval")))
    assert not torch.equal(a, b)


def _seeds_in_use() -> set[int]:
    """Every seed the book and its stored results run with, as a superset: 0–99 (chapters' defaults, the seeds of
    the tolerance measurement, every seed spread) and the sticky chain's seeds."""
    from attention_dynamics.chapters.sticky_markov_chain import paper_scale
    from attention_dynamics.tasks.sticky_chain import PAPER_SEEDS

    return set(range(100)) | set(PAPER_SEEDS) | set(paper_scale._TWENTY)


#: The indices each stream is drawn with, as a superset of what the book uses (eval: the test lengths of every
#: scale; heldout: a sequence or a task; analysis: the task; clusters: the batch and the k-means start).
_INDICES = {"eval": (0, 8, 12, 20, 30, 50, 100), "heldout": tuple(range(100)), "analysis": tuple(range(10)),
            "probe": (0, 1), "clusters": (0, 1)}


def test_no_two_streams_in_use_share_a_generator_seed():
    from attention_dynamics.core.seeding import HASHED_FLOOR, STREAMS, legacy_stream_values, stream

    numbers: dict[int, tuple[str, int, int]] = {}
    for seed in sorted(_seeds_in_use()):
        for name in STREAMS:
            for index in _INDICES.get(name, (0,)):
                value = stream(seed, name, index)
                assert value not in numbers, f"{(name, seed, index)} and {numbers[value]} share the seed {value}"
                numbers[value] = (name, seed, index)
                assert value < HASHED_FLOOR or (name, seed, index) not in legacy_stream_values()
    assert len(numbers) > 10_000
    # the legacy numbers are exactly the ones the committed results were computed with, and distinct
    legacy = legacy_stream_values()
    assert len(set(legacy.values())) == len(legacy)
    assert all(stream(s, name, i) == value for (name, s, i), value in legacy.items())


def test_hashed_streams_fit_every_generator_and_do_not_collide_with_seeds():
    from attention_dynamics.core.seeding import HASHED_FLOOR, stream

    value = stream(7, "data")
    assert HASHED_FLOOR <= value < 2**63
    torch_generator(value)  # torch accepts it
    np.random.default_rng(value)
    assert stream(7, "data") == value and stream(8, "data") != value and stream(7, "data", 1) != value


# Raw seeds passed straight to a generator (not through stream) are the run's init stream; each such site must
# draw initial weights, follow the paper's protocol, or be a statistic's own fixed resampling seed.
_RAW_SEED_SITES = {
    "training/families.py": ("torch.manual_seed(seed)", 2, "model initialisation: the init stream"),
    "chapters/sticky_markov_chain/paper_scale.py": ("torch.manual_seed(int(seed))", 1, "the deep variant's "
                                                    "initialisation: the init stream"),
    "chapters/architectures/runs.py": ("torch.manual_seed(seed)", 1, "a model's initialisation: the init stream"),
    "chapters/diagnostics/runs.py": ("torch.manual_seed(seed)", 1, "a model's initialisation: the init stream"),
    "tasks/sticky_chain.py": ("torch_generator(seed)", 2, "the paper's protocol: the reference script seeds one "
                              "generator with the run's seed for the chain and the head alike"),
}


def test_raw_seeds_reach_generators_only_where_declared():
    import re

    package = Path(__file__).resolve().parents[1] / "src" / "attention_dynamics"
    pattern = re.compile(r"(torch\.manual_seed\((?:int\()?seed\)?\)|torch_generator\(seed\))")
    found = {}
    for path in package.rglob("*.py"):
        if path.name == "seeding.py":  # the seeding function itself
            continue
        hits = pattern.findall(path.read_text())
        if hits:
            found[path.relative_to(package).as_posix()] = len(hits)
    assert found == {site: count for site, (_, count, _) in _RAW_SEED_SITES.items()}


@pytest.mark.parametrize("name, index", [("nope", 0), ("data", -1)])
def test_stream_rejects_unknown_names_and_negative_indices(name, index):
    from attention_dynamics.core.seeding import stream

    with pytest.raises(ValueError):
        stream(0, name, index)
