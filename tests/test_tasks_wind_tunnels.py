"""The wind tunnels behind one interface (tasks.wind_tunnels): sizes validated, batches with exact posteriors, the loss."""

from __future__ import annotations

import pytest
import torch

from attention_dynamics.book.nbcompare import assert_book_close
from attention_dynamics.tasks import wind_tunnels as tunnels

SMALL_TASKS = [
    tunnels.WindTunnel.make("bijection", V=5, L=4),
    tunnels.WindTunnel.make("hmm", n_states=3, n_symbols=2, length=6),
    tunnels.WindTunnel.make("binding", n_pairs=3, n_queries=2, n_keys=5, n_values=4),
]


def test_task_sizes_are_validated():
    with pytest.raises(ValueError, match="unknown task"):
        tunnels.WindTunnel.make("copying", n=3)
    with pytest.raises(ValueError, match="needs sizes"):
        tunnels.WindTunnel.make("bijection", V=5)
    with pytest.raises(ValueError):
        tunnels.WindTunnel.make("bijection", V=5, L=6)
    with pytest.raises(ValueError):
        tunnels.WindTunnel.make("binding", n_pairs=4, n_queries=5, n_keys=6, n_values=3)


@pytest.mark.parametrize("task", SMALL_TASKS, ids=lambda t: t.name)
def test_batches_have_consistent_shapes_and_exact_posteriors(task):
    batch = task.sample(7, generator=torch.Generator().manual_seed(0))
    assert batch.inputs.shape[:2] == (7, task.sequence_length)
    P = len(batch.positions)
    assert batch.posterior.shape == (7, P, task.n_out)
    assert_book_close(batch.posterior.sum(-1), torch.ones(7, P, dtype=torch.float64))
    if batch.targets is not None:  # the sampled answer is always possible under the posterior
        assert (batch.posterior.gather(2, batch.targets[..., None]) > 0).all()


@pytest.mark.parametrize("task", SMALL_TASKS, ids=lambda t: t.name)
def test_task_loss_is_cross_entropy_against_the_posterior(task):
    batch = task.sample(5, generator=torch.Generator().manual_seed(1))
    logits = torch.randn(5, len(batch.positions), task.n_out, dtype=torch.float64)
    log_q = torch.log_softmax(logits, -1)
    assert_book_close(tunnels.loss_from_logits(logits, batch), -(batch.posterior * log_q).sum(-1).mean())
    if task.name == "binding":  # a one-hot posterior: the ordinary cross-entropy of the answer
        assert_book_close(tunnels.loss_from_logits(logits, batch), -log_q.gather(2, batch.targets[..., None]).mean())


def test_longmem_tunnel_draws_very_sticky_chains_with_weak_emissions_and_their_filter():
    from attention_dynamics.tasks import hmm

    task = tunnels.WindTunnel.make("hmm_longmem", n_states=5, n_symbols=5, length=6)
    assert task.self_transition == tunnels.LONGMEM_SELF_TRANSITION == 0.95
    assert task.emission_uniform_share == tunnels.LONGMEM_EMISSION_UNIFORM_SHARE == 0.5
    batch = task.sample(50, generator=torch.Generator().manual_seed(0))
    T, E, obs = batch.extra["transition"], batch.extra["emission"], batch.extra["observations"]
    assert bool((torch.diagonal(T, dim1=-2, dim2=-1) >= 0.95).all())
    assert float(E.min()) >= 0.5 / 5 - 1e-12 and float(E.max()) <= 0.5 + 0.1 + 1e-12
    assert_book_close(batch.posterior, hmm.forward_filter(T, E, obs))
    assert task.input_dim == hmm.hmm_input_dim(5, 5) and task.n_out == 5


@pytest.mark.parametrize("base", tunnels.FORMAT_TUNNELS)
def test_every_format_carries_the_same_hmms_on_the_grid_with_their_exact_filter(base):
    from attention_dynamics.tasks import hmm

    batches = {fmt: tunnels.FormattedHMMTunnel(base, fmt, 5, 5, 6).sample(12, generator=torch.Generator().manual_seed(2))
               for fmt in hmm.INPUT_FORMATS}
    ref = batches["every_step"]
    T, E, obs = ref.extra["transition"], ref.extra["emission"], ref.extra["observations"]
    for fmt, b in batches.items():
        for name in ("transition", "emission", "observations"):
            assert torch.equal(b.extra[name], ref.extra[name]), (fmt, name)
        assert torch.equal(b.posterior, hmm.forward_filter(T, E, obs))
    for M in (T, E):  # on the 0.01 grid, rows stochastic
        assert_book_close(M * 100, (M * 100).round(), rtol=0, atol=1e-9)
        assert_book_close(M.sum(-1), torch.ones(M.shape[:-1], dtype=torch.float64), rtol=0)
    if base == "hmm_sticky":  # still sticky after the rounding
        assert bool((torch.diagonal(T, dim1=-2, dim2=-1) >= 0.7 - 0.03).all())
    header = batches["header"]
    assert torch.equal(header.inputs[:, header.positions] - 105, obs)  # the scored positions hold o_t
    assert torch.equal(batches["first_step"].positions, torch.arange(obs.shape[1]))


def test_formats_reject_unknown_names():
    with pytest.raises(ValueError, match="input_format"):
        tunnels.FormattedHMMTunnel("hmm", "sideways", 5, 5, 4)
    with pytest.raises(ValueError, match="base"):
        tunnels.FormattedHMMTunnel("bijection", "header", 5, 5, 4)
