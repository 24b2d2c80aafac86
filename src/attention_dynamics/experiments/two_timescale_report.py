"""Chapter 4's report: the Gaussian-mixture bridge, the frame-versus-precision runs, their claims, tables and figures.

The measurements themselves live below: the mixture in :mod:`attention_dynamics.em`, the recall head and
its settling records in :mod:`attention_dynamics.experiments.head_training`, the unit-free criterion and
the freeze-the-frame intervention in :mod:`attention_dynamics.experiments.frame_precision`. This module
runs them with the chapter's settings, glues the numbers the prose states, records the ledger claims
and draws the figures.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from .. import claims, em
from ..training import map_parallel
from . import frame_precision, head_training


# --------------------------------------------------------------------------------------------
# The Gaussian-mixture bridge
# --------------------------------------------------------------------------------------------


# --------------------------------------------------------------------------------------------
# Frame and precision: the runs
# --------------------------------------------------------------------------------------------


# --------------------------------------------------------------------------------------------
# The learning-rate ratio
# --------------------------------------------------------------------------------------------


# --------------------------------------------------------------------------------------------
# Freezing the frame
# --------------------------------------------------------------------------------------------


