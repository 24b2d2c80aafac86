"""When a curve settles: the one place that answers "the first step at which …" and "the first step
after which … for good", for every settling, crossing and quiescence measure of the book."""

from __future__ import annotations

import numpy as np

__all__ = ["first_true", "first_true_for_good"]


def first_true(condition) -> int | None:
    """Return the index of the first True of a 1-D boolean sequence, or None if there is none."""
    c = np.asarray(condition, dtype=bool)
    if c.ndim != 1:
        raise ValueError(f"condition must be 1-D, got shape {c.shape}")
    hits = np.flatnonzero(c)
    return int(hits[0]) if hits.size else None


def first_true_for_good(condition) -> int | None:
    """Return the first index from which a 1-D boolean sequence is True to its end, or None if its last entry is False."""
    c = np.asarray(condition, dtype=bool)
    if c.ndim != 1:
        raise ValueError(f"condition must be 1-D, got shape {c.shape}")
    if c.size == 0 or not c[-1]:
        return None
    misses = np.flatnonzero(~c)
    return int(misses[-1] + 1) if misses.size else 0
