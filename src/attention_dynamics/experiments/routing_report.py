"""Chapter 3's report on routing–content feedback: its settings, the three runs, their summaries, claims, glue and figures.

The runs are :func:`attention_dynamics.experiments.head_training.train_specialization_head`; the measures of one
parameter state are :mod:`attention_dynamics.dynamics`. This module runs the chapter's variants, reads the runs,
records the ledger's claims and draws the chapter's figures.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np
import torch

from .. import claims, dynamics
from ..attention import causal_mask
from ..settling import first_true
from ..tasks import specialization as recall
from ..tasks.specialization import SpecializationBatch
from .head_training import SpecializationRun, milestone_indices, train_specialization_head

_RECALL = {"steps": 2000, "lr": 0.5, "n_train": 256, "n_probe": 256, "record_every": 20, "n_check": 64}
SETTINGS = {  # one head on the recall task; the paper has no such experiment, so "paper" = "book"
    "fast": {"steps": 300, "lr": 0.5, "n_train": 64, "n_probe": 64, "record_every": 20, "n_check": 16},
    "book": dict(_RECALL),
    "paper": dict(_RECALL),
}
VARIANTS = {"full": (), "values frozen": ("W_V",), "routing frozen": ("W_Q", "W_K")}  # name → frozen matrices
MILESTONES = (0.25, 0.5, 0.75)  # shares of the rise of the E-step quality that mark the routing transition
ETAS = np.logspace(-2, 4, 25)  # step sizes of the value-only steps (large: the loss is a mean over N queries)


# --------------------------------------------------------------------------------------------
# The task
# --------------------------------------------------------------------------------------------


# --------------------------------------------------------------------------------------------
# Training and its summary
# --------------------------------------------------------------------------------------------


# --------------------------------------------------------------------------------------------
# The first-order predictions
# --------------------------------------------------------------------------------------------


