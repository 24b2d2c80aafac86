"""Content-based routing across architectures (PAPER.md §3 item 7; chapter 7).

Paper I v3 sorts inference into three primitives and asks which architectures realise them:

- **belief accumulation** — bijection elimination (:mod:`~attention_dynamics.tasks.bijection`),
- **belief transport** — HMM filtering (:mod:`~attention_dynamics.tasks.hmm`),
- **random-access binding** — associative recall (:mod:`~attention_dynamics.tasks.associative_recall`).

This module holds everything the chapter computes:

1. the three tasks behind one interface (:class:`WindTunnel`, :class:`TaskBatch`, :func:`task_loss`);
2. five model families with parameter counts matched to a target (:func:`build_matched_model`);
3. one training-and-evaluation run (:func:`train_and_evaluate`, driven by
   :func:`attention_dynamics.training.fit`) and the grid of runs on both cores
   (:func:`compare_architectures`), with the exact reference levels (:func:`reference_levels`);
4. the routing law beyond attention: the advantage form for any softmax-normalised content router
   (:class:`ContentRouter`, :func:`softmax_routing_gradients`) and how much of Mamba's routing
   gradient it explains (:func:`advantage_form_fit`, :func:`mamba_advantage_fit`);
5. the geometry of Mamba's states on HMM filtering (:func:`cluster_purity`, :func:`state_clustering`).

Units: calibration errors in bits (:mod:`attention_dynamics.calibration`), accuracies as fractions,
losses in nats (mean cross-entropy over prediction positions).
"""

from __future__ import annotations

import copy
import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from . import calibration
from .gradients import advantage_routing_gradient
from .models import CausalTransformer, count_parameters
from .models.mamba import (
    MambaSequenceModel,
    block_output_from_routing,
    forward_with_explicit_routing,
    selective_scan_routing,
)
from .models.mlp import ContextBlindMLP, WindowMLP
from .models.recurrent import LSTMSequenceModel
from .seeding import torch_generator
from .settings import check_positive_int
from .tasks import associative_recall, bijection, hmm
from .training import fit, map_parallel
from .wind_tunnel import warmup_cosine  # the book's one warm-up + cosine schedule (chapter 6)

__all__ = [
    "SETTINGS",
    "book_tasks",
    "TASKS",
    "FAMILIES",
    "FAMILY_LABELS",
    "TASK_PRIMITIVES",
    "PAPER_I_RESULTS",
    "HEADLINE_METRIC",
    "REALISED_FRACTION_OF_BLIND",
    "REALISED_BINDING_ACCURACY",
    "TRANSFORMER_BINDING_TARGET",
    "WIDTH_GRID",
    "SCORE_FUNCTIONS",
    "WindTunnel",
    "TaskBatch",
    "prediction_logits",
    "task_loss",
    "loss_from_logits",
    "build_model",
    "matched_width",
    "build_matched_model",
    "RunResult",
    "evaluation_seed",
    "evaluation_batch",
    "evaluate",
    "evaluation_report",
    "train_and_evaluate",
    "compare_architectures",
    "ReferenceLevels",
    "hmm_context_blind_log_probs",
    "permute_within_rows",
    "reference_levels",
    "realises_primitive",
    "paper_verdict_bounds",
    "results_table",
    "pd_table",
    "bayes_floor_nats",
    "record_table_claims",
    "verdict_summary",
    "ContentRouter",
    "RouterForward",
    "softmax_routing_gradients",
    "AdvantageFit",
    "advantage_form_fit",
    "pooled_r2",
    "mamba_advantage_fit",
    "scan_reproduction_error",
    "cluster_purity",
    "chance_purity",
    "StateClustering",
    "final_layer_states",
    "state_clustering",
    "family_color",
    "plot_training_losses",
    "plot_advantage_fits",
    "plot_state_clusters",
    "plot_hmm_kl_by_position",
]

#: The three wind tunnels, in the order of Paper I v3's primitives.
TASKS = ("bijection", "hmm", "binding")
#: What each task tests.
TASK_PRIMITIVES = {"bijection": "accumulation", "hmm": "transport", "binding": "binding"}
#: The five model families, from content routing to none at all.
FAMILIES = ("transformer", "mamba", "lstm", "mlp_window", "mlp_blind")
FAMILY_LABELS = {
    "transformer": "Transformer",
    "mamba": "Mamba",
    "lstm": "LSTM",
    "mlp_window": "MLP (whole window)",
    "mlp_blind": "MLP (context-blind)",
}

#: Chapter 7's settings per scale (chapter 7 and the seed-spread runs of :mod:`seed_spread` read them).
SETTINGS: dict[str, dict[str, Any]] = {
    "fast": {"bijection_V": 5, "bijection_L": 5, "hmm_states": 5, "hmm_symbols": 5, "hmm_length": 6,
             "binding_pairs": 3, "binding_queries": 3, "binding_keys": 6, "binding_values": 6,
             "target_params": 6000, "steps": 20, "batch_size": 16, "lr": 2e-3,
             "eval_sequences": 64, "analysis_sequences": 4, "cluster_sequences": 32},
    "book": {"bijection_V": 8, "bijection_L": 8, "hmm_states": 5, "hmm_symbols": 5, "hmm_length": 16,
             "binding_pairs": 4, "binding_queries": 4, "binding_keys": 16, "binding_values": 16,
             "target_params": 60000, "steps": 800, "batch_size": 64, "lr": 2e-3,
             "eval_sequences": 1000, "analysis_sequences": 16, "cluster_sequences": 400},
    # Paper I's sizes where PAPER.md gives them (bijection V = 20, L = 19; HMM K = 20; ~2.7M parameters,
    # AdamW 3e-4, 50k steps); the binding sizes are not stated there and are our choice. GPU-sized.
    "paper": {"bijection_V": 20, "bijection_L": 19, "hmm_states": 5, "hmm_symbols": 5, "hmm_length": 20,
              "binding_pairs": 16, "binding_queries": 16, "binding_keys": 64, "binding_values": 64,
              "target_params": 2_700_000, "steps": 50_000, "batch_size": 64, "lr": 3e-4,
              "eval_sequences": 5000, "analysis_sequences": 16, "cluster_sequences": 1000},
}


def book_tasks(cfg: Mapping[str, Any]) -> list["WindTunnel"]:
    """Return chapter 7's three wind tunnels (bijection, HMM, binding) at the sizes of settings ``cfg``."""
    return [
        WindTunnel.make("bijection", V=cfg["bijection_V"], L=cfg["bijection_L"]),
        WindTunnel.make("hmm", n_states=cfg["hmm_states"], n_symbols=cfg["hmm_symbols"], length=cfg["hmm_length"]),
        WindTunnel.make("binding", n_pairs=cfg["binding_pairs"], n_queries=cfg["binding_queries"],
                        n_keys=cfg["binding_keys"], n_values=cfg["binding_values"]),
    ]


#: Paper I's reported numbers (PAPER.md §4.2): bijection per-sample entropy error (bits), HMM entropy
#: error (bits, v3 table at K = 20), binding accuracy (fraction), and the primitives each family realises
#: ("MLP" in Paper I is the context-blind one: its 1.85 bits sit at the context-blind level).
PAPER_I_RESULTS: dict[str, dict[str, Any]] = {
    "transformer": {"bijection_mae_bits": 0.007, "hmm_mae_bits": 0.049, "binding_accuracy": 1.0,
                    "realises": {"bijection": True, "hmm": True, "binding": True}},
    "mamba": {"bijection_mae_bits": 0.010, "hmm_mae_bits": None, "binding_accuracy": 0.978,
              "realises": {"bijection": True, "hmm": True, "binding": True}},
    "lstm": {"bijection_mae_bits": 0.009, "hmm_mae_bits": None, "binding_accuracy": 0.005,
             "realises": {"bijection": True, "hmm": False, "binding": False}},
    "mlp_window": {"bijection_mae_bits": None, "hmm_mae_bits": None, "binding_accuracy": None,
                   "realises": None},
    "mlp_blind": {"bijection_mae_bits": 1.85, "hmm_mae_bits": None, "binding_accuracy": None,
                  "realises": {"bijection": False, "hmm": False, "binding": False}},
}


# --------------------------------------------------------------------------------------------
# 1. The tasks behind one interface
# --------------------------------------------------------------------------------------------


@dataclass
class TaskBatch:
    """A batch of any wind tunnel, ready for a model.

    inputs: token ids ``(B, T)`` or features ``(B, T, F)``; positions ``(P,)``: where predictions
    are scored; targets ``(B, P)`` int64 sampled answers (bijection, binding; for accuracy) or ``None``
    (HMM); posterior ``(B, P, C)`` float64, the exact posterior at those positions (the training target).
    ``extra`` keeps task-specific tensors (the HMM's matrices and hidden states).
    """

    inputs: torch.Tensor
    positions: torch.Tensor
    targets: torch.Tensor | None
    posterior: torch.Tensor
    extra: dict[str, torch.Tensor] = field(default_factory=dict)

    def __len__(self) -> int:
        return self.inputs.shape[0]


@dataclass(frozen=True)
class WindTunnel:
    """One task with its sizes: ``bijection`` (V, L), ``hmm`` (n_states, n_symbols, length) or
    ``binding`` (n_pairs, n_queries, n_keys, n_values).

    Inputs: bijection tokens; HMM features (observation and both matrices at every step); binding in
    the one-position-per-pair layout (:func:`~attention_dynamics.tasks.associative_recall.pair_features`),
    so that retrieval is a single content-routing step for every architecture.
    """

    name: str
    sizes: tuple[tuple[str, int], ...]

    @classmethod
    def make(cls, name: str, **sizes: int) -> "WindTunnel":
        """Return the task ``name`` with ``sizes`` validated."""
        if name not in TASKS:
            raise ValueError(f"unknown task {name!r}; choose one of {', '.join(TASKS)}")
        required = {"bijection": ("V", "L"), "hmm": ("n_states", "n_symbols", "length"),
                    "binding": ("n_pairs", "n_queries", "n_keys", "n_values")}[name]
        if set(sizes) != set(required):
            raise ValueError(f"task {name!r} needs sizes {', '.join(required)}, got {', '.join(sorted(sizes))}")
        sizes = {k: check_positive_int(k, v) for k, v in sizes.items()}
        if name == "bijection":
            bijection.check_sizes(sizes["V"], sizes["L"])
        elif name == "binding":
            associative_recall.check_sizes(sizes["n_pairs"], sizes["n_queries"], sizes["n_keys"], sizes["n_values"])
        return cls(name, tuple((k, sizes[k]) for k in required))

    def __getitem__(self, key: str) -> int:
        return dict(self.sizes)[key]

    @property
    def vocab_size(self) -> int | None:
        """Return the number of token ids (``None`` for feature inputs: HMM and binding)."""
        return bijection.vocab_size(self["V"]) if self.name == "bijection" else None

    @property
    def input_dim(self) -> int | None:
        """Return the feature size per position (``None`` for the bijection's token inputs)."""
        if self.name == "hmm":
            return hmm.hmm_input_dim(self["n_states"], self["n_symbols"])
        if self.name == "binding":
            return associative_recall.pair_feature_dim(self["n_keys"], self["n_values"])
        return None

    @property
    def n_out(self) -> int:
        """Return the number of classes predicted at each position."""
        return {"bijection": lambda: self["V"], "hmm": lambda: self["n_states"],
                "binding": lambda: self["n_values"]}[self.name]()

    @property
    def sequence_length(self) -> int:
        """Return the number of positions T of a sequence."""
        if self.name == "bijection":
            return bijection.sequence_length(self["L"])
        if self.name == "binding":
            return self["n_pairs"] + self["n_queries"]  # one position per pair, then the queries
        return self["length"]

    def sample(self, n_sequences: int, *, generator: torch.Generator | None = None) -> TaskBatch:
        """Return a :class:`TaskBatch` of ``n_sequences`` fresh sequences."""
        if self.name == "bijection":
            b = bijection.sample_bijection_batch(n_sequences, self["V"], self["L"], generator=generator)
            return TaskBatch(inputs=b.tokens, positions=b.key_positions, targets=b.targets, posterior=b.posterior)
        if self.name == "binding":
            b = associative_recall.sample_associative_recall_batch(
                n_sequences, self["n_pairs"], self["n_queries"], self["n_keys"], self["n_values"], generator=generator)
            posterior = associative_recall.exact_posterior(b.tokens, self["n_pairs"], self["n_keys"], self["n_values"])
            return TaskBatch(inputs=associative_recall.pair_features(b),
                             positions=associative_recall.pair_query_positions(self["n_pairs"], self["n_queries"]),
                             targets=b.targets, posterior=posterior)
        b = hmm.sample_hmm_batch(n_sequences, self["length"], n_states=self["n_states"],
                                 n_symbols=self["n_symbols"], generator=generator)
        return TaskBatch(inputs=b.inputs, positions=torch.arange(self["length"]), targets=None,
                         posterior=b.posterior,
                         extra={"transition": b.transition, "emission": b.emission,
                                "states": b.states, "observations": b.observations})

    def describe(self) -> str:
        """Return the sizes as short text, e.g. ``"V=10, L=10"``."""
        return ", ".join(f"{k}={v}" for k, v in self.sizes)


def prediction_logits(model: nn.Module, batch: TaskBatch) -> torch.Tensor:
    """Return the model's logits at the prediction positions, ``(B, P, C)``."""
    return model(batch.inputs)[:, batch.positions]


def task_loss(model: nn.Module, batch: TaskBatch) -> torch.Tensor:
    """Return the training loss in nats: the mean cross-entropy against the exact posterior at the prediction positions.

    For binding the posterior is one-hot, so this is the ordinary cross-entropy of the answer. For the
    bijection Paper I trains on the sampled value; the posterior target has the same expected gradient
    in every context (cross-entropy is linear in the target and the posterior is the conditional mean
    of the one-hot target), hence the same minimiser, without the sampling noise (chapter 6 does the
    same). The HMM is trained on the posterior, as in Paper I.
    """
    return loss_from_logits(prediction_logits(model, batch), batch)


def loss_from_logits(logits: torch.Tensor, batch: TaskBatch) -> torch.Tensor:
    """Return :func:`task_loss` (nats) from logits at the prediction positions ``(B, P, C)``."""
    return calibration.soft_cross_entropy_nats(logits, batch.posterior.to(logits.dtype))


# --------------------------------------------------------------------------------------------
# 2. Models with matched parameter counts
# --------------------------------------------------------------------------------------------

#: How each family's size is set by one "width" (everything else fixed), and the widths tried.
WIDTH_GRID = {
    "transformer": range(8, 1025, 4),  # d_model (4 heads, 2 layers, d_ff = 4 d_model)
    "mamba": range(8, 1025, 4),  # d_model (2 layers, d_state 16, expand 2)
    "lstm": range(8, 2049, 4),  # hidden size (1 layer, embedding = hidden size)
    "mlp_window": range(4, 16385, 4),  # hidden units (1 hidden layer, 16-dim embedding per slot)
    "mlp_blind": range(4, 16385, 4),  # hidden units (2 hidden layers, 64-dim embedding)
}


def build_model(family: str, task: WindTunnel, width: int) -> nn.Module:
    """Return a fresh model of ``family`` for ``task`` whose size is set by ``width`` (see :data:`WIDTH_GRID`)."""
    io = {"n_out": task.n_out, "vocab_size": task.vocab_size, "input_dim": task.input_dim}
    if family == "transformer":
        return CausalTransformer(**io, d_model=width, n_layers=2, n_heads=4, max_len=task.sequence_length)
    if family == "mamba":
        return MambaSequenceModel(**io, d_model=width, n_layers=2)
    if family == "lstm":
        return LSTMSequenceModel(**io, hidden_size=width)
    if family == "mlp_window":
        return WindowMLP(**io, window=task.sequence_length, d_embed=16, hidden=width, n_hidden_layers=1)
    if family == "mlp_blind":
        return ContextBlindMLP(**io, d_embed=64, hidden=width, n_hidden_layers=2)
    raise ValueError(f"unknown model family {family!r}; choose one of {', '.join(FAMILIES)}")


def matched_width(family: str, task: WindTunnel, target_params: int) -> int:
    """Return the width of :data:`WIDTH_GRID` whose model for ``task`` has the parameter count closest to the target.

    Counts grow with width, so a bisection finds the first width at or above the target; the
    answer is it or its predecessor, whichever is closer in ratio.
    """
    target_params = check_positive_int("target_params", target_params)
    if family not in WIDTH_GRID:
        raise ValueError(f"unknown model family {family!r}; choose one of {', '.join(FAMILIES)}")
    grid = WIDTH_GRID[family]

    def count(i: int) -> int:
        return count_parameters(build_model(family, task, grid[i]))

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


def build_matched_model(family: str, task: WindTunnel, target_params: int) -> nn.Module:
    """Return a fresh model of ``family`` for ``task`` with about ``target_params`` parameters."""
    return build_model(family, task, matched_width(family, task, target_params))


# --------------------------------------------------------------------------------------------
# 3. One run, the grid of runs, the reference levels and the table
# --------------------------------------------------------------------------------------------


@dataclass
class RunResult:
    """What one training run returns (plain data, so it crosses process boundaries).

    ``metrics``: ``entropy_mae_bits``, ``curve_mae_bits``, ``kl_bits`` (against the exact posterior)
    and ``accuracy`` (top-1 against the sampled answer; ``nan`` for the HMM), on the evaluation set.
    ``losses``: the training loss (nats) at every step. ``state_dict``: the trained weights when kept.
    ``cpu_seconds``: CPU time of the run's process (for budgeting; machine-dependent, never shown in the book).
    ``kl_by_position``: KL(posterior ‖ model) in bits at each prediction position ``(P,)``, averaged over sequences.
    """

    family: str
    task: WindTunnel
    seed: int
    width: int
    n_params: int
    steps: int
    metrics: dict[str, float]
    losses: np.ndarray
    state_dict: dict[str, torch.Tensor] | None = None
    cpu_seconds: float = float("nan")
    kl_by_position: np.ndarray | None = None

    def initial_model(self) -> nn.Module:
        """Return the model as it was before training (the same seeded initialisation), in eval mode."""
        return _seeded_model(self.family, self.task, self.width, self.seed).eval()

    def model(self) -> nn.Module:
        """Return the trained model rebuilt from ``state_dict`` (in eval mode)."""
        if self.state_dict is None:
            raise ValueError("this run did not keep its weights (keep_state=False)")
        model = build_model(self.family, self.task, self.width)
        model.load_state_dict(self.state_dict)
        return model.eval()


def _seeded_model(family: str, task: WindTunnel, width: int, seed: int) -> nn.Module:
    torch.manual_seed(seed)  # model initialisation (mambapy also draws its Δ initialisation from the global RNG)
    return build_model(family, task, width)


def evaluation_seed(seed: int, task_index: int) -> int:
    """Return the seed of the evaluation set of the ``task_index``-th task of a comparison started from ``seed``."""
    return 10_000 + seed + task_index


def evaluation_batch(task: WindTunnel, n_sequences: int, seed: int) -> TaskBatch:
    """Return the evaluation set of ``task``: ``n_sequences`` drawn with their own seed (the same for every model)."""
    return task.sample(n_sequences, generator=torch_generator(seed))


@torch.no_grad()
def evaluation_report(model: nn.Module, batch: TaskBatch, *, chunk: int = 256) -> tuple[dict[str, float], calibration.CalibrationReport]:
    """Return ``(metrics, calibration report)`` of the model on ``batch`` (metrics as in :class:`RunResult`)."""
    model.eval()
    device = next(model.parameters()).device
    log_probs = torch.cat([
        torch.log_softmax(prediction_logits(model, _to(_slice(batch, i, i + chunk), device)).double(), dim=-1).cpu()
        for i in range(0, len(batch), chunk)
    ])  # (B, P, C)
    report = calibration.calibration_report(batch.posterior, log_probs)
    metrics = report.as_dict()
    if batch.targets is not None:
        metrics["accuracy"] = float((log_probs.argmax(-1) == batch.targets).double().mean())
    else:
        metrics["accuracy"] = float("nan")
    return metrics, report


def evaluate(model: nn.Module, batch: TaskBatch, *, chunk: int = 256) -> dict[str, float]:
    """Return the model's calibration (bits) and accuracy on ``batch`` (see :class:`RunResult`)."""
    return evaluation_report(model, batch, chunk=chunk)[0]


def _to(batch: TaskBatch, device: torch.device | str) -> TaskBatch:
    return TaskBatch(inputs=batch.inputs.to(device), positions=batch.positions.to(device),
                     targets=None if batch.targets is None else batch.targets.to(device),
                     posterior=batch.posterior.to(device), extra=batch.extra)


def _slice(batch: TaskBatch, start: int, stop: int) -> TaskBatch:
    return TaskBatch(inputs=batch.inputs[start:stop], positions=batch.positions,
                     targets=None if batch.targets is None else batch.targets[start:stop],
                     posterior=batch.posterior[start:stop],
                     extra={k: v[start:stop] for k, v in batch.extra.items()})


def train_and_evaluate(
    *,
    family: str,
    task: WindTunnel,
    target_params: int,
    steps: int,
    batch_size: int,
    lr: float,
    seed: int,
    eval_sequences: int,
    eval_seed: int,
    warmup_fraction: float = 0.05,
    keep_state: bool = False,
    device: str = "cpu",
) -> RunResult:
    """Train one parameter-matched model on one task from fresh batches; return its :class:`RunResult`.

    AdamW (weight decay 0.01) with linear warm-up and cosine decay of ``lr``, gradient clipping at 1,
    one fresh batch of ``batch_size`` sequences per step (drawn on the CPU, then moved to ``device``);
    everything seeded by ``seed``. The model is evaluated on the task's evaluation set
    (``eval_sequences`` drawn with ``eval_seed``).
    """
    steps = check_positive_int("steps", steps)
    started = time.process_time()
    width = matched_width(family, task, target_params)
    model = _seeded_model(family, task, width, seed).to(device)
    data = torch_generator(seed + 1)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    schedule = warmup_cosine(optimizer, steps, max(1, int(warmup_fraction * steps)))
    history = fit(model, lambda step: _to(task.sample(batch_size, generator=data), device), steps=steps, optimizer=optimizer,
                  loss_fn=task_loss, scheduler=schedule, grad_clip=1.0)
    metrics, report = evaluation_report(model, evaluation_batch(task, eval_sequences, eval_seed))
    state = {k: v.detach().cpu().clone() for k, v in model.state_dict().items()} if keep_state else None
    return RunResult(family=family, task=task, seed=seed, width=width, n_params=count_parameters(model),
                     steps=steps, metrics=metrics, losses=history.losses, state_dict=state,
                     cpu_seconds=time.process_time() - started, kl_by_position=report.kl_by_position)


def compare_architectures(
    tasks: Sequence[WindTunnel],
    *,
    families: Sequence[str] = FAMILIES,
    target_params: int,
    steps: Mapping[str, int] | int,
    batch_size: int,
    lr: float,
    seed: int,
    eval_sequences: int,
    keep_state: Callable[[str, str], bool] = lambda family, task: False,
    processes: int | None = None,
    device: str = "cpu",
) -> dict[tuple[str, str], RunResult]:
    """Return ``{(family, task name): RunResult}`` for every family × task, run in parallel on all cores.

    ``steps`` may differ per family (a mapping family → steps). Every run of a task is evaluated on
    the same evaluation set; every model starts from ``seed``. On a GPU the runs go one after another.
    """
    jobs, keys = [], []
    for t_index, task in enumerate(tasks):
        for family in families:
            n_steps = steps[family] if isinstance(steps, Mapping) else steps
            jobs.append(dict(family=family, task=task, target_params=target_params, steps=n_steps,
                             batch_size=batch_size, lr=lr, seed=seed, eval_sequences=eval_sequences,
                             eval_seed=evaluation_seed(seed, t_index), keep_state=keep_state(family, task.name),
                             device=str(device)))
            keys.append((family, task.name))
    # Longest jobs first, so the two cores finish together.
    order = sorted(range(len(jobs)), key=lambda i: -_job_cost(jobs[i]))
    if torch.device(device).type != "cpu":
        processes = 1
    results = map_parallel(train_and_evaluate, [jobs[i] for i in order], processes=processes)
    by_key = {keys[i]: r for i, r in zip(order, results)}
    return {k: by_key[k] for k in keys}


def _job_cost(job: dict[str, Any]) -> float:
    per_step = {"mamba": 8.0, "transformer": 1.5, "lstm": 1.0}.get(job["family"], 0.5)
    return per_step * job["steps"] * job["task"].sequence_length


#: A model "realises" a primitive when its calibration error is at most this fraction of the
#: context-blind level (bits tasks) ...
REALISED_FRACTION_OF_BLIND = 0.1
#: ... or its binding accuracy is at least this.
REALISED_BINDING_ACCURACY = 0.9
#: Paper I's transformer answers every binding query (100%); the book asks at least this of its own.
TRANSFORMER_BINDING_TARGET = 0.95


@dataclass
class ReferenceLevels:
    """The exact reference rows of the table: ``{task name: {metric: value}}`` for the Bayes posterior
    itself (``bayes``) and for the best predictor that cannot see the context (``context_blind``);
    for the HMM also the context-blind KL in bits at each step, ``(K,)``."""

    bayes: dict[str, dict[str, float]]
    context_blind: dict[str, dict[str, float]]
    context_blind_kl_by_position: dict[str, np.ndarray] = field(default_factory=dict)


def hmm_context_blind_log_probs(transition: torch.Tensor, emission: torch.Tensor, observations: torch.Tensor) -> torch.Tensor:
    """Return log q_t(s), the log of :func:`tasks.hmm.context_blind_posterior` ``(n, K, S)`` float64.

    The posterior given only the current input: the HMM's reference level (one function, shared
    with chapter 6).
    """
    return hmm.context_blind_posterior(transition, emission, observations).log()


def reference_levels(tasks: Sequence[WindTunnel], eval_batches: Mapping[str, TaskBatch]) -> ReferenceLevels:
    """Return the Bayes and context-blind levels of every task (bits; accuracies as fractions).

    Bijection: closed forms (:func:`~attention_dynamics.tasks.bijection.context_blind_entropy_error_bits`);
    HMM: the exact per-sequence context-blind posterior (:func:`hmm_context_blind_log_probs`) scored
    on the evaluation set; binding: accuracy 1 with the context, 1/V without.
    """
    bayes, blind, by_position = {}, {}, {}
    for task in tasks:
        if task.name == "bijection":
            level = bijection.context_blind_entropy_error_bits(task["V"], task["L"])
            bayes[task.name] = {"entropy_mae_bits": 0.0, "kl_bits": 0.0,
                                "accuracy": bijection.bayes_top1_accuracy(task["V"], task["L"])}
            blind[task.name] = {"entropy_mae_bits": level, "kl_bits": level, "accuracy": 1.0 / task["V"]}
        elif task.name == "hmm":
            batch = eval_batches[task.name]
            log_q = hmm_context_blind_log_probs(batch.extra["transition"], batch.extra["emission"],
                                                batch.extra["observations"])
            report = calibration.calibration_report(batch.posterior, log_q)
            bayes[task.name] = {"entropy_mae_bits": 0.0, "kl_bits": 0.0}
            blind[task.name] = {"entropy_mae_bits": report.entropy_mae_bits, "kl_bits": report.kl_bits}
            by_position[task.name] = report.kl_by_position
        else:
            bayes[task.name] = {"accuracy": associative_recall.bayes_accuracy(), "entropy_mae_bits": 0.0,
                                "kl_bits": 0.0}
            blind[task.name] = {"accuracy": associative_recall.context_blind_accuracy(task["n_values"])}
    return ReferenceLevels(bayes=bayes, context_blind=blind, context_blind_kl_by_position=by_position)


#: The metric each task is judged by (what the table and the claims report).
HEADLINE_METRIC = {"bijection": "entropy_mae_bits", "hmm": "kl_bits", "binding": "accuracy"}


def realises_primitive(task: str, metrics: Mapping[str, float], levels: ReferenceLevels) -> bool:
    """Return whether a model realises the task's primitive: error ≤ 10% of the context-blind level, or accuracy ≥ 0.9."""
    metric = HEADLINE_METRIC[task]
    if metric == "accuracy":
        return metrics[metric] >= REALISED_BINDING_ACCURACY
    return metrics[metric] <= REALISED_FRACTION_OF_BLIND * levels.context_blind[task][metric]


def paper_verdict_bounds(family: str, task: str, levels: ReferenceLevels, metric: str | None = None) -> dict[str, float | None]:
    """Return the claim bounds ``{"lower", "upper"}`` that encode Paper I's verdict for ``family`` on ``task``.

    Where Paper I says the family realises the primitive, ``metric`` (default: the task's headline
    metric) must be on the "realised" side of the threshold of :func:`realises_primitive`; where it
    says it does not, on the other side; the transformer's binding accuracy must reach
    :data:`TRANSFORMER_BINDING_TARGET`. No verdict (the whole-window MLP, which Paper I does not
    test): no bounds.
    """
    verdicts = PAPER_I_RESULTS[family]["realises"]
    if verdicts is None:
        return {"lower": None, "upper": None}
    metric = metric or HEADLINE_METRIC[task]
    if metric == "accuracy":
        threshold = REALISED_BINDING_ACCURACY
        if family == "transformer":
            return {"lower": TRANSFORMER_BINDING_TARGET, "upper": None}
        return {"lower": threshold, "upper": None} if verdicts[task] else {"lower": None, "upper": threshold}
    threshold = REALISED_FRACTION_OF_BLIND * levels.context_blind[task][metric]
    return {"lower": None, "upper": threshold} if verdicts[task] else {"lower": threshold, "upper": None}


def results_table(results: Mapping[tuple[str, str], RunResult], levels: ReferenceLevels, *, families: Sequence[str] = FAMILIES):
    """Return the results table (a ``pandas.DataFrame`` of formatted text): reference rows and every family.

    Columns: bijection entropy error (ours, Paper I), HMM entropy error (ours, Paper I), HMM KL
    (ours), binding accuracy (ours, Paper I), and the parameter count of each family's models.
    """
    import pandas as pd

    def bits(x):
        return "—" if x is None else f"{x:.3f}" if x >= 0.01 or x == 0 else f"{x:.1e}"

    def pct(x):
        return "—" if x is None else f"{100 * x:.1f}%"

    columns = ["bijection: entropy error, bits", "Paper I", "HMM: entropy error, bits", "Paper I",
               "HMM: KL, bits", "binding: accuracy", "Paper I", "parameters"]
    rows, index = [], []

    def reference_row(name, level):
        rows.append([bits(level.get("bijection", {}).get("entropy_mae_bits")), bits(level.get("bijection", {}).get("entropy_mae_bits")),
                     bits(level.get("hmm", {}).get("entropy_mae_bits")), bits(level.get("hmm", {}).get("entropy_mae_bits")),
                     bits(level.get("hmm", {}).get("kl_bits")), pct(level.get("binding", {}).get("accuracy")),
                     pct(level.get("binding", {}).get("accuracy")), "—"])
        index.append(name)

    reference_row("Bayes posterior (exact)", levels.bayes)
    for family in families:
        paper = PAPER_I_RESULTS[family]
        got = {task: results[(family, task)].metrics for task in TASKS if (family, task) in results}
        counts = sorted({results[(family, t)].n_params for t in TASKS if (family, t) in results})
        rows.append([bits(got.get("bijection", {}).get("entropy_mae_bits")), bits(paper["bijection_mae_bits"]),
                     bits(got.get("hmm", {}).get("entropy_mae_bits")), bits(paper["hmm_mae_bits"]),
                     bits(got.get("hmm", {}).get("kl_bits")), pct(got.get("binding", {}).get("accuracy")),
                     pct(paper["binding_accuracy"]), "–".join(f"{c / 1000:.0f}k" for c in (counts[0], counts[-1])) if counts else "—"])
        index.append(FAMILY_LABELS[family])
    reference_row("context-blind (exact best)", levels.context_blind)
    # Paper I's columns hold the paper's numbers for models only; reference rows repeat our exact levels there.
    table = pd.DataFrame(rows, index=index, columns=pd.Index(columns))
    for col in (1, 3, 6):
        table.iloc[[0, len(table) - 1], col] = "—"
    return table


def pd_table(rows: Mapping[str, Mapping[str, Any]], *, index_name: str, column_suffix: str = ""):
    """Return ``{row: {column: value}}`` as a ``pandas.DataFrame`` (rows in the given order)."""
    import pandas as pd

    table = pd.DataFrame.from_dict(rows, orient="index")
    table.index.name = index_name
    return table.rename(columns=lambda c: f"{c}{column_suffix}")


def bayes_floor_nats(eval_batches: Mapping[str, TaskBatch]) -> dict[str, float]:
    """Return each task's Bayes floor of the training loss in nats: the mean entropy of the exact posterior."""
    return {name: float(calibration.entropy_bits(b.posterior).mean()) * calibration.LN2 for name, b in eval_batches.items()}


#: The numbers of the results table, as ledger claims: (claim name, task, metric, unit).
TABLE_CLAIMS = (
    ("bijection_mae_bits", "bijection", "entropy_mae_bits", "bits"),
    ("hmm_mae_bits", "hmm", "entropy_mae_bits", "bits"),
    ("hmm_kl_bits", "hmm", "kl_bits", "bits"),
    ("binding_accuracy", "binding", "accuracy", "fraction"),
)
_PAPER_KEYS = {"bijection_mae_bits": "bijection_mae_bits", "hmm_mae_bits": "hmm_mae_bits", "binding_accuracy": "binding_accuracy"}


def record_table_claims(results: Mapping[tuple[str, str], RunResult], levels: ReferenceLevels, *,
                        params: Mapping[str, Any], explanations: Mapping[str, str] | None = None,
                        seed_means: Mapping[str, Mapping[str, Any]] | None = None) -> dict[str, Any]:
    """Record every number of the results table in the claims ledger (ids ``architectures.<metric>_<family>``).

    Each claim carries Paper I's number (where it gives one) and, as bounds, Paper I's verdict
    (:func:`paper_verdict_bounds`); ``explanations`` maps a claim id to the chapter's account of why
    it does not reproduce or cannot be decided (kept only then). ``seed_means`` maps a claim id to a
    mean over seeds with its 95 % interval (:func:`seed_spread.t_interval`, plus ``"seeds"``): that
    claim is then stated as the mean, decided by the whole interval, instead of this run's value.
    Returns the claims by id.
    """
    from . import claims

    explanations = dict(explanations or {})
    seed_means = dict(seed_means or {})
    recorded = {}
    for name, task, metric, unit in TABLE_CLAIMS:
        for family in FAMILIES:
            if (family, task) not in results:
                continue
            run = results[(family, task)]
            claim_id = f"architectures.{name}_{family}"
            paper = PAPER_I_RESULTS[family].get(_PAPER_KEYS.get(name, ""), None)
            verdict = PAPER_I_RESULTS[family]["realises"]
            said = ("no verdict in Paper I" if verdict is None else
                    f"Paper I: {'realises' if verdict[task] else 'does not realise'} {TASK_PRIMITIVES[task]}")
            description = (f"{FAMILY_LABELS[family]} on {task} ({TASK_PRIMITIVES[task]}): "
                           f"{'top-1 accuracy' if metric == 'accuracy' else metric.replace('_bits', '').replace('_', ' ') + ' in bits'}"
                           f" against the exact posterior; {said}")
            value, interval = run.metrics[metric], None
            run_params = {**params, "family": family, "n_params": run.n_params, "width": run.width, "steps": run.steps}
            if claim_id in seed_means:
                ci = seed_means[claim_id]
                value, interval = ci["mean"], (ci["low"], ci["high"])
                description += f"; mean over {ci['n']} seeds with its 95% interval"
                run_params = {**run_params, "seed": None, "seeds": list(ci["seeds"]), "interval": "Student-t 95%"}
            recorded[claim_id] = claims.record(
                claim_id, value, unit=unit, description=description, paper_value=paper, interval=interval,
                explanation=explanations.get(claim_id) or _default_explanation(family, task, metric, run, levels),
                params=run_params, **paper_verdict_bounds(family, task, levels, metric))
    return recorded


def _default_explanation(family: str, task: str, metric: str, run: RunResult, levels: ReferenceLevels) -> str:
    verdict = PAPER_I_RESULTS[family]["realises"]
    if verdict is None:
        return ""
    return (f"Paper I reports that the {FAMILY_LABELS[family]} {'realises' if verdict[task] else 'does not realise'} "
            f"{TASK_PRIMITIVES[task]}; our {run.n_params}-parameter model after {run.steps} steps is on the other side "
            f"of the threshold ({metric} = {run.metrics[metric]:.3g}). Paper I's models have ~2.7M parameters and "
            f"train for 50k–150k steps.")


def verdict_summary(results: Mapping[tuple[str, str], RunResult], levels: ReferenceLevels) -> str:
    """Return a Markdown list: for every family, which primitives it realises here and whether Paper I agrees."""
    lines = []
    for family in FAMILIES:
        got = {t: realises_primitive(t, results[(family, t)].metrics, levels) for t in TASKS if (family, t) in results}
        ours = ", ".join(TASK_PRIMITIVES[t] for t, ok in got.items() if ok) or "none"
        verdict = PAPER_I_RESULTS[family]["realises"]
        if verdict is None:
            lines.append(f"- **{FAMILY_LABELS[family]}** realises here: {ours}. Paper I does not test this model.")
            continue
        theirs = ", ".join(TASK_PRIMITIVES[t] for t in TASKS if verdict[t]) or "none"
        differ = [TASK_PRIMITIVES[t] for t in got if got[t] != verdict[t]]
        agreement = "agrees with Paper I" if not differ else f"differs from Paper I on {', '.join(differ)}"
        lines.append(f"- **{FAMILY_LABELS[family]}** realises here: {ours}; Paper I: {theirs} — {agreement}.")
    return "\n".join(lines)


def pooled_r2(fits: Sequence["AdvantageFit"]) -> float:
    """Return the R² of several :class:`AdvantageFit` pooled by their gradients' squared norms."""
    total = sum(f.total for f in fits)
    return 1.0 - sum(f.residual for f in fits) / total


# --------------------------------------------------------------------------------------------
# 4. The routing law beyond attention
# --------------------------------------------------------------------------------------------


@dataclass
class RouterForward:
    """Intermediates of :class:`ContentRouter`: scores, alpha ``(B, T, T)``; values, context ``(B, T, d_v)``; logits ``(B, T, C)``."""

    scores: torch.Tensor
    alpha: torch.Tensor
    values: torch.Tensor
    context: torch.Tensor
    logits: torch.Tensor


SCORE_FUNCTIONS = ("mlp", "bilinear", "distance")


class ContentRouter(nn.Module):
    """Softmax-normalised causal routing whose logits are a differentiable function of the content.

    ``score_function``: ``"mlp"`` — s_ij = MLP([x_i, x_j, x_i ⊙ x_j]) (nothing like a dot product);
    ``"bilinear"`` — s_ij = (W_Q x_i)·(W_K x_j)/sqrt(d) (attention); ``"distance"`` —
    s_ij = −‖W_Q x_i − W_K x_j‖². Then alpha = softmax over j ≤ i, g_i = Σ_j alpha_ij v_j, logits = W_O g_i.
    """

    def __init__(self, d_in: int, *, d_hidden: int = 16, d_v: int = 8, n_classes: int = 5, score_function: str = "mlp"):
        super().__init__()
        if score_function not in SCORE_FUNCTIONS:
            raise ValueError(f"score_function must be one of {', '.join(SCORE_FUNCTIONS)}, got {score_function!r}")
        self.score_function = score_function
        if score_function == "mlp":
            self.score_net = nn.Sequential(nn.Linear(3 * d_in, d_hidden), nn.Tanh(), nn.Linear(d_hidden, 1))
        else:
            self.W_Q = nn.Linear(d_in, d_hidden, bias=False)
            self.W_K = nn.Linear(d_in, d_hidden, bias=False)
        self.W_V = nn.Linear(d_in, d_v, bias=False)
        self.W_O = nn.Linear(d_v, n_classes, bias=False)

    def scores(self, x: torch.Tensor) -> torch.Tensor:
        """Return the routing logits s_ij ``(B, T, T)`` (before the causal mask)."""
        B, T, d = x.shape
        if self.score_function == "mlp":
            xi = x[:, :, None, :].expand(B, T, T, d)  # (B, Ti, Tj, d)
            xj = x[:, None, :, :].expand(B, T, T, d)
            return self.score_net(torch.cat([xi, xj, xi * xj], dim=-1)).squeeze(-1)  # (B, T, T)
        q, k = self.W_Q(x), self.W_K(x)  # (B, T, d_hidden)
        if self.score_function == "bilinear":
            return q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
        return -(q[:, :, None, :] - k[:, None, :, :]).square().sum(-1)

    def forward(self, x: torch.Tensor) -> RouterForward:
        """Return every intermediate (:class:`RouterForward`) for inputs ``x`` ``(B, T, d_in)``."""
        T = x.shape[1]
        mask = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
        scores = self.scores(x).masked_fill(~mask, float("-inf"))  # (B, T, T)
        alpha = torch.softmax(scores, dim=-1)
        values = self.W_V(x)  # (B, T, d_v)
        context = alpha @ values  # (B, T, d_v)
        return RouterForward(scores=scores, alpha=alpha, values=values, context=context, logits=self.W_O(context))


def softmax_routing_gradients(router: ContentRouter, x: torch.Tensor, targets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Return ``(∂L/∂s by autograd, advantage form alpha ⊙ (b − E_alpha[b]), alpha, b)``, each ``(B, T, T)``.

    L is the mean cross-entropy (nats) of the router's logits against ``targets`` ``(B, T)``; b = u vᵀ
    with u = ∂L/∂g from autograd. The routing law says the first two are equal whatever function of
    the content the scores are.
    """
    fwd = router(x)
    loss = F.cross_entropy(fwd.logits.reshape(-1, fwd.logits.shape[-1]), targets.reshape(-1))
    grad_scores, u = torch.autograd.grad(loss, [fwd.scores, fwd.context])
    b = u @ fwd.values.detach().transpose(-1, -2)  # (B, T, T): b_ij = u_i · v_j
    alpha = fwd.alpha.detach()
    grad_scores = torch.where(alpha > 0, grad_scores, torch.zeros_like(grad_scores))  # masked entries: no gradient
    return grad_scores, advantage_routing_gradient(alpha, b), alpha, b


@dataclass
class AdvantageFit:
    """How much of a routing-logit gradient the advantage form explains.

    r2: 1 − ‖G − λ A‖² / ‖G‖² summed over all rows, with A_ij = alpha_ij (b_ij − E_{alpha_i}[b]) and the
    best scale λ_i per row (so the cosine between G and the fit is sqrt(r2)); true, fitted: a
    sample of matching entries of G and λ A (for scatter plots); n_rows: rows (query × channel) fitted;
    residual, total: ‖G − λA‖² and ‖G‖² (to pool several fits).
    """

    r2: float
    true: np.ndarray
    fitted: np.ndarray
    n_rows: int
    residual: float
    total: float


def advantage_form_fit(logit_grad: torch.Tensor, alpha: torch.Tensor, b: torch.Tensor, *, sample: int = 4000,
                       generator: torch.Generator | None = None) -> AdvantageFit:
    """Return the :class:`AdvantageFit` of the gradient ``logit_grad`` ``(..., Tq, Tk)`` w.r.t. routing logits.

    ``alpha`` ``(..., Tq, Tk)``: the routing distribution of each row (rows sum to 1, zeros where
    masked); ``b``: the compatibilities. Each row's best advantage-form fit is λ_i A_i with
    λ_i = ⟨G_i, A_i⟩ / ⟨A_i, A_i⟩ (0 where A_i = 0, e.g. a row with one visible key).
    """
    G = logit_grad.detach().to(torch.float64)
    A = advantage_routing_gradient(alpha.detach().to(torch.float64), b.detach().to(torch.float64))
    AA = (A * A).sum(-1, keepdim=True)
    lam = torch.where(AA > 0, (G * A).sum(-1, keepdim=True) / AA.clamp_min(1e-300), torch.zeros_like(AA))
    fitted = lam * A
    total = float((G * G).sum())
    residual = float(((G - fitted) ** 2).sum())
    r2 = 1.0 - residual / total if total > 0 else float("nan")
    visible = alpha.detach() > 0
    g_flat, f_flat = G[visible], fitted[visible]
    if g_flat.numel() > sample:
        pick = torch.randperm(g_flat.numel(), generator=generator)[:sample]
        g_flat, f_flat = g_flat[pick], f_flat[pick]
    return AdvantageFit(r2=r2, true=g_flat.numpy(), fitted=f_flat.numpy(), n_rows=int(np.prod(G.shape[:-1])),
                        residual=residual, total=total)


def permute_within_rows(values: torch.Tensor, visible: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
    """Return ``values`` with the visible entries of every row (last axis) randomly permuted among themselves.

    Entries where ``visible`` is False stay where they are. The null of an advantage-form fit: the
    same compatibilities, no longer paired with their own keys.
    """
    keys = torch.rand(values.shape, generator=generator, dtype=torch.float64)
    keys = keys.masked_fill(~visible, 2.0)  # masked entries sort last
    order = keys.argsort(-1)  # visible entries first, in random order
    slots = (~visible).to(torch.int8).argsort(dim=-1, stable=True)  # visible positions first, in index order
    out = values.clone()
    out.scatter_(-1, slots, values.gather(-1, order))
    return torch.where(visible, out, values)


def mamba_advantage_fit(model: MambaSequenceModel, batch: TaskBatch, layer: int, *, sample: int = 4000,
                        generator: torch.Generator | None = None, permuted: bool = False) -> AdvantageFit:
    """Return the :class:`AdvantageFit` of Mamba's routing gradient in layer ``layer`` on ``batch``.

    The scan's weights w_ij[c] (:func:`~attention_dynamics.models.mamba.selective_scan_routing`) are
    unnormalised and signed. Their logits are ℓ_ij = ln|w_ij| (w = sign · e^ℓ, as alpha = e^{s − ln Z}),
    so the true logit gradient is G_ij = w_ij ∂L/∂w_ij. Against it we fit the advantage form built
    from the routing distribution alpha_ij = |w_ij| / Σ_j |w_ij| and the sign-carrying compatibility
    b_ij = sign(w_ij) ∂L/∂w_ij. Since G_ij = Z_i [alpha_ij (b_ij − E_alpha[b]) + alpha_ij E_alpha[b]]
    with Z_i = Σ_j |w_ij|, what the advantage form cannot explain is the second, "gain" term: the
    total routing mass, which a softmax holds fixed and Mamba does not.

    With ``permuted`` the fit is the null: the same compatibilities permuted within each row among
    the visible keys (:func:`permute_within_rows`), so that an R² from near-uniform weights and
    roughly centred compatibilities alone is seen for what it is.
    """
    model.eval()
    logits, routing = forward_with_explicit_routing(model, batch.inputs, layer)
    loss = loss_from_logits(logits[:, batch.positions], batch)
    (grad_w,) = torch.autograd.grad(loss, routing.weights)  # (B, ED, T, T): ∂L/∂w_ij
    w = routing.weights.detach().to(torch.float64)
    grad_w = grad_w.to(torch.float64)
    magnitude = w.abs()
    alpha = magnitude / magnitude.sum(-1, keepdim=True).clamp_min(1e-300)
    b = torch.sign(w) * grad_w
    if permuted:
        b = permute_within_rows(b, alpha > 0, generator)
    return advantage_form_fit(w * grad_w, alpha, b, sample=sample, generator=generator)


def scan_reproduction_error(model: MambaSequenceModel, inputs: torch.Tensor) -> float:
    """Return max |mambapy block output − output rebuilt from the routing weights| over every layer (float64 copy)."""
    model = copy.deepcopy(model).double().eval()
    inputs = inputs if not torch.is_floating_point(inputs) else inputs.double()
    worst = 0.0
    with torch.no_grad():
        h = model.embed(inputs)
        for residual in model.backbone.layers:
            x = residual.norm(h)
            rebuilt = block_output_from_routing(residual.mixer, selective_scan_routing(residual.mixer, x))
            worst = max(worst, float((rebuilt - residual.mixer(x)).abs().max()))
            h = residual(h)
    return worst


# --------------------------------------------------------------------------------------------
# 5. Geometry: do final-layer states cluster by hidden state?
# --------------------------------------------------------------------------------------------


def cluster_purity(clusters: np.ndarray, labels: np.ndarray) -> float:
    """Return the purity Σ_k max_c |cluster k ∩ class c| / n of a clustering against labels (1 = every cluster pure)."""
    clusters, labels = np.asarray(clusters), np.asarray(labels)
    if clusters.shape != labels.shape or clusters.ndim != 1 or clusters.size == 0:
        raise ValueError("clusters and labels must be matching non-empty 1-D arrays")
    _, c_idx = np.unique(clusters, return_inverse=True)
    _, l_idx = np.unique(labels, return_inverse=True)
    table = np.zeros((c_idx.max() + 1, l_idx.max() + 1), dtype=np.int64)
    np.add.at(table, (c_idx, l_idx), 1)
    return float(table.max(axis=1).sum() / clusters.size)


def chance_purity(clusters: np.ndarray, labels: np.ndarray, *, n_permutations: int = 20, seed: int = 0) -> float:
    """Return the mean purity of the same clusters against randomly permuted labels (what purity means by chance)."""
    rng = np.random.default_rng(seed)
    labels = np.asarray(labels)
    return float(np.mean([cluster_purity(clusters, rng.permutation(labels)) for _ in range(n_permutations)]))


@dataclass
class StateClustering:
    """k-means of final-layer states against the most probable hidden state.

    purity of the states' clusters; chance: the same clusters against permuted labels; posterior_purity:
    k-means of the exact posterior vectors themselves (what clustering by belief can reach);
    coords ``(n, 2)``: the states' first two principal components; labels ``(n,)``: the most probable
    state; clusters ``(n,)``: the k-means cluster of each state. With ``groups`` (e.g. the current
    observation of each state): centred_purity, the purity against the most probable state of k-means
    run after subtracting each group's mean state, and between_group_variance, the fraction of the
    states' total variance that lies between group means (what the grouping explains).
    other_purities: the purity of the same clusters against other labellings (``other_labels``, e.g. the
    current observation).
    """

    purity: float
    chance: float
    posterior_purity: float
    coords: np.ndarray
    labels: np.ndarray
    clusters: np.ndarray
    explained_variance: np.ndarray
    centred_purity: float = float("nan")
    between_group_variance: float = float("nan")
    other_purities: dict[str, float] = field(default_factory=dict)
    other_labels: dict[str, np.ndarray] = field(default_factory=dict)


@torch.no_grad()
def final_layer_states(model: nn.Module, inputs: torch.Tensor) -> torch.Tensor:
    """Return the states the read-out of ``model`` sees, ``(B, T, width)``: after the final norm (Mamba,
    transformer) or the last LSTM layer."""
    model.eval()
    if hasattr(model, "final_states"):
        return model.final_states(inputs)
    if isinstance(model, CausalTransformer):
        captured = []
        handle = model.ln_final.register_forward_hook(lambda mod, args, out: captured.append(out))
        try:
            model(inputs)
        finally:
            handle.remove()
        return captured[0]
    raise ValueError(f"no final-layer states defined for {type(model).__name__}")


def state_clustering(states: torch.Tensor, posterior: torch.Tensor, *, n_clusters: int = 5, seed: int = 0,
                     groups: np.ndarray | None = None, other_labels: Mapping[str, np.ndarray] | None = None) -> StateClustering:
    """Return the :class:`StateClustering` of ``states`` ``(n, d)`` against ``posterior`` ``(n, S)`` (scikit-learn k-means).

    ``groups`` ``(n,)`` (optional): a labelling whose part of the geometry should be removed before
    clustering again — in HMM filtering the current observation, which a state also encodes and which
    can dominate it. ``other_labels``: further labellings ``(n,)`` to score the same clusters against.
    """
    from sklearn.cluster import KMeans
    from sklearn.decomposition import PCA

    X = states.detach().to(torch.float64).numpy()
    P = posterior.detach().to(torch.float64).numpy()
    if X.ndim != 2 or P.ndim != 2 or X.shape[0] != P.shape[0]:
        raise ValueError(f"states (n, d) and posterior (n, S) must have the same n, got {X.shape} and {P.shape}")
    labels = P.argmax(-1)
    clusters = KMeans(n_clusters=n_clusters, n_init=10, random_state=seed).fit_predict(X)
    posterior_clusters = KMeans(n_clusters=n_clusters, n_init=10, random_state=seed).fit_predict(P)
    pca = PCA(n_components=2, svd_solver="full").fit(X)
    centred_purity = between = float("nan")
    if groups is not None:
        groups = np.asarray(groups)
        _, g_idx = np.unique(groups, return_inverse=True)
        means = np.zeros((g_idx.max() + 1, X.shape[1]))
        np.add.at(means, g_idx, X)
        means /= np.bincount(g_idx)[:, None]
        centred = X - means[g_idx]
        centred_clusters = KMeans(n_clusters=n_clusters, n_init=10, random_state=seed).fit_predict(centred)
        centred_purity = cluster_purity(centred_clusters, labels)
        total = ((X - X.mean(0)) ** 2).sum()
        between = float(1.0 - (centred ** 2).sum() / total) if total > 0 else float("nan")
    return StateClustering(
        purity=cluster_purity(clusters, labels),
        chance=chance_purity(clusters, labels, seed=seed),
        posterior_purity=cluster_purity(posterior_clusters, labels),
        coords=pca.transform(X),
        labels=labels,
        clusters=clusters,
        explained_variance=pca.explained_variance_ratio_,
        centred_purity=centred_purity,
        between_group_variance=between,
        other_purities={name: cluster_purity(clusters, np.asarray(lab)) for name, lab in (other_labels or {}).items()},
        other_labels={name: np.asarray(lab) for name, lab in (other_labels or {}).items()},
    )


# --------------------------------------------------------------------------------------------
# Figures
# --------------------------------------------------------------------------------------------


def family_color(family: str):
    """Return the fixed colour of a model family (the same in every figure of the chapter)."""
    from .plotting import PALETTE

    return PALETTE[FAMILIES.index(family) % len(PALETTE)]


def plot_training_losses(results: Mapping[tuple[str, str], RunResult], tasks: Sequence[WindTunnel],
                         floors_nats: Mapping[str, float], *, window: int = 25):
    """Return ``(fig, axes)``: the training loss (nats, moving average over ``window`` steps) of every family, one panel per task.

    ``floors_nats``: the Bayes floor of each task's loss (the mean posterior entropy), drawn dashed.
    """
    from . import plotting

    fig, axes = plotting.new_figure(len(tasks), width=3.5, height=2.9)
    for ax, task in zip(np.atleast_1d(axes), tasks):
        for family in FAMILIES:
            if (family, task.name) not in results:
                continue
            losses = results[(family, task.name)].losses
            w = min(window, len(losses))
            smooth = np.convolve(losses, np.ones(w) / w, mode="valid")
            ax.plot(np.arange(w - 1, len(losses)), smooth, color=family_color(family), label=FAMILY_LABELS[family])
        ax.axhline(floors_nats[task.name], color="black", ls="--", lw=1, label="Bayes floor")
        ax.set_title(f"{task.name} ({TASK_PRIMITIVES[task.name]})")
        ax.set_xlabel("training step")
        ax.set_ylabel("cross-entropy (nats)")
    handles, labels = np.atleast_1d(axes)[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=len(labels), fontsize=8)
    return fig, axes


def plot_advantage_fits(softmax: tuple[np.ndarray, np.ndarray], mamba: AdvantageFit, r2_rows: Mapping[str, Sequence[float]],
                        layer_labels: Sequence[str]):
    """Return ``(fig, axes)``: (a) softmax routing, autograd vs the advantage form; (b) Mamba, true logit
    gradient vs its best advantage-form fit; (c) R² by layer for each Mamba model in ``r2_rows``."""
    import matplotlib.scale

    from . import plotting

    fig, axes = plotting.new_figure(3, width=3.7, height=3.3)
    truth, law = softmax
    ax = axes[0]
    ax.scatter(law, truth, s=4, alpha=0.5, color=family_color("transformer"))
    lim = float(np.abs(np.concatenate([truth, law])).max()) * 1.05
    ax.plot([-lim, lim], [-lim, lim], color="black", lw=0.8, ls="--")
    ax.set(xlim=(-lim, lim), ylim=(-lim, lim), title="softmax routing,\nlogits from a network on content",
           xlabel=r"$\alpha_{ij}(b_{ij} - \mathbb{E}_{\alpha_i}[b])$ (nats)", ylabel=r"autograd $\partial L/\partial s_{ij}$ (nats)")
    ax = axes[1]
    ax.scatter(mamba.fitted, mamba.true, s=4, alpha=0.4, color=family_color("mamba"))
    lim = float(np.abs(np.concatenate([mamba.true, mamba.fitted])).max()) * 1.5
    ax.plot([-lim, lim], [-lim, lim], color="black", lw=0.8, ls="--")
    linthresh = float(np.quantile(np.abs(mamba.true[mamba.true != 0]), 0.5)) if np.any(mamba.true != 0) else 1.0
    powers = np.arange(np.ceil(np.log10(linthresh)), np.floor(np.log10(lim)) + 1)[::-2][::-1]  # every other decade
    ticks = [*(-(10.0 ** powers[::-1])), 0.0, *(10.0 ** powers)]
    for axis in (ax.xaxis, ax.yaxis):  # heavy-tailed: linear near 0, logarithmic beyond
        axis._set_axes_scale(matplotlib.scale.SymmetricalLogScale(axis, linthresh=linthresh))
        axis.set_ticks(ticks)
    ax.set(xlim=(-lim, lim), ylim=(-lim, lim), title=f"Mamba selective scan\n$R^2$ = {mamba.r2:.2f}",
           xlabel=r"best advantage-form fit $\lambda_i A_{ij}$ (nats, symlog)",
           ylabel=r"true $\partial L/\partial \ln|w_{ij}|$ (nats, symlog)")
    ax.tick_params(labelsize=7)
    ax = axes[2]
    n = len(r2_rows)
    width = 0.8 / max(n, 1)
    x = np.arange(len(layer_labels))
    for k, (label, values) in enumerate(r2_rows.items()):
        colour = "0.6" if k == 0 else plotting.PALETTE[(5, 8, 9, 6)[(k - 1) % 4]]
        ax.bar(x + (k - (n - 1) / 2) * width, values, width=width, label=label, color=colour)
    ax.axhline(1.0, color=family_color("transformer"), lw=1.2, ls="--", label="softmax routing (exact)")
    ax.set(xticks=x, xticklabels=list(layer_labels), ylim=(0, 1.5), yticks=np.linspace(0, 1, 6),
           ylabel=r"$R^2$ of the advantage form", title="advantage share of\nMamba's routing gradient",
           xlabel="Mamba layer")
    ax.legend(loc="upper center", ncol=2, fontsize=6.5, columnspacing=0.8, handlelength=1.5)
    return fig, axes


def plot_state_clusters(result: StateClustering, *, title: str, max_points: int = 3000):
    """Return ``(fig, axes)``: the states' first two principal components coloured by the most probable hidden
    state and by each labelling in ``result.other_labels``, and the k-means purity against each labelling next to
    chance and to the purity of clustering the exact posteriors."""
    from . import plotting

    colourings = {"most probable state": result.labels, **result.other_labels}
    fig, axes = plotting.new_figure(len(colourings) + 1, width=3.6, height=3.3)
    n = min(max_points, len(result.labels))
    for ax, (name, labels) in zip(axes, colourings.items()):
        for k, value in enumerate(np.unique(labels)):
            sel = np.flatnonzero(labels[:n] == value)
            ax.scatter(result.coords[sel, 0], result.coords[sel, 1], s=3, alpha=0.5, color=plotting.PALETTE[k % 10],
                       label=str(int(value)))
        ax.set(title=f"{title}\ncoloured by {name}", xlabel=f"PC 1 ({100 * result.explained_variance[0]:.0f}% of variance)",
               ylabel=f"PC 2 ({100 * result.explained_variance[1]:.0f}% of variance)")
        ax.legend(title=name, fontsize=7, title_fontsize=7, markerscale=3, loc="upper center",
                  bbox_to_anchor=(0.5, -0.3), ncol=len(np.unique(labels)), columnspacing=0.6, handletextpad=0.1)
    ax = axes[-1]
    names = ["chance", "most\nprobable\nstate", *[k.replace(" ", "\n") for k in result.other_purities], "exact\nposteriors"]
    values = [result.chance, result.purity, *result.other_purities.values(), result.posterior_purity]
    colours = [plotting.PALETTE[7], family_color("mamba"), *[plotting.PALETTE[9]] * len(result.other_purities), "0.4"]
    ax.bar(range(len(values)), values, color=colours)
    for i, v in enumerate(values):
        ax.text(i, v + 0.02, f"{v:.2f}", ha="center", fontsize=8)
    ax.set_xticks(range(len(values)), names, fontsize=7)
    ax.set(ylim=(0, 1.12), ylabel="k-means purity (5 clusters)", title="purity of the clusters\nagainst each labelling")
    return fig, axes


def plot_hmm_kl_by_position(results: Mapping[tuple[str, str], RunResult], levels: ReferenceLevels, *, task: str = "hmm",
                            families: Sequence[str] = FAMILIES, ax=None):
    """Return ``(fig, ax)``: KL to the exact filter (bits) at every step of the HMM, per family, with the
    context-blind level — what transport has to beat."""
    import matplotlib.ticker

    from . import plotting

    if ax is None:
        fig, ax = plotting.new_figure(1, width=5.0, height=3.2)
    else:
        fig = ax.figure
    blind = levels.context_blind_kl_by_position[task]
    steps = np.arange(len(blind))
    for family in families:
        run = results.get((family, task))
        if run is None or run.kl_by_position is None:
            continue
        ax.plot(steps, run.kl_by_position, marker="o", ms=3, color=family_color(family), label=FAMILY_LABELS[family])
    # at t = 0 the context-blind posterior is the filter itself (KL 0, off a log axis)
    ax.plot(steps[1:], blind[1:], color="black", ls="--", lw=1.2, label="context-blind (exact best), t ≥ 1")
    ax.set(yscale="log", xlabel="step t", ylabel="KL(posterior ‖ model) (bits)", title="HMM filtering, step by step")
    ax.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))
    ax.legend(fontsize=7, ncol=2)
    return fig, ax
