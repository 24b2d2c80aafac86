"""When a curve settles: the one place that answers "the first step at which …" and "the first step
after which … for good", for every settling, crossing and quiescence measure of the book."""

from __future__ import annotations

import numpy as np

__all__ = ["first_true", "first_true_for_good", "settle_step", "stays_above_step", "quiescence_step",
           "path_settling_step", "late_change", "late_drop"]


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


def settle_step(steps, values, *, fraction: float = 0.1, log: bool = False) -> int:
    """Return the first step after which a trajectory stays within ``fraction`` of its total change from its end.

    With values m(s) at increasing ``steps``, final value m_F and first value m_0, this is the
    smallest s* such that ``|m(s) − m_F| ≤ fraction · |m_0 − m_F|`` for every s ≥ s* (90 % of the way
    and staying there, for the default 0.1). ``log=True`` measures the change in log10 m (for
    errors that fall by orders of magnitude; values must then be positive).
    """
    s = np.asarray(steps)
    m = np.asarray(values, dtype=np.float64)
    if s.ndim != 1 or m.shape != s.shape or s.size < 2 or np.any(np.diff(s) <= 0):
        raise ValueError("steps must be increasing and values must have one entry per step (at least two)")
    if not 0 < fraction < 1:
        raise ValueError(f"fraction must be in (0, 1), got {fraction}")
    if log:
        if np.any(m <= 0):
            raise ValueError("log=True needs positive values")
        m = np.log10(m)
    band = fraction * abs(m[0] - m[-1])
    outside = np.nonzero(np.abs(m - m[-1]) > band)[0]
    return int(s[0] if outside.size == 0 else s[min(outside[-1] + 1, s.size - 1)])


def stays_above_step(steps, values, threshold: float) -> int | None:
    """Return the first step from which ``values`` stay ≥ ``threshold`` to the end (None if the last is below).

    An absolute counterpart of :func:`settle_step`, for a quantity with a natural scale, such as the
    similarity of attention patterns (0.95 = at most 5 % of the attention mass routed differently).
    """
    s = np.asarray(steps)
    m = np.asarray(values, dtype=np.float64)
    if s.ndim != 1 or m.shape != s.shape or s.size < 1 or np.any(np.diff(s) <= 0):
        raise ValueError("steps must be increasing and values must have one entry per step")
    k = first_true_for_good(m >= threshold)
    return None if k is None else int(s[k])


def late_change(steps, values, *, last: float = 0.2) -> float:
    """Return how much a trajectory still moves over the last ``last`` fraction of training: max − min there.

    The values m(s) at increasing ``steps`` are taken at every step s ≥ (1 − last) · s_final (the
    final one included). A metric has *plateaued* at a stated amount δ when this is below δ. Under a
    learning rate that decays to zero the late steps move little by construction, so a plateau says
    that this schedule is done, not that a longer one would end at the same value.
    """
    s = np.asarray(steps, dtype=np.float64)
    m = np.asarray(values, dtype=np.float64)
    if s.ndim != 1 or m.shape != s.shape or s.size < 2 or np.any(np.diff(s) <= 0):
        raise ValueError("steps must be increasing and values must have one entry per step (at least two)")
    if not 0 < last < 1:
        raise ValueError(f"last must be in (0, 1), got {last}")
    late = m[s >= (1.0 - last) * s[-1]]
    return float(late.max() - late.min())


def quiescence_step(steps: np.ndarray, change: np.ndarray, threshold: float) -> tuple[int, bool]:
    """Return ``(step, settled)``: the first step from which every later windowed change is ≤ ``threshold``.

    ``change[t]`` is how much a quantity moves in a fixed window starting at ``steps[t]``. If
    even the last window moves more than ``threshold`` the quantity has not settled by the end
    of the run: the result is ``(steps[-1] + window, False)`` with window = ``steps[1] − steps[0]``
    (a lower bound on the true settling step, i.e. a censored time).
    """
    steps = np.asarray(steps)
    change = np.asarray(change, dtype=float)
    if steps.shape != change.shape or change.ndim != 1 or change.size == 0:
        raise ValueError(f"steps and change must be 1-d of equal length, got {steps.shape} and {change.shape}")
    if not threshold > 0:
        raise ValueError(f"threshold must be positive, got {threshold!r}")
    k = first_true_for_good(change <= threshold)
    if k is None:
        spacing = int(steps[1] - steps[0]) if len(steps) > 1 else 0
        return int(steps[-1]) + spacing, False
    return int(steps[k]), True


def path_settling_step(steps: np.ndarray, increments: np.ndarray, fraction: float) -> int:
    """Return the first step at which the path still to go is at most ``fraction`` of the whole path.

    ``steps`` ``(n + 1,)`` are recording steps and ``increments`` ``(n,)`` the distance the quantity
    moves between consecutive ones (any unit: only ratios are used). The remaining fraction at
    ``steps[k]`` is ``Σ_{m ≥ k} increments[m] / Σ increments``; it falls from 1 to 0.
    """
    steps = np.asarray(steps)
    inc = np.asarray(increments, dtype=float)
    if inc.ndim != 1 or steps.shape != (inc.size + 1,):
        raise ValueError(f"need steps of length len(increments) + 1, got {steps.shape} and {inc.shape}")
    if not 0 < fraction < 1:
        raise ValueError(f"fraction must be in (0, 1), got {fraction!r}")
    total = inc.sum()
    if total == 0:
        return int(steps[0])
    remaining = np.r_[inc[::-1].cumsum()[::-1], 0.0] / total
    return int(steps[first_true(remaining <= fraction)])
