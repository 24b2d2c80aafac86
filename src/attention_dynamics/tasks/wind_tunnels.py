"""Paper I's three wind tunnels behind one interface (chapter 7): a task with its sizes (:class:`WindTunnel`)
samples a :class:`TaskBatch` with its exact posterior; :func:`task_loss` is the cross-entropy against it (nats).

- **belief accumulation**: bijection elimination (:mod:`~attention_dynamics.tasks.bijection`),
- **belief transport**: HMM filtering (:mod:`~attention_dynamics.tasks.hmm`),
- **random-access binding**: associative recall (:mod:`~attention_dynamics.tasks.associative_recall`).

A fourth tunnel, ``hmm_sticky``, is HMM filtering on sticky chains (each transition row mixed with the
identity, :data:`STICKY_SELF_TRANSITION`), where carrying the belief forward is worth much more than
the current observation. A fifth, ``hmm_longmem``, is HMM filtering designed so that no short look-back
suffices: very sticky chains (:data:`LONGMEM_SELF_TRANSITION`) seen through weak emissions
(:data:`LONGMEM_EMISSION_UNIFORM_SHARE`), where the exact posterior given the last 8 observations stays far
from the filter (:func:`~attention_dynamics.tasks.hmm.window_posterior`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.nn as nn

from ..core.settings import check_positive_int
from ..science import calibration
from ..tasks import associative_recall, bijection, hmm

#: The three wind tunnels, in the order of Paper I v3's primitives.
TASKS = ("bijection", "hmm", "binding")
#: The task name of HMM filtering on sticky chains: transport with a large value (chapter 7's sticky-HMM tunnel).
STICKY_HMM_TASK = "hmm_sticky"
#: HMM filtering that only a long memory solves: the long-memory tunnel.
LONGMEM_HMM = "hmm_longmem"
#: Every task name :meth:`WindTunnel.make` accepts (the three primitives, then the sticky and long-memory HMMs).
ALL_TASKS = (*TASKS, STICKY_HMM_TASK, LONGMEM_HMM)
#: The HMM-filtering tasks (the same inputs, targets and reference levels).
HMM_TASKS = ("hmm", STICKY_HMM_TASK, LONGMEM_HMM)
#: The sticky HMM's mix: each transition row is ``(1 − m)·Dirichlet row + m·identity`` with this ``m``.
STICKY_SELF_TRANSITION = 0.7
#: The long-memory HMM's transition mix (the chain keeps its state for about 20 steps on average) ...
LONGMEM_SELF_TRANSITION = 0.95
#: ... and its emission mix: each emission row is ``(1 − u)·Dirichlet row + u/O`` with this ``u`` (weak evidence).
LONGMEM_EMISSION_UNIFORM_SHARE = 0.5
#: What each task tests.
TASK_PRIMITIVES = {"bijection": "accumulation", "hmm": "transport", "binding": "binding", STICKY_HMM_TASK: "transport",
                   LONGMEM_HMM: "transport"}


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
    """One task with its sizes: ``bijection`` (V, L), ``hmm``, ``hmm_sticky`` or ``hmm_longmem`` (n_states,
    n_symbols, length) or ``binding`` (n_pairs, n_queries, n_keys, n_values).

    Inputs: bijection tokens; HMM features (observation and both matrices at every step); binding in
    the one-position-per-pair layout (:func:`~attention_dynamics.tasks.associative_recall.pair_features`),
    so that retrieval is a single content-routing step for every architecture.
    """

    name: str
    sizes: tuple[tuple[str, int], ...]

    @classmethod
    def make(cls, name: str, **sizes: int) -> "WindTunnel":
        """Return the task ``name`` with ``sizes`` validated."""
        if name not in ALL_TASKS:
            raise ValueError(f"unknown task {name!r}; choose one of {', '.join(ALL_TASKS)}")
        required = {"bijection": ("V", "L"), "hmm": ("n_states", "n_symbols", "length"),
                    STICKY_HMM_TASK: ("n_states", "n_symbols", "length"),
                    LONGMEM_HMM: ("n_states", "n_symbols", "length"),
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
        if self.name in HMM_TASKS:
            return hmm.hmm_input_dim(self["n_states"], self["n_symbols"])
        if self.name == "binding":
            return associative_recall.pair_feature_dim(self["n_keys"], self["n_values"])
        return None

    @property
    def n_out(self) -> int:
        """Return the number of classes predicted at each position."""
        if self.name in HMM_TASKS:
            return self["n_states"]
        return {"bijection": lambda: self["V"], "binding": lambda: self["n_values"]}[self.name]()

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
                                 n_symbols=self["n_symbols"], self_transition=self.self_transition,
                                 emission_uniform_share=self.emission_uniform_share, generator=generator)
        return TaskBatch(inputs=b.inputs, positions=torch.arange(self["length"]), targets=None,
                         posterior=b.posterior,
                         extra={"transition": b.transition, "emission": b.emission,
                                "states": b.states, "observations": b.observations})

    @property
    def self_transition(self) -> float:
        """Return the HMM's sticky mix (:data:`STICKY_SELF_TRANSITION` for ``hmm_sticky``,
        :data:`LONGMEM_SELF_TRANSITION` for ``hmm_longmem``, 0 otherwise)."""
        return {STICKY_HMM_TASK: STICKY_SELF_TRANSITION, LONGMEM_HMM: LONGMEM_SELF_TRANSITION}.get(self.name, 0.0)

    @property
    def emission_uniform_share(self) -> float:
        """Return the HMM's emission mix with the uniform row (:data:`LONGMEM_EMISSION_UNIFORM_SHARE` for
        ``hmm_longmem``, 0 otherwise)."""
        return LONGMEM_EMISSION_UNIFORM_SHARE if self.name == LONGMEM_HMM else 0.0

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


#: The HMM tunnels whose matrices can be given in each of :data:`~attention_dynamics.tasks.hmm.INPUT_FORMATS`.
FORMAT_TUNNELS = ("hmm", STICKY_HMM_TASK)


@dataclass(frozen=True)
class FormattedHMMTunnel:
    """HMM filtering (``base``: ``hmm`` or ``hmm_sticky``) with the matrices given in ``input_format``.

    Duck-types :class:`~attention_dynamics.tasks.wind_tunnels.WindTunnel` for the model factory (``n_out``,
    ``vocab_size``, ``input_dim``, ``sequence_length``) and :meth:`sample` returns a :class:`TaskBatch` whose
    ``positions`` are the observation positions (``(K,)``) and whose ``posterior`` is the exact filter there.
    """

    base: str
    input_format: str
    n_states: int
    n_symbols: int
    length: int

    def __post_init__(self) -> None:
        if self.base not in FORMAT_TUNNELS:
            raise ValueError(f"base must be one of {FORMAT_TUNNELS}, got {self.base!r}")
        if self.input_format not in hmm.INPUT_FORMATS:
            raise ValueError(f"input_format must be one of {hmm.INPUT_FORMATS}, got {self.input_format!r}")

    @property
    def n_out(self) -> int:
        """Return the number of hidden states (the classes predicted at each observation)."""
        return self.n_states

    @property
    def vocab_size(self) -> int | None:
        """Return the header format's number of token ids (``None`` for the feature formats)."""
        return hmm.hmm_header_vocab_size(self.n_symbols) if self.input_format == "header" else None

    @property
    def input_dim(self) -> int | None:
        """Return the feature size per position (``None`` for the header format, which is tokens)."""
        return None if self.input_format == "header" else hmm.hmm_input_dim(self.n_states, self.n_symbols)

    @property
    def sequence_length(self) -> int:
        """Return the number of input positions (the header's tokens included)."""
        if self.input_format == "header":
            return hmm.hmm_header_length(self.n_states, self.n_symbols, self.length)
        return self.length

    @property
    def self_transition(self) -> float:
        """Return the sticky mix of ``base`` (:data:`STICKY_SELF_TRANSITION` for ``hmm_sticky``, 0 for ``hmm``)."""
        return STICKY_SELF_TRANSITION if self.base == STICKY_HMM_TASK else 0.0

    def sample(self, n_sequences: int, *, generator: torch.Generator | None = None) -> TaskBatch:
        """Return ``n_sequences`` fresh sequences in this format; the HMMs lie on the 0.01 grid."""
        T, E = hmm.sample_hmm_parameters(n_sequences, n_states=self.n_states, n_symbols=self.n_symbols, grid=0.01,
                                         self_transition=self.self_transition, generator=generator)
        if self.self_transition > 0:
            T = hmm.round_to_grid(T, 0.01)  # the mix with the identity leaves the grid; the header needs it
        states, obs = hmm.sample_hmm_sequences(T, E, self.length, generator=generator)
        if self.input_format == "header":
            inputs = hmm.hmm_header_tokens(T, E, obs)
            positions = hmm.hmm_header_observation_positions(self.n_states, self.n_symbols, self.length)
        else:
            make = hmm.hmm_input_features if self.input_format == "every_step" else hmm.hmm_first_step_features
            inputs, positions = make(T, E, obs), torch.arange(self.length)
        return TaskBatch(inputs=inputs, positions=positions, targets=None, posterior=hmm.forward_filter(T, E, obs),
                         extra={"transition": T, "emission": E, "states": states, "observations": obs})
