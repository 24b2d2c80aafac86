"""The sticky Markov chain of the paper's named experiment (chapter 5), with its Bayes floors.

Eight symbols on a circle. From symbol i the chain stays with a self-transition probability and
otherwise jumps to j with a weight proportional to 1/d(i, j), the circular distance
``d = min(|i − j|, n − |i − j|)``. Two versions of the transition matrix exist:

- ``"nominal"``: what the paper's words describe — the diagonal is exactly ``self_prob`` and the
  off-diagonal entries share ``1 − self_prob`` in proportion to 1/d.
- ``"reference"``: what the authors' script computes — it puts ``self_prob`` *and* the 1/d weights
  in the row, divides the whole row (diagonal included) by its sum, multiplies by ``1 − self_prob``,
  adds ``self_prob`` to the diagonal and renormalises. The diagonal therefore also receives a share
  of the off-diagonal mass, and the effective self-transition probability exceeds ``self_prob``.

The data: fixed symbol means ``mu ∈ R^{n × d}`` drawn once from N(0, I) with seed 0, one sequence
``y_0 … y_{T−1}`` per seed (uniform start), inputs ``x_t = mu[y_{t−1}] + N(0, I)`` and targets
``y_t`` — ``T − 1`` positions. The random draws follow the reference script's order (start
symbol, one multinomial draw per step, then the noise) from a generator seeded with the run's
seed, so a seed here gives the script's sequence.

Bayes floors, all in nats unless a name says bits:

- :func:`bayes_floor_nats` — the paper's H_min, the *unweighted* mean row entropy of P.
- :func:`entropy_rate_nats` — the stationary-weighted conditional entropy H(Y_t | Y_{t−1}) (the
  entropy rate). Both chains are circulant, so every row has the same entropy and the two agree.
- :func:`filtered_cross_entropy_nats` — the cross-entropy of the exact Bayes predictor that sees
  only the noisy inputs ``x_{≤t}`` (an HMM forward filter), the floor a model of these inputs can
  actually reach; it lies slightly above H_min because ``y_{t−1}`` is seen through noise.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from scipy.special import logsumexp

from ..core.seeding import torch_generator

__all__ = [
    "N_SYMBOLS",
    "SELF_PROB",
    "INPUT_DIM",
    "SEQUENCE_LENGTH",
    "PAPER_SEEDS",
    "MEANS_SEED",
    "CHAIN_KINDS",
    "StickyChainData",
    "circular_distance",
    "transition_matrix",
    "stationary_distribution",
    "effective_self_prob",
    "row_entropies_nats",
    "bayes_floor_nats",
    "bayes_floor_bits",
    "entropy_rate_nats",
    "symbol_means",
    "sample_chain",
    "make_sticky_chain_data",
    "empirical_conditional_entropy_nats",
    "monte_carlo_entropy_rate",
    "filtered_cross_entropy_nats",
    "UNIFORM_LOSS_NATS",
    "share_of_way",
    "position_phrase",
]

N_SYMBOLS = 8
SELF_PROB = 0.3
INPUT_DIM = 20
#: Length of one training sequence (T symbols give T − 1 input/target positions).
SEQUENCE_LENGTH = 2000
#: The five seeds of the paper's protocol (the reference script's list).
PAPER_SEEDS = (42, 2024, 1337, 7777, 9999)
#: The symbol means are drawn once, with this seed, and shared by every run.
MEANS_SEED = 0
CHAIN_KINDS = ("reference", "nominal")


@dataclass
class StickyChainData:
    """One sequence of the task: inputs x ``(T−1, d)``, targets y ``(T−1,)``, the chain and its means.

    ``symbols`` ``(T,)`` is the whole chain (y_0 … y_{T−1}); ``x[t−1] = mu[symbols[t−1]] + noise``
    is the input whose target is ``y[t−1] = symbols[t]``.
    """

    x: torch.Tensor
    y: torch.Tensor
    symbols: torch.Tensor
    P: torch.Tensor
    mu: torch.Tensor
    kind: str
    seed: int

    @property
    def previous_symbols(self) -> torch.Tensor:
        """Return y_{t−1} for every position ``(T−1,)`` (the symbol whose mean each input carries)."""
        return self.symbols[:-1]


def _check_kind(kind: str) -> str:
    if kind not in CHAIN_KINDS:
        raise ValueError(f"unknown chain kind {kind!r}; choose one of {', '.join(CHAIN_KINDS)}")
    return kind


def circular_distance(n_symbols: int = N_SYMBOLS) -> np.ndarray:
    """Return the ``(n, n)`` integer matrix of circular distances min(|i − j|, n − |i − j|)."""
    if not isinstance(n_symbols, (int, np.integer)) or n_symbols < 2:
        raise ValueError(f"n_symbols must be an integer >= 2, got {n_symbols!r}")
    idx = np.arange(n_symbols)
    diff = np.abs(idx[:, None] - idx[None, :])
    return np.minimum(diff, n_symbols - diff)


def transition_matrix(
    kind: str = "reference",
    n_symbols: int = N_SYMBOLS,
    self_prob: float = SELF_PROB,
    *,
    dtype: torch.dtype = torch.float64,
) -> torch.Tensor:
    """Return the ``(n, n)`` row-stochastic transition matrix P of the sticky chain (see module doc).

    ``kind="reference"`` follows the reference script's normalisation step by step, in ``dtype``
    (float32 reproduces the script's matrix to the last bit); ``kind="nominal"`` has diagonal
    exactly ``self_prob``.
    """
    _check_kind(kind)
    if not 0.0 <= self_prob < 1.0:
        raise ValueError(f"self_prob must be in [0, 1), got {self_prob!r}")
    dist = torch.as_tensor(circular_distance(n_symbols))
    eye = torch.eye(n_symbols, dtype=torch.bool)
    inverse_distance = torch.where(eye, torch.zeros((), dtype=dtype), 1.0 / dist.clamp(min=1).to(dtype))
    if kind == "nominal":
        off = inverse_distance / inverse_distance.sum(dim=1, keepdim=True)  # rows of the off-diagonal sum to 1
        return off * (1.0 - self_prob) + eye.to(dtype) * self_prob
    P = torch.where(eye, torch.full((), self_prob, dtype=dtype), inverse_distance)  # self_prob on the diagonal, 1/d off it
    rows = []
    for i in range(n_symbols):  # the script's order of operations, row by row
        row = P[i] / P[i].sum() * (1 - self_prob) + eye[i].to(dtype) * self_prob
        rows.append(row / row.sum())
    return torch.stack(rows)


def stationary_distribution(P: torch.Tensor | np.ndarray) -> np.ndarray:
    """Return the stationary distribution pi (pi P = pi, sum 1) of an irreducible chain, as float64."""
    P = np.asarray(P, dtype=np.float64)
    evals, evecs = np.linalg.eig(P.T)
    k = int(np.argmin(np.abs(evals - 1.0)))
    if abs(evals[k] - 1.0) > 1e-8:
        raise ValueError("P has no eigenvalue 1; is it row-stochastic?")
    pi = np.real(evecs[:, k])
    return pi / pi.sum()


def effective_self_prob(P: torch.Tensor | np.ndarray) -> float:
    """Return the stationary-weighted self-transition probability Σ_i pi_i P_ii (= P_ii for these chains)."""
    P = np.asarray(P, dtype=np.float64)
    return float(stationary_distribution(P) @ np.diag(P))


def row_entropies_nats(P: torch.Tensor | np.ndarray) -> np.ndarray:
    """Return the entropy of every row of P, in nats ``(n,)`` (0 log 0 = 0)."""
    P = np.asarray(P, dtype=np.float64)
    logs = np.log(np.where(P > 0, P, 1.0))
    return -(P * logs).sum(axis=1)


def bayes_floor_nats(P: torch.Tensor | np.ndarray) -> float:
    """Return the paper's H_min: the unweighted mean row entropy of P, in nats.

    The reference script labels this number "bits"; it uses the natural log, so it is in nats.
    """
    return float(row_entropies_nats(P).mean())


def bayes_floor_bits(P: torch.Tensor | np.ndarray) -> float:
    """Return the paper's H_min in bits (the mean row entropy of P divided by ln 2)."""
    return bayes_floor_nats(P) / float(np.log(2.0))


#: The loss of the uniform prediction over the eight symbols, ln 8 nats: where every run starts (its plateau).
UNIFORM_LOSS_NATS = float(np.log(N_SYMBOLS))


def share_of_way(loss: float, hmin: float | None = None) -> float:
    """Return how much of the way from ln 8 (the uniform prediction) down to H_min a loss (nats) has covered.

    0 at ln 8, 1 at H_min (default: the reference chain's :func:`bayes_floor_nats`); below 0 above ln 8, above 1
    below H_min (a head can go below H_min on its one training sequence).
    """
    if hmin is None:
        hmin = bayes_floor_nats(transition_matrix("reference"))
    return (UNIFORM_LOSS_NATS - float(loss)) / (UNIFORM_LOSS_NATS - float(hmin))


def position_phrase(share: float) -> str:
    """Return where a loss lies, in words, from its :func:`share_of_way`, by the halfway bound of chapter 5's
    plateau claims ("still near ln 8" read as: within the first half of the way down)."""
    if share < 0.5:
        return "still in the first half of the way from ln 8 down to H_min"
    return "more than halfway from ln 8 down to H_min"


def entropy_rate_nats(P: torch.Tensor | np.ndarray) -> float:
    """Return the entropy rate H(Y_t | Y_{t−1}) = Σ_i pi_i H(P_i) in nats (stationary-weighted)."""
    return float(stationary_distribution(P) @ row_entropies_nats(P))


def symbol_means(n_symbols: int = N_SYMBOLS, input_dim: int = INPUT_DIM, *, seed: int = MEANS_SEED) -> torch.Tensor:
    """Return the fixed symbol means mu ``(n, d)`` drawn from N(0, I) with ``seed`` (float32)."""
    g = torch_generator(seed)
    return torch.randn(n_symbols, input_dim, generator=g)


def sample_chain(P: torch.Tensor, length: int, generator: torch.Generator) -> torch.Tensor:
    """Return ``length`` symbols of the chain ``(length,)`` (int64): uniform start, then one draw per step.

    The draws (``randint`` for the start, one ``multinomial`` per step) are the reference script's,
    so a generator seeded like the script's gives its sequence.
    """
    if length < 1:
        raise ValueError(f"length must be positive, got {length}")
    n = P.shape[0]
    rows = P.to(torch.float32)
    symbols = torch.empty(length, dtype=torch.int64)
    symbols[0] = torch.randint(n, (1,), generator=generator).item()
    for t in range(1, length):
        symbols[t] = torch.multinomial(rows[symbols[t - 1]], 1, generator=generator).item()
    return symbols


def make_sticky_chain_data(
    seed: int,
    *,
    kind: str = "reference",
    length: int = SEQUENCE_LENGTH,
    n_symbols: int = N_SYMBOLS,
    input_dim: int = INPUT_DIM,
    self_prob: float = SELF_PROB,
    noise_std: float = 1.0,
) -> StickyChainData:
    """Return one sequence of the task for ``seed``: x ``(length−1, d)`` float32, y ``(length−1,)``.

    The chain is sampled from the float32 matrix P of ``kind`` (the script samples from float32),
    then the noise ``N(0, noise_std² I)`` is drawn for the ``length − 1`` inputs; the means come from
    :func:`symbol_means` and do not depend on ``seed``.
    """
    _check_kind(kind)
    if length < 2:
        raise ValueError(f"length must be at least 2 (one input/target pair), got {length}")
    P32 = transition_matrix(kind, n_symbols, self_prob, dtype=torch.float32)
    mu = symbol_means(n_symbols, input_dim)
    g = torch_generator(seed)
    symbols = sample_chain(P32, length, g)
    noise = torch.randn(length - 1, input_dim, generator=g) * noise_std  # (T−1, d)
    x = mu[symbols[:-1]] + noise  # x_t = mu[y_{t−1}] + noise
    y = symbols[1:].clone()
    P = transition_matrix(kind, n_symbols, self_prob, dtype=torch.float64)
    return StickyChainData(x=x, y=y, symbols=symbols, P=P, mu=mu, kind=kind, seed=int(seed))


def empirical_conditional_entropy_nats(symbols: np.ndarray | torch.Tensor, n_symbols: int = N_SYMBOLS) -> float:
    """Return the plug-in estimate of H(Y_t | Y_{t−1}) in nats from one long chain (transition counts).

    A Monte Carlo estimate of the entropy rate, independent of the closed forms: it never reads P.
    """
    s = np.asarray(symbols, dtype=np.int64)
    counts = np.zeros((n_symbols, n_symbols))
    np.add.at(counts, (s[:-1], s[1:]), 1.0)
    row_totals = counts.sum(axis=1, keepdims=True)
    cond = np.divide(counts, row_totals, out=np.zeros_like(counts), where=row_totals > 0)
    weights = row_totals[:, 0] / row_totals.sum()
    return float(weights @ row_entropies_nats(cond))


def monte_carlo_entropy_rate(P: torch.Tensor | np.ndarray, length: int, seed: int = 0) -> dict[str, float]:
    """Return a Monte Carlo estimate of H(Y_t | Y_{t−1}) in nats from one simulated chain, with its standard error.

    The chain (``length`` symbols, uniform start) is simulated from P with NumPy inverse-CDF draws (fast,
    and independent of :func:`sample_chain`); the estimate is the plug-in
    conditional entropy of its transition counts (:func:`empirical_conditional_entropy_nats`, which never
    reads P); the standard error is sd(−log p̂(y_t | y_{t−1})) / sqrt(length − 1). Keys: ``estimate``,
    ``standard_error``, ``length``.
    """
    P = np.asarray(P, dtype=np.float64)
    n = P.shape[0]
    rng = np.random.default_rng(seed)
    cdf = np.cumsum(P, axis=1)
    cdf[:, -1] = 1.0
    uniforms = rng.random(length)
    symbols = np.empty(length, dtype=np.int64)
    state = int(rng.integers(n))
    symbols[0] = state
    for t in range(1, length):
        state = int(np.searchsorted(cdf[state], uniforms[t], side="right"))
        symbols[t] = state
    counts = np.zeros((n, n))
    np.add.at(counts, (symbols[:-1], symbols[1:]), 1.0)
    cond = counts / np.maximum(counts.sum(axis=1, keepdims=True), 1.0)
    log_loss = -np.log(cond[symbols[:-1], symbols[1:]])  # (length − 1,)
    return {"estimate": empirical_conditional_entropy_nats(symbols, n),
            "standard_error": float(log_loss.std(ddof=1) / np.sqrt(len(log_loss))), "length": int(length)}


def filtered_cross_entropy_nats(data: StickyChainData, noise_std: float = 1.0) -> float:
    """Return the mean cross-entropy (nats) of the exact Bayes predictor given the noisy inputs x_{≤t}.

    The hidden state is y_{t−1}; it emits ``x_t ~ N(mu[y_{t−1}], noise_std² I)`` and moves by P. The
    forward filter gives p(y_{t−1} | x_{≤t}); the prediction of y_t is that posterior times P (the
    start of the chain is uniform). This is the floor for any model of these inputs.
    """
    x = data.x.double().numpy()  # (N, d)
    mu = data.mu.double().numpy()  # (n, d)
    P = data.P.double().numpy()
    logP = np.log(P)
    n = P.shape[0]
    sq = ((x[:, None, :] - mu[None, :, :]) ** 2).sum(-1)  # (N, n)
    log_emission = -0.5 * sq / noise_std**2  # constants cancel in the normalisation
    log_prior = np.full(n, -np.log(n))  # y_0 is uniform
    total = 0.0
    for t in range(x.shape[0]):
        log_post = log_prior + log_emission[t]
        log_post -= logsumexp(log_post)  # log p(y_{t−1} | x_{≤t})
        log_pred = logsumexp(log_post[:, None] + logP, axis=0)  # log p(y_t | x_{≤t})
        total -= log_pred[int(data.y[t])]
        log_prior = log_pred
    return total / x.shape[0]
