"""Chapter 7 (chapters.architectures): the reference levels against brute force, Paper I's verdicts as bounds, the
results table's claims and when a verdict is not decided, binding at the longest run made, the figures."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch

from attention_dynamics.book.nbcompare import assert_book_close
from attention_dynamics.chapters.architectures import figures, report, runs, settings
from attention_dynamics.core import plotting
from attention_dynamics.diagnostics import routing_fit, state_clusters
from attention_dynamics.models import factory, registry
from attention_dynamics.science import calibration, stats
from attention_dynamics.tasks import bijection, hmm, wind_tunnels as tunnels
from attention_dynamics.training import families

SMALL_TASKS = [
    tunnels.WindTunnel.make("bijection", V=5, L=4),
    tunnels.WindTunnel.make("hmm", n_states=3, n_symbols=2, length=6),
    tunnels.WindTunnel.make("binding", n_pairs=3, n_queries=2, n_keys=5, n_values=4),
]


def test_bijection_context_blind_level_is_the_uniform_predictors_calibration():
    task = tunnels.WindTunnel.make("bijection", V=6, L=5)
    batch = families.evaluation_batch(task, 50, 0)
    levels = runs.reference_levels([task], {"bijection": batch})
    uniform = torch.full(batch.posterior.shape, -math.log(6), dtype=torch.float64)
    report = calibration.calibration_report(batch.posterior, uniform)
    assert_book_close(levels.context_blind["bijection"]["entropy_mae_bits"], report.entropy_mae_bits, rtol=0)
    assert_book_close(levels.context_blind["bijection"]["kl_bits"], report.kl_bits, rtol=0)


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
    log_q = runs.hmm_context_blind_log_probs(transition, emission, obs)
    for b in range(3):
        for t in range(4):
            expected = _brute_force_posterior_given_current_observation(transition[b].numpy(), emission[b].numpy(),
                                                                        obs[b].numpy(), t)
            assert_book_close(log_q[b, t].exp().numpy(), expected, rtol=1e-12)


def test_hmm_context_blind_predictor_is_the_mean_of_the_filter_posterior():
    """Tower property: averaging p(s_t | o_0..o_t) over histories with the same o_t gives the blind posterior."""
    T = torch.tensor([[[0.7, 0.2, 0.1], [0.1, 0.8, 0.1], [0.3, 0.3, 0.4]]], dtype=torch.float64)
    E = torch.tensor([[[0.9, 0.1], [0.2, 0.8], [0.5, 0.5]]], dtype=torch.float64)
    n = 40_000
    _, obs = hmm.sample_hmm_sequences(T.expand(n, 3, 3), E.expand(n, 3, 2), 3, generator=torch.Generator().manual_seed(5))
    post = hmm.forward_filter(T.expand(n, 3, 3), E.expand(n, 3, 2), obs)
    blind = runs.hmm_context_blind_log_probs(T.expand(n, 3, 3), E.expand(n, 3, 2), obs).exp()
    for o in (0, 1):
        sel = obs[:, 2] == o
        assert_book_close(post[sel, 2].mean(0), blind[sel, 2][0], rtol=0, atol=0.01)  # a mean over sampled sequences


def test_verdict_bounds_follow_paper_i():
    task = tunnels.WindTunnel.make("bijection", V=6, L=5)
    levels = runs.reference_levels([task], {"bijection": families.evaluation_batch(task, 4, 0)})
    level = levels.context_blind["bijection"]["entropy_mae_bits"]
    assert runs.paper_verdict_bounds("lstm", "bijection", levels) == {"lower": None, "upper": 0.1 * level}
    assert runs.paper_verdict_bounds("mlp_blind", "bijection", levels) == {"lower": 0.1 * level, "upper": None}
    assert runs.paper_verdict_bounds("lstm", "binding", levels) == {"lower": None, "upper": 0.9}
    assert runs.paper_verdict_bounds("mlp_window", "binding", levels) == {"lower": None, "upper": None}
    assert runs.paper_verdict_bounds("transformer", "binding", levels) == {"lower": 0.95, "upper": None}
    assert runs.realises_primitive("bijection", {"entropy_mae_bits": 0.05 * level}, levels)
    assert not runs.realises_primitive("binding", {"accuracy": 0.5}, levels)


def test_bayes_floor_of_the_bijection_is_the_closed_form():
    task = tunnels.WindTunnel.make("bijection", V=7, L=6)
    floors = runs.bayes_floor_nats({"bijection": families.evaluation_batch(task, 20, 1)})
    assert_book_close(floors["bijection"], bijection.bayes_ce_floor_nats(7, 6), rtol=0)


def _fake_results(values: dict[str, dict[str, float]]) -> dict:
    out = {}
    for family in factory.FAMILIES:
        for t in SMALL_TASKS:
            metrics = {"entropy_mae_bits": 0.5, "curve_mae_bits": 0.5, "kl_bits": 0.5, "accuracy": 0.5}
            metrics.update(values.get(f"{family}/{t.name}", {}))
            out[(family, t.name)] = families.RunResult(family=family, task=t, seed=0, width=8, n_params=1000, steps=5,
                                                   metrics=metrics, losses=np.zeros(5))
    return out


def test_table_claims_encode_paper_i_verdicts_as_bounds():
    batches = {t.name: families.evaluation_batch(t, 16, 0) for t in SMALL_TASKS}
    levels = runs.reference_levels(SMALL_TASKS, batches)
    tiny = 0.01 * levels.context_blind["bijection"]["entropy_mae_bits"]
    results = _fake_results({"lstm/bijection": {"entropy_mae_bits": tiny}, "transformer/binding": {"accuracy": 1.0},
                             "lstm/binding": {"accuracy": 0.95}})
    recorded = report.record_table_claims(results, levels, params={"seed": 0},
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
    summary = report.verdict_summary(results, levels)
    assert summary.count("\n") == len(factory.FAMILIES) - 1 and "differs from Paper I on binding" in summary
    table = runs.results_table(results, levels)
    assert list(table.index)[0].startswith("Bayes") and list(table.index)[-1].startswith("context-blind")
    assert table.shape == (len(factory.FAMILIES) + 2, 8)


def test_figures_draw_without_error():
    import matplotlib

    matplotlib.use("Agg")
    batches = {t.name: families.evaluation_batch(t, 8, 0) for t in SMALL_TASKS}
    results = _fake_results({})
    fig = figures.plot_training_losses(results, SMALL_TASKS, runs.bayes_floor_nats(batches))
    plotting.check_figure(fig)
    assert fig.get_size_inches()[0] <= plotting.MAX_FIGURE_WIDTH_IN
    gen = torch.Generator().manual_seed(0)
    alpha = torch.softmax(torch.randn(3, 5, dtype=torch.float64, generator=gen), -1)
    b = torch.randn(3, 5, dtype=torch.float64, generator=gen)
    fit = routing_fit.advantage_form_fit(alpha * b, alpha, b)
    fig = figures.plot_advantage_fits((fit.true, fit.fitted), fit, {"trained": [0.5, 0.6]}, ["layer 1", "layer 2"],
                                      mamba_title="Mamba layer 2")
    plotting.check_figure(fig)
    assert len(fig.axes) == 3 and fig.axes[1].get_title().startswith("Mamba layer 2\n")
    rng = np.random.default_rng(0)
    clustering = state_clusters.state_clustering(torch.as_tensor(rng.normal(size=(60, 4))),
                                       torch.softmax(torch.as_tensor(rng.normal(size=(60, 5))), -1))
    fig = figures.plot_state_clusters(clustering, title="random")
    plotting.check_figure(fig)
    levels = runs.reference_levels(SMALL_TASKS, batches)
    for (family, task), run in results.items():
        run.kl_by_position = np.linspace(0.1, 0.2, len(batches[task].positions))
    fig = figures.plot_hmm_kl_by_position(results, levels)
    plotting.check_figure(fig)  # the legend stays clear of the context-blind line
    ax = fig.axes[0]
    assert len(ax.lines) == len(factory.FAMILIES) + 1
    assert [line.get_color() for line in ax.lines[:-1]] == [registry.family_color(f) for f in factory.FAMILIES]


def test_a_does_not_realise_row_is_undecided_while_the_positive_control_fails():
    """LSTM on the HMM: Paper I says it does not realise transport; if our transformer does not either, the
    row passing says nothing about the LSTM, so it is undecided; once the transformer realises it, decided."""
    from types import SimpleNamespace

    levels = runs.ReferenceLevels(bayes={"hmm": {"kl_bits": 0.0, "entropy_mae_bits": 0.0}},
                                  context_blind={"hmm": {"kl_bits": 0.03, "entropy_mae_bits": 0.08}})

    def run(kl):
        return SimpleNamespace(metrics={"kl_bits": kl, "entropy_mae_bits": 2 * kl}, n_params=1, width=1, steps=1)

    threshold = runs.realised_threshold("hmm", "kl_bits", levels)
    assert_book_close(threshold, settings.TRANSPORT_FRACTION_OF_BLIND * 0.03)
    for transformer_kl, lstm_status in ((0.05, "undecided"), (0.5 * threshold, "pass")):
        results = {("transformer", "hmm"): run(transformer_kl), ("lstm", "hmm"): run(0.06)}
        assert runs.positive_control_fails("hmm", results, levels) == (lstm_status == "undecided")
        recorded = report.record_table_claims(results, levels, params={})
        assert recorded["architectures.hmm_kl_bits_lstm"].status == lstm_status
        assert recorded["architectures.hmm_kl_bits_transformer"].status == ("fail" if transformer_kl > threshold
                                                                             else "pass")


def test_a_row_that_would_fail_is_not_decided_without_a_longer_run_and_a_passing_row_is_decided():
    from types import SimpleNamespace

    levels = runs.ReferenceLevels(bayes={"hmm": {"kl_bits": 0.0, "entropy_mae_bits": 0.0}},
                                  context_blind={"hmm": {"kl_bits": 0.03, "entropy_mae_bits": 0.08}})
    steps = np.arange(1000)
    falling = 1.0 + 0.5 / (1 + steps / 100)  # excess over the floor (1 nat) still falling
    for kl, status in ((0.05, "undecided"), (0.001, "pass")):
        run = SimpleNamespace(metrics={"kl_bits": kl, "entropy_mae_bits": 2 * kl}, n_params=1, width=1, steps=1000,
                              losses=falling)
        recorded = report.record_table_claims({("transformer", "hmm"): run}, levels, params={}, floors={"hmm": 1.0})
        claim = recorded["architectures.hmm_kl_bits_transformer"]
        assert claim.status == status
        assert status == "pass" or "fell by" in claim.explanation
    without_floors = report.record_table_claims({("transformer", "hmm"): run.__class__(**{**vars(run), "metrics": {
        "kl_bits": 0.05, "entropy_mae_bits": 0.1}})}, levels, params={})
    assert without_floors["architectures.hmm_kl_bits_transformer"].status == "fail"  # no floors: the old rule


def test_a_claim_stated_at_a_longer_run_is_decided_by_that_run():
    """A seed mean from a 4x longer run decides a failing row (the longer run is the evidence); without it the
    same numbers are only "not decided at this scale"."""
    from types import SimpleNamespace

    levels = runs.ReferenceLevels(bayes={"binding": {"accuracy": 1.0}}, context_blind={"binding": {"accuracy": 0.0625}})
    run = SimpleNamespace(metrics={"accuracy": 0.7}, n_params=1, width=1, steps=800, losses=np.linspace(2.0, 0.5, 800))
    ci = {"mean": 0.7, "low": 0.6, "high": 0.8, "n": 5, "seeds": [0, 1, 2, 3, 4]}
    cid = "architectures.binding_accuracy_mamba"
    kwargs = dict(params={}, floors={"binding": 0.0}, seed_means={cid: ci})
    assert report.record_table_claims({("mamba", "binding"): run}, levels, **kwargs)[cid].status == "undecided"
    stated = report.record_table_claims({("mamba", "binding"): run}, levels, longer_steps={cid: 3200}, **kwargs)[cid]
    assert stated.status == "fail" and stated.params["steps"] == 3200 and stated.params["steps_of_the_grid"] == 800
    assert (stated.interval[0], stated.interval[1]) == (0.6, 0.8)
    straddling = {**ci, "high": 0.95}
    assert report.record_table_claims({("mamba", "binding"): run}, levels, longer_steps={cid: 3200},
                                    **{**kwargs, "seed_means": {cid: straddling}})[cid].status == "undecided"
    with pytest.raises(ValueError, match="seed mean"):
        report.record_table_claims({("mamba", "binding"): run}, levels, params={}, longer_steps={cid: 3200})


def _spread(short: list[float], longer: list[float] | None) -> dict:
    seeds = list(range(len(short)))
    runs = {"binding_mamba": [{"seed": s, "accuracy": a, "loss_before": 1.0, "loss_after": 0.9}
                              for s, a in zip(seeds, short)]}
    intervals = {"binding_accuracy_mamba": stats.t_interval(short)}
    if longer is not None:
        runs["binding_mamba_longer"] = [{"seed": s, "accuracy": a, "loss_before": 0.5, "loss_after": 0.5, "steps": 20,
                                         "cpu_seconds": 60.0,
                                         "loss_curve": [1.0, 0.7, 0.5, 0.5]} for s, a in zip(seeds, longer)]
        intervals["binding_accuracy_mamba_longer"] = stats.t_interval(longer)
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
    batches = {t.name: families.evaluation_batch(t, 16, 0) for t in SMALL_TASKS}
    levels = runs.reference_levels(SMALL_TASKS, batches)
    results = _fake_results({"transformer/binding": {"accuracy": 1.0}})
    short = [0.77, 0.86, 0.75, 0.57, 0.82]
    report.record_results(results, levels, settings.SETTINGS["fast"].replace(steps=5, target_params=1000), params={},
                          spread=_spread(short, longer), floors=runs.bayes_floor_nats(batches))
    claim = captured["architectures.binding_accuracy_mamba"]
    values = short if longer is None else longer
    low, high = scipy_stats.t.interval(0.95, df=4, loc=np.mean(values), scale=scipy_stats.sem(values))
    assert_book_close(claim.value, np.mean(values))
    assert_book_close(claim.interval, [low, high])
    assert claim.status == status
    assert claim.params["steps"] == (5 if longer is None else 20)
    if status == "fail":  # decided by the longer run, which the account names with both intervals
        assert "longest run made" in claim.explanation and f"{low:.1%}" in claim.explanation
        assert claim.undecided_because is None


def test_binding_longer_figure_pairs_each_seed_at_both_lengths():
    import matplotlib

    matplotlib.use("Agg")
    spread = _spread([0.77, 0.86, 0.75, 0.57, 0.82], [0.96, 0.97, 0.98, 0.97, 0.99])
    fig = figures.plot_binding_longer(spread, paper_accuracy=0.978, bag_accuracy=0.3, chance=0.0625)
    plotting.check_figure(fig)
    ax_loss, ax_acc = fig.axes
    assert len(ax_loss.lines) == 2 * 5 + 1  # each seed's curve and its last 20 %, and the chapter's length
    paired = [line for line in ax_acc.lines if line.get_marker() == "o"]
    assert len(paired) == 5 and len(ax_acc.containers) == 2  # one line per seed, two intervals
    assert len([line for line in ax_acc.lines if len(line.get_xdata()) == 2 and line.get_marker() != "o"]) == 4  # levels
    assert "4×" in ax_loss.get_title()
    spread["runs"]["binding_lstm"] = [dict(r) for r in spread["runs"]["binding_mamba"]]
    spread["runs"]["binding_lstm_longer"] = [dict(r) for r in spread["runs"]["binding_mamba_longer"]]
    spread["intervals"]["binding_accuracy_lstm"] = spread["intervals"]["binding_accuracy_mamba"]
    spread["intervals"]["binding_accuracy_lstm_longer"] = spread["intervals"]["binding_accuracy_mamba_longer"]
    fig = figures.plot_binding_longer(spread, paper_accuracy=0.978, bag_accuracy=0.3, chance=0.0625)
    plotting.check_figure(fig)
    ax_loss, ax_acc = fig.axes
    assert len(ax_loss.lines) == 2 * 2 * 5 + 1 and len(ax_acc.containers) == 4  # both families
    spread["runs"]["binding_lstm_longer"][0]["seed"] = 7
    with pytest.raises(ValueError, match="seeds"):
        figures.plot_binding_longer(spread, paper_accuracy=0.978, bag_accuracy=0.3, chance=0.0625)
    with pytest.raises(ValueError, match="no longer binding runs"):
        figures.plot_binding_longer(_spread([0.7, 0.8], None), paper_accuracy=0.978, bag_accuracy=0.3, chance=0.0625)


@pytest.mark.parametrize("lstm_longer, status", [([0.35, 0.36, 0.34, 0.35, 0.37], "pass"),
                                                 ([0.95, 0.97, 0.96, 0.98, 0.97], "fail")])
def test_the_lstms_binding_is_stated_at_its_longer_run_against_paper_is_does_not_realise(lstm_longer, status,
                                                                                         monkeypatch):
    captured = {}
    original = report.record_table_claims
    monkeypatch.setattr(report, "record_table_claims",
                        lambda *a, **k: captured.update(original(*a, **k)) or captured)
    batches = {t.name: families.evaluation_batch(t, 16, 0) for t in SMALL_TASKS}
    levels = runs.reference_levels(SMALL_TASKS, batches)
    results = _fake_results({"transformer/binding": {"accuracy": 1.0}, "lstm/binding": {"accuracy": 0.3}})
    spread = _spread([0.77, 0.86, 0.75, 0.57, 0.82], None)
    short = [0.30, 0.31, 0.29, 0.30, 0.32]
    spread["runs"]["binding_lstm"] = [{"seed": s, "accuracy": a, "loss_before": 1, "loss_after": 1}
                                      for s, a in enumerate(short)]
    spread["runs"]["binding_lstm_longer"] = [{"seed": s, "accuracy": a, "loss_before": 1, "loss_after": 0.9, "steps": 20,
                                              "cpu_seconds": 6.0,
                                              "loss_curve": [1.0]} for s, a in enumerate(lstm_longer)]
    spread["intervals"]["binding_accuracy_lstm"] = stats.t_interval(short)
    spread["intervals"]["binding_accuracy_lstm_longer"] = stats.t_interval(lstm_longer)
    report.record_results(results, levels, settings.SETTINGS["fast"].replace(steps=5, target_params=1000), params={}, spread=spread,
                          floors=runs.bayes_floor_nats(batches))
    claim = captured["architectures.binding_accuracy_lstm"]
    assert_book_close(claim.value, np.mean(lstm_longer))
    assert claim.params["steps"] == 20
    assert claim.upper == settings.REALISED_BINDING_ACCURACY and claim.status == status
    assert status == "pass" or "against what Paper I reports" in claim.explanation
    assert captured["architectures.binding_accuracy_mamba"].params["steps"] == 5  # no longer Mamba run here


def test_verdict_summary_follows_the_claims_and_the_longest_run_made():
    batches = {t.name: families.evaluation_batch(t, 16, 0) for t in SMALL_TASKS}
    levels = runs.reference_levels(SMALL_TASKS, batches)
    results = _fake_results({"transformer/binding": {"accuracy": 1.0}, "mamba/binding": {"accuracy": 0.75}})
    plain = report.verdict_summary(results, levels).splitlines()
    mamba = next(line for line in plain if line.startswith("- **Mamba**"))
    assert "differs from Paper I on" in mamba and "binding" in mamba.split("differs from Paper I on")[1]
    statuses = {key: "pass" for key in results}
    statuses[("mamba", "hmm")] = "undecided"
    lines = report.verdict_summary(results, levels, statuses=statuses,
                                 longer={("mamba", "binding"): (True, 3200)}).splitlines()
    mamba = next(line for line in lines if line.startswith("- **Mamba**"))
    assert "binding (after 3200 steps)" in mamba.split(";")[0]
    assert "not decided on transport (its claim is undecided" in mamba
    assert "binding" not in mamba.split("—")[1].split(";")[0]  # no longer listed as a difference
