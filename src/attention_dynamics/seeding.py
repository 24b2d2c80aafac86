"""The one seeding function of the book: same seed, same machine, same outputs."""

from __future__ import annotations

import os
import random

import numpy as np
import torch

__all__ = ["seed_everything", "torch_generator"]


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


def torch_generator(seed: int, device: str | torch.device = "cpu") -> torch.Generator:
    """Return a ``torch.Generator`` on ``device`` seeded with ``seed`` (for explicit, order-free draws)."""
    g = torch.Generator(device=device)
    g.manual_seed(int(seed))
    return g
