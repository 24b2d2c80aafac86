"""Chapter 2's checks of the gradient laws: its settings, random heads, claims with their tolerances, glue and figures.

The laws themselves are :mod:`attention_dynamics.gradients`; this module draws the heads the chapter checks
them on, records the ledger's claims and draws the chapter's figures. Every random draw comes from the
``generator`` the chapter passes in, in the chapter's order, so a chapter that calls these functions in
sequence sees the numbers it would see with the code inline.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np
import torch

from .. import attention, claims, gradients
from ..attention import HeadForward


# --------------------------------------------------------------------------------------------
# The worked example
# --------------------------------------------------------------------------------------------


# --------------------------------------------------------------------------------------------
# Verified four ways
# --------------------------------------------------------------------------------------------


# --------------------------------------------------------------------------------------------
# Why routing freezes first
# --------------------------------------------------------------------------------------------


# --------------------------------------------------------------------------------------------
# The laws in weight space
# --------------------------------------------------------------------------------------------


