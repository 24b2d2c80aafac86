"""Chapter 6's runs: the example sequences, the held-out batches and the two tunnels trained side by side."""

from __future__ import annotations


import numpy as np
import torch

from ...tasks import bijection, hmm
from ...training.wind_tunnels import TrainedRun, hmm_batch_for_eval, train_both
from .settings import ManifoldsSettings

__all__ = [
    "train_tunnels",
    "bijection_example_text",
    "hmm_example_batch",
    "hmm_eval_batches",
]


def train_tunnels(cfg: ManifoldsSettings, *, seed: int, device: str = "cpu") -> tuple[TrainedRun, TrainedRun]:
    """Return ``(bijection run, HMM run)`` of the chapter, trained side by side (one process and one thread each),
    each keeping ``cfg.n_checkpoints`` checkpoints."""
    return train_both(cfg.bijection, cfg.hmm, seed=seed, device=device, checkpoints=cfg.n_checkpoints)


def bijection_example_text(settings: ManifoldsSettings, generator: torch.Generator) -> str:
    """Return two lines: one bijection sequence drawn with ``generator`` (k→v pairs, the last key open) and the
    exact posterior entropy at the key positions (bits)."""
    example = bijection.sample_bijection_batch(1, settings.bijection.V, settings.bijection.L, generator=generator)
    keys, values = example.keys[0].tolist(), example.targets[0].tolist()
    pairs = "  ".join(f"k{k}→v{v}" for k, v in zip(keys[:-1], values[:-1])) + f"  k{keys[-1]}→?"
    entropy = np.round(bijection.bayes_entropy_bits(settings.bijection.V, settings.bijection.L), 3)
    return f"{pairs}\nposterior entropy at the key positions (bits): {entropy}"


def hmm_example_batch(settings: ManifoldsSettings, generator: torch.Generator) -> hmm.HMMBatch:
    """Return one HMM sequence of the training length with its exact filter, drawn with ``generator``."""
    return hmm.sample_hmm_batch(1, settings.hmm.length, n_states=settings.hmm.n_states,
                                n_symbols=settings.hmm.n_symbols, grid=settings.hmm.grid, generator=generator)


def hmm_eval_batches(settings: ManifoldsSettings, *, seed: int) -> dict[int, hmm.HMMBatch]:
    """Return the held-out HMM batches, test length → batch (:func:`~attention_dynamics.training.wind_tunnels.hmm_batch_for_eval`)."""
    return {K: hmm_batch_for_eval(settings.hmm, K, seed=seed, n=settings.n_eval) for K in settings.hmm.test_lengths}
