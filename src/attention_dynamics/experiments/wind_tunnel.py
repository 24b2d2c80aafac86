"""Chapter 6's experiment: transformers trained in Paper I's wind tunnels, measured against exact posteriors.

Two tasks (PAPER.md §4.2), one causal transformer each (:class:`~attention_dynamics.models.transformer.CausalTransformer`),
one training loop (:func:`~attention_dynamics.training.fit`):

- **bijection elimination** (:mod:`~attention_dynamics.tasks.bijection`): token inputs, logits over the
  V values read at the key positions; checkpoints through training for the frame–precision
  dissociation;
- **HMM filtering** (:mod:`~attention_dynamics.tasks.hmm`): vector inputs carrying the observation and
  both matrices, trained on the exact filtering posterior at length K and evaluated at longer lengths
  (ALiBi positions, so the same model runs at any length).

:data:`SETTINGS` holds the sizes per scale (``fast`` / ``book`` / ``paper``); the chapter and anyone
who needs the trained model (chapter 8's diagnostics) use the same table, and
:func:`trained_bijection_transformer` rebuilds the chapter's model deterministically.

Training targets. Both tasks are trained by cross-entropy. For HMM filtering the target is the
exact posterior (soft-target cross-entropy, as the paper does). For the bijection the book's
default is also the exact posterior (``bijection_target="posterior"``); Paper I trains on the
sampled next value (``"sampled"``). The two objectives have the same expected gradient in every
context (cross-entropy is linear in the target, and the posterior is the conditional mean of the
one-hot target), hence the same minimiser; the posterior target removes the sampling noise, which
is what lets a CPU-sized run reach the paper's calibration in minutes.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Mapping, Sequence

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from .. import calibration, geometry, settling, stats
from ..models.transformer import CausalTransformer, probe_activations
from ..seeding import stream, torch_generator
from ..settings import check_positive_int, check_scale, resolve_device
from ..tasks import bijection, hmm
from ..training import ResumePoint, fast_adamw, fit, fit_resumable, map_parallel

__all__ = [
    "SETTINGS",
    "BIJECTION_TARGETS",
    "TrainedRun",
    "freeze_query_key",
    "make_bijection_transformer",
    "make_hmm_transformer",
    "warmup_cosine",
    "checkpoint_schedule",
    "train_bijection",
    "train_hmm",
    "train_both",
    "bijection_settings",
    "bijection_log_probs",
    "hmm_log_probs",
    "bijection_batch_for_eval",
    "bijection_probe_batch",
    "hmm_batch_for_eval",
    "HMMCurve",
    "hmm_kl_through_training",
    "trained_bijection_transformer",
    "FramePrecision",
    "frame_precision",
    "GeometryReport",
    "bijection_geometry",
    "HMMManifold",
    "hmm_manifold",
    "bijection_scrambled_probe",
    "geometry_summary",
    "bijection_geometry_nulls",
    "bijection_geometry_through_training",
]


#: Settings per scale. ``book`` is what the chapter shows (2 CPU cores; HMM rate 1e-3 chosen on seed 0:
#: KL at 6,000 steps 0.69x the context-blind level, 0.96x at 2e-3, 1.12x at 5e-4); ``paper`` is
#: Paper I's bijection model (V = 20, L = 19, 6 layers, 6 heads, d = 192, AdamW 3e-4, sampled
#: targets), GPU-sized; ``fast`` is a smoke run.
SETTINGS: dict[str, dict[str, Any]] = {
    "fast": {
        "V": 6, "L": 6, "bij_d_model": 32, "bij_n_layers": 2, "bij_n_heads": 2, "bij_steps": 150,
        "bij_batch": 32, "bij_lr": 2e-3, "bijection_target": "posterior",
        "hmm_states": 5, "hmm_symbols": 5, "hmm_length": 8, "hmm_test_lengths": (8, 12, 20), "hmm_grid": None,
        "hmm_d_model": 32, "hmm_n_layers": 2, "hmm_n_heads": 2, "hmm_steps": 150, "hmm_batch": 32, "hmm_lr": 2e-3,
        "hmm_fused_adamw": True, "warmup_steps": 20, "n_checkpoints": 8, "n_eval": 200, "n_probe": 64,
    },
    "book": {
        "V": 10, "L": 10, "bij_d_model": 64, "bij_n_layers": 4, "bij_n_heads": 2, "bij_steps": 2000,
        "bij_batch": 64, "bij_lr": 1e-3, "bijection_target": "posterior",
        "hmm_states": 5, "hmm_symbols": 5, "hmm_length": 20, "hmm_test_lengths": (20, 30, 50), "hmm_grid": None,
        "hmm_d_model": 64, "hmm_n_layers": 2, "hmm_n_heads": 4, "hmm_steps": 10_000, "hmm_batch": 64, "hmm_lr": 1e-3,
        "hmm_fused_adamw": True, "warmup_steps": 100, "n_checkpoints": 30, "n_eval": 2000, "n_probe": 256,
    },
    "paper": {
        "V": 20, "L": 19, "bij_d_model": 192, "bij_n_layers": 6, "bij_n_heads": 6, "bij_steps": 100_000,
        "bij_batch": 64, "bij_lr": 3e-4, "bijection_target": "sampled",
        "hmm_states": 5, "hmm_symbols": 5, "hmm_length": 20, "hmm_test_lengths": (20, 30, 50), "hmm_grid": 0.01,
        "hmm_d_model": 192, "hmm_n_layers": 6, "hmm_n_heads": 6, "hmm_steps": 100_000, "hmm_batch": 64, "hmm_lr": 3e-4,
        "hmm_fused_adamw": True, "warmup_steps": 1000, "n_checkpoints": 40, "n_eval": 5000, "n_probe": 256,
    },
}


# --------------------------------------------------------------------------------------------
# Models and schedules
# --------------------------------------------------------------------------------------------


# --------------------------------------------------------------------------------------------
# Training
# --------------------------------------------------------------------------------------------


def bijection_settings(settings: Mapping[str, Any]) -> dict[str, Any]:
    """Return the settings the bijection run reads (every one but the ``hmm_*`` entries)."""
    return {k: v for k, v in settings.items() if not k.startswith("hmm_")}


def _plain_settings(settings: Mapping[str, Any]) -> dict[str, Any]:
    """Return the settings that matter for training (no device objects; picklable)."""
    keys = SETTINGS["book"].keys()
    missing = [k for k in keys if k not in settings]
    if missing:
        raise ValueError(f"settings lack {', '.join(missing)}")
    return {k: settings[k] for k in keys}


# --------------------------------------------------------------------------------------------
# Evaluation
# --------------------------------------------------------------------------------------------


# --------------------------------------------------------------------------------------------
# Frame–precision dissociation
# --------------------------------------------------------------------------------------------


# --------------------------------------------------------------------------------------------
# Geometry of the trained bijection transformer
# --------------------------------------------------------------------------------------------


# --------------------------------------------------------------------------------------------
# Geometry beside its nulls, and through training
# --------------------------------------------------------------------------------------------


