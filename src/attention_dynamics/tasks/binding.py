"""Binding: a wind tunnel that cannot be solved without content-based routing (chapter 9).

Each sequence draws a fresh random map ``pi`` from ``V`` keys to ``V`` values and ``L`` keys ``k_1..k_L``
**with replacement**, so a key can come back. The model sees the pairs revealed so far and, at each key,
predicts its value. When the key has come before, the answer is the value stored with it: the model must find
that earlier pair by its content (which key it holds), wherever it sits. That is the routing the paper is
about; bijection elimination (keys without replacement) never asks for it.

Two layouts of the same sequences:

- ``"pair"`` (one hop): ``[k_1, P(k_1, v_1), k_2, P(k_2, v_2), ..., k_L]`` with one token per revealed pair,
  ``P(k, v) = V + k·V + v`` (vocabulary ``V + V²``, length ``2L − 1``). Retrieval is one content match: the
  current key against the keys held by earlier pair tokens.
- ``"separate"`` (two hops, the authors' binding task): ``[k_1, v_1 + V, k_2, v_2 + V, ..., k_L]`` (vocabulary
  ``2V``): find the earlier occurrence of the key, then read the token after it.

Two value maps:

- ``"bijection"``: ``pi`` a uniformly random permutation. A repeated key's posterior is a point mass on its
  value; a new key's is uniform over the values not revealed yet (elimination, as in bijection).
- ``"function"``: ``pi`` a uniformly random function (values may repeat; the authors' pilot): a new key's posterior
  is uniform over all ``V`` values.

Reference levels (all exact): the context-blind predictor (the current key and position only: uniform over V),
and the **pairing-blind** posterior, the best a model can do that knows which keys and which values were revealed
but not which value went with which key (a bag of separate key and value tokens). The gap between the
pairing-blind level and the exact posterior is what binding is worth.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

__all__ = [
    "LAYOUTS",
    "VALUE_MAPS",
    "BindingBatch",
    "check_sizes",
    "sequence_length",
    "vocab_size",
    "key_positions",
    "sample_binding_batch",
    "exact_posterior",
    "pairing_blind_posterior",
    "answer_source_positions",
    "repeat_probability",
    "context_blind_kl_bits",
]

LAYOUTS = ("pair", "separate")
VALUE_MAPS = ("bijection", "function")


def check_sizes(V: int, L: int, layout: str = "pair", value_map: str = "bijection") -> tuple[int, int]:
    """Return ``(V, L)`` if ``V ≥ 2`` and ``L ≥ 1`` are integers and the layout and value map are known."""
    for name, val in (("V", V), ("L", L)):
        if isinstance(val, bool) or not isinstance(val, (int, np.integer)):
            raise ValueError(f"{name} must be an integer, got {val!r}")
    if V < 2:
        raise ValueError(f"V (number of keys and values) must be at least 2, got {V}")
    if L < 1:
        raise ValueError(f"L (number of keys in a sequence) must be at least 1, got {L}")
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}")
    if value_map not in VALUE_MAPS:
        raise ValueError(f"value_map must be one of {VALUE_MAPS}, got {value_map!r}")
    return int(V), int(L)


def sequence_length(L: int) -> int:
    """Return the number of tokens of a sequence with ``L`` keys: 2L − 1 (the last value is never shown)."""
    return 2 * L - 1


def vocab_size(V: int, layout: str = "pair") -> int:
    """Return the vocabulary size: V + V² (keys and pair tokens) or 2V (keys and value tokens)."""
    check_sizes(V, 1, layout)
    return V + V * V if layout == "pair" else 2 * V


def key_positions(L: int) -> torch.Tensor:
    """Return the token positions ``(L,)`` of the keys, 0, 2, …, 2L − 2 (where predictions are made)."""
    return torch.arange(0, sequence_length(L), 2)


@dataclass
class BindingBatch:
    """A batch of binding sequences with their exact posteriors.

    tokens ``(B, 2L−1)`` int64; keys ``(B, L)``; targets ``(B, L)`` = pi(key) in ``0..V−1``; value_map ``(B, V)``
    (pi itself); posterior ``(B, L, V)`` float64, the exact posterior at each key position; repeated ``(B, L)``
    bool, whether the key at that position came before (its posterior is then a point mass).
    """

    tokens: torch.Tensor
    keys: torch.Tensor
    targets: torch.Tensor
    value_map: torch.Tensor
    posterior: torch.Tensor
    repeated: torch.Tensor
    V: int
    L: int
    layout: str
    map_kind: str

    def __len__(self) -> int:
        return self.tokens.shape[0]

    def to(self, device: torch.device | str) -> "BindingBatch":
        """Return a copy with every tensor moved to ``device``."""
        moved = {n: getattr(self, n).to(device) for n in ("tokens", "keys", "targets", "value_map", "posterior",
                                                          "repeated")}
        return BindingBatch(**moved, V=self.V, L=self.L, layout=self.layout, map_kind=self.map_kind)


def sample_binding_batch(n_sequences: int, V: int, L: int, *, layout: str = "pair", value_map: str = "bijection",
                         generator: torch.Generator | None = None) -> BindingBatch:
    """Return ``n_sequences`` fresh binding sequences (a new random map each) with their exact posteriors."""
    V, L = check_sizes(V, L, layout, value_map)
    if isinstance(n_sequences, bool) or not isinstance(n_sequences, (int, np.integer)) or n_sequences < 1:
        raise ValueError(f"n_sequences must be a positive integer, got {n_sequences!r}")
    B = int(n_sequences)
    if value_map == "bijection":
        pi = torch.rand(B, V, generator=generator).argsort(dim=-1)  # (B, V): a uniform permutation per sequence
    else:
        pi = torch.randint(0, V, (B, V), generator=generator)  # (B, V): a uniform function
    keys = torch.randint(0, V, (B, L), generator=generator)  # (B, L), with replacement
    targets = pi.gather(1, keys)  # (B, L)
    tokens = torch.empty(B, sequence_length(L), dtype=torch.long)
    tokens[:, 0::2] = keys
    revealed = (V + keys * V + targets) if layout == "pair" else (V + targets)  # (B, L)
    tokens[:, 1::2] = revealed[:, :-1]
    posterior = exact_posterior(keys, targets, V, value_map)
    repeated = _seen_before(keys, V)
    return BindingBatch(tokens=tokens, keys=keys, targets=targets, value_map=pi, posterior=posterior,
                        repeated=repeated, V=V, L=L, layout=layout, map_kind=value_map)


def _revealed_before(items: torch.Tensor, V: int) -> torch.Tensor:
    """Return ``(B, L, V)`` float64: 1 where symbol v occurred strictly before position t."""
    B, L = items.shape
    seen = torch.zeros(B, L, V, dtype=torch.float64)
    if L > 1:
        seen[:, 1:] = F.one_hot(items[:, :-1], V).to(torch.float64).cumsum(dim=1).clamp(max=1.0)
    return seen


def _seen_before(keys: torch.Tensor, V: int) -> torch.Tensor:
    """Return ``(B, L)`` bool: whether the key at position t occurred at an earlier position."""
    seen = _revealed_before(keys, V)
    return seen.gather(2, keys[..., None]).squeeze(-1) > 0


def exact_posterior(keys: torch.Tensor, targets: torch.Tensor, V: int, value_map: str = "bijection") -> torch.Tensor:
    """Return the exact posterior ``(B, L, V)`` (float64) of the value at every key position.

    A key seen before: a point mass on the value revealed with it. A new key: uniform over the values not
    revealed yet (``"bijection"``: the map is a permutation) or over all V values (``"function"``).
    """
    check_sizes(V, keys.shape[1], "pair", value_map)
    repeated = _seen_before(keys, V)  # (B, L)
    point = F.one_hot(targets, V).to(torch.float64)  # (B, L, V)
    if value_map == "bijection":
        free = 1.0 - _revealed_before(targets, V)  # values not revealed before t
        new = free / free.sum(-1, keepdim=True)
    else:
        new = torch.full(point.shape, 1.0 / V, dtype=torch.float64)
    return torch.where(repeated[..., None], point, new)


def pairing_blind_posterior(keys: torch.Tensor, targets: torch.Tensor, V: int,
                            value_map: str = "bijection") -> torch.Tensor:
    """Return the posterior ``(B, L, V)`` of a predictor that knows which keys and values were revealed, not the pairing.

    For a bijection: a repeated key's value is uniform over the revealed values (the pairing, uniform over the
    matchings of revealed keys and values, is unknown), a new key's over the values not revealed yet, exactly as
    the exact posterior. For a function: a repeated key's value is the value of one of the d revealed keys, each
    with probability 1/d (counted with multiplicity: the revealed pairs' values); a new key's is uniform over V.
    """
    check_sizes(V, keys.shape[1], "pair", value_map)
    B, L = keys.shape
    repeated = _seen_before(keys, V)
    exact = exact_posterior(keys, targets, V, value_map)
    if value_map == "bijection":
        revealed = _revealed_before(targets, V)  # the d distinct values revealed before t
        among = revealed / revealed.sum(-1, keepdim=True).clamp(min=1.0)
    else:
        # one value per distinct revealed key: count each key's value once, with multiplicity across keys
        first = torch.zeros(B, L, dtype=torch.bool)  # position j is the first occurrence of its key
        first[:, 0] = True
        if L > 1:
            first[:, 1:] = ~_seen_before(keys, V)[:, 1:]
        onehot = F.one_hot(targets, V).to(torch.float64) * first[..., None]  # (B, L, V)
        counts = torch.zeros(B, L, V, dtype=torch.float64)
        counts[:, 1:] = onehot[:, :-1].cumsum(dim=1)
        among = counts / counts.sum(-1, keepdim=True).clamp(min=1.0)
    return torch.where(repeated[..., None], among, exact)


def answer_source_positions(keys: torch.Tensor) -> torch.Tensor:
    """Return ``(B, L)`` int64: the token position holding the answer of each key position, or −1 for a new key.

    The answer sits in the pair (``"pair"`` layout) or value (``"separate"``) token right after the key's most recent
    earlier occurrence, at position 2j + 1 for the occurrence at key position j.
    """
    B, L = keys.shape
    out = torch.full((B, L), -1, dtype=torch.long)
    index = torch.arange(L)
    for t in range(1, L):
        same = keys[:, :t] == keys[:, t:t + 1]  # (B, t)
        last = torch.where(same, index[:t].expand(B, t), torch.full((B, t), -1)).max(dim=-1).values
        out[:, t] = torch.where(last >= 0, 2 * last + 1, last)
    return out


def _occupancy(V: int, L: int) -> np.ndarray:
    """Return ``P[t, d]``: the probability that ``d`` distinct keys appear among the first ``t`` uniform draws."""
    P = np.zeros((L, V + 1))
    P[0, 0] = 1.0
    for t in range(1, L):
        d = np.arange(V + 1)
        P[t, 1:] += P[t - 1, :-1] * (V - d[:-1]) / V
        P[t] += P[t - 1] * d / V
    return P


def repeat_probability(V: int, L: int) -> np.ndarray:
    """Return ``(L,)``: the probability that the key at position t came before, 1 − (1 − 1/V)^t."""
    V, L = check_sizes(V, L)
    return 1.0 - (1.0 - 1.0 / V) ** np.arange(L, dtype=np.float64)


def context_blind_kl_bits(V: int, L: int, value_map: str = "bijection") -> float:
    """Return the mean KL (bits) from the exact posterior of the best predictor that sees only the current key.

    That predictor is uniform over V (by symmetry nothing else about the value is known), so its KL at a position
    is log2 V − H(posterior): log2 V for a repeated key, log2 V − log2(V − d) for a new key after d distinct keys
    (``"bijection"``; 0 for ``"function"``). Averaged over the occupancy distribution of d, exactly.
    """
    V, L = check_sizes(V, L, "pair", value_map)
    P = _occupancy(V, L)  # (L, V + 1)
    total = 0.0
    for t in range(L):
        for d in range(V + 1):
            if P[t, d] == 0.0:
                continue
            repeat = d / V
            new_kl = (math.log2(V) - math.log2(V - d)) if (value_map == "bijection" and d < V) else 0.0
            total += P[t, d] * (repeat * math.log2(V) + (1.0 - repeat) * new_kl)
    return total / L
