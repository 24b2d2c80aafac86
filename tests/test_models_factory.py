"""The parameter-matched model families (models.factory): every family on every tunnel at a matched size."""

from __future__ import annotations

import math

import pytest
import torch

from attention_dynamics.models import count_parameters, factory, registry
from attention_dynamics.tasks import wind_tunnels as tunnels

SMALL_TASKS = [
    tunnels.WindTunnel.make("bijection", V=5, L=4),
    tunnels.WindTunnel.make("hmm", n_states=3, n_symbols=2, length=6),
    tunnels.WindTunnel.make("binding", n_pairs=3, n_queries=2, n_keys=5, n_values=4),
]


@pytest.mark.parametrize("task", SMALL_TASKS, ids=lambda t: t.name)
@pytest.mark.parametrize("family", factory.FAMILIES)
def test_every_family_builds_for_every_task_with_matched_parameters(family, task):
    target = 20_000
    model = factory.build_matched_model(family, task, target)
    n = count_parameters(model)
    assert 0.75 * target <= n <= 1.25 * target, (family, task.name, n)
    batch = task.sample(2, generator=torch.Generator().manual_seed(2))
    assert model(batch.inputs).shape == (2, task.sequence_length, task.n_out)


def test_matched_width_is_the_closest_on_its_grid():
    task = SMALL_TASKS[0]
    width = factory.matched_width("lstm", task, 30_000)
    counts = {w: count_parameters(factory.build_model("lstm", task, w)) for w in registry.family("lstm").widths if w <= width + 40}
    best = min(counts, key=lambda w: abs(math.log(counts[w] / 30_000)))
    assert width == best
    with pytest.raises(ValueError, match="unknown model family"):
        factory.build_model("rnn", task, 8)
