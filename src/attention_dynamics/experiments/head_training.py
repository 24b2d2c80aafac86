"""The single head trained on content-addressed recall with every measurement along the way (chapters 2–4): the runs, their summaries and figures.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np
import torch
import torch.nn.functional as F

from ..attention import SingleHeadParams, init_single_head
from ..dynamics import (
    advantage_change_rate,
    attention_distance,
    attention_on_correct_source,
    attention_on_sources,
    responsibility_purity,
    specialization_matrix,
    value_distance,
    value_precision_nats,
    value_prototype_alignment,
)
from ..models.single_head import SingleHeadModule
from ..seeding import stream, torch_generator
from ..settings import check_positive_int
from ..settling import quiescence_step, settle_step
from ..tasks import specialization as task
from ..tasks.specialization import SpecializationBatch
from ..training import fit


def frame_precision_summary(runs: Sequence[SpecializationRun], threshold: float = 0.01) -> dict[str, Any]:
    """Return per-run settling steps (rate criterion) and their summary over runs (seeds).

    Keys: ``frame_steps``, ``value_steps`` (arrays; a run that has not settled counts as the
    end of its run, a lower bound), ``unsettled`` (number of such censored times),
    ``frame_first_fraction`` (fraction of runs whose frame settles strictly before their
    values), ``time_ratios`` (value step / frame step per run) and ``median_time_ratio``.
    """
    if not runs:
        raise ValueError("need at least one run")
    pairs = [r.settling_steps(threshold) for r in runs]
    frame = np.array([f for (f, _), _ in pairs], dtype=float)
    value = np.array([v for _, (v, _) in pairs], dtype=float)
    unsettled = sum((not fs) + (not vs) for (_, fs), (_, vs) in pairs)
    ratios = value / np.maximum(frame, 1.0)
    return {
        "frame_steps": frame,
        "value_steps": value,
        "unsettled": int(unsettled),
        "frame_first_fraction": float(np.mean(frame < value)),
        "time_ratios": ratios,
        "median_time_ratio": float(np.median(ratios)),
    }


