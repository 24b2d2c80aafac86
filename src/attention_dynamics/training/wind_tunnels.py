"""The book's wind-tunnel transformers and how they are trained (Paper I's tunnels; chapter 6).

Chapters 4 (freezing the frame), 6 (the tunnels themselves, and their long tier) and 8 (diagnostics of the
same model) train these, so they live here, below the chapters:

- **bijection elimination** (:mod:`~attention_dynamics.tasks.bijection`): token inputs, logits over the V values
  read at the key positions (:class:`BijectionTraining`, :func:`train_bijection`);
- **HMM filtering** (:mod:`~attention_dynamics.tasks.hmm`): vector inputs carrying the observation and both
  matrices, trained on the exact filtering posterior at length K, evaluated at longer lengths (ALiBi positions,
  so the same model runs at any length; :class:`HMMTraining`, :func:`train_hmm`);
- **binding** (:mod:`~attention_dynamics.tasks.binding`): keys with replacement, so a repeated key's value must be
  found by content (:class:`BindingTraining`, :func:`train_binding`; chapter 9).

Every trainer takes a ``routing`` control (:data:`ROUTING_CONTROLS`): ``"learned"`` (the model as it is),
``"frozen"`` (every layer's W_Q, W_K kept at their initial values), ``"uniform"`` (W_Q = W_K = 0, kept there: every
head attends uniformly to the positions it may see). The same model with routing removed tells whether a task needs
routing at all. ``value_lr_factor`` multiplies the learning rate of every layer's value projection W_V (the paper's
"EM-like" schedule, here on AdamW's step).

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
from ..tasks import bijection, binding, hmm
from .loop import ResumePoint, fast_adamw, fit, fit_resumable, map_parallel
from .routing import (
    ROUTING_CONTROLS,
    check_routing,
    freeze_query_key,
    scale_value_steps,
    zero_query_key,
)
from .schedules import warmup_cosine

__all__ = [
    "BIJECTION_TARGETS",
    "ROUTING_CONTROLS",
    "BijectionTraining",
    "BindingTraining",
    "BINDING_TUNNELS",
    "train_binding",
    "binding_batch_for_eval",
    "binding_probe_batch",
    "binding_log_probs",
    "zero_query_key",
    "scale_value_steps",
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
class BindingTraining:
    """A binding transformer and its training (:mod:`~attention_dynamics.tasks.binding`): V keys and values, L keys per
    sequence (with replacement), the ``layout`` (``"pair"``: one token per revealed pair; ``"separate"``: key and value
    tokens) and the ``value_map`` (``"bijection"`` or ``"function"``); model and AdamW schedule as
    :class:`BijectionTraining` (always on the exact posterior)."""

    V: int
    L: int
    d_model: int
    n_layers: int
    n_heads: int
    steps: int
    batch: int
    lr: float
    warmup_steps: int
    layout: str = "pair"
    value_map: str = "bijection"

    def __post_init__(self) -> None:
        _check_positive(self, "V", "L", "d_model", "n_layers", "n_heads", "steps", "batch", "warmup_steps")
        binding.check_sizes(self.V, self.L, self.layout, self.value_map)
        if not self.lr > 0:
            raise ValueError(f"lr must be positive, got {self.lr}")

    def replace(self, **changes: Any) -> "BindingTraining":
        """Return a copy with ``changes`` (validated again)."""
        return dataclasses.replace(self, **changes)

    def model(self) -> CausalTransformer:
        """Return an untrained model of this size (initialised from torch's global generator)."""
        return CausalTransformer(n_out=self.V, vocab_size=binding.vocab_size(self.V, self.layout),
                                 d_model=self.d_model, n_layers=self.n_layers, n_heads=self.n_heads,
                                 max_len=binding.sequence_length(self.L), positional="learned")

    def sample(self, n: int, generator: torch.Generator) -> binding.BindingBatch:
        """Return ``n`` fresh sequences of this tunnel."""
        return binding.sample_binding_batch(n, self.V, self.L, layout=self.layout, value_map=self.value_map,
                                            generator=generator)


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


#: The book's binding tunnel per scale: chapter 6's bijection transformer and training (``book``: V = L = 10, 4 layers,
#: d = 64, 2 heads, AdamW 1e-3, 2,000 steps) on the one-hop pair layout; ``paper``: Paper I's sizes; ``fast``: a smoke
#: run.
BINDING_TUNNELS: dict[str, BindingTraining] = {
    "fast": BindingTraining(V=6, L=6, d_model=32, n_layers=2, n_heads=2, steps=150, batch=32, lr=2e-3,
                            warmup_steps=20),
    "book": BindingTraining(V=10, L=10, d_model=64, n_layers=4, n_heads=2, steps=2000, batch=64, lr=1e-3,
                            warmup_steps=100),
    "paper": BindingTraining(V=20, L=19, d_model=192, n_layers=6, n_heads=6, steps=100_000, batch=64, lr=3e-4,
                             warmup_steps=1000),
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

    settings: BijectionTraining | HMMTraining | BindingTraining
    state_dict: dict[str, torch.Tensor]
    losses: np.ndarray
    checkpoints: dict[int, dict[str, torch.Tensor]] = field(default_factory=dict)

    @property
    def task(self) -> str:
        """Return ``"bijection"``, ``"binding"`` or ``"hmm"``."""
        if isinstance(self.settings, BijectionTraining):
            return "bijection"
        return "binding" if isinstance(self.settings, BindingTraining) else "hmm"

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
                    progress: bool = False, freeze_routing_at: int | None = None, routing: str = "learned",
                    value_lr_factor: float = 1.0, resume: ResumePoint | None = None) -> TrainedRun:
    """Return the :class:`TrainedRun` of a transformer trained on fresh bijection-elimination batches.

    Loss: cross-entropy in nats at the key positions, against the exact posterior or the sampled
    value (``settings.target``). AdamW with warm-up and cosine decay, gradients clipped at 1. With
    ``checkpoints`` = n > 0, the weights at the n-point :func:`checkpoint_schedule` are kept.
    ``freeze_routing_at`` = t: every layer's query and key weights keep their step-t values from then
    on (:func:`freeze_query_key`); everything else trains on. ``routing``: a control of
    :data:`ROUTING_CONTROLS`; ``value_lr_factor``: the value projections' learning rate multiplier
    (:func:`scale_value_steps`). ``resume``: save the run's state there as it goes and continue from it
    (:func:`~attention_dynamics.training.fit_resumable`; no checkpoints then).
    """
    s = _checked(settings, BijectionTraining)
    V, L = s.V, s.L

    def sample(n: int, generator: torch.Generator) -> bijection.BijectionBatch:
        return bijection.sample_bijection_batch(n, V, L, generator=generator)

    def loss_fn(m: nn.Module, batch: bijection.BijectionBatch) -> torch.Tensor:
        logits = m(batch.tokens)[:, 0::2]  # (B, L, V): predictions at the key positions
        if s.target == "posterior":
            return calibration.soft_cross_entropy_nats(logits, batch.posterior.to(logits.dtype))
        return F.cross_entropy(logits.reshape(-1, V), batch.targets.reshape(-1))

    return _train_token_tunnel(s, sample, loss_fn, seed=seed, data_index=0, device=device, checkpoints=checkpoints,
                               progress=progress, freeze_routing_at=freeze_routing_at, routing=routing,
                               value_lr_factor=value_lr_factor, resume=resume, desc="bijection")


def train_binding(settings: BindingTraining, *, seed: int, device: str = "cpu", checkpoints: int = 0,
                  progress: bool = False, freeze_routing_at: int | None = None, routing: str = "learned",
                  value_lr_factor: float = 1.0, resume: ResumePoint | None = None) -> TrainedRun:
    """Return the :class:`TrainedRun` of a transformer trained on fresh binding batches (exact-posterior targets).

    As :func:`train_bijection`: soft-target cross-entropy in nats at the key positions, AdamW with warm-up and cosine
    decay, clipping at 1, the same checkpoints, freezing, routing controls and value learning-rate factor. Its
    batches come from the seed's training stream at index 1 (index 0 is bijection's).
    """
    s = _checked(settings, BindingTraining)

    def loss_fn(m: nn.Module, batch: binding.BindingBatch) -> torch.Tensor:
        logits = m(batch.tokens)[:, 0::2]  # (B, L, V)
        return calibration.soft_cross_entropy_nats(logits, batch.posterior.to(logits.dtype))

    return _train_token_tunnel(s, s.sample, loss_fn, seed=seed, data_index=1, device=device, checkpoints=checkpoints,
                               progress=progress, freeze_routing_at=freeze_routing_at, routing=routing,
                               value_lr_factor=value_lr_factor, resume=resume, desc="binding")


def _train_token_tunnel(s, sample, loss_fn, *, seed: int, data_index: int, device: str, checkpoints: int,
                        progress: bool, freeze_routing_at: int | None, routing: str, value_lr_factor: float,
                        resume: ResumePoint | None, desc: str, fused_adamw: bool = False) -> TrainedRun:
    """The one training loop of the wind tunnels (bijection, binding, HMM): see :func:`train_bijection`."""
    check_routing(routing, freeze_routing_at)
    if not value_lr_factor > 0:
        raise ValueError(f"value_lr_factor must be positive, got {value_lr_factor!r}")
    dev = resolve_device(device)
    threads = _set_threads(dev)
    try:
        model = untrained_model(s, seed)
        if routing == "uniform":
            zero_query_key(model)
        model = model.to(dev)
        for attn in model.attention_modules():
            attn.fused = True  # the same function as the explicit path (tested), faster
        data = torch_generator(stream(seed, "train", data_index))
        freeze_at = 0 if routing != "learned" else freeze_routing_at
        frozen = freeze_query_key(model) if freeze_at is not None else None

        def batches(step: int):
            if frozen is not None and step >= freeze_at:
                frozen(step == freeze_at)
            return sample(s.batch, data).to(dev)

        kept: dict[int, dict[str, torch.Tensor]] = {}
        steps = s.steps
        at = checkpoint_schedule(steps, checkpoints) if checkpoints else []

        def keep(step: int, m: nn.Module, _loss: float) -> None:
            if frozen is not None and step >= freeze_at and step > 0:
                frozen(False)  # the stored weights hold the frozen rows, not the last step's move of them
            kept[step] = _cpu_state(m)

        optimizer = _optimizer(model, s.lr, fused=fused_adamw)
        if value_lr_factor != 1.0:
            scale_value_steps(model, optimizer, value_lr_factor)
        history = _fit(model, batches, steps, optimizer, loss_fn, s, resume=resume, generator=data,
                       callback=keep if at else None, callback_steps=at, progress=progress, desc=desc)
        if frozen is not None and freeze_at < steps:
            frozen(False)  # undo the last step's move of the frozen rows
        return TrainedRun(s, _cpu_state(model), history.losses, kept)
    finally:
        torch.set_num_threads(threads)


def train_hmm(settings: HMMTraining, *, seed: int, device: str = "cpu", checkpoints: int = 0,
              progress: bool = False, freeze_routing_at: int | None = None, routing: str = "learned",
              value_lr_factor: float = 1.0, resume: ResumePoint | None = None) -> TrainedRun:
    """Return the :class:`TrainedRun` of a transformer trained on fresh HMM-filtering batches of length K.

    Loss: soft-target cross-entropy in nats against the exact filtering posterior (its minimum is
    the mean posterior entropy). AdamW with warm-up and cosine decay, gradients clipped at 1;
    ``settings.fused_adamw`` selects AdamW's fused kernel (the same update, faster on a CPU).
    With ``checkpoints`` = n > 0, the weights at :func:`checkpoint_schedule` steps are kept (for the
    calibration curve through training, :func:`hmm_kl_through_training`); ``freeze_routing_at``, ``routing``,
    ``value_lr_factor`` and ``resume`` as in :func:`train_bijection`.
    """
    s = _checked(settings, HMMTraining)

    def sample(n: int, generator: torch.Generator) -> hmm.HMMBatch:
        return _hmm_batch(s, n, s.length, generator)

    def loss_fn(m: nn.Module, batch: hmm.HMMBatch) -> torch.Tensor:
        logits = m(batch.inputs)  # (B, K, S)
        return calibration.soft_cross_entropy_nats(logits, batch.posterior.to(logits.dtype))

    return _train_token_tunnel(s, sample, loss_fn, seed=seed, data_index=0, device=device, checkpoints=checkpoints,
                               progress=progress, freeze_routing_at=freeze_routing_at, routing=routing,
                               value_lr_factor=value_lr_factor, resume=resume, desc="HMM",
                               fused_adamw=s.fused_adamw)


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


def untrained_model(settings: BijectionTraining | HMMTraining | BindingTraining, seed: int) -> CausalTransformer:
    """Return the model a run with ``seed`` starts from (drawn from the seed's init stream, as the trainers draw it)."""
    torch.manual_seed(stream(seed, "init"))
    return settings.model()


def train(settings: BijectionTraining | HMMTraining | BindingTraining, *, seed: int, device: str = "cpu",
          checkpoints: int = 0) -> TrainedRun:
    """Return the :class:`TrainedRun` of the tunnel ``settings`` describe (:func:`train_bijection`, :func:`train_binding`
    or :func:`train_hmm`)."""
    trainer = (train_bijection if isinstance(settings, BijectionTraining)
               else train_binding if isinstance(settings, BindingTraining) else train_hmm)
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


def binding_batch_for_eval(settings: BindingTraining, *, seed: int, n: int) -> binding.BindingBatch:
    """Return the held-out binding batch of an experiment (the seed's evaluation stream at index 1, never trained on)."""
    return settings.sample(n, torch_generator(stream(seed, "eval", 1)))


def binding_probe_batch(settings: BindingTraining, *, seed: int, n: int) -> binding.BindingBatch:
    """Return the binding probe batch (``n`` held-out sequences; the seed's probe stream at index 2)."""
    return settings.sample(n, torch_generator(stream(seed, "probe", 2)))


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
def binding_log_probs(model: nn.Module, batch: binding.BindingBatch) -> torch.Tensor:
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
