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

BIJECTION_TARGETS = ("posterior", "sampled")


# --------------------------------------------------------------------------------------------
# Models and schedules
# --------------------------------------------------------------------------------------------


def make_bijection_transformer(V: int, L: int, *, d_model: int, n_layers: int, n_heads: int) -> CausalTransformer:
    """Return a causal transformer reading the 2V-token vocabulary and emitting logits over the V values."""
    V, L = bijection.check_sizes(V, L)
    return CausalTransformer(n_out=V, vocab_size=bijection.vocab_size(V), d_model=d_model, n_layers=n_layers,
                             n_heads=n_heads, max_len=bijection.sequence_length(L), positional="learned")


def make_hmm_transformer(n_states: int, n_symbols: int, *, d_model: int, n_layers: int, n_heads: int) -> CausalTransformer:
    """Return a causal transformer with ALiBi positions (any length) emitting logits over the hidden states."""
    return CausalTransformer(n_out=n_states, input_dim=hmm.hmm_input_dim(n_states, n_symbols), d_model=d_model,
                             n_layers=n_layers, n_heads=n_heads, positional="alibi")


def warmup_cosine(optimizer: torch.optim.Optimizer, steps: int, warmup_steps: int) -> torch.optim.lr_scheduler.LambdaLR:
    """Return a schedule with linear warm-up over ``warmup_steps`` and cosine decay to zero at ``steps``."""
    steps, warmup_steps = check_positive_int("steps", steps), check_positive_int("warmup_steps", warmup_steps)

    def factor(step: int) -> float:
        return min(1.0, (step + 1) / warmup_steps) * 0.5 * (1.0 + math.cos(math.pi * min(step, steps) / steps))

    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


def checkpoint_schedule(steps: int, n_checkpoints: int) -> list[int]:
    """Return about ``n_checkpoints`` steps from 0 to ``steps``: log-spaced early, linear late, both ends included."""
    steps, n = check_positive_int("steps", steps), check_positive_int("n_checkpoints", n_checkpoints)
    early = np.geomspace(1, steps, max(n // 2, 2))
    late = np.linspace(0, steps, max(n - n // 2, 2))
    return sorted({0, steps, *np.round(early).astype(int).tolist(), *np.round(late).astype(int).tolist()})


def _optimizer(model: nn.Module, lr: float, *, fused: bool = False) -> torch.optim.Optimizer:
    """Return AdamW (betas 0.9, 0.98, no decay); ``fused``: its one-pass kernel (:func:`~attention_dynamics.training.fast_adamw`)."""
    make = fast_adamw if fused else torch.optim.AdamW
    return make(model.parameters(), lr=lr, betas=(0.9, 0.98), weight_decay=0.0)


# --------------------------------------------------------------------------------------------
# Training
# --------------------------------------------------------------------------------------------


@dataclass
class TrainedRun:
    """A finished training run: the model's weights, its losses and (optionally) checkpoint weights.

    ``losses`` ``(steps,)`` is the training loss (nats) before every update; ``checkpoints`` maps a
    step to the state dict after that many updates; ``settings`` holds everything needed to
    rebuild the model (:meth:`model`).
    """

    task: str
    settings: dict[str, Any]
    state_dict: dict[str, torch.Tensor]
    losses: np.ndarray
    checkpoints: dict[int, dict[str, torch.Tensor]] = field(default_factory=dict)

    def model(self, step: int | None = None) -> CausalTransformer:
        """Return the model (in eval mode) with the final weights, or those of checkpoint ``step``."""
        s = self.settings
        if self.task == "bijection":
            m = make_bijection_transformer(s["V"], s["L"], d_model=s["bij_d_model"], n_layers=s["bij_n_layers"],
                                           n_heads=s["bij_n_heads"])
        else:
            m = make_hmm_transformer(s["hmm_states"], s["hmm_symbols"], d_model=s["hmm_d_model"],
                                     n_layers=s["hmm_n_layers"], n_heads=s["hmm_n_heads"])
        m.load_state_dict(self.state_dict if step is None else self.checkpoints[step])
        return m.eval()


def _cpu_state(model: nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().to("cpu", copy=True) for k, v in model.state_dict().items()}


def _set_threads(device: torch.device) -> int:
    """Use one CPU thread for a CPU run (results then do not depend on the machine's core count)."""
    previous = torch.get_num_threads()
    if device.type == "cpu":
        torch.set_num_threads(1)
    return previous


def train_bijection(settings: Mapping[str, Any], *, seed: int, device: str = "cpu", checkpoints: bool = True,
                    progress: bool = False, freeze_routing_at: int | None = None,
                    resume: ResumePoint | None = None) -> TrainedRun:
    """Return the :class:`TrainedRun` of a transformer trained on fresh bijection-elimination batches.

    Loss: cross-entropy in nats at the key positions, against the exact posterior or the sampled
    value (``settings["bijection_target"]``). AdamW with warm-up and cosine decay, gradients clipped
    at 1. With ``checkpoints``, the weights at :func:`checkpoint_schedule` steps are kept.
    ``freeze_routing_at`` = t: every layer's query and key weights keep their step-t values from then
    on (:func:`freeze_query_key`); everything else trains on. ``resume``: save the run's state there as it
    goes and continue from it (:func:`~attention_dynamics.training.fit_resumable`; no checkpoints then).
    """
    s = dict(settings)
    if s["bijection_target"] not in BIJECTION_TARGETS:
        raise ValueError(f"bijection_target must be one of {BIJECTION_TARGETS}, got {s['bijection_target']!r}")
    dev = resolve_device(device)
    threads = _set_threads(dev)
    try:
        torch.manual_seed(stream(seed, "init"))
        model = make_bijection_transformer(s["V"], s["L"], d_model=s["bij_d_model"], n_layers=s["bij_n_layers"],
                                           n_heads=s["bij_n_heads"]).to(dev)
        for attn in model.attention_modules():
            attn.fused = True  # the same function as the explicit path (tested), faster
        data = torch_generator(stream(seed, "train"))
        V, L, B = s["V"], s["L"], s["bij_batch"]

        frozen = freeze_query_key(model) if freeze_routing_at is not None else None

        def batches(step: int) -> bijection.BijectionBatch:
            if frozen is not None and step >= freeze_routing_at:
                frozen(step == freeze_routing_at)
            return bijection.sample_bijection_batch(B, V, L, generator=data).to(dev)

        def loss_fn(m: nn.Module, batch: bijection.BijectionBatch) -> torch.Tensor:
            logits = m(batch.tokens)[:, 0::2]  # (B, L, V): predictions at the key positions
            if s["bijection_target"] == "posterior":
                return calibration.soft_cross_entropy_nats(logits, batch.posterior.to(logits.dtype))
            return F.cross_entropy(logits.reshape(-1, V), batch.targets.reshape(-1))

        kept: dict[int, dict[str, torch.Tensor]] = {}
        steps = s["bij_steps"]
        at = checkpoint_schedule(steps, s["n_checkpoints"]) if checkpoints else []

        def keep(step: int, m: nn.Module, _loss: float) -> None:
            kept[step] = _cpu_state(m)

        optimizer = _optimizer(model, s["bij_lr"])
        history = _fit(model, batches, steps, optimizer, loss_fn, s, resume=resume, generator=data,
                       callback=keep if at else None, callback_steps=at, progress=progress, desc="bijection")
        if frozen is not None and freeze_routing_at < steps:
            frozen(False)  # undo the last step's move of the frozen rows
        return TrainedRun("bijection", s, _cpu_state(model), history.losses, kept)
    finally:
        torch.set_num_threads(threads)


def freeze_query_key(model: CausalTransformer):
    """Return ``hold(take)``: ``hold(True)`` stores every layer's query and key weights, ``hold(False)`` restores them.

    Query and key are the first two thirds of each fused ``qkv`` projection (weights and bias).
    Restoring them before every forward pass keeps them exactly where they were stored while the
    optimiser moves everything else (AdamW's decay and moments of those rows have no effect).
    """
    held: list[tuple[torch.Tensor, torch.Tensor]] = []

    def hold(take: bool) -> None:
        rows = [t[: 2 * attn.qkv.weight.shape[1]] for attn in model.attention_modules()
                for t in (attn.qkv.weight, attn.qkv.bias) if t is not None]
        with torch.no_grad():
            if take:
                held[:] = [r.clone() for r in rows]
            else:
                for r, h in zip(rows, held):
                    r.copy_(h)

    return hold


def train_hmm(settings: Mapping[str, Any], *, seed: int, device: str = "cpu", checkpoints: bool = True,
              progress: bool = False, resume: ResumePoint | None = None) -> TrainedRun:
    """Return the :class:`TrainedRun` of a transformer trained on fresh HMM-filtering batches of length K.

    Loss: soft-target cross-entropy in nats against the exact filtering posterior (its minimum is
    the mean posterior entropy). AdamW with warm-up and cosine decay, gradients clipped at 1;
    ``settings["hmm_fused_adamw"]`` selects AdamW's fused kernel (the same update, faster on a CPU).
    With ``checkpoints``, the weights at :func:`checkpoint_schedule` steps are kept (for the
    calibration curve through training, :func:`hmm_kl_through_training`); ``resume`` as in :func:`train_bijection`.
    """
    s = dict(settings)
    dev = resolve_device(device)
    threads = _set_threads(dev)
    try:
        torch.manual_seed(stream(seed, "init"))
        model = make_hmm_transformer(s["hmm_states"], s["hmm_symbols"], d_model=s["hmm_d_model"],
                                     n_layers=s["hmm_n_layers"], n_heads=s["hmm_n_heads"]).to(dev)
        for attn in model.attention_modules():
            attn.fused = True
        data = torch_generator(stream(seed, "train"))

        def batches(step: int) -> hmm.HMMBatch:
            return _hmm_batch(s, s["hmm_batch"], s["hmm_length"], data).to(dev)

        def loss_fn(m: nn.Module, batch: hmm.HMMBatch) -> torch.Tensor:
            logits = m(batch.inputs)  # (B, K, S)
            return calibration.soft_cross_entropy_nats(logits, batch.posterior.to(logits.dtype))

        steps = s["hmm_steps"]
        kept: dict[int, dict[str, torch.Tensor]] = {}
        at = checkpoint_schedule(steps, s["n_checkpoints"]) if checkpoints else []

        def keep(step: int, m: nn.Module, _loss: float) -> None:
            kept[step] = _cpu_state(m)

        optimizer = _optimizer(model, s["hmm_lr"], fused=bool(s.get("hmm_fused_adamw", False)))
        history = _fit(model, batches, steps, optimizer, loss_fn, s, resume=resume, generator=data,
                       callback=keep if at else None, callback_steps=at, progress=progress, desc="HMM")
        return TrainedRun("hmm", s, _cpu_state(model), history.losses, kept)
    finally:
        torch.set_num_threads(threads)


def _fit(model, batches, steps, optimizer, loss_fn, s, *, resume, generator, **kwargs):
    """:func:`fit` with AdamW's warm-up–cosine schedule and clipping at 1; resumable (no checkpoints) if ``resume``."""
    scheduler = warmup_cosine(optimizer, steps, s["warmup_steps"])
    if resume is None:
        return fit(model, batches, steps=steps, optimizer=optimizer, loss_fn=loss_fn, scheduler=scheduler,
                   grad_clip=1.0, **kwargs)
    return fit_resumable(model, batches, steps=steps, optimizer=optimizer, loss_fn=loss_fn, scheduler=scheduler,
                         grad_clip=1.0, resume=resume, generator=generator, progress=kwargs["progress"], desc=kwargs["desc"])


def _hmm_batch(s: Mapping[str, Any], n: int, length: int, generator: torch.Generator) -> hmm.HMMBatch:
    return hmm.sample_hmm_batch(n, length, n_states=s["hmm_states"], n_symbols=s["hmm_symbols"],
                                grid=s["hmm_grid"], generator=generator)


def _train_job(task: str, settings: Mapping[str, Any], seed: int, device: str) -> TrainedRun:
    if task == "bijection":
        return train_bijection(settings, seed=seed, device=device)
    return train_hmm(settings, seed=seed, device=device)


def train_both(settings: Mapping[str, Any], *, seed: int, device: str = "cpu") -> tuple[TrainedRun, TrainedRun]:
    """Return ``(bijection run, HMM run)``, trained side by side on two cores (one process each).

    Each run seeds itself and uses one thread on the CPU, so the result is the same whether the
    two runs share a machine or not.
    """
    s = _plain_settings(settings)
    device = str(resolve_device(device))
    jobs = [dict(task=t, settings=s, seed=int(seed), device=device) for t in ("bijection", "hmm")]
    bij, hmm_run = map_parallel(_train_job, jobs)
    return bij, hmm_run


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


def bijection_batch_for_eval(settings: Mapping[str, Any], *, seed: int, n: int | None = None) -> bijection.BijectionBatch:
    """Return the held-out bijection batch of an experiment (its own random stream, never trained on)."""
    return bijection.sample_bijection_batch(n or settings["n_eval"], settings["V"], settings["L"],
                                            generator=torch_generator(stream(seed, "eval")))


def bijection_probe_batch(settings: Mapping[str, Any], *, seed: int) -> bijection.BijectionBatch:
    """Return the probe batch (``n_probe`` held-out sequences) on which geometry and checkpoints are measured."""
    return bijection.sample_bijection_batch(settings["n_probe"], settings["V"], settings["L"],
                                            generator=torch_generator(stream(seed, "probe")))


def hmm_batch_for_eval(settings: Mapping[str, Any], length: int, *, seed: int, n: int | None = None) -> hmm.HMMBatch:
    """Return a held-out HMM batch of ``length`` steps (one random stream per length)."""
    return _hmm_batch(settings, n or settings["n_eval"], length, torch_generator(stream(seed, "eval", length)))


@torch.no_grad()
def bijection_log_probs(model: nn.Module, batch: bijection.BijectionBatch) -> torch.Tensor:
    """Return the model's log-probabilities ``(B, L, V)`` (float64, natural log) at the key positions."""
    model.eval()
    device = next(model.parameters()).device
    return torch.log_softmax(model(batch.tokens.to(device))[:, 0::2].double().cpu(), dim=-1)


@torch.no_grad()
def hmm_log_probs(model: nn.Module, batch: hmm.HMMBatch) -> torch.Tensor:
    """Return the model's log-probabilities ``(B, K, S)`` (float64, natural log) of the hidden state."""
    model.eval()
    device = next(model.parameters()).device
    return torch.log_softmax(model(batch.inputs.to(device)).double().cpu(), dim=-1)


@dataclass
class HMMCurve:
    """HMM calibration through training, at the checkpoint steps of a run.

    ``kl_bits[K]`` ``(n_ckpt,)``: mean KL(exact filter ‖ model) in bits on the batch of length ``K``;
    ``context_blind_kl_bits[K]``: the same for the posterior given only the current observation
    (:func:`~attention_dynamics.tasks.hmm.context_blind_posterior`), the level a model with no memory
    reaches; ``ratio(K)``: the model's KL over that level.
    """

    steps: np.ndarray
    kl_bits: dict[int, np.ndarray]
    context_blind_kl_bits: dict[int, float]

    def ratio(self, K: int) -> np.ndarray:
        """Return the KL at every checkpoint as a multiple of the context-blind level at length ``K``."""
        return self.kl_bits[K] / self.context_blind_kl_bits[K]


def hmm_kl_through_training(run: TrainedRun, batches: Mapping[int, hmm.HMMBatch]) -> HMMCurve:
    """Return the :class:`HMMCurve` of an HMM run with checkpoints, on held-out ``batches`` (length → batch)."""
    if not run.checkpoints:
        raise ValueError("this run kept no checkpoints; train with checkpoints=True")
    steps = np.array(sorted(run.checkpoints))
    kl = {K: np.array([calibration.calibration_report(b.posterior, hmm_log_probs(run.model(int(t)), b)).kl_bits
                       for t in steps]) for K, b in batches.items()}
    blind = {K: calibration.calibration_report(
        b.posterior, hmm.context_blind_posterior(b.transition, b.emission, b.observations).log()).kl_bits
        for K, b in batches.items()}
    return HMMCurve(steps=steps, kl_bits=kl, context_blind_kl_bits=blind)


@lru_cache(maxsize=4)
def _trained_bijection(scale: str, seed: int, device: str) -> TrainedRun:
    return train_bijection(SETTINGS[scale], seed=seed, device=device, checkpoints=False)


def trained_bijection_transformer(scale: str = "book", seed: int = 0, device: str = "cpu") -> CausalTransformer:
    """Return chapter 6's bijection transformer, trained deterministically at ``scale`` (cached per process).

    The same settings and seed as the chapter give the same weights (CPU, one thread), so other
    chapters can study exactly the model chapter 6 measures. ``scale="paper"`` needs a GPU.
    """
    check_scale(scale)
    return copy.deepcopy(_trained_bijection(scale, int(seed), str(resolve_device(device))).model())


# --------------------------------------------------------------------------------------------
# Frame–precision dissociation
# --------------------------------------------------------------------------------------------


@dataclass
class FramePrecision:
    """Routing ("frame") vs calibration ("precision") through training, at the checkpoint steps.

    ``attention_similarity`` ``(n_ckpt, n_layers)``: 1 − mean TV distance between the checkpoint's
    attention rows at the key positions and the final model's, on the probe batch;
    ``entropy_mae_bits`` and ``kl_bits`` ``(n_ckpt,)``: calibration against the exact posterior;
    ``value_pcs`` ``(n_ckpt, n, 2)``: the value manifold (last layer's attention output at key
    positions, as in :class:`GeometryReport`) projected on the *final* model's first two PCs, and
    ``value_pc1_spearman`` ``(n_ckpt,)`` the rank correlation of that PC1 coordinate with the Bayes
    entropy.

    Settling (see :mod:`~attention_dynamics.geometry`): ``frame_settle_step`` is the first checkpoint
    from which *every* layer's similarity stays ≥ ``frame_threshold`` (at most 5 % of the attention
    mass routed differently from the end, by default); ``frame_settle_step_relative`` applies the
    10 %-of-total-change rule of :func:`~attention_dynamics.settling.settle_step` to the mean
    attention distance instead; ``calibration_settle_step`` applies that rule to log10 of the entropy
    error (which falls by orders of magnitude), ``calibration_settle_step_linear`` to the error itself.
    """

    steps: np.ndarray
    attention_similarity: np.ndarray
    entropy_mae_bits: np.ndarray
    kl_bits: np.ndarray
    value_pcs: np.ndarray
    value_entropy_bits: np.ndarray
    value_pc1_spearman: np.ndarray
    frame_settle_step: int
    frame_settle_step_relative: int
    calibration_settle_step: int
    calibration_settle_step_linear: int
    frame_threshold: float
    fraction: float


def _key_position_outputs(layers: Sequence[Mapping[str, torch.Tensor]]) -> torch.Tensor:
    """Return the last layer's attention output at the key positions, heads concatenated: ``(B·L, H·d_head)``."""
    return _heads_concatenated(layers[-1]["context"][:, :, 0::2])


def frame_precision(run: TrainedRun, probe: bijection.BijectionBatch, *, frame_threshold: float = 0.95,
                    fraction: float = 0.1) -> FramePrecision:
    """Return the :class:`FramePrecision` of a bijection run with checkpoints, measured on ``probe``.

    Attention rows are compared at the key positions (the queries that make predictions).
    """
    if not run.checkpoints:
        raise ValueError("this run kept no checkpoints; train with checkpoints=True")
    steps = np.array(sorted(run.checkpoints))
    final_logits, final_layers = probe_activations(run.model(int(steps[-1])), probe.tokens)
    final_alpha = [lay["attn_weights"][:, :, 0::2] for lay in final_layers]  # (B, H, L, T) per layer
    final_values = _key_position_outputs(final_layers).double().numpy()
    entropy = np.broadcast_to(bijection.bayes_entropy_bits(probe.V, probe.L), (len(probe), probe.L)).reshape(-1).copy()
    mean = final_values.mean(0)
    _, _, components = np.linalg.svd(final_values - mean, full_matrices=False)
    basis = components[:2].T  # (H·d, 2): the final model's first two principal directions
    if geometry.spearman_correlation((final_values - mean) @ basis[:, 0], entropy) < 0:
        basis[:, 0] *= -1  # PC1 points toward higher posterior entropy, as in bijection_geometry
    if basis[np.argmax(np.abs(basis[:, 1])), 1] < 0:
        basis[:, 1] *= -1  # PC2: largest loading positive (sklearn's convention)
    similarity, mae, kl, pcs = [], [], [], []
    for step in steps:
        logits, layers = probe_activations(run.model(int(step)), probe.tokens)
        similarity.append([geometry.attention_pattern_similarity(lay["attn_weights"][:, :, 0::2], ref)
                           for lay, ref in zip(layers, final_alpha)])
        rep = calibration.calibration_report(probe.posterior, torch.log_softmax(logits[:, 0::2].double(), -1))
        mae.append(rep.entropy_mae_bits)
        kl.append(rep.kl_bits)
        pcs.append((_key_position_outputs(layers).double().numpy() - mean) @ basis)
    similarity = np.array(similarity)
    mae = np.array(mae)
    distance = 1.0 - similarity.mean(1)
    return FramePrecision(
        steps=steps, attention_similarity=similarity, entropy_mae_bits=mae, kl_bits=np.array(kl),
        value_pcs=np.array(pcs), value_entropy_bits=entropy,
        value_pc1_spearman=np.array([geometry.spearman_correlation(z[:, 0], entropy) for z in pcs]),
        frame_settle_step=settling.stays_above_step(steps, similarity.min(1), frame_threshold),
        frame_settle_step_relative=settling.settle_step(steps, distance, fraction=fraction),
        calibration_settle_step=settling.settle_step(steps, mae, fraction=fraction, log=True),
        calibration_settle_step_linear=settling.settle_step(steps, mae, fraction=fraction),
        frame_threshold=frame_threshold, fraction=fraction,
    )


# --------------------------------------------------------------------------------------------
# Geometry of the trained bijection transformer
# --------------------------------------------------------------------------------------------


@dataclass
class GeometryReport:
    """Paper I's geometry measured on a trained bijection transformer (on a probe batch).

    Per layer ``(n_layers,)``:

    - ``key_abs_cos``: mean ``|cos|`` over pairs of key vectors of one sequence (every position),
      averaged over sequences and heads; ``key_abs_cos_value_tokens`` / ``key_abs_cos_key_tokens``:
      the same over the positions holding value tokens / key tokens only;
    - ``attention_entropy_bits``: mean entropy of the attention rows of the key-position queries
      that see more than one token (t ≥ 1), over heads and sequences;
    - ``qk_alignment_attended`` / ``qk_alignment_visible``: mean cos(q_i, k_j) weighted by the
      attention vs uniformly over the visible keys (all queries).

    ``key_abs_cos_baseline``: ``E|cos|`` of isotropic random vectors of the head dimension;
    ``attention_entropy_uniform_bits``: the same rows' entropy under uniform attention.
    ``key_cosines`` ``(T, T)``: layer 0, head 0 cosines between the keys of the first probe sequence.
    The **value manifold** is the last layer's attention output g_i = Σ_j α_ij v_j (heads
    concatenated) at the key positions: ``value_scores`` ``(B·L, 2)`` (PC1 oriented so that its
    Spearman ρ with the Bayes entropy is ≥ 0), ``value_ratios`` (explained variance of PC1, PC2),
    ``value_pc1_entropy_spearman``. ``manifold_table`` holds PC1 ratio and ρ for every candidate
    representation (values, attention outputs, residual stream, per layer).
    """

    key_abs_cos: np.ndarray
    key_abs_cos_value_tokens: np.ndarray
    key_abs_cos_key_tokens: np.ndarray
    key_abs_cos_baseline: float
    key_cosines: np.ndarray
    key_token_types: np.ndarray
    attention_entropy_bits: np.ndarray
    attention_entropy_uniform_bits: float
    qk_alignment_attended: np.ndarray
    qk_alignment_visible: np.ndarray
    value_scores: np.ndarray
    value_ratios: np.ndarray
    value_pc1_entropy_spearman: float
    manifold_table: list[dict[str, Any]]
    entropy_bits: np.ndarray

    @property
    def attention_entropy_reduction(self) -> float:
        """Return the fractional fall of attention entropy from the first to the last layer (negative = rise)."""
        return geometry.relative_reduction(float(self.attention_entropy_bits[0]), float(self.attention_entropy_bits[-1]))


def _heads_concatenated(t: torch.Tensor) -> torch.Tensor:
    """Return per-head tensors ``(B, H, n, d)`` as rows ``(B·n, H·d)``."""
    B, H, n, d = t.shape
    return t.permute(0, 2, 1, 3).reshape(B * n, H * d)


def _pc1(X: torch.Tensor, entropy: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    """Return (scores (n, 2), ratios (2,), ρ(PC1, entropy) ≥ 0), orienting PC1 along increasing entropy."""
    scores, ratios = geometry.pca_projection(X.double().numpy(), 2)
    rho = geometry.spearman_correlation(scores[:, 0], entropy)
    if rho < 0:
        scores[:, 0] *= -1
        rho = -rho
    return scores, ratios, rho


def bijection_geometry(model: CausalTransformer, probe: bijection.BijectionBatch, *,
                       table: bool = True) -> GeometryReport:
    """Return the :class:`GeometryReport` of a trained bijection transformer on the ``probe`` batch.

    ``table=False`` leaves ``manifold_table`` empty (it is the costly part; the curves through
    training do not need it).
    """
    _, layers = probe_activations(model, probe.tokens)
    entropy = np.broadcast_to(bijection.bayes_entropy_bits(probe.V, probe.L), (len(probe), probe.L)).reshape(-1).copy()
    key_cos, key_cos_values, key_cos_keys, attn_entropy, attended, visible = [], [], [], [], [], []
    rows: list[dict[str, Any]] = []
    for l, lay in enumerate(layers):
        keys = lay["keys"]  # (B, H, T, d_head)
        key_cos.append(float(geometry.mean_abs_cosine_per_set(keys).mean()))
        key_cos_values.append(float(geometry.mean_abs_cosine_per_set(keys[:, :, 1::2]).mean()))
        key_cos_keys.append(float(geometry.mean_abs_cosine_per_set(keys[:, :, 0::2]).mean()))
        alpha_q = lay["attn_weights"][:, :, 2::2]  # key positions t ≥ 1 (they see more than one token)
        attn_entropy.append(float(stats.entropy(alpha_q, unit="bits").mean()))
        a, v = geometry.query_key_alignment(lay["queries"], lay["keys"], lay["attn_weights"])
        attended.append(a)
        visible.append(v)
        for name, label in (("values", "values v_j"), ("context", "attention output g_i"),
                            ("residual", "residual stream (in)")) if table else ():
            t = lay[name][:, 0::2] if name == "residual" else _heads_concatenated(lay[name][:, :, 0::2])
            _, ratios, rho = _pc1(t.reshape(len(entropy), -1), entropy)
            rows.append({"layer": l, "representation": label, "pc1_ratio": float(ratios[0]), "spearman": rho})
    if table:
        out = layers[-1]["residual_out"][:, 0::2].reshape(len(entropy), -1)
        _, ratios, rho = _pc1(out, entropy)
        rows.append({"layer": len(layers) - 1, "representation": "residual stream (out)",
                     "pc1_ratio": float(ratios[0]), "spearman": rho})
    v_scores, v_ratios, v_rho = _pc1(_heads_concatenated(layers[-1]["context"][:, :, 0::2]), entropy)
    first = F.normalize(layers[0]["keys"][0, 0].double(), dim=-1)  # (T, d_head): sequence 0, head 0
    T = probe.tokens.shape[1]
    uniform = float(np.mean(np.log2(np.arange(3, T + 1, 2))))  # the t-th key position sees 2t + 1 tokens
    return GeometryReport(
        key_abs_cos=np.array(key_cos), key_abs_cos_value_tokens=np.array(key_cos_values),
        key_abs_cos_key_tokens=np.array(key_cos_keys),
        key_abs_cos_baseline=geometry.isotropic_abs_cosine_baseline(layers[0]["keys"].shape[-1]),
        key_cosines=(first @ first.T).numpy(), key_token_types=np.array(["key", "value"] * (T // 2) + ["key"]),
        attention_entropy_bits=np.array(attn_entropy), attention_entropy_uniform_bits=uniform,
        qk_alignment_attended=np.array(attended), qk_alignment_visible=np.array(visible),
        value_scores=v_scores, value_ratios=v_ratios, value_pc1_entropy_spearman=v_rho,
        manifold_table=rows, entropy_bits=entropy,
    )


@dataclass
class HMMManifold:
    """The HMM transformer's representations at every step, against the exact posterior entropy.

    ``scores`` ``(B·K, 2)``, ``ratios`` and ``spearman``: PCA of the last layer's attention output
    (heads concatenated, as for the bijection) and the Spearman ρ of its PC1 with the posterior
    entropy (PC1 oriented so that ρ ≥ 0); ``within_position_spearman``: the mean over steps t of
    the same correlation among sequences at one step — free of position, since here the entropy
    varies from sequence to sequence; ``manifold_table``: the three numbers for every candidate
    representation (values, attention outputs, residual stream, per layer); ``entropy_bits`` ``(B·K,)``.
    """

    scores: np.ndarray
    ratios: np.ndarray
    spearman: float
    within_position_spearman: float
    manifold_table: list[dict[str, Any]]
    entropy_bits: np.ndarray


def hmm_manifold(model: CausalTransformer, batch: hmm.HMMBatch) -> HMMManifold:
    """Return the :class:`HMMManifold` of a trained HMM transformer on ``batch``."""
    _, layers = probe_activations(model, batch.inputs)
    B, K = batch.observations.shape
    entropy = stats.entropy(batch.posterior, unit="bits").numpy()  # (B, K)

    def measure(rows: torch.Tensor) -> tuple[np.ndarray, np.ndarray, float, float]:
        scores, ratios, rho = _pc1(rows, entropy.reshape(-1))
        pc1 = scores[:, 0].reshape(B, K)
        within = float(np.mean([geometry.spearman_correlation(pc1[:, t], entropy[:, t]) for t in range(K)]))
        return scores, ratios, rho, within

    table: list[dict[str, Any]] = []
    candidates = [(l, label, _heads_concatenated(lay[name]) if name != "residual" else lay[name].reshape(B * K, -1))
                  for l, lay in enumerate(layers)
                  for name, label in (("values", "values v_j"), ("context", "attention output g_i"),
                                      ("residual", "residual stream (in)"))]
    candidates.append((len(layers) - 1, "residual stream (out)", layers[-1]["residual_out"].reshape(B * K, -1)))
    for l, label, rows in candidates:
        _, ratios, rho, within = measure(rows)
        table.append({"layer": l, "representation": label, "pc1_ratio": float(ratios[0]), "spearman": rho,
                      "within_step_spearman": within})
    scores, ratios, rho, within = measure(_heads_concatenated(layers[-1]["context"]))
    return HMMManifold(scores=scores, ratios=ratios, spearman=rho, within_position_spearman=within,
                       manifold_table=table, entropy_bits=entropy.reshape(-1))


# --------------------------------------------------------------------------------------------
# Geometry beside its nulls, and through training
# --------------------------------------------------------------------------------------------


def bijection_scrambled_probe(settings: Mapping[str, Any], *, seed: int) -> bijection.BijectionBatch:
    """Return the probe batch with every revealed value replaced by an independent uniform value token.

    The control for the bijection geometry: positions and token types (key, value) are those of the
    probe, but the values are no longer a bijection's (repeats occur), so nothing is left to
    eliminate consistently. ``posterior`` is recomputed from the scrambled tokens
    (:func:`~attention_dynamics.tasks.bijection.exact_posterior`: uniform over the values not shown);
    ``keys`` / ``targets`` / ``bijection`` are the original sequences' and do not match the tokens —
    the batch is for geometry only.
    """
    probe = bijection_probe_batch(settings, seed=seed)
    g = torch_generator(stream(seed, "probe", 1))
    tokens = probe.tokens.clone()
    tokens[:, 1::2] = probe.V + torch.randint(probe.V, tokens[:, 1::2].shape, generator=g)
    return bijection.BijectionBatch(tokens=tokens, keys=probe.keys, targets=probe.targets, bijection=probe.bijection,
                                    posterior=bijection.exact_posterior(tokens, probe.V), V=probe.V, L=probe.L)


def geometry_summary(report: GeometryReport) -> dict[str, float]:
    """Return the geometry numbers the chapter states, by name, from one :class:`GeometryReport`.

    Key ``|cos|`` at layer 0 over every position and over the key-token positions only (Paper I's
    measure), the value manifold's PC1 share and its Spearman ρ with the entropy log2(V − t), the
    attention entropy of every layer (bits) and its relative fall from the first to the last layer.
    """
    out = {"key |cos|, layer 0, all positions": float(report.key_abs_cos[0]),
           "key |cos|, layer 0, key tokens": float(report.key_abs_cos_key_tokens[0]),
           "value PC1 share": float(report.value_ratios[0]),
           "ρ(value PC1, entropy)": float(report.value_pc1_entropy_spearman)}
    for l, h in enumerate(report.attention_entropy_bits):
        out[f"attention entropy, layer {l} (bits)"] = float(h)
    out["attention entropy reduction, first → last layer"] = float(report.attention_entropy_reduction)
    return out


def bijection_geometry_nulls(run: TrainedRun, probe: bijection.BijectionBatch,
                             scrambled: bijection.BijectionBatch) -> dict[str, dict[str, float]]:
    """Return :func:`geometry_summary` of the trained model, of its untrained self and of the control.

    ``"trained"``: the final weights on ``probe``; ``"untrained"``: the same model at step 0 (its
    initialisation: same size, same seed, no training; the run must have kept checkpoint 0);
    ``"scrambled values"``: the trained model on ``scrambled`` (:func:`bijection_scrambled_probe`).
    The untrained column is what size, initialisation and the inputs' statistics give with no
    learning; the scrambled column is what the trained weights give when positions and token types
    are kept but the sequence no longer holds a bijection to eliminate.
    """
    if 0 not in run.checkpoints:
        raise ValueError("the run kept no checkpoint at step 0; train with checkpoints=True")
    return {"trained": geometry_summary(bijection_geometry(run.model(), probe, table=False)),
            "untrained": geometry_summary(bijection_geometry(run.model(0), probe, table=False)),
            "scrambled values": geometry_summary(bijection_geometry(run.model(), scrambled, table=False))}


def bijection_geometry_through_training(run: TrainedRun, probe: bijection.BijectionBatch) -> dict[str, np.ndarray]:
    """Return :func:`geometry_summary` at every checkpoint of a bijection run: name → ``(n_ckpt,)``, plus ``"step"``."""
    if not run.checkpoints:
        raise ValueError("this run kept no checkpoints; train with checkpoints=True")
    steps = sorted(run.checkpoints)
    rows = [geometry_summary(bijection_geometry(run.model(int(t)), probe, table=False)) for t in steps]
    return {"step": np.array(steps), **{k: np.array([r[k] for r in rows]) for k in rows[0]}}
