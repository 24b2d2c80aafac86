"""HMM filtering: Paper I's wind tunnel with a fresh hidden Markov model per sequence (chapter 6).

Every sequence has its own HMM with ``S`` hidden states and ``O`` symbols: the rows of the
transition and emission matrices are drawn from Dirichlet(1), floored at 0.05 and renormalised
(optionally rounded to a 0.01 grid, as the paper does); the initial state is uniform. A *sticky*
HMM (``self_transition = m > 0``) mixes each transition row with the identity,
``T = (1 − m)·T_Dirichlet + m·I``: the chain stays where it is with probability at least ``m``, so
the past observations say much more about the current state than on Paper I's random HMMs. The model
sees both matrices in its input together with the observations ``o_0..o_{K−1}``, and must output
the exact filtering posterior ``p(s_t | o_0..o_t)`` at every step, computed by the (normalised)
forward algorithm. Training uses soft-target cross-entropy against that posterior.

Conventions: ``transition[b, i, j] = p(s_{t+1} = j | s_t = i)``, ``emission[b, i, o] = p(o_t = o | s_t = i)``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..settings import check_positive_int

__all__ = [
    "HMMBatch",
    "sample_hmm_parameters",
    "sample_hmm_sequences",
    "sample_hmm_batch",
    "forward_filter",
    "context_blind_posterior",
    "hmm_input_features",
    "hmm_input_dim",
]


def _dirichlet_ones(shape: tuple[int, ...], generator: torch.Generator | None) -> torch.Tensor:
    """Return Dirichlet(1, …, 1) rows along the last axis (normalised Exp(1) draws), float64."""
    u = torch.rand(shape, generator=generator, dtype=torch.float64)
    e = -torch.log1p(-u)  # Exp(1); log1p(−u) is finite since u < 1
    return e / e.sum(-1, keepdim=True)


def _floor_and_round(rows: torch.Tensor, floor: float, grid: float | None) -> torch.Tensor:
    """Return rows floored at ``floor``, renormalised and (optionally) rounded onto a ``grid``."""
    rows = rows.clamp_min(floor)
    rows = rows / rows.sum(-1, keepdim=True)
    if grid is not None:
        n = round(1.0 / grid)
        if abs(n * grid - 1.0) > 1e-12:
            raise ValueError(f"grid must divide 1 (e.g. 0.01), got {grid}")
        counts = torch.round(rows * n)  # integer multiples of the grid
        counts = counts.clamp_min(1.0)  # never round a probability to zero
        # Put the rounding residual on each row's largest entry so rows sum to 1 exactly on the grid.
        residual = n - counts.sum(-1, keepdim=True)
        largest = counts.argmax(-1, keepdim=True)
        counts = counts.scatter_add(-1, largest, residual)
        rows = counts / n
    return rows


def sample_hmm_parameters(
    n_hmms: int,
    *,
    n_states: int = 5,
    n_symbols: int = 5,
    floor: float = 0.05,
    grid: float | None = None,
    self_transition: float = 0.0,
    generator: torch.Generator | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Return ``(transition (n, S, S), emission (n, S, O))``, float64 row-stochastic, one HMM per row.

    Rows are Dirichlet(1), floored at ``floor``, renormalised; ``grid=0.01`` also rounds every
    probability to a multiple of 0.01 (rows still sum to one). ``self_transition = m`` in [0, 1)
    then mixes every transition row with the identity, ``T = (1 − m)·T + m·I`` (a sticky chain; the
    random draws are the same for every ``m``, so ``m = 0`` gives exactly Paper I's HMMs).
    """
    n = check_positive_int("n_hmms", n_hmms)
    S = check_positive_int("n_states", n_states)
    O = check_positive_int("n_symbols", n_symbols)
    if not 0 <= floor < 1.0 / max(S, O):
        raise ValueError(f"floor must be in [0, 1/max(S, O)), got {floor}")
    if not 0 <= self_transition < 1:
        raise ValueError(f"self_transition must be in [0, 1), got {self_transition}")
    transition = _floor_and_round(_dirichlet_ones((n, S, S), generator), floor, grid)
    emission = _floor_and_round(_dirichlet_ones((n, S, O), generator), floor, grid)
    if self_transition > 0:
        identity = torch.eye(S, dtype=transition.dtype)
        transition = (1.0 - self_transition) * transition + self_transition * identity
    return transition, emission


def _categorical(probs: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
    """Return one draw per row of ``probs`` ``(n, C)`` by inverting the cumulative sum, ``(n,)``."""
    u = torch.rand(probs.shape[0], 1, generator=generator, dtype=probs.dtype)
    cdf = probs.cumsum(-1)
    return (u > cdf).sum(-1).clamp_max(probs.shape[-1] - 1)


def sample_hmm_sequences(
    transition: torch.Tensor, emission: torch.Tensor, length: int, *, generator: torch.Generator | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Return ``(states (n, K), observations (n, K))`` int64, one sequence per HMM, uniform initial state."""
    K = check_positive_int("length", length)
    n, S, _ = transition.shape
    rows = torch.arange(n)
    states = torch.empty(n, K, dtype=torch.long)
    observations = torch.empty(n, K, dtype=torch.long)
    s = torch.randint(0, S, (n,), generator=generator)
    for t in range(K):
        if t > 0:
            s = _categorical(transition[rows, s], generator)
        states[:, t] = s
        observations[:, t] = _categorical(emission[rows, s], generator)
    return states, observations


def forward_filter(
    transition: torch.Tensor,
    emission: torch.Tensor,
    observations: torch.Tensor,
    initial: torch.Tensor | None = None,
) -> torch.Tensor:
    """Return the filtering posterior p(s_t | o_0..o_t) ``(n, K, S)`` (float64) by the forward algorithm.

    ``transition`` ``(n, S, S)``, ``emission`` ``(n, S, O)``, ``observations`` ``(n, K)``;
    ``initial`` ``(n, S)`` or ``(S,)`` defaults to uniform. Normalised at every step (no underflow).
    """
    transition = torch.as_tensor(transition, dtype=torch.float64)
    emission = torch.as_tensor(emission, dtype=torch.float64)
    observations = torch.as_tensor(observations, dtype=torch.long)
    if transition.ndim != 3 or emission.ndim != 3 or observations.ndim != 2:
        raise ValueError("expected transition (n, S, S), emission (n, S, O) and observations (n, K)")
    n, S, _ = transition.shape
    K = observations.shape[1]
    if initial is None:
        belief = torch.full((n, S), 1.0 / S, dtype=torch.float64)
    else:
        belief = torch.as_tensor(initial, dtype=torch.float64).expand(n, S).clone()
    # likelihood[b, t, s] = p(o_t | s_t = s): gather each observation's column of the emission matrix
    likelihood = emission.transpose(1, 2).gather(1, observations[:, :, None].expand(n, K, S))  # (n, K, S)
    posterior = torch.empty(n, K, S, dtype=torch.float64)
    for t in range(K):
        if t > 0:
            belief = torch.einsum("bi,bij->bj", belief, transition)  # predict: p(s_t | o_<t)
        belief = belief * likelihood[:, t]  # update with o_t
        belief = belief / belief.sum(-1, keepdim=True)
        posterior[:, t] = belief
    return posterior


def context_blind_posterior(
    transition: torch.Tensor,
    emission: torch.Tensor,
    observations: torch.Tensor,
    initial: torch.Tensor | None = None,
) -> torch.Tensor:
    """Return q_t(s) ∝ (π₀ Tᵗ)(s) · E(s, o_t) ``(n, K, S)`` (float64): the posterior given only the current input.

    The reference level of belief *transport*. A model that sees, at step t, the observation o_t and
    both matrices but no earlier observation (and is told t) can do no better in expected KL to the
    filter than this: by the tower property the filter's expectation given that information is
    p(s_t | o_t, T, E), the initial distribution pushed t steps through the chain times the
    likelihood of o_t. A model's HMM number shows transport only below this level. Shapes and
    ``initial`` as :func:`forward_filter`.
    """
    transition = torch.as_tensor(transition, dtype=torch.float64)
    emission = torch.as_tensor(emission, dtype=torch.float64)
    observations = torch.as_tensor(observations, dtype=torch.long)
    if transition.ndim != 3 or emission.ndim != 3 or observations.ndim != 2:
        raise ValueError("expected transition (n, S, S), emission (n, S, O) and observations (n, K)")
    n, S, _ = transition.shape
    K = observations.shape[1]
    if initial is None:
        prior = torch.full((n, S), 1.0 / S, dtype=torch.float64)
    else:
        prior = torch.as_tensor(initial, dtype=torch.float64).expand(n, S).clone()
    likelihood = emission.transpose(1, 2).gather(1, observations[:, :, None].expand(n, K, S))  # (n, K, S)
    out = torch.empty(n, K, S, dtype=torch.float64)
    for t in range(K):
        if t > 0:
            prior = torch.einsum("bi,bij->bj", prior, transition)  # marginal of s_t, no observation used
        joint = prior * likelihood[:, t]
        out[:, t] = joint / joint.sum(-1, keepdim=True)
    return out


def hmm_input_dim(n_states: int = 5, n_symbols: int = 5) -> int:
    """Return the feature size per position: one-hot observation O, then the flattened S×S and S×O matrices."""
    return n_symbols + n_states * n_states + n_states * n_symbols


def hmm_input_features(transition: torch.Tensor, emission: torch.Tensor, observations: torch.Tensor) -> torch.Tensor:
    """Return the model input ``(n, K, O + S² + S·O)`` (float32): [one-hot o_t, vec(T), vec(E)] at every t.

    This is how "the transition and emission matrices are given to the model in its input":
    every position carries both matrices next to its observation.
    """
    n, S, O = emission.shape
    K = observations.shape[1]
    one_hot = torch.nn.functional.one_hot(observations, O).to(torch.float32)  # (n, K, O)
    matrices = torch.cat([transition.reshape(n, S * S), emission.reshape(n, S * O)], dim=-1).to(torch.float32)
    return torch.cat([one_hot, matrices[:, None, :].expand(n, K, matrices.shape[-1])], dim=-1)


@dataclass
class HMMBatch:
    """A batch of HMM-filtering sequences with their exact posteriors.

    transition ``(B, S, S)``, emission ``(B, S, O)`` float64; states, observations ``(B, K)``
    int64; posterior ``(B, K, S)`` float64 = p(s_t | o_0..o_t); inputs ``(B, K, O + S² + S·O)``
    float32 (what the model reads).
    """

    transition: torch.Tensor
    emission: torch.Tensor
    states: torch.Tensor
    observations: torch.Tensor
    posterior: torch.Tensor
    inputs: torch.Tensor

    def __len__(self) -> int:
        return self.observations.shape[0]

    @property
    def length(self) -> int:
        """Return the number of steps K."""
        return self.observations.shape[1]

    def to(self, device: torch.device | str) -> "HMMBatch":
        """Return a copy with every tensor moved to ``device``."""
        return HMMBatch(**{n: getattr(self, n).to(device) for n in self.__dataclass_fields__})


def sample_hmm_batch(
    n_sequences: int,
    length: int,
    *,
    n_states: int = 5,
    n_symbols: int = 5,
    floor: float = 0.05,
    grid: float | None = None,
    self_transition: float = 0.0,
    generator: torch.Generator | None = None,
) -> HMMBatch:
    """Return ``n_sequences`` sequences of ``length`` steps, each from a fresh HMM, with exact posteriors.

    ``self_transition``: the sticky mix of :func:`sample_hmm_parameters` (0: Paper I's random HMMs).
    """
    transition, emission = sample_hmm_parameters(
        n_sequences, n_states=n_states, n_symbols=n_symbols, floor=floor, grid=grid,
        self_transition=self_transition, generator=generator,
    )
    states, observations = sample_hmm_sequences(transition, emission, length, generator=generator)
    return HMMBatch(
        transition=transition,
        emission=emission,
        states=states,
        observations=observations,
        posterior=forward_filter(transition, emission, observations),
        inputs=hmm_input_features(transition, emission, observations),
    )
