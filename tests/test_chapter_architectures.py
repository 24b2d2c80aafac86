"""Chapter 7's experiment module: tasks, matched models, the routing law beyond attention, state clustering."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch
from sklearn.metrics.cluster import contingency_matrix

from attention_dynamics import gradients
from attention_dynamics.diagnostics import routing_fit, state_clusters
from attention_dynamics.experiments import architectures as arch
from attention_dynamics.experiments import architectures_report as report
from attention_dynamics.models import factory, routing
from attention_dynamics.tasks import wind_tunnels as tunnels
from attention_dynamics import calibration
from attention_dynamics.models import count_parameters
from attention_dynamics.models.mamba import MambaSequenceModel, forward_with_explicit_routing
from attention_dynamics.tasks import bijection, hmm

SMALL_TASKS = [
    tunnels.WindTunnel.make("bijection", V=5, L=4),
    tunnels.WindTunnel.make("hmm", n_states=3, n_symbols=2, length=6),
    tunnels.WindTunnel.make("binding", n_pairs=3, n_queries=2, n_keys=5, n_values=4),
]


# ---------------------------------------------------------------------------- tasks and models


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
    counts = {w: count_parameters(factory.build_model("lstm", task, w)) for w in factory.WIDTH_GRID["lstm"] if w <= width + 40}
    best = min(counts, key=lambda w: abs(math.log(counts[w] / 30_000)))
    assert width == best
    with pytest.raises(ValueError, match="unknown model family"):
        factory.build_model("rnn", task, 8)


def test_training_is_deterministic_and_returns_finite_metrics():
    task = SMALL_TASKS[2]
    kw = dict(family="lstm", task=task, target_params=3_000, steps=3, batch_size=4, lr=1e-3, seed=5,
              eval_sequences=8, eval_seed=6, keep_state=True)
    a, b = arch.train_and_evaluate(**kw), arch.train_and_evaluate(**kw)
    np.testing.assert_array_equal(a.losses, b.losses)
    assert a.metrics == b.metrics and 0 <= a.metrics["accuracy"] <= 1
    assert set(a.metrics) == {"entropy_mae_bits", "curve_mae_bits", "kl_bits", "accuracy"}
    rebuilt = a.model()
    batch = arch.evaluation_batch(task, 8, 6)
    assert arch.evaluate(rebuilt, batch) == a.metrics


@pytest.mark.slow
def test_compare_architectures_runs_the_grid_on_two_processes():
    results = arch.compare_architectures(SMALL_TASKS[:1], families=("transformer", "mlp_blind"), target_params=3_000,
                                         steps=2, batch_size=4, lr=1e-3, seed=0, eval_sequences=8, processes=2)
    assert set(results) == {("transformer", "bijection"), ("mlp_blind", "bijection")}
    serial = arch.train_and_evaluate(family="mlp_blind", task=SMALL_TASKS[0], target_params=3_000, steps=2,
                                     batch_size=4, lr=1e-3, seed=0, eval_sequences=8, eval_seed=10_000)
    assert results[("mlp_blind", "bijection")].metrics == serial.metrics  # same job, same numbers in a worker


# ---------------------------------------------------------------------------- reference levels


def test_bijection_context_blind_level_is_the_uniform_predictors_calibration():
    task = tunnels.WindTunnel.make("bijection", V=6, L=5)
    batch = arch.evaluation_batch(task, 50, 0)
    levels = arch.reference_levels([task], {"bijection": batch})
    uniform = torch.full(batch.posterior.shape, -math.log(6), dtype=torch.float64)
    report = calibration.calibration_report(batch.posterior, uniform)
    assert levels.context_blind["bijection"]["entropy_mae_bits"] == pytest.approx(report.entropy_mae_bits, abs=1e-12)
    assert levels.context_blind["bijection"]["kl_bits"] == pytest.approx(report.kl_bits, abs=1e-12)


def _brute_force_posterior_given_current_observation(T, E, obs, t):
    """Return p(s_t | o_t) by summing the joint over every state and observation path (uniform start)."""
    S, O = E.shape
    post = np.zeros(S)
    for states in itertools.product(range(S), repeat=t + 1):
        p = 1.0 / S
        for k in range(1, t + 1):
            p *= T[states[k - 1], states[k]]
        post[states[t]] += p * E[states[t], obs[t]]  # earlier observations are summed out (they sum to 1)
    return post / post.sum()


def test_hmm_context_blind_posterior_matches_brute_force_enumeration():
    transition, emission = hmm.sample_hmm_parameters(3, n_states=3, n_symbols=2, generator=torch.Generator().manual_seed(3))
    _, obs = hmm.sample_hmm_sequences(transition, emission, 4, generator=torch.Generator().manual_seed(4))
    log_q = arch.hmm_context_blind_log_probs(transition, emission, obs)
    for b in range(3):
        for t in range(4):
            expected = _brute_force_posterior_given_current_observation(transition[b].numpy(), emission[b].numpy(),
                                                                        obs[b].numpy(), t)
            np.testing.assert_allclose(log_q[b, t].exp().numpy(), expected, rtol=1e-12)


def test_hmm_context_blind_predictor_is_the_mean_of_the_filter_posterior():
    """Tower property: averaging p(s_t | o_0..o_t) over histories with the same o_t gives the blind posterior."""
    T = torch.tensor([[[0.7, 0.2, 0.1], [0.1, 0.8, 0.1], [0.3, 0.3, 0.4]]], dtype=torch.float64)
    E = torch.tensor([[[0.9, 0.1], [0.2, 0.8], [0.5, 0.5]]], dtype=torch.float64)
    n = 40_000
    _, obs = hmm.sample_hmm_sequences(T.expand(n, 3, 3), E.expand(n, 3, 2), 3, generator=torch.Generator().manual_seed(5))
    post = hmm.forward_filter(T.expand(n, 3, 3), E.expand(n, 3, 2), obs)
    blind = arch.hmm_context_blind_log_probs(T.expand(n, 3, 3), E.expand(n, 3, 2), obs).exp()
    for o in (0, 1):
        sel = obs[:, 2] == o
        np.testing.assert_allclose(post[sel, 2].mean(0).numpy(), blind[sel, 2][0].numpy(), atol=0.01)


def test_verdict_bounds_follow_paper_i():
    task = tunnels.WindTunnel.make("bijection", V=6, L=5)
    levels = arch.reference_levels([task], {"bijection": arch.evaluation_batch(task, 4, 0)})
    level = levels.context_blind["bijection"]["entropy_mae_bits"]
    assert arch.paper_verdict_bounds("lstm", "bijection", levels) == {"lower": None, "upper": 0.1 * level}
    assert arch.paper_verdict_bounds("mlp_blind", "bijection", levels) == {"lower": 0.1 * level, "upper": None}
    assert arch.paper_verdict_bounds("lstm", "binding", levels) == {"lower": None, "upper": 0.9}
    assert arch.paper_verdict_bounds("mlp_window", "binding", levels) == {"lower": None, "upper": None}
    assert arch.paper_verdict_bounds("transformer", "binding", levels) == {"lower": 0.95, "upper": None}
    assert arch.realises_primitive("bijection", {"entropy_mae_bits": 0.05 * level}, levels)
    assert not arch.realises_primitive("binding", {"accuracy": 0.5}, levels)


# ---------------------------------------------------------------------------- the routing law beyond attention


@pytest.mark.parametrize("score_function", routing.SCORE_FUNCTIONS)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_softmax_content_routing_gradient_has_the_advantage_form(score_function, seed):
    """Whatever differentiable function of content the logits are, ∂L/∂s = alpha ⊙ (b − E_alpha[b])."""
    torch.manual_seed(seed)
    router = routing.ContentRouter(6, score_function=score_function).double()
    x = torch.randn(3, 7, 6, dtype=torch.float64, generator=torch.Generator().manual_seed(seed))
    y = torch.randint(0, 5, (3, 7), generator=torch.Generator().manual_seed(seed + 10))
    autograd_grad, law, alpha, b = routing_fit.softmax_routing_gradients(router, x, y)
    assert autograd_grad.abs().max() > 1e-4  # a non-trivial gradient
    torch.testing.assert_close(autograd_grad, law, rtol=1e-10, atol=1e-14)
    torch.testing.assert_close(law.sum(-1), torch.zeros(3, 7, dtype=torch.float64), rtol=0, atol=1e-15)
    fit = routing_fit.advantage_form_fit(autograd_grad, alpha, b)
    assert fit.r2 == pytest.approx(1.0, abs=1e-12)


def test_advantage_fit_matches_a_per_row_least_squares_computed_independently():
    gen = torch.Generator().manual_seed(7)
    w = torch.randn(4, 6, 6, dtype=torch.float64, generator=gen).tril()  # signed, unnormalised routing weights
    grad_w = torch.randn(4, 6, 6, dtype=torch.float64, generator=gen)
    G = w * grad_w
    alpha = w.abs() / w.abs().sum(-1, keepdim=True)
    fit = routing_fit.advantage_form_fit(G, alpha, torch.sign(w) * grad_w)
    residual = total = 0.0
    for row_w, row_g in zip(w.reshape(-1, 6).numpy(), grad_w.reshape(-1, 6).numpy()):
        m = row_w != 0
        g = row_w[m] * row_g[m]
        a = np.abs(row_w[m]) / np.abs(row_w[m]).sum()
        bt = np.sign(row_w[m]) * row_g[m]
        A = a * (bt - (a * bt).sum())
        if np.any(A != 0):
            lam, *_ = np.linalg.lstsq(A[:, None], g, rcond=None)
            residual += ((g - lam[0] * A) ** 2).sum()
        else:
            residual += (g ** 2).sum()
        total += (g ** 2).sum()
    assert fit.r2 == pytest.approx(1 - residual / total, abs=1e-12)
    assert 0 < fit.r2 < 1


def test_advantage_fit_is_one_when_the_gain_term_vanishes_and_less_when_it_does_not():
    """G = Z alpha (b − E b) + Z alpha E b: without the gain term E_alpha[b] the fit is perfect."""
    gen = torch.Generator().manual_seed(8)
    alpha = torch.softmax(torch.randn(5, 8, dtype=torch.float64, generator=gen), -1)
    b = torch.randn(5, 8, dtype=torch.float64, generator=gen)
    b_centred = b - (alpha * b).sum(-1, keepdim=True)
    assert routing_fit.advantage_form_fit(3.0 * alpha * b_centred, alpha, b_centred).r2 == pytest.approx(1.0, abs=1e-12)
    shifted = b_centred + 5.0  # a large common gain: mostly unexplained
    assert routing_fit.advantage_form_fit(alpha * shifted, alpha, shifted).r2 < 0.5


def test_mamba_advantage_fit_uses_the_gradient_with_respect_to_log_weights():
    """Differentiate through ℓ = ln|w| explicitly and compare with the fit's input G = w ⊙ ∂L/∂w."""
    torch.manual_seed(0)
    task = SMALL_TASKS[2]
    model = MambaSequenceModel(n_out=task.n_out, vocab_size=task.vocab_size, input_dim=task.input_dim, d_model=8,
                               n_layers=2, d_state=4).double()
    batch = task.sample(3, generator=torch.Generator().manual_seed(9))
    batch.inputs = batch.inputs.double()  # binding features, float64 like the model
    fit = routing_fit.mamba_advantage_fit(model, batch, 1, sample=10**6)
    logits, routing = forward_with_explicit_routing(model, batch.inputs, 1)
    loss = tunnels.loss_from_logits(logits[:, batch.positions], batch)
    (grad_w,) = torch.autograd.grad(loss, routing.weights)
    w = routing.weights.detach()
    ell = w.abs().clamp_min(1e-300).log().requires_grad_(True)
    rebuilt = torch.sign(w) * ell.exp()  # w as a function of its log-magnitude
    (grad_ell,) = torch.autograd.grad((rebuilt * grad_w).sum(), ell)  # chain rule through the same ∂L/∂w
    visible = w != 0
    np.testing.assert_allclose(np.sort(fit.true), np.sort(grad_ell[visible].numpy()), rtol=1e-9, atol=1e-300)
    assert 0 <= fit.r2 <= 1


# ---------------------------------------------------------------------------- clustering


def test_cluster_purity_against_sklearns_contingency_matrix():
    rng = np.random.default_rng(0)
    clusters, labels = rng.integers(0, 5, 300), rng.integers(0, 4, 300)
    expected = contingency_matrix(labels, clusters).max(axis=0).sum() / 300
    assert state_clusters.cluster_purity(clusters, labels) == pytest.approx(expected)
    assert state_clusters.cluster_purity(labels, labels) == 1.0
    with pytest.raises(ValueError):
        state_clusters.cluster_purity(clusters[:3], labels)


def test_state_clustering_finds_separated_clusters_and_chance_is_low():
    rng = np.random.default_rng(1)
    labels = rng.integers(0, 5, 500)
    centres = rng.normal(size=(5, 8)) * 10
    states = torch.as_tensor(centres[labels] + rng.normal(size=(500, 8)))
    posterior = torch.as_tensor(np.eye(5)[labels] * 0.8 + 0.04)
    result = state_clusters.state_clustering(states, posterior, seed=0)
    assert result.purity == 1.0 and result.posterior_purity == 1.0
    assert result.chance < 0.4
    assert result.coords.shape == (500, 2)


# ---------------------------------------------------------------------------- table, claims, figures


def test_bayes_floor_of_the_bijection_is_the_closed_form():
    task = tunnels.WindTunnel.make("bijection", V=7, L=6)
    floors = arch.bayes_floor_nats({"bijection": arch.evaluation_batch(task, 20, 1)})
    assert floors["bijection"] == pytest.approx(bijection.bayes_ce_floor_nats(7, 6), abs=1e-12)


def _fake_results(values: dict[str, dict[str, float]]) -> dict:
    out = {}
    for family in factory.FAMILIES:
        for t in SMALL_TASKS:
            metrics = {"entropy_mae_bits": 0.5, "curve_mae_bits": 0.5, "kl_bits": 0.5, "accuracy": 0.5}
            metrics.update(values.get(f"{family}/{t.name}", {}))
            out[(family, t.name)] = arch.RunResult(family=family, task=t, seed=0, width=8, n_params=1000, steps=5,
                                                   metrics=metrics, losses=np.zeros(5))
    return out


def test_table_claims_encode_paper_i_verdicts_as_bounds():
    batches = {t.name: arch.evaluation_batch(t, 16, 0) for t in SMALL_TASKS}
    levels = arch.reference_levels(SMALL_TASKS, batches)
    tiny = 0.01 * levels.context_blind["bijection"]["entropy_mae_bits"]
    results = _fake_results({"lstm/bijection": {"entropy_mae_bits": tiny}, "transformer/binding": {"accuracy": 1.0},
                             "lstm/binding": {"accuracy": 0.95}})
    recorded = arch.record_table_claims(results, levels, params={"seed": 0},
                                        explanations={"architectures.binding_accuracy_lstm": "it memorised"})
    assert len(recorded) == 4 * len(factory.FAMILIES)
    assert recorded["architectures.bijection_mae_bits_lstm"].status == "pass"
    assert recorded["architectures.binding_accuracy_transformer"].status == "pass"
    assert recorded["architectures.binding_accuracy_transformer"].paper_value == 1.0
    lstm_binding = recorded["architectures.binding_accuracy_lstm"]
    assert lstm_binding.status == "fail" and lstm_binding.explanation == "it memorised"
    assert recorded["architectures.bijection_mae_bits_mamba"].status == "fail"  # 0.5 bits is not "realised"
    assert recorded["architectures.bijection_mae_bits_mamba"].explanation  # a default account is always given
    assert recorded["architectures.hmm_kl_bits_mlp_window"].status == "new"
    summary = arch.verdict_summary(results, levels)
    assert summary.count("\n") == len(factory.FAMILIES) - 1 and "differs from Paper I on binding" in summary
    table = arch.results_table(results, levels)
    assert list(table.index)[0].startswith("Bayes") and list(table.index)[-1].startswith("context-blind")
    assert table.shape == (len(factory.FAMILIES) + 2, 8)


def test_pooled_r2_weights_fits_by_their_gradient_norms():
    gen = torch.Generator().manual_seed(3)
    alpha = torch.softmax(torch.randn(2, 6, dtype=torch.float64, generator=gen), -1)
    b1, b2 = torch.randn(2, 6, dtype=torch.float64, generator=gen), torch.randn(2, 6, dtype=torch.float64, generator=gen)
    f1, f2 = routing_fit.advantage_form_fit(alpha * b1, alpha, b1), routing_fit.advantage_form_fit(10 * alpha * b2, alpha, b2)
    both = routing_fit.advantage_form_fit(torch.cat([alpha * b1, 10 * alpha * b2]), torch.cat([alpha, alpha]), torch.cat([b1, b2]))
    assert routing_fit.pooled_r2([f1, f2]) == pytest.approx(both.r2, abs=1e-12)


def test_scan_reproduction_error_is_rounding_level_and_final_states_match_the_read_out():
    task = SMALL_TASKS[2]
    torch.manual_seed(1)
    mamba = factory.build_model("mamba", task, 8)
    batch = task.sample(3, generator=torch.Generator().manual_seed(4))
    assert routing_fit.scan_reproduction_error(mamba, batch.inputs) < 1e-12
    for family in ("transformer", "mamba", "lstm"):
        model = factory.build_model(family, task, 8).eval()
        states = state_clusters.final_layer_states(model, batch.inputs)
        torch.testing.assert_close(model.head(states), model(batch.inputs))
    with pytest.raises(ValueError, match="no final-layer states"):
        state_clusters.final_layer_states(factory.build_model("mlp_blind", task, 8), batch.inputs)


def test_figures_draw_without_error():
    import matplotlib

    matplotlib.use("Agg")
    batches = {t.name: arch.evaluation_batch(t, 8, 0) for t in SMALL_TASKS}
    results = _fake_results({})
    fig, _ = report.plot_training_losses(results, SMALL_TASKS, arch.bayes_floor_nats(batches))
    gen = torch.Generator().manual_seed(0)
    alpha = torch.softmax(torch.randn(3, 5, dtype=torch.float64, generator=gen), -1)
    b = torch.randn(3, 5, dtype=torch.float64, generator=gen)
    fit = routing_fit.advantage_form_fit(alpha * b, alpha, b)
    fig, _ = report.plot_advantage_fits((fit.true, fit.fitted), fit, {"trained": [0.5, 0.6]}, ["layer 1", "layer 2"])
    rng = np.random.default_rng(0)
    clustering = state_clusters.state_clustering(torch.as_tensor(rng.normal(size=(60, 4))),
                                       torch.softmax(torch.as_tensor(rng.normal(size=(60, 5))), -1))
    fig, _ = report.plot_state_clusters(clustering, title="random")
    levels = arch.reference_levels(SMALL_TASKS, batches)
    for (family, task), run in results.items():
        run.kl_by_position = np.linspace(0.1, 0.2, len(batches[task].positions))
    fig, ax = report.plot_hmm_kl_by_position(results, levels)
    assert len(ax.lines) == len(factory.FAMILIES) + 1


def test_permute_within_rows_permutes_only_the_visible_entries_of_each_row():
    g = torch.Generator().manual_seed(0)
    values = torch.arange(2 * 5 * 5, dtype=torch.float64).reshape(2, 5, 5)
    visible = torch.ones(5, 5, dtype=torch.bool).tril().expand(2, 5, 5)
    out = routing_fit.permute_within_rows(values, visible, g)
    assert torch.equal(out[~visible], values[~visible]), "masked entries must stay"
    for b in range(2):
        for i in range(5):
            kept = visible[b, i]
            assert sorted(out[b, i][kept].tolist()) == sorted(values[b, i][kept].tolist())
    assert not torch.equal(out, values), "a permutation of 2 x 5 rows should move something"


def test_the_null_fit_breaks_an_exact_advantage_form():
    """A gradient that is exactly of advantage form: R² = 1; with b permuted within rows, much less."""
    g = torch.Generator().manual_seed(1)
    T = 12
    visible = torch.ones(T, T, dtype=torch.bool).tril()
    logits = torch.randn(3, T, T, generator=g, dtype=torch.float64).masked_fill(~visible, float("-inf"))
    alpha = torch.softmax(logits, -1)
    b = torch.randn(3, T, T, generator=g, dtype=torch.float64) * visible
    exact = gradients.advantage_routing_gradient(alpha, b)
    assert routing_fit.advantage_form_fit(exact, alpha, b).r2 == pytest.approx(1.0, abs=1e-12)
    null = routing_fit.advantage_form_fit(exact, alpha, routing_fit.permute_within_rows(b, alpha > 0, g))
    assert null.r2 < 0.5


def test_a_does_not_realise_row_is_undecided_while_the_positive_control_fails():
    """LSTM on the HMM: Paper I says it does not realise transport; if our transformer does not either, the
    row passing says nothing about the LSTM, so it is undecided; once the transformer realises it, decided."""
    from types import SimpleNamespace

    levels = arch.ReferenceLevels(bayes={"hmm": {"kl_bits": 0.0, "entropy_mae_bits": 0.0}},
                                  context_blind={"hmm": {"kl_bits": 0.03, "entropy_mae_bits": 0.08}})

    def run(kl):
        return SimpleNamespace(metrics={"kl_bits": kl, "entropy_mae_bits": 2 * kl}, n_params=1, width=1, steps=1)

    threshold = arch.realised_threshold("hmm", "kl_bits", levels)
    assert threshold == pytest.approx(arch.TRANSPORT_FRACTION_OF_BLIND * 0.03)
    for transformer_kl, lstm_status in ((0.05, "undecided"), (0.5 * threshold, "pass")):
        results = {("transformer", "hmm"): run(transformer_kl), ("lstm", "hmm"): run(0.06)}
        assert arch.positive_control_fails("hmm", results, levels) == (lstm_status == "undecided")
        recorded = arch.record_table_claims(results, levels, params={})
        assert recorded["architectures.hmm_kl_bits_lstm"].status == lstm_status
        assert recorded["architectures.hmm_kl_bits_transformer"].status == ("fail" if transformer_kl > threshold
                                                                             else "pass")


def test_a_row_that_would_fail_is_not_decided_without_a_longer_run_and_a_passing_row_is_decided():
    from types import SimpleNamespace

    levels = arch.ReferenceLevels(bayes={"hmm": {"kl_bits": 0.0, "entropy_mae_bits": 0.0}},
                                  context_blind={"hmm": {"kl_bits": 0.03, "entropy_mae_bits": 0.08}})
    steps = np.arange(1000)
    falling = 1.0 + 0.5 / (1 + steps / 100)  # excess over the floor (1 nat) still falling
    for kl, status in ((0.05, "undecided"), (0.001, "pass")):
        run = SimpleNamespace(metrics={"kl_bits": kl, "entropy_mae_bits": 2 * kl}, n_params=1, width=1, steps=1000,
                              losses=falling)
        recorded = arch.record_table_claims({("transformer", "hmm"): run}, levels, params={}, floors={"hmm": 1.0})
        claim = recorded["architectures.hmm_kl_bits_transformer"]
        assert claim.status == status
        assert status == "pass" or "fell by" in claim.explanation
    without_floors = arch.record_table_claims({("transformer", "hmm"): run.__class__(**{**vars(run), "metrics": {
        "kl_bits": 0.05, "entropy_mae_bits": 0.1}})}, levels, params={})
    assert without_floors["architectures.hmm_kl_bits_transformer"].status == "fail"  # no floors: the old rule


def test_a_claim_stated_at_a_longer_run_is_decided_by_that_run():
    """A seed mean from a 4x longer run decides a failing row (the longer run is the evidence); without it the
    same numbers are only "not decided at this scale"."""
    from types import SimpleNamespace

    levels = arch.ReferenceLevels(bayes={"binding": {"accuracy": 1.0}}, context_blind={"binding": {"accuracy": 0.0625}})
    run = SimpleNamespace(metrics={"accuracy": 0.7}, n_params=1, width=1, steps=800, losses=np.linspace(2.0, 0.5, 800))
    ci = {"mean": 0.7, "low": 0.6, "high": 0.8, "n": 5, "seeds": [0, 1, 2, 3, 4]}
    cid = "architectures.binding_accuracy_mamba"
    kwargs = dict(params={}, floors={"binding": 0.0}, seed_means={cid: ci})
    assert arch.record_table_claims({("mamba", "binding"): run}, levels, **kwargs)[cid].status == "undecided"
    stated = arch.record_table_claims({("mamba", "binding"): run}, levels, longer_steps={cid: 3200}, **kwargs)[cid]
    assert stated.status == "fail" and stated.params["steps"] == 3200 and stated.params["steps_of_the_grid"] == 800
    assert (stated.interval[0], stated.interval[1]) == (0.6, 0.8)
    straddling = {**ci, "high": 0.95}
    assert arch.record_table_claims({("mamba", "binding"): run}, levels, longer_steps={cid: 3200},
                                    **{**kwargs, "seed_means": {cid: straddling}})[cid].status == "undecided"
    with pytest.raises(ValueError, match="seed mean"):
        arch.record_table_claims({("mamba", "binding"): run}, levels, params={}, longer_steps={cid: 3200})


def _spread(short: list[float], longer: list[float] | None) -> dict:
    from attention_dynamics.experiments import seed_spread

    seeds = list(range(len(short)))
    runs = {"binding_mamba": [{"seed": s, "accuracy": a, "loss_before": 1.0, "loss_after": 0.9}
                              for s, a in zip(seeds, short)]}
    intervals = {"binding_accuracy_mamba": seed_spread.t_interval(short)}
    if longer is not None:
        runs["binding_mamba_longer"] = [{"seed": s, "accuracy": a, "loss_before": 0.5, "loss_after": 0.5, "steps": 20,
                                         "cpu_seconds": 60.0,
                                         "loss_curve": [1.0, 0.7, 0.5, 0.5]} for s, a in zip(seeds, longer)]
        intervals["binding_accuracy_mamba_longer"] = seed_spread.t_interval(longer)
    return {"seeds": seeds, "settings": {"binding": {"steps": 5}}, "runs": runs, "intervals": intervals}


@pytest.mark.parametrize("longer, status", [(None, "undecided"), ([0.96, 0.97, 0.98, 0.97, 0.99], "pass"),
                                            ([0.70, 0.75, 0.72, 0.74, 0.71], "fail")])
def test_mambas_binding_is_stated_at_the_longest_run_made(longer, status, monkeypatch):
    from scipy import stats as scipy_stats

    captured = {}
    original = report.record_table_claims

    def capture(*args, **kwargs):
        captured.update(original(*args, **kwargs))
        return captured

    monkeypatch.setattr(report, "record_table_claims", capture)
    batches = {t.name: arch.evaluation_batch(t, 16, 0) for t in SMALL_TASKS}
    levels = arch.reference_levels(SMALL_TASKS, batches)
    results = _fake_results({"transformer/binding": {"accuracy": 1.0}})
    short = [0.77, 0.86, 0.75, 0.57, 0.82]
    report.record_results(results, levels, {"steps": 5, "target_params": 1000}, params={},
                          spread=_spread(short, longer), floors=arch.bayes_floor_nats(batches))
    claim = captured["architectures.binding_accuracy_mamba"]
    values = short if longer is None else longer
    low, high = scipy_stats.t.interval(0.95, df=4, loc=np.mean(values), scale=scipy_stats.sem(values))
    assert claim.value == pytest.approx(np.mean(values)) and claim.interval == pytest.approx([low, high])
    assert claim.status == status
    assert claim.params["steps"] == (5 if longer is None else 20)
    if status == "fail":  # decided by the longer run, which the account names with both intervals
        assert "longest run made" in claim.explanation and f"{low:.1%}" in claim.explanation
        assert claim.undecided_because is None


def test_binding_longer_figure_pairs_each_seed_at_both_lengths():
    import matplotlib

    matplotlib.use("Agg")
    spread = _spread([0.77, 0.86, 0.75, 0.57, 0.82], [0.96, 0.97, 0.98, 0.97, 0.99])
    fig, (ax_loss, ax_acc) = report.plot_binding_longer(spread, paper_accuracy=0.978, bag_accuracy=0.3, chance=0.0625)
    assert len(ax_loss.lines) == 2 * 5 + 1  # each seed's curve and its last 20 %, and the chapter's length
    paired = [line for line in ax_acc.lines if line.get_marker() == "o"]
    assert len(paired) == 5 and len(ax_acc.containers) == 2  # one line per seed, two intervals
    assert len([line for line in ax_acc.lines if len(line.get_xdata()) == 2 and line.get_marker() != "o"]) == 4  # levels
    assert "4×" in ax_loss.get_title()
    spread["runs"]["binding_lstm"] = [dict(r) for r in spread["runs"]["binding_mamba"]]
    spread["runs"]["binding_lstm_longer"] = [dict(r) for r in spread["runs"]["binding_mamba_longer"]]
    spread["intervals"]["binding_accuracy_lstm"] = spread["intervals"]["binding_accuracy_mamba"]
    spread["intervals"]["binding_accuracy_lstm_longer"] = spread["intervals"]["binding_accuracy_mamba_longer"]
    fig, (ax_loss, ax_acc) = report.plot_binding_longer(spread, paper_accuracy=0.978, bag_accuracy=0.3, chance=0.0625)
    assert len(ax_loss.lines) == 2 * 2 * 5 + 1 and len(ax_acc.containers) == 4  # both families
    spread["runs"]["binding_lstm_longer"][0]["seed"] = 7
    with pytest.raises(ValueError, match="seeds"):
        report.plot_binding_longer(spread, paper_accuracy=0.978, bag_accuracy=0.3, chance=0.0625)
    with pytest.raises(ValueError, match="no longer binding runs"):
        report.plot_binding_longer(_spread([0.7, 0.8], None), paper_accuracy=0.978, bag_accuracy=0.3, chance=0.0625)


@pytest.mark.parametrize("lstm_longer, status", [([0.35, 0.36, 0.34, 0.35, 0.37], "pass"),
                                                 ([0.95, 0.97, 0.96, 0.98, 0.97], "fail")])
def test_the_lstms_binding_is_stated_at_its_longer_run_against_paper_is_does_not_realise(lstm_longer, status,
                                                                                         monkeypatch):
    from attention_dynamics.experiments import seed_spread

    captured = {}
    original = report.record_table_claims
    monkeypatch.setattr(report, "record_table_claims",
                        lambda *a, **k: captured.update(original(*a, **k)) or captured)
    batches = {t.name: arch.evaluation_batch(t, 16, 0) for t in SMALL_TASKS}
    levels = arch.reference_levels(SMALL_TASKS, batches)
    results = _fake_results({"transformer/binding": {"accuracy": 1.0}, "lstm/binding": {"accuracy": 0.3}})
    spread = _spread([0.77, 0.86, 0.75, 0.57, 0.82], None)
    short = [0.30, 0.31, 0.29, 0.30, 0.32]
    spread["runs"]["binding_lstm"] = [{"seed": s, "accuracy": a, "loss_before": 1, "loss_after": 1}
                                      for s, a in enumerate(short)]
    spread["runs"]["binding_lstm_longer"] = [{"seed": s, "accuracy": a, "loss_before": 1, "loss_after": 0.9, "steps": 20,
                                              "cpu_seconds": 6.0,
                                              "loss_curve": [1.0]} for s, a in enumerate(lstm_longer)]
    spread["intervals"]["binding_accuracy_lstm"] = seed_spread.t_interval(short)
    spread["intervals"]["binding_accuracy_lstm_longer"] = seed_spread.t_interval(lstm_longer)
    report.record_results(results, levels, {"steps": 5, "target_params": 1000}, params={}, spread=spread,
                          floors=arch.bayes_floor_nats(batches))
    claim = captured["architectures.binding_accuracy_lstm"]
    assert claim.value == pytest.approx(np.mean(lstm_longer)) and claim.params["steps"] == 20
    assert claim.upper == arch.REALISED_BINDING_ACCURACY and claim.status == status
    assert status == "pass" or "against what Paper I reports" in claim.explanation
    assert captured["architectures.binding_accuracy_mamba"].params["steps"] == 5  # no longer Mamba run here


def test_verdict_summary_follows_the_claims_and_the_longest_run_made():
    batches = {t.name: arch.evaluation_batch(t, 16, 0) for t in SMALL_TASKS}
    levels = arch.reference_levels(SMALL_TASKS, batches)
    results = _fake_results({"transformer/binding": {"accuracy": 1.0}, "mamba/binding": {"accuracy": 0.75}})
    plain = arch.verdict_summary(results, levels).splitlines()
    mamba = next(line for line in plain if line.startswith("- **Mamba**"))
    assert "differs from Paper I on" in mamba and "binding" in mamba.split("differs from Paper I on")[1]
    statuses = {key: "pass" for key in results}
    statuses[("mamba", "hmm")] = "undecided"
    lines = arch.verdict_summary(results, levels, statuses=statuses,
                                 longer={("mamba", "binding"): (True, 3200)}).splitlines()
    mamba = next(line for line in lines if line.startswith("- **Mamba**"))
    assert "binding (after 3200 steps)" in mamba.split(";")[0]
    assert "not decided on transport (its claim is undecided" in mamba
    assert "binding" not in mamba.split("—")[1].split(";")[0]  # no longer listed as a difference
