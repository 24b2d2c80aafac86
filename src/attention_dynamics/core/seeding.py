"""The one seeding function of the book: same seed, same machine, same outputs."""

from __future__ import annotations

import os
import random

import numpy as np
import torch

__all__ = ["seed_everything", "torch_generator", "STREAMS", "stream"]

#: The book's named random streams: ``stream(seed, name, index) = seed + STREAMS[name] + index``. One
#: run draws each kind of randomness from its own stream, so adding a draw of one kind never moves
#: another; the offsets are the ones the book's results were computed with.
STREAMS = {
    "init": 0,  # initial weights (a model's, a head's), and chapter 8's encoder batches
    "data": 1,  # training data of chapter 7's runs; chapter 8's evaluation batch
    "analysis": 2,  # chapter 7's analysis batches (index: the task)
    "clusters": 4,  # chapter 7's state-clustering batch
    "null": 7,  # permutation nulls
    "train": 1_000,  # chapter 6's training data
    "eval": 2_000,  # chapter 6's evaluation batches (index: the test length)
    "probe": 3_000,  # chapter 6's probe batch
    "heldout": 10_000,  # held-out sequences (index: the sequence, or the task)
}


def seed_everything(seed: int, *, deterministic: bool = True) -> torch.Generator:
    """Seed Python, NumPy and PyTorch; return a fresh ``torch.Generator`` seeded with ``seed``.

    Chapters call this once at the top; functions that draw random numbers accept an explicit
    ``generator`` so that experiments with several seeds do not depend on call order.
    """
    if not isinstance(seed, (int, np.integer)) or isinstance(seed, bool):
        raise TypeError(f"seed must be an integer, got {seed!r}")
    if seed < 0:
        raise ValueError(f"seed must be non-negative, got {seed}")
    seed = int(seed)
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)
    if deterministic:
        # Deterministic kernels where PyTorch has them; warn (not fail) where it does not.
        torch.use_deterministic_algorithms(True, warn_only=True)
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    return torch_generator(seed)


def stream(seed: int, name: str, index: int = 0) -> int:
    """Return the integer seed of random stream ``name`` (see :data:`STREAMS`) of a run seeded with ``seed``."""
    if name not in STREAMS:
        raise ValueError(f"unknown random stream {name!r}; choose one of {', '.join(STREAMS)}")
    if index < 0:
        raise ValueError(f"a stream index must be non-negative, got {index}")
    return int(seed) + STREAMS[name] + int(index)


def torch_generator(seed: int, device: str | torch.device = "cpu") -> torch.Generator:
    """Return a ``torch.Generator`` on ``device`` seeded with ``seed`` (for explicit, order-free draws)."""
    g = torch.Generator(device=device)
    g.manual_seed(int(seed))
    return g
