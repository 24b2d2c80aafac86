"""The one seeding function of the book: same seed, same machine, same outputs."""

from __future__ import annotations

import os
import random

import numpy as np
import torch

__all__ = ["seed_everything", "torch_generator", "STREAMS", "LEGACY_OFFSETS", "LEGACY_STREAMS", "HASHED_FLOOR",
           "stream", "legacy_stream_values"]

#: The book's named random streams, and what each one draws. A run draws each kind of randomness from its own
#: stream, so adding a draw of one kind never moves another, and no two streams the book uses share a generator
#: seed (tests/test_seeding.py enumerates every stream the book and its stored results use).
STREAMS: dict[str, str] = {
    "init": "initial weights (a model's, a head's): the run's seed itself, as the paper's script seeds its head",
    "data": "training batches of chapter 7's families and of the recall heads",
    "train": "training batches of the wind-tunnel transformers (chapters 4, 6, 8)",
    "eval": "held-out evaluation batches of the wind tunnels (index: the test length)",
    "probe": "probe batches on which geometry and checkpoints are measured (index: which probe)",
    "heldout": "held-out sequences (index: the sequence, or the task)",
    "analysis": "chapter 7's analysis batches (index: the task)",
    "clusters": "chapter 7's state-clustering batch",
    "null": "permutation nulls",
    "inputs": "random inputs of a worked example or a numerical check",
    "controls": "the no-routing controls' own draws",
}

#: Streams whose numbers the committed stored results were computed with, kept as they were:
#: ``seed + LEGACY_OFFSETS[name] + index`` for the (seed, index) pairs of :data:`LEGACY_STREAMS`. These are
#: the wind tunnels' batches (chapters 4, 6 and 8: seeds 0–99 train and probe, seeds 0–3 evaluate at the
#: tunnels' test lengths) and the sticky chain's held-out sequences (the paper's five seeds). Keeping them spares
#: recomputing every tunnel run; :func:`legacy_stream_values` shows (and the tests check) that no two of them, and
#: no seed below :data:`HASHED_FLOOR` used as an ``init`` stream outside their ranges, share a number.
LEGACY_OFFSETS: dict[str, int] = {"train": 1_000, "eval": 2_000, "probe": 3_000, "heldout": 10_000}
_PAPER_SEEDS = (42, 2024, 1337, 7777, 9999)  # the sticky chain's seeds (tasks.sticky_chain.PAPER_SEEDS)
LEGACY_STREAMS: dict[str, frozenset[tuple[int, int]]] = {
    "train": frozenset((s, 0) for s in range(100)),
    "probe": frozenset((s, 0) for s in range(100)),
    "eval": frozenset((s, i) for s in range(4) for i in (0, 20, 30, 50)),
    "heldout": frozenset((s, k) for s in _PAPER_SEEDS for k in range(100)),
}
#: Every other stream is a 64-bit hash (NumPy's SeedSequence of seed, name and index) at or above this floor, so it
#: never equals a run's seed (an ``init`` stream) or a legacy number.
HASHED_FLOOR = 2**32


def legacy_stream_values() -> dict[tuple[str, int, int], int]:
    """Return every legacy stream's number by ``(name, seed, index)`` (see :data:`LEGACY_STREAMS`)."""
    return {(name, s, i): s + LEGACY_OFFSETS[name] + i for name, pairs in LEGACY_STREAMS.items() for s, i in pairs}


def _check_legacy() -> None:
    values = legacy_stream_values()
    if len(set(values.values())) != len(values):
        raise AssertionError("two legacy streams share a number")


_check_legacy()


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
    """Return the integer seed of random stream ``name`` (see :data:`STREAMS`) of a run seeded with ``seed``.

    ``init`` is the seed itself. A legacy stream (:data:`LEGACY_STREAMS`) keeps the number the committed results
    were computed with, ``seed + offset + index``. Every other stream is derived from ``(seed, name, index)`` by
    NumPy's ``SeedSequence`` hash, mapped to ``[2**32, 2**63)``: distinct triples get distinct numbers (barring a
    64-bit hash collision, which the tests rule out for every stream in use), and none equals a seed or a legacy
    number.
    """
    if name not in STREAMS:
        raise ValueError(f"unknown random stream {name!r}; choose one of {', '.join(STREAMS)}")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"a seed must be a non-negative integer, got {seed!r}")
    if isinstance(index, bool) or not isinstance(index, (int, np.integer)) or index < 0:
        raise ValueError(f"a stream index must be a non-negative integer, got {index!r}")
    seed, index = int(seed), int(index)
    if name == "init":
        return seed
    if (seed, index) in LEGACY_STREAMS.get(name, ()):
        return seed + LEGACY_OFFSETS[name] + index
    code = int.from_bytes(name.encode("ascii"), "little")
    word = int(np.random.SeedSequence([seed, code, index]).generate_state(1, dtype=np.uint64)[0])
    return HASHED_FLOOR + word % (2**63 - HASHED_FLOOR)


def torch_generator(seed: int, device: str | torch.device = "cpu") -> torch.Generator:
    """Return a ``torch.Generator`` on ``device`` seeded with ``seed`` (for explicit, order-free draws)."""
    g = torch.Generator(device=device)
    g.manual_seed(int(seed))
    return g
