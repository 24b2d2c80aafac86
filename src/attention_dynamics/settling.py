"""When a curve settles: the one place that answers "the first step at which …" and "the first step
after which … for good", for every settling, crossing and quiescence measure of the book."""

from __future__ import annotations

import numpy as np

__all__ = ["first_true", "first_true_for_good", "PLATEAU_TOLERANCE", "late_drop", "has_plateaued"]


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


#: A curve has reached its plateau when its excess over the floor fell by less than this fraction over the
#: last 20% of training (the mean over the last 10% of steps against the mean over the 10% before).
PLATEAU_TOLERANCE = 0.05


def late_drop(curve, floor: float = 0.0, *, window: float = 0.1) -> float:
    """Return how much a training curve's excess over ``floor`` fell over its last ``2 · window`` of steps.

    The relative drop ``(before − after) / before`` of the mean excess ``curve − floor`` over the
    second-to-last and the last ``window`` fraction of the steps: 0 on a plateau, positive while
    the curve still falls, negative when it rises.
    """
    c = np.asarray(curve, dtype=float) - float(floor)
    if c.ndim != 1 or c.size < 2:
        raise ValueError(f"a curve must be 1-D with at least two points, got shape {c.shape}")
    if not 0 < window <= 0.5:
        raise ValueError(f"window must be in (0, 0.5], got {window}")
    n = max(1, int(round(window * c.size)))
    before, after = c[-2 * n:-n].mean(), c[-n:].mean()
    return float((before - after) / abs(before)) if before != 0 else 0.0


def has_plateaued(curve, floor: float = 0.0, *, tolerance: float = PLATEAU_TOLERANCE) -> bool:
    """Return whether a training curve's excess over ``floor`` fell by less than ``tolerance`` over its last 20%."""
    return late_drop(curve, floor) < tolerance
