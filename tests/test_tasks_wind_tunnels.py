"""The wind tunnels behind one interface (tasks.wind_tunnels): sizes validated, batches with exact posteriors, the loss."""

from __future__ import annotations

import pytest
import torch

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
    torch.testing.assert_close(batch.posterior.sum(-1), torch.ones(7, P, dtype=torch.float64))
    if batch.targets is not None:  # the sampled answer is always possible under the posterior
        assert (batch.posterior.gather(2, batch.targets[..., None]) > 0).all()


@pytest.mark.parametrize("task", SMALL_TASKS, ids=lambda t: t.name)
def test_task_loss_is_cross_entropy_against_the_posterior(task):
    batch = task.sample(5, generator=torch.Generator().manual_seed(1))
    logits = torch.randn(5, len(batch.positions), task.n_out, dtype=torch.float64)
    log_q = torch.log_softmax(logits, -1)
    torch.testing.assert_close(tunnels.loss_from_logits(logits, batch), -(batch.posterior * log_q).sum(-1).mean())
    if task.name == "binding":  # a one-hot posterior: the ordinary cross-entropy of the answer
        torch.testing.assert_close(tunnels.loss_from_logits(logits, batch), -log_q.gather(2, batch.targets[..., None]).mean())
