"""The book's wind-tunnel transformers and how they are trained (Paper I's tunnels; chapter 6).

Chapters 4 (freezing the frame), 6 (the tunnels themselves, and their long tier) and 8 (diagnostics of the
same model) train these, so they live here, below the chapters:

- **bijection elimination** (:mod:`~attention_dynamics.tasks.bijection`): token inputs, logits over the V values
  read at the key positions (:class:`BijectionTraining`, :func:`train_bijection`);
- **HMM filtering** (:mod:`~attention_dynamics.tasks.hmm`): vector inputs carrying the observation and both
  matrices, trained on the exact filtering posterior at length K, evaluated at longer lengths (ALiBi positions,
  so the same model runs at any length; :class:`HMMTraining`, :func:`train_hmm`).

:data:`BIJECTION_TUNNELS` and :data:`HMM_TUNNELS` are the book's tunnels per scale (``fast`` / ``book`` /
``paper``): chapter 6 trains them, and chapters 4 and 8 study exactly the models chapter 6 measures.

Training targets. Both tasks are trained by cross-entropy. For HMM filtering the target is the exact posterior
(soft-target cross-entropy, as the paper does). For the bijection the book's default is also the exact posterior
(``target="posterior"``); Paper I trains on the sampled next value (``"sampled"``). The two objectives have the
same expected gradient in every context (cross-entropy is linear in the target, and the posterior is the
conditional mean of the one-hot target), hence the same minimiser; the posterior target removes the sampling
noise, which is what lets a CPU-sized run reach the paper's calibration in minutes.
"""

from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Mapping

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from ..core.seeding import stream, torch_generator
from ..core.settings import check_positive_int, resolve_device
from ..models.transformer import CausalTransformer
from ..science import calibration
from ..tasks import bijection, hmm
from .loop import ResumePoint, fast_adamw, fit, fit_resumable, map_parallel
from .schedules import warmup_cosine

__all__ = [
    "BIJECTION_TARGETS",
    "BijectionTraining",
    "HMMTraining",
    "BIJECTION_TUNNELS",
    "HMM_TUNNELS",
    "make_bijection_transformer",
    "make_hmm_transformer",
    "checkpoint_schedule",
    "TrainedRun",
    "train_bijection",
    "freeze_query_key",
    "train_hmm",
    "untrained_model",
    "train",
    "train_both",
    "bijection_batch_for_eval",
    "bijection_probe_batch",
    "hmm_batch_for_eval",
    "bijection_log_probs",
    "hmm_log_probs",
    "HMMCurve",
    "hmm_kl_through_training",
    "trained_bijection_transformer",
]

BIJECTION_TARGETS = ("posterior", "sampled")


def _check_positive(owner: object, *names: str) -> None:
    for name in names:
        check_positive_int(name, getattr(owner, name))


@dataclass(frozen=True)
class BijectionTraining:
    """A bijection-elimination transformer and its training: task sizes V, L; model d_model, n_layers, n_heads;
    AdamW at ``lr`` with ``warmup_steps`` of linear warm-up then cosine decay over ``steps`` updates of ``batch``
    fresh sequences; ``target``: the exact posterior or the sampled value (see the module's docstring)."""

    V: int
    L: int
    d_model: int
    n_layers: int
    n_heads: int
    steps: int
    batch: int
    lr: float
    warmup_steps: int
    target: str = "posterior"

    def __post_init__(self) -> None:
        _check_positive(self, "V", "L", "d_model", "n_layers", "n_heads", "steps", "batch", "warmup_steps")
        bijection.check_sizes(self.V, self.L)
        if self.target not in BIJECTION_TARGETS:
            raise ValueError(f"target must be one of {BIJECTION_TARGETS}, got {self.target!r}")
        if not self.lr > 0:
            raise ValueError(f"lr must be positive, got {self.lr}")

    def replace(self, **changes: Any) -> "BijectionTraining":
        """Return a copy with ``changes`` (validated again)."""
        return dataclasses.replace(self, **changes)

    def model(self) -> CausalTransformer:
        """Return an untrained model of this size (initialised from torch's global generator)."""
        return make_bijection_transformer(self.V, self.L, d_model=self.d_model, n_layers=self.n_layers,
                                          n_heads=self.n_heads)


@dataclass(frozen=True)
class HMMTraining:
    """An HMM-filtering transformer and its training: HMM sizes (``n_states``, ``n_symbols``), training length
    ``length`` and the lengths it is tested at, the probability grid of the HMMs (``None``: none); model sizes;
    AdamW (``fused_adamw``: its one-pass kernel, the same update) with warm-up and cosine decay, as
    :class:`BijectionTraining`."""

    n_states: int
    n_symbols: int
    length: int
    test_lengths: tuple[int, ...]
    d_model: int
    n_layers: int
    n_heads: int
    steps: int
    batch: int
    lr: float
    warmup_steps: int
    grid: float | None = None
    fused_adamw: bool = True

    def __post_init__(self) -> None:
        _check_positive(self, "n_states", "n_symbols", "length", "d_model", "n_layers", "n_heads", "steps", "batch",
                        "warmup_steps")
        object.__setattr__(self, "test_lengths", tuple(check_positive_int("test length", k) for k in self.test_lengths))
        if self.length not in self.test_lengths:
            raise ValueError(f"the test lengths {self.test_lengths} must include the training length {self.length}")
        if not self.lr > 0:
            raise ValueError(f"lr must be positive, got {self.lr}")

    def replace(self, **changes: Any) -> "HMMTraining":
        """Return a copy with ``changes`` (validated again)."""
        return dataclasses.replace(self, **changes)

    def model(self) -> CausalTransformer:
        """Return an untrained model of this size (initialised from torch's global generator)."""
        return make_hmm_transformer(self.n_states, self.n_symbols, d_model=self.d_model, n_layers=self.n_layers,
                                    n_heads=self.n_heads)


#: The book's bijection tunnel per scale. ``book``: what chapter 6 shows (2 CPU cores); ``paper``: Paper I's model
#: (V = 20, L = 19, 6 layers, 6 heads, d = 192, AdamW 3e-4, sampled targets), GPU-sized; ``fast``: a smoke run.
BIJECTION_TUNNELS: dict[str, BijectionTraining] = {
    "fast": BijectionTraining(V=6, L=6, d_model=32, n_layers=2, n_heads=2, steps=150, batch=32, lr=2e-3,
                              warmup_steps=20),
    "book": BijectionTraining(V=10, L=10, d_model=64, n_layers=4, n_heads=2, steps=2000, batch=64, lr=1e-3,
                              warmup_steps=100),
    "paper": BijectionTraining(V=20, L=19, d_model=192, n_layers=6, n_heads=6, steps=100_000, batch=64, lr=3e-4,
                               warmup_steps=1000, target="sampled"),
}
#: The book's HMM tunnel per scale (``book``: learning rate 1e-3 chosen on seed 0: KL at 6,000 steps 0.69x the
#: context-blind level, 0.96x at 2e-3, 1.12x at 5e-4; ``paper``: Paper I's sizes and 0.01 grid, GPU-sized).
HMM_TUNNELS: dict[str, HMMTraining] = {
    "fast": HMMTraining(n_states=5, n_symbols=5, length=8, test_lengths=(8, 12, 20), d_model=32, n_layers=2,
                        n_heads=2, steps=150, batch=32, lr=2e-3, warmup_steps=20),
    "book": HMMTraining(n_states=5, n_symbols=5, length=20, test_lengths=(20, 30, 50), d_model=64, n_layers=2,
                        n_heads=4, steps=10_000, batch=64, lr=1e-3, warmup_steps=100),
    "paper": HMMTraining(n_states=5, n_symbols=5, length=20, test_lengths=(20, 30, 50), d_model=192, n_layers=6,
                         n_heads=6, steps=100_000, batch=64, lr=3e-4, warmup_steps=1000, grid=0.01),
}


def make_bijection_transformer(V: int, L: int, *, d_model: int, n_layers: int, n_heads: int) -> CausalTransformer:
    """Return a causal transformer reading the 2V-token vocabulary and emitting logits over the V values."""
    V, L = bijection.check_sizes(V, L)
    return CausalTransformer(n_out=V, vocab_size=bijection.vocab_size(V), d_model=d_model, n_layers=n_layers,
                             n_heads=n_heads, max_len=bijection.sequence_length(L), positional="learned")


def make_hmm_transformer(n_states: int, n_symbols: int, *, d_model: int, n_layers: int, n_heads: int) -> CausalTransformer:
    """Return a causal transformer with ALiBi positions (any length) emitting logits over the hidden states."""
    return CausalTransformer(n_out=n_states, input_dim=hmm.hmm_input_dim(n_states, n_symbols), d_model=d_model,
                             n_layers=n_layers, n_heads=n_heads, positional="alibi")


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


@dataclass
class TrainedRun:
    """A finished training run: the model's weights, its losses and (optionally) checkpoint weights.

    ``losses`` ``(steps,)`` is the training loss (nats) before every update; ``checkpoints`` maps a
    step to the state dict after that many updates; ``settings`` (a :class:`BijectionTraining` or
    :class:`HMMTraining`) holds everything needed to rebuild the model (:meth:`model`).
    """

    settings: BijectionTraining | HMMTraining
    state_dict: dict[str, torch.Tensor]
    losses: np.ndarray
    checkpoints: dict[int, dict[str, torch.Tensor]] = field(default_factory=dict)

    @property
    def task(self) -> str:
        """Return ``"bijection"`` or ``"hmm"``."""
        return "bijection" if isinstance(self.settings, BijectionTraining) else "hmm"

    def model(self, step: int | None = None) -> CausalTransformer:
        """Return the model (in eval mode) with the final weights, or those of checkpoint ``step``."""
        m = self.settings.model()
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


def train_bijection(settings: BijectionTraining, *, seed: int, device: str = "cpu", checkpoints: int = 0,
                    progress: bool = False, freeze_routing_at: int | None = None,
                    resume: ResumePoint | None = None) -> TrainedRun:
    """Return the :class:`TrainedRun` of a transformer trained on fresh bijection-elimination batches.

    Loss: cross-entropy in nats at the key positions, against the exact posterior or the sampled
    value (``settings.target``). AdamW with warm-up and cosine decay, gradients clipped at 1. With
    ``checkpoints`` = n > 0, the weights at the n-point :func:`checkpoint_schedule` are kept.
    ``freeze_routing_at`` = t: every layer's query and key weights keep their step-t values from then
    on (:func:`freeze_query_key`); everything else trains on. ``resume``: save the run's state there as it
    goes and continue from it (:func:`~attention_dynamics.training.fit_resumable`; no checkpoints then).
    """
    s = _checked(settings, BijectionTraining)
    dev = resolve_device(device)
    threads = _set_threads(dev)
    try:
        model = untrained_model(s, seed).to(dev)
        for attn in model.attention_modules():
            attn.fused = True  # the same function as the explicit path (tested), faster
        data = torch_generator(stream(seed, "train"))
        V, L, B = s.V, s.L, s.batch

        frozen = freeze_query_key(model) if freeze_routing_at is not None else None

        def batches(step: int) -> bijection.BijectionBatch:
            if frozen is not None and step >= freeze_routing_at:
                frozen(step == freeze_routing_at)
            return bijection.sample_bijection_batch(B, V, L, generator=data).to(dev)

        def loss_fn(m: nn.Module, batch: bijection.BijectionBatch) -> torch.Tensor:
            logits = m(batch.tokens)[:, 0::2]  # (B, L, V): predictions at the key positions
            if s.target == "posterior":
                return calibration.soft_cross_entropy_nats(logits, batch.posterior.to(logits.dtype))
            return F.cross_entropy(logits.reshape(-1, V), batch.targets.reshape(-1))

        kept: dict[int, dict[str, torch.Tensor]] = {}
        steps = s.steps
        at = checkpoint_schedule(steps, checkpoints) if checkpoints else []

        def keep(step: int, m: nn.Module, _loss: float) -> None:
            kept[step] = _cpu_state(m)

        optimizer = _optimizer(model, s.lr)
        history = _fit(model, batches, steps, optimizer, loss_fn, s, resume=resume, generator=data,
                       callback=keep if at else None, callback_steps=at, progress=progress, desc="bijection")
        if frozen is not None and freeze_routing_at < steps:
            frozen(False)  # undo the last step's move of the frozen rows
        return TrainedRun(s, _cpu_state(model), history.losses, kept)
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


def train_hmm(settings: HMMTraining, *, seed: int, device: str = "cpu", checkpoints: int = 0,
              progress: bool = False, resume: ResumePoint | None = None) -> TrainedRun:
    """Return the :class:`TrainedRun` of a transformer trained on fresh HMM-filtering batches of length K.

    Loss: soft-target cross-entropy in nats against the exact filtering posterior (its minimum is
    the mean posterior entropy). AdamW with warm-up and cosine decay, gradients clipped at 1;
    ``settings.fused_adamw`` selects AdamW's fused kernel (the same update, faster on a CPU).
    With ``checkpoints`` = n > 0, the weights at :func:`checkpoint_schedule` steps are kept (for the
    calibration curve through training, :func:`hmm_kl_through_training`); ``resume`` as in :func:`train_bijection`.
    """
    s = _checked(settings, HMMTraining)
    dev = resolve_device(device)
    threads = _set_threads(dev)
    try:
        model = untrained_model(s, seed).to(dev)
        for attn in model.attention_modules():
            attn.fused = True
        data = torch_generator(stream(seed, "train"))

        def batches(step: int) -> hmm.HMMBatch:
            return _hmm_batch(s, s.batch, s.length, data).to(dev)

        def loss_fn(m: nn.Module, batch: hmm.HMMBatch) -> torch.Tensor:
            logits = m(batch.inputs)  # (B, K, S)
            return calibration.soft_cross_entropy_nats(logits, batch.posterior.to(logits.dtype))

        steps = s.steps
        kept: dict[int, dict[str, torch.Tensor]] = {}
        at = checkpoint_schedule(steps, checkpoints) if checkpoints else []

        def keep(step: int, m: nn.Module, _loss: float) -> None:
            kept[step] = _cpu_state(m)

        optimizer = _optimizer(model, s.lr, fused=s.fused_adamw)
        history = _fit(model, batches, steps, optimizer, loss_fn, s, resume=resume, generator=data,
                       callback=keep if at else None, callback_steps=at, progress=progress, desc="HMM")
        return TrainedRun(s, _cpu_state(model), history.losses, kept)
    finally:
        torch.set_num_threads(threads)


def _fit(model, batches, steps, optimizer, loss_fn, s, *, resume, generator, **kwargs):
    """:func:`fit` with AdamW's warm-up–cosine schedule and clipping at 1; resumable (no checkpoints) if ``resume``."""
    scheduler = warmup_cosine(optimizer, steps, s.warmup_steps)
    if resume is None:
        return fit(model, batches, steps=steps, optimizer=optimizer, loss_fn=loss_fn, scheduler=scheduler,
                   grad_clip=1.0, **kwargs)
    return fit_resumable(model, batches, steps=steps, optimizer=optimizer, loss_fn=loss_fn, scheduler=scheduler,
                         grad_clip=1.0, resume=resume, generator=generator, progress=kwargs["progress"], desc=kwargs["desc"])


def _hmm_batch(s: HMMTraining, n: int, length: int, generator: torch.Generator) -> hmm.HMMBatch:
    return hmm.sample_hmm_batch(n, length, n_states=s.n_states, n_symbols=s.n_symbols, grid=s.grid,
                                generator=generator)


def _checked(settings: Any, kind: type) -> Any:
    if not isinstance(settings, kind):
        raise TypeError(f"expected {kind.__name__} settings, got {type(settings).__name__}")
    return settings


def untrained_model(settings: BijectionTraining | HMMTraining, seed: int) -> CausalTransformer:
    """Return the model a run with ``seed`` starts from (drawn from the seed's init stream, as the trainers draw it)."""
    torch.manual_seed(stream(seed, "init"))
    return settings.model()


def train(settings: BijectionTraining | HMMTraining, *, seed: int, device: str = "cpu", checkpoints: int = 0) -> TrainedRun:
    """Return the :class:`TrainedRun` of the tunnel ``settings`` describe (:func:`train_bijection` or :func:`train_hmm`)."""
    trainer = train_bijection if isinstance(settings, BijectionTraining) else train_hmm
    return trainer(settings, seed=seed, device=device, checkpoints=checkpoints)


def train_both(bijection_settings: BijectionTraining, hmm_settings: HMMTraining, *, seed: int, device: str = "cpu",
               checkpoints: int = 0) -> tuple[TrainedRun, TrainedRun]:
    """Return ``(bijection run, HMM run)``, trained side by side on two cores (one process each).

    Each run seeds itself and uses one thread on the CPU, so the result is the same whether the
    two runs share a machine or not.
    """
    device = str(resolve_device(device))
    jobs = [dict(settings=s, seed=int(seed), device=device, checkpoints=checkpoints)
            for s in (_checked(bijection_settings, BijectionTraining), _checked(hmm_settings, HMMTraining))]
    bij, hmm_run = map_parallel(train, jobs)
    return bij, hmm_run


def bijection_batch_for_eval(settings: BijectionTraining, *, seed: int, n: int) -> bijection.BijectionBatch:
    """Return the held-out bijection batch of an experiment (its own random stream, never trained on)."""
    return bijection.sample_bijection_batch(n, settings.V, settings.L, generator=torch_generator(stream(seed, "eval")))


def bijection_probe_batch(settings: BijectionTraining, *, seed: int, n: int) -> bijection.BijectionBatch:
    """Return the probe batch (``n`` held-out sequences) on which geometry and checkpoints are measured."""
    return bijection.sample_bijection_batch(n, settings.V, settings.L, generator=torch_generator(stream(seed, "probe")))


def hmm_batch_for_eval(settings: HMMTraining, length: int, *, seed: int, n: int) -> hmm.HMMBatch:
    """Return a held-out HMM batch of ``length`` steps (one random stream per length)."""
    return _hmm_batch(settings, n, length, torch_generator(stream(seed, "eval", length)))


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
        raise ValueError("this run kept no checkpoints; train with checkpoints=n")
    steps = np.array(sorted(run.checkpoints))
    kl = {K: np.array([calibration.calibration_report(b.posterior, hmm_log_probs(run.model(int(t)), b)).kl_bits
                       for t in steps]) for K, b in batches.items()}
    blind = {K: calibration.calibration_report(
        b.posterior, hmm.context_blind_posterior(b.transition, b.emission, b.observations).log()).kl_bits
        for K, b in batches.items()}
    return HMMCurve(steps=steps, kl_bits=kl, context_blind_kl_bits=blind)


@lru_cache(maxsize=4)
def _trained_bijection(settings: BijectionTraining, seed: int, device: str) -> TrainedRun:
    return train_bijection(settings, seed=seed, device=device)


def trained_bijection_transformer(settings: BijectionTraining, seed: int = 0, device: str = "cpu") -> CausalTransformer:
    """Return the bijection transformer of ``settings``, trained deterministically (cached per process).

    The same settings and seed give the same weights (CPU, one thread), so a chapter can study exactly the model
    chapter 6 measures (:data:`BIJECTION_TUNNELS`). The paper's sizes need a GPU.
    """
    return copy.deepcopy(_trained_bijection(_checked(settings, BijectionTraining), int(seed),
                                            str(resolve_device(device))).model())
