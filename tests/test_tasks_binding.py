"""The binding tunnel: its tokens, its exact posterior and its reference levels, against brute-force enumeration of
every map and every key sequence."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch

from attention_dynamics.tasks import binding


def _maps(V: int, kind: str):
    return list(itertools.permutations(range(V))) if kind == "bijection" else list(itertools.product(range(V), repeat=V))


def _brute_posteriors(keys: tuple[int, ...], pi: tuple[int, ...], V: int, kind: str):
    """Exact and pairing-blind posteriors at every key position, by enumerating every map consistent with what is
    known (uniform prior over maps)."""
    maps = _maps(V, kind)
    exact, blind = [], []
    for t, key in enumerate(keys):
        known = {keys[j]: pi[keys[j]] for j in range(t)}
        consistent = [m for m in maps if all(m[k] == v for k, v in known.items())]
        exact.append(np.bincount([m[key] for m in consistent], minlength=V) / len(consistent))
        revealed_keys = sorted(known)
        multiset = sorted(known.values())
        consistent = [m for m in maps if sorted(m[k] for k in revealed_keys) == multiset]
        blind.append(np.bincount([m[key] for m in consistent], minlength=V) / len(consistent))
    return np.array(exact), np.array(blind)


@pytest.mark.parametrize("kind", binding.VALUE_MAPS)
def test_exact_and_pairing_blind_posteriors_match_enumeration(kind):
    V, L = 3, 5
    batch = binding.sample_binding_batch(40, V, L, value_map=kind, generator=torch.Generator().manual_seed(3))
    blind = binding.pairing_blind_posterior(batch.keys, batch.targets, V, kind)
    assert batch.repeated.any() and (~batch.repeated).any()
    for b in range(len(batch)):
        keys = tuple(batch.keys[b].tolist())
        pi = tuple(batch.value_map[b].tolist())
        want_exact, want_blind = _brute_posteriors(keys, pi, V, kind)
        np.testing.assert_allclose(batch.posterior[b].numpy(), want_exact, atol=1e-12)  # tolerance: exact rationals
        np.testing.assert_allclose(blind[b].numpy(), want_blind, atol=1e-12)  # tolerance: exact rationals


@pytest.mark.parametrize("layout", binding.LAYOUTS)
def test_tokens_reveal_each_pair_after_its_key(layout):
    V, L = 4, 6
    batch = binding.sample_binding_batch(8, V, L, layout=layout, generator=torch.Generator().manual_seed(0))
    assert batch.tokens.shape == (8, binding.sequence_length(L))
    assert torch.equal(batch.tokens[:, 0::2], batch.keys)
    shown = batch.tokens[:, 1::2]
    if layout == "pair":
        assert torch.equal((shown - V) // V, batch.keys[:, :-1]) and torch.equal((shown - V) % V, batch.targets[:, :-1])
    else:
        assert torch.equal(shown - V, batch.targets[:, :-1])
    assert batch.tokens.max() < binding.vocab_size(V, layout)
    assert torch.equal(batch.targets, batch.value_map.gather(1, batch.keys))


def test_answer_source_is_the_pair_after_the_keys_last_occurrence():
    keys = torch.tensor([[1, 2, 1, 1, 0]])
    assert binding.answer_source_positions(keys).tolist() == [[-1, -1, 1, 5, -1]]
    batch = binding.sample_binding_batch(50, 5, 8, generator=torch.Generator().manual_seed(1))
    src = binding.answer_source_positions(batch.keys)
    assert torch.equal(src >= 0, batch.repeated)
    b, t = torch.nonzero(src >= 0, as_tuple=True)
    pair = batch.tokens[b, src[b, t]]
    assert torch.equal((pair - 5) % 5, batch.targets[b, t])  # the source token holds the answer


@pytest.mark.parametrize("kind", binding.VALUE_MAPS)
def test_context_blind_level_matches_enumeration_of_every_key_sequence(kind):
    V, L = 4, 4
    total = 0.0
    for keys in itertools.product(range(V), repeat=L):
        for t, key in enumerate(keys):
            seen = set(keys[:t])
            if key in seen:
                total += math.log2(V)
            elif kind == "bijection":
                total += math.log2(V) - math.log2(V - len(seen))
    want = total / (V**L * L)
    assert abs(binding.context_blind_kl_bits(V, L, kind) - want) < 1e-12


def test_repeat_probability_is_the_share_of_repeated_keys():
    V, L = 6, 9
    batch = binding.sample_binding_batch(20_000, V, L, generator=torch.Generator().manual_seed(2))
    measured = batch.repeated.double().mean(0).numpy()
    expected = binding.repeat_probability(V, L)
    assert np.all(np.abs(measured - expected) < 5 * np.sqrt(expected * (1 - expected) / 20_000) + 1e-12)


@pytest.mark.parametrize("bad", [dict(V=1, L=3), dict(V=4, L=0), dict(V=4, L=3, layout="x"),
                                 dict(V=4, L=3, value_map="y"), dict(V=4.0, L=3)])
def test_bad_sizes_are_refused(bad):
    with pytest.raises(ValueError):
        binding.check_sizes(**bad)
