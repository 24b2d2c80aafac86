"""Any family trained and evaluated on any tunnel (training.families): determinism, metrics, the grid in workers."""

from __future__ import annotations

import numpy as np
import pytest

from attention_dynamics.book.nbcompare import assert_book_close
from attention_dynamics.tasks import wind_tunnels as tunnels
from attention_dynamics.training import families

SMALL_TASKS = [
    tunnels.WindTunnel.make("bijection", V=5, L=4),
    tunnels.WindTunnel.make("hmm", n_states=3, n_symbols=2, length=6),
    tunnels.WindTunnel.make("binding", n_pairs=3, n_queries=2, n_keys=5, n_values=4),
]


def test_training_is_deterministic_and_returns_finite_metrics():
    task = SMALL_TASKS[2]
    kw = dict(family="lstm", task=task, target_params=3_000, steps=3, batch_size=4, lr=1e-3, seed=5,
              eval_sequences=8, eval_seed=6, keep_state=True)
    a, b = families.train_and_evaluate(**kw), families.train_and_evaluate(**kw)
    np.testing.assert_array_equal(a.losses, b.losses)
    assert a.metrics == b.metrics and 0 <= a.metrics["accuracy"] <= 1
    assert set(a.metrics) == {"entropy_mae_bits", "curve_mae_bits", "kl_bits", "accuracy"}
    rebuilt = a.model()
    batch = families.evaluation_batch(task, 8, 6)
    assert families.evaluate(rebuilt, batch) == a.metrics


@pytest.mark.slow
def test_compare_architectures_runs_the_grid_on_two_processes():
    results = families.compare_architectures(SMALL_TASKS[:1], families=("transformer", "mlp_blind"), target_params=3_000,
                                         steps=2, batch_size=4, lr=1e-3, seed=0, eval_sequences=8, processes=2)
    assert set(results) == {("transformer", "bijection"), ("mlp_blind", "bijection")}
    serial = families.train_and_evaluate(family="mlp_blind", task=SMALL_TASKS[0], target_params=3_000, steps=2,
                                     batch_size=4, lr=1e-3, seed=0, eval_sequences=8,
                                     eval_seed=families.evaluation_seed(0, 0))
    assert results[("mlp_blind", "bijection")].metrics == serial.metrics  # same job, same numbers in a worker


def test_train_and_measure_is_train_and_evaluate_and_its_curve_the_kl_on_each_batch():
    from attention_dynamics.chapters.architectures import sticky_hmm

    task = tunnels.WindTunnel.make("hmm_sticky", n_states=3, n_symbols=3, length=5)
    eval_batch = families.evaluation_batch(task, 32, 11)
    kwargs = {"target_params": 2000, "steps": 6, "batch_size": 8, "lr": 1e-3, "seed": 3}
    ours = families.train_and_measure("lstm", task, eval_batch=eval_batch, **kwargs)
    theirs = families.train_and_evaluate(family="lstm", task=task, eval_sequences=32, eval_seed=11, **kwargs)
    assert_book_close(ours["metrics"]["kl_bits"], theirs.metrics["kl_bits"], rtol=1e-6)
    assert_book_close(ours["loss_curve_nats"], theirs.losses, rtol=1e-6)
    curve = sticky_hmm.kl_curve_bits(theirs.losses, task, batch_size=8, seed=3)  # batches drawn again, independently
    assert_book_close(ours["kl_curve_bits"], curve, rtol=1e-6, atol=1e-9)
    assert families.curve_blocks(np.arange(10.0), 5) == [0.5, 2.5, 4.5, 6.5, 8.5]
