"""Shared test fixtures: float64 by default where precision matters, and the repository root."""

from __future__ import annotations

import os

# Check the shape annotations of the public API at every call (attention_dynamics.core.shapes); set before the package is
# imported, since the check is decided at import.
os.environ.setdefault("ATTENTION_DYNAMICS_CHECK_SHAPES", "1")

from pathlib import Path

import pytest
import torch

REPO_ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def repo_root() -> Path:
    """Return the repository root."""
    return REPO_ROOT


@pytest.fixture(autouse=True)
def _single_thread_determinism():
    """Run each test with the same thread count so float reductions are reproducible."""
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)
