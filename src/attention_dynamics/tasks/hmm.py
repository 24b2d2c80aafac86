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

The references a model's number is read against are exact too: :func:`window_posterior` is the posterior
given only the last ``k`` observations and the matrices (the *memory ladder*: ``k = 1`` is
:func:`context_blind_posterior`, a window as long as the sequence is :func:`forward_filter`). Weak
emissions (``emission_uniform_share = u > 0``) mix each emission row with the uniform one,
``E = (1 − u)·E_Dirichlet + u/O``: every observation then says less, and the belief has to be built from
many of them.

Conventions: ``transition[b, i, j] = p(s_{t+1} = j | s_t = i)``, ``emission[b, i, o] = p(o_t = o | s_t = i)``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..core.settings import check_positive_int

__all__ = [
    "HMMBatch",
    "sample_hmm_parameters",
    "sample_hmm_sequences",
    "sample_hmm_batch",
    "round_to_grid",
    "forward_filter",
    "window_posterior",
    "window_posterior_by_path_enumeration",
    "context_blind_posterior",
    "state_marginals",
    "hmm_input_features",
    "hmm_input_dim",
    "INPUT_FORMATS",
    "hmm_first_step_features",
    "HEADER_PROBABILITY_TOKENS",
    "hmm_header_vocab_size",
    "hmm_header_length",
    "hmm_header_tokens",
    "hmm_header_observation_positions",
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


def round_to_grid(rows: torch.Tensor, grid: float = 0.01) -> torch.Tensor:
    """Return row-stochastic ``rows`` rounded onto multiples of ``grid`` (rows still sum to one, no entry 0).

    Used to put matrices that were mixed after the grid rounding (a sticky chain) back on Paper I's
    0.01 grid, so that each probability is one of the header's tokens.
    """
    return _floor_and_round(torch.as_tensor(rows, dtype=torch.float64), 0.0, grid)


def sample_hmm_parameters(
    n_hmms: int,
    *,
    n_states: int = 5,
    n_symbols: int = 5,
    floor: float = 0.05,
    grid: float | None = None,
    self_transition: float = 0.0,
    emission_uniform_share: float = 0.0,
    generator: torch.Generator | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Return ``(transition (n, S, S), emission (n, S, O))``, float64 row-stochastic, one HMM per row.

    Rows are Dirichlet(1), floored at ``floor``, renormalised; ``grid=0.01`` also rounds every
    probability to a multiple of 0.01 (rows still sum to one). ``self_transition = m`` in [0, 1)
    then mixes every transition row with the identity, ``T = (1 − m)·T + m·I`` (a sticky chain; the
    random draws are the same for every ``m``, so ``m = 0`` gives exactly Paper I's HMMs).
    ``emission_uniform_share = u`` in [0, 1) likewise mixes every emission row with the uniform row,
    ``E = (1 − u)·E + u/O`` (weak emissions: each observation says less about the state).
    """
    n = check_positive_int("n_hmms", n_hmms)
    S = check_positive_int("n_states", n_states)
    O = check_positive_int("n_symbols", n_symbols)
    if not 0 <= floor < 1.0 / max(S, O):
        raise ValueError(f"floor must be in [0, 1/max(S, O)), got {floor}")
    if not 0 <= self_transition < 1:
        raise ValueError(f"self_transition must be in [0, 1), got {self_transition}")
    if not 0 <= emission_uniform_share < 1:
        raise ValueError(f"emission_uniform_share must be in [0, 1), got {emission_uniform_share}")
    transition = _floor_and_round(_dirichlet_ones((n, S, S), generator), floor, grid)
    emission = _floor_and_round(_dirichlet_ones((n, S, O), generator), floor, grid)
    if self_transition > 0:
        identity = torch.eye(S, dtype=transition.dtype)
        transition = (1.0 - self_transition) * transition + self_transition * identity
    if emission_uniform_share > 0:
        emission = (1.0 - emission_uniform_share) * emission + emission_uniform_share / O
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


def _checked_hmm(
    transition: torch.Tensor, emission: torch.Tensor, observations: torch.Tensor, initial: torch.Tensor | None
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Return ``(transition, emission, observations, initial (n, S))`` as float64/int64, shapes checked.

    ``initial`` ``(n, S)`` or ``(S,)`` defaults to uniform.
    """
    transition = torch.as_tensor(transition, dtype=torch.float64)
    emission = torch.as_tensor(emission, dtype=torch.float64)
    observations = torch.as_tensor(observations, dtype=torch.long)
    if transition.ndim != 3 or emission.ndim != 3 or observations.ndim != 2:
        raise ValueError("expected transition (n, S, S), emission (n, S, O) and observations (n, K)")
    n, S, _ = transition.shape
    if transition.shape != (n, S, S) or emission.shape[:2] != (n, S) or observations.shape[0] != n:
        raise ValueError(f"shapes disagree: transition {tuple(transition.shape)}, emission {tuple(emission.shape)}, "
                         f"observations {tuple(observations.shape)}")
    if initial is None:
        initial = torch.full((n, S), 1.0 / S, dtype=torch.float64)
    else:
        initial = torch.as_tensor(initial, dtype=torch.float64).expand(n, S).clone()
    return transition, emission, observations, initial


def _likelihoods(emission: torch.Tensor, observations: torch.Tensor) -> torch.Tensor:
    """Return p(o_t | s_t = s) ``(n, K, S)``: each observation's column of the emission matrix."""
    n, S, _ = emission.shape
    K = observations.shape[1]
    return emission.transpose(1, 2).gather(1, observations[:, :, None].expand(n, K, S))


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
    transition, emission, observations, belief = _checked_hmm(transition, emission, observations, initial)
    n, K = observations.shape
    likelihood = _likelihoods(emission, observations)  # (n, K, S)
    posterior = torch.empty(n, K, transition.shape[1], dtype=torch.float64)
    for t in range(K):
        if t > 0:
            belief = torch.einsum("bi,bij->bj", belief, transition)  # predict: p(s_t | o_<t)
        belief = belief * likelihood[:, t]  # update with o_t
        belief = belief / belief.sum(-1, keepdim=True)
        posterior[:, t] = belief
    return posterior


def state_marginals(transition: torch.Tensor, length: int, initial: torch.Tensor) -> torch.Tensor:
    """Return the chain's marginals p(s_t) = (π₀ Tᵗ) ``(n, length, S)`` (float64), no observation used."""
    marginal = initial
    out = torch.empty(initial.shape[0], length, initial.shape[1], dtype=torch.float64)
    for t in range(length):
        if t > 0:
            marginal = torch.einsum("bi,bij->bj", marginal, transition)
        out[:, t] = marginal
    return out


def window_posterior(
    transition: torch.Tensor,
    emission: torch.Tensor,
    observations: torch.Tensor,
    window: int,
    initial: torch.Tensor | None = None,
) -> torch.Tensor:
    """Return p(s_t | o_{t−k+1..t}, T, E) ``(n, K, S)`` (float64): the exact posterior given the last k = ``window`` observations.

    The window's first state has the chain's marginal at its step as prior, p(s_a) = (π₀ Tᵃ) with
    a = max(0, t − k + 1); the observations in the window then update it by the forward recursion.
    This is the best a predictor can do, in expected KL to the filter, from the matrices, the step t
    and the last k observations (by the tower property the filter's conditional mean given that
    information is this posterior), so a model whose KL is below the k-window's level uses
    information from more than k steps back. ``window = 1`` is :func:`context_blind_posterior`;
    ``window ≥ t + 1`` is the forward filter at step t. Shapes and ``initial`` as :func:`forward_filter`.
    """
    window = check_positive_int("window", window)
    transition, emission, observations, initial = _checked_hmm(transition, emission, observations, initial)
    n, K = observations.shape
    likelihood = _likelihoods(emission, observations)  # (n, K, S)
    t = torch.arange(K)
    start = (t - window + 1).clamp_min(0)  # (K,): the first step of each position's window
    belief = state_marginals(transition, K, initial)[:, start]  # (n, K, S): p(s_a) at each window's start
    for j in range(min(window, K)):
        step = start + j  # (K,): the step each window reaches after j transitions
        active = (step <= t)[None, :, None]  # windows that still have observations to read
        if j > 0:
            belief = torch.where(active, torch.einsum("bti,bij->btj", belief, transition), belief)
        updated = belief * likelihood[:, step.clamp_max(K - 1)]
        belief = torch.where(active, updated / updated.sum(-1, keepdim=True), belief)
    return belief


def window_posterior_by_path_enumeration(
    transition: torch.Tensor,
    emission: torch.Tensor,
    observations: torch.Tensor,
    window: int,
    initial: torch.Tensor | None = None,
) -> torch.Tensor:
    """Return :func:`window_posterior` ``(n, K, S)`` computed another way: summing over every hidden path of the window.

    p(s_t | o_{a..t}) ∝ Σ over paths s_a..s_t of p(s_a) Π T(s_r, s_{r+1}) Π E(s_r, o_r), with
    p(s_a) = (π₀ Tᵃ). Exponential in the window (Sᵏ paths): an independent check of the recursion,
    for short windows only.
    """
    window = check_positive_int("window", window)
    transition, emission, observations, initial = _checked_hmm(transition, emission, observations, initial)
    n, K = observations.shape
    S = transition.shape[1]
    if S ** min(window, K) > 200_000:
        raise ValueError(f"{S}^{min(window, K)} paths per position is too many to enumerate")
    marginals = state_marginals(transition, K, initial)  # (n, K, S)
    likelihood = _likelihoods(emission, observations)  # (n, K, S)
    out = torch.empty(n, K, S, dtype=torch.float64)
    for t in range(K):
        a = max(0, t - window + 1)
        length = t - a + 1
        paths = torch.cartesian_prod(*[torch.arange(S)] * length).reshape(-1, length)  # (P, length)
        weight = marginals[:, a][:, paths[:, 0]] * likelihood[:, a][:, paths[:, 0]]  # (n, P)
        for r in range(1, length):
            weight = weight * transition[:, paths[:, r - 1], paths[:, r]] * likelihood[:, a + r][:, paths[:, r]]
        last = torch.zeros(n, S, dtype=torch.float64).index_add_(1, paths[:, -1], weight)  # sum over paths by s_t
        out[:, t] = last / last.sum(-1, keepdim=True)
    return out


def context_blind_posterior(
    transition: torch.Tensor,
    emission: torch.Tensor,
    observations: torch.Tensor,
    initial: torch.Tensor | None = None,
) -> torch.Tensor:
    """Return q_t(s) ∝ (π₀ Tᵗ)(s) · E(s, o_t) ``(n, K, S)`` (float64): the posterior given only the current input.

    The reference level of belief *transport*, the one-step window of :func:`window_posterior`. A
    model that sees, at step t, the observation o_t and both matrices but no earlier observation (and
    is told t) can do no better in expected KL to the filter than this: by the tower property the
    filter's expectation given that information is p(s_t | o_t, T, E), the initial distribution pushed
    t steps through the chain times the likelihood of o_t. Shapes and ``initial`` as :func:`forward_filter`.
    """
    return window_posterior(transition, emission, observations, 1, initial)


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


#: The three ways a model can be given the matrices: at every position (the book's), only at t = 0, or as Paper I's
#: header of probability tokens before the observations.
INPUT_FORMATS = ("every_step", "first_step", "header")


def hmm_first_step_features(transition: torch.Tensor, emission: torch.Tensor, observations: torch.Tensor) -> torch.Tensor:
    """Return :func:`hmm_input_features` with the matrices only at t = 0 (zeros after) ``(n, K, O + S² + S·O)`` (float32).

    A model reading these must keep the matrices in its own state (or look back at position 0) to use
    them at later steps.
    """
    x = hmm_input_features(transition, emission, observations)
    x[:, 1:, emission.shape[-1]:] = 0.0
    return x


#: Paper I's header writes each probability as one of these tokens: p = i / 100 for token id i (a 0.01 grid).
HEADER_PROBABILITY_TOKENS = 101
#: The header's special tokens, after the probability tokens: [TRANS], [EMIT], [SEP], [OBS]; the observation
#: symbols follow them.
_TRANS, _EMIT, _SEP, _OBS = range(HEADER_PROBABILITY_TOKENS, HEADER_PROBABILITY_TOKENS + 4)


def hmm_header_vocab_size(n_symbols: int = 5) -> int:
    """Return the number of token ids of the header format: 101 probabilities, 4 special tokens, the O symbols."""
    return _OBS + 1 + check_positive_int("n_symbols", n_symbols)


def hmm_header_length(n_states: int, n_symbols: int, length: int) -> int:
    """Return the number of tokens of a header-format sequence: 3 + S² + S·O header tokens, then 2 per observation."""
    return 3 + n_states * n_states + n_states * n_symbols + 2 * length


def hmm_header_observation_positions(n_states: int, n_symbols: int, length: int) -> torch.Tensor:
    """Return the positions ``(K,)`` of the observation tokens o_0..o_{K−1} in the header format (where the loss is)."""
    header = 3 + n_states * n_states + n_states * n_symbols
    return header + 2 * torch.arange(length) + 1


def hmm_header_tokens(transition: torch.Tensor, emission: torch.Tensor, observations: torch.Tensor) -> torch.Tensor:
    """Return Paper I's token sequence ``(n, 3 + S² + S·O + 2K)`` int64 (``encode_instance`` in the authors' ``src/data/hmm.py``).

    ``[TRANS] T[0,0] … T[S−1,S−1] [EMIT] E[0,0] … E[S−1,O−1] [SEP] [OBS] o_0 [OBS] o_1 …``, every
    probability one token on the 0.01 grid (token id = 100·p). The matrices must lie on that grid
    (draw them with ``grid=0.01``; :func:`round_to_grid` after a sticky mix), so that the header says
    exactly what the exact posterior uses. A model must read the matrices from the header and look up
    the emission column of each observation by content.
    """
    transition = torch.as_tensor(transition, dtype=torch.float64)
    emission = torch.as_tensor(emission, dtype=torch.float64)
    observations = torch.as_tensor(observations, dtype=torch.long)
    n, S, O = emission.shape
    K = observations.shape[1]
    probabilities = torch.cat([transition.reshape(n, S * S), emission.reshape(n, S * O)], dim=1)  # (n, S² + S·O)
    ids = torch.round(probabilities * 100)
    if float((ids - probabilities * 100).abs().max()) > 1e-6:
        raise ValueError("the header format needs matrices on the 0.01 grid (draw them with grid=0.01)")
    ids = ids.long()

    def column(token: int) -> torch.Tensor:
        return torch.full((n, 1), token, dtype=torch.long)

    observed = torch.stack([torch.full((n, K), _OBS, dtype=torch.long), _OBS + 1 + observations], dim=2)  # (n, K, 2)
    return torch.cat([column(_TRANS), ids[:, : S * S], column(_EMIT), ids[:, S * S:], column(_SEP),
                      observed.reshape(n, 2 * K)], dim=1)


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
    emission_uniform_share: float = 0.0,
    generator: torch.Generator | None = None,
) -> HMMBatch:
    """Return ``n_sequences`` sequences of ``length`` steps, each from a fresh HMM, with exact posteriors.

    ``self_transition`` and ``emission_uniform_share``: the mixes of :func:`sample_hmm_parameters`
    (both 0: Paper I's random HMMs).
    """
    transition, emission = sample_hmm_parameters(
        n_sequences, n_states=n_states, n_symbols=n_symbols, floor=floor, grid=grid,
        self_transition=self_transition, emission_uniform_share=emission_uniform_share, generator=generator,
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
