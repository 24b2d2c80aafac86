"""Every registered model family with its parameter count matched to a target (chapter 7): :func:`build_matched_model`.

The families are the entries of :mod:`~attention_dynamics.models.registry` (the book's five are :data:`FAMILIES`,
their labels :data:`FAMILY_LABELS`, both the registry's): each says how to build its model for a task at a width and
the widths it is matched over.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import torch.nn as nn

from ..core.settings import check_positive_int
from .registry import FAMILIES, FAMILY_LABELS, family
from .transformer import count_parameters

if TYPE_CHECKING:
    from ..tasks.wind_tunnels import WindTunnel

__all__ = ["FAMILIES", "FAMILY_LABELS", "build_model", "matched_width", "build_matched_model"]


def build_model(family_name: str, task: WindTunnel, width: int) -> nn.Module:
    """Return a fresh model of the registered family ``family_name`` for ``task`` whose size is set by ``width`` (see
    the entry's ``widths``)."""
    return family(family_name).build(task, width)


def matched_width(family_name: str, task: WindTunnel, target_params: int) -> int:
    """Return the width of the family's grid whose model for ``task`` has the parameter count closest to the target.

    Counts grow with width, so a bisection finds the first width at or above the target; the
    answer is it or its predecessor, whichever is closer in ratio.
    """
    target_params = check_positive_int("target_params", target_params)
    grid = family(family_name).widths

    def count(i: int) -> int:
        return count_parameters(build_model(family_name, task, grid[i]))

    lo, hi = 0, len(grid) - 1
    while lo < hi:  # first index whose count reaches the target (or the last index)
        mid = (lo + hi) // 2
        if count(mid) >= target_params:
            hi = mid
        else:
            lo = mid + 1
    candidates = [i for i in (lo - 1, lo) if i >= 0]
    best = min(candidates, key=lambda i: abs(math.log(count(i) / target_params)))
    return grid[best]


def build_matched_model(family_name: str, task: WindTunnel, target_params: int) -> nn.Module:
    """Return a fresh model of ``family_name`` for ``task`` with about ``target_params`` parameters."""
    return build_model(family_name, task, matched_width(family_name, task, target_params))
