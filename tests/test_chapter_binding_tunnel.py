"""Chapter 9: which tasks need routing and the binding tunnel — the controls' costs against hand computations, the
library's dynamics measures against autograd, the chapter's settings, its stored results regenerated at the fast
scale through ``compute`` and read by its report into the claims it writes out."""

from __future__ import annotations

import copy
import json
import math

import numpy as np
import pytest
import scipy.stats
import torch

from attention_dynamics.book import compute
from attention_dynamics.book.nbcompare import assert_book_close
from attention_dynamics.chapters.binding_tunnel import (binding_tunnel, hmm_grid_controls, report, routing_controls,
                                                        settings)
from attention_dynamics.diagnostics import routing_need, tunnel_dynamics
from attention_dynamics.ledger import claims
from attention_dynamics.ledger import hmm_grid_controls as hgc
from attention_dynamics.tasks import binding
from attention_dynamics.training import wind_tunnels as wt


def test_control_cost_is_the_geometric_mean_ratio_and_the_gap_share_with_their_t_intervals():
    trained, control, untrained = [0.1, 0.2, 0.15], [0.5, 0.4, 0.6], [1.5, 1.6, 1.4]
    cost = routing_need.control_cost(trained, control, untrained)
    logs = np.log(np.array(control) / np.array(trained))
    half = scipy.stats.t.ppf(0.975, 2) * scipy.stats.sem(logs)
    assert_book_close([cost["ratio"]["point"], cost["ratio"]["low"], cost["ratio"]["high"]],
                      [math.exp(logs.mean()), math.exp(logs.mean() - half), math.exp(logs.mean() + half)])
    gaps = (np.array(control) - trained) / (np.array(untrained) - trained)
    assert_book_close(cost["gap_lost"]["point"], gaps.mean())
    assert routing_need.routing_verdict(cost["ratio"]) == "undecided"  # the interval reaches below 1.25
    assert routing_need.routing_verdict({"low": 1.3, "high": 9.0}) == "needs routing"
    assert routing_need.routing_verdict({"low": 0.8, "high": 1.2}) == "does not need routing"
    with pytest.raises(ValueError, match="positive"):
        routing_need.control_cost([0.0, 0.1], [0.1, 0.1], [1, 1])
    with pytest.raises(ValueError, match="paired"):
        routing_need.control_cost([0.1], [0.2], [1.0])


def test_the_value_step_of_attention_signals_is_the_value_law_by_autograd():
    s = wt.BINDING_TUNNELS["fast"]
    model = wt.untrained_model(s, 0).double()
    batch = wt.binding_probe_batch(s, seed=0, n=8)
    signals = tunnel_dynamics.attention_signals(model, batch.tokens, batch.posterior)
    # autograd of the same loss with respect to layer 0's values (the probe's output)
    captured = {}
    attn = model.attention_modules()[0]
    attn.fused = False
    handle = attn.values.register_forward_hook(lambda _m, _i, out: captured.setdefault("v", out))
    logits = model(batch.tokens)[:, 0::2]
    from attention_dynamics.science import calibration

    loss = calibration.soft_cross_entropy_nats(logits, batch.posterior) * logits.shape[0] * logits.shape[1]
    grad_v = torch.autograd.grad(loss, captured["v"])[0]
    handle.remove()
    law = signals[0]["alpha"].transpose(-1, -2) @ signals[0]["u"]  # Σ_i α_ij u_i, per head
    assert_book_close(law.numpy(), grad_v.detach().numpy(), rtol=1e-8)


def test_source_advantage_shares_are_shares_and_the_transition_is_half_the_rise():
    s = wt.BINDING_TUNNELS["fast"]
    run = wt.train_binding(s, seed=1)
    probe = wt.binding_probe_batch(s, seed=1, n=32)
    sources = binding.answer_source_positions(probe.keys)
    out = tunnel_dynamics.source_advantage(run.model(), probe.tokens, probe.posterior, sources, layer=0, head=0)
    for key in ("routes_to_source", "routes_to_other", "feedback_source", "feedback_other"):
        assert 0.0 <= out[key] <= 1.0
    assert_book_close(out["routing_margin"], out["routes_to_source"] - out["routes_to_other"])
    assert out["queries"] <= int(probe.repeated.sum())
    on_source = tunnel_dynamics.attention_on_source(run.model(), probe.tokens, sources)
    assert on_source.shape == (s.n_layers, s.n_heads) and np.all((0 <= on_source) & (on_source <= 1))
    assert tunnel_dynamics.transition_step([0, 10, 20, 30], [0.1, 0.12, 0.4, 0.5]) == 20
    assert tunnel_dynamics.transition_step([0, 10, 20], [1.0, 0.2, 0.1]) == 10


def test_settings_are_validated_and_name_their_scales():
    assert settings.SETTINGS["book"].tunnel == wt.BINDING_TUNNELS["book"]
    assert settings.SETTINGS["book"].two_hop.layout == "separate"
    with pytest.raises(ValueError, match="freeze points"):
        settings.BindingTunnelSettings(freeze_points=(0,))
    with pytest.raises(ValueError, match="two seeds"):
        settings.BindingTunnelSettings(seeds=(0,))
    keys = [j.key for j in binding_tunnel.binding_tunnel_jobs("book")]
    # five seeds × (learned, 2 controls, 3 routings 4x as long, 4 freezes, 2 EM-like) and the two-hop task, learned
    # and with uniform attention, on one seed
    assert len(keys) == 5 * 12 + 2 and len(set(keys)) == len(keys)
    assert "learned-seed4" in keys and "uniform-x4-seed2" in keys and "freeze500-seed3" in keys
    assert "frozen-x4-seed0" in keys and not any(k.endswith("seed5") for k in keys)
    assert "two_hop-learned-seed0" in keys and "two_hop-uniform-seed0" in keys
    assert not any(k.startswith("two_hop") and not k.endswith("seed0") for k in keys)


def test_the_book_scale_leaves_out_the_controls_it_names_and_no_others():
    from attention_dynamics.ledger import routing_controls as rc

    book = rc.SETTINGS["book"]
    assert book.hmm_seeds == () and book.architecture_seeds == ()
    assert book.sticky_seeds[:5] == tuple(rc.PAPER_SEEDS) and len(book.bijection_seeds) >= 2
    keys = [j.key for j in rc.routing_controls_jobs("book")]
    assert not any(k.startswith(("hmm-", "architectures-")) for k in keys)
    assert sum(k.startswith("sticky-") for k in keys) == 5 * 2 * len(rc.STICKY_ROUTINGS)
    with pytest.raises(ValueError, match="recall_seeds"):
        rc.RoutingControlSettings(recall_seeds=())  # only the named controls may be left out



def _as_at_the_book_scale(controls):
    """The fast routing controls without the blocks the book's scale leaves to ``hmm_grid_controls``."""
    out = copy.deepcopy(controls)
    out["tunnels"].pop("hmm")
    out["architectures"] = {}
    return out


@pytest.fixture(scope="module")
def fast_results(tmp_path_factory):
    root = tmp_path_factory.mktemp("compute")
    out = {}
    for name, file in (("binding_tunnel", binding_tunnel.FILE), ("routing_controls", "routing_controls.json"),
                       ("sticky_routing_seeds", "sticky_routing_seeds.json"),
                       ("hmm_grid_controls", hgc.FILE)):
        folder = compute.compute(name, "fast", root=root, processes=1, log=lambda m: None)
        out[name] = json.loads((folder / file).read_text())
    return out


@pytest.mark.slow
def test_the_fast_results_feed_every_claim_the_chapter_writes_out(fast_results, monkeypatch):
    recorded = {}
    real = claims.record

    def record(cid, value, **kw):
        recorded[cid] = real(cid, value, **kw)
        return recorded[cid]

    monkeypatch.setattr(claims, "record", record)
    tunnel = fast_results["binding_tunnel"]
    controls = hgc.with_hmm_grid_controls(_as_at_the_book_scale(fast_results["routing_controls"]),
                                                        fast_results["hmm_grid_controls"])
    report.record_routing_need_claims(controls, tunnel, fast_results["sticky_routing_seeds"])
    # the HMM transformer's and chapter 7's grid's controls come from their own result, added to the others
    assert {"routing_need.hmm.uniform_kl_ratio", "routing_need.hmm.frozen_gap_lost_fraction",
            "routing_need.architectures_bijection.frozen_kl_ratio"} <= set(recorded)
    report.record_binding_claims(tunnel)
    # the fast scale's three seeds are more than the paper's first two of the controls: the twenty-seed claims are made
    assert {"routing_need.sticky.speedup_identity_routing_twenty_seeds",
            "routing_need.sticky.sgd_loss_frozen_twenty_seeds"} <= set(recorded)
    assert set(recorded) <= set(report.ROUTING_NEED_CLAIM_IDS) | set(report.BINDING_CLAIM_IDS)
    fast_freeze = {f"binding.freeze_kl_ratio_t{t}" for t in settings.SETTINGS["fast"].freeze_points}
    assert fast_freeze <= set(recorded)
    for claim in recorded.values():
        assert claim.status not in ("fail", "undecided") or claim.explanation
    table = report.routing_need_table(controls, tunnel)
    assert "binding (this chapter)" in table.index and "Needs routing?" in table.columns
    levels = report.reference_levels(tunnel["settings"]["tunnel"], seed=0, n=200)
    assert 0 <= levels["pairing_blind_kl_bits"] <= levels["context_blind_kl_bits"] + 1e-9
    glued = {}
    monkeypatch.setattr(claims, "glue", lambda name, value, **kw: glued.__setitem__(name, value))
    report.glue_chapter(controls, tunnel, levels)
    assert set(report.CHAPTER_GLUE) <= set(glued)
    for control in ("uniform", "frozen"):  # the longer controls, counted and worded from their own runs
        longer = tunnel["controls"][f"{control}-x{settings.LONGER_FACTOR}"]
        assert glued[f"ch9.{control}_x4_binding_seeds"] == sum(r["kl_bits"] < levels["pairing_blind_kl_bits"]
                                                                for r in longer)
        trained = {r["seed"]: r["kl_bits"] for r in tunnel["controls"][f"learned-x{settings.LONGER_FACTOR}"]}
        assert_book_close(glued[f"ch9.{control}_x4_best_ratio"], min(r["kl_bits"] / trained[r["seed"]] for r in longer))
        assert glued[f"ch9.{control}_x4_verdict"] in report.LONGER_VERDICT_WORDS.values()


def test_the_chapters_figures_draw_from_the_fast_results_within_the_column(fast_results):
    import matplotlib.pyplot as plt

    from attention_dynamics.chapters.binding_tunnel import figures
    from attention_dynamics.core import plotting

    tunnel = fast_results["binding_tunnel"]
    controls = hgc.with_hmm_grid_controls(_as_at_the_book_scale(fast_results["routing_controls"]),
                                                        fast_results["hmm_grid_controls"])
    table = report.routing_need_table(controls, tunnel)
    assert {"HMM filtering", "bijection, chapter 7's transformer"} <= set(table.index)
    for fig in (figures.plot_routing_need(controls, tunnel), figures.plot_frame_before_precision(tunnel),
                figures.plot_freeze_sweep(tunnel), figures.plot_em_like(tunnel)):
        plotting.check_figure(fig)  # the column's width, no text under the book's smallest size
        plt.close(fig)
    freeze = report.freeze_table_for_reading(tunnel)
    assert list(freeze.index) == [f"{t:,}" for t in settings.SETTINGS["fast"].freeze_points]


def test_the_routing_numbers_other_chapters_state_are_the_stored_runs(fast_results):
    """The numbers chapters 3-8 glue from the controls, recomputed from the per-seed runs by hand."""
    from attention_dynamics.ledger import routing_controls as rc

    controls = fast_results["routing_controls"]
    numbers = rc.routing_control_numbers(controls)
    assert set(numbers) == set(rc.ROUTING_GLUE)
    runs = controls["tunnels"]["bijection"]["runs"]
    ratio = np.exp(np.mean(np.log([u["kl_bits"] / t["kl_bits"] for u, t in zip(runs["uniform"], runs["learned"])])))
    assert_book_close(numbers["routing.bijection_uniform_kl_ratio"], ratio)
    recall = controls["recall_head"]["runs"]
    gap = np.mean([(f["final"] - t["final"]) / (t["initial"] - t["final"])
                   for f, t in zip(recall["frozen"], recall["learned"])])
    assert_book_close(numbers["routing.recall_frozen_gap_lost"], gap)
    five = [str(s) for s in controls["sticky"]["paper_seeds"]]
    assert_book_close(numbers["routing.sticky_sgd_loss_identity"],
                      np.mean([controls["sticky"]["final_loss"]["identity-sgd"][s] for s in five]))
    assert numbers["routing.sticky_speedup_frozen"] == controls["sticky"]["speedup"]["paper_seeds"]["frozen"]["speedup"]


def test_the_chapters_claim_tables_are_written_out_and_cover_the_book_scale():
    book = settings.SETTINGS["book"]
    expected = {f"binding.freeze_kl_ratio_t{t}" for t in book.freeze_points}
    expected |= {f"binding.freeze_cost_gap_fraction_t{t}" for t in book.freeze_points}
    assert expected <= set(report.BINDING_CLAIM_IDS)
    assert len(set(report.ROUTING_NEED_CLAIM_IDS)) == len(report.ROUTING_NEED_CLAIM_IDS)
    tasks = {cid.split(".")[1] for cid in report.ROUTING_NEED_CLAIM_IDS}
    assert {"bijection", "hmm", "recall_head", "binding", "sticky"} <= tasks
    assert routing_controls.ROUTING_CONTROLS.committed_scale == "book"


def test_the_summary_labels_follow_the_chapters_own_readings_of_the_frame_row():
    """Chapter 9's summary glues what its own claims make of the frame row: the binding readings decide it, the routing
    gate can set it aside, and the other chapters' readings (the bijection tunnel's) do not enter."""
    import copy
    from pathlib import Path

    from attention_dynamics.ledger import verdicts

    ledger = json.loads((Path(__file__).parents[1] / "book" / "claims.json").read_text())["claims"]
    own = [c for c in ledger if c["chapter"] == "09-binding-tunnel"]
    ids = {c["id"] for c in own}
    row = next(pc for pc in verdicts.PAPER_CLAIMS if pc.id == "frame_precision_wind_tunnel")
    readings = {cid for g in row.groups if set(g.evidence) <= ids for cid in g.evidence}
    gates = {cid for g in row.groups if set(g.evidence) <= ids for cid in g.requires_routing}
    assert readings and gates and not any(set(g.evidence) <= ids for g in row.groups if "bijection" in g.name)

    def label(status, gate="pass"):
        claims_ = copy.deepcopy(own)
        for c in claims_:
            if c["id"] in readings:
                c["status"] = status
            if c["id"] in gates:
                c["status"] = gate
        return report.glue_rows(claims_)["frame_precision_wind_tunnel"]

    assert label("pass") == "holds"
    assert label("fail") == "does not hold"
    assert label("undecided") == "open at this scale"
    assert label("pass", gate="fail") == "not tested here"  # binding turned out not to need routing


def test_the_twenty_seed_speedups_are_the_paper_metric_on_the_stored_runs(fast_results):
    """The twenty-seed result's speed-ups and losses, recomputed by hand from the paper's metric on its own runs, and
    its runs are the routing controls' where the two share a seed and a routing (the same jobs)."""
    from attention_dynamics.diagnostics.routing_need import sticky_run
    from attention_dynamics.ledger import sticky_routing_seeds as srs

    twenty = fast_results["sticky_routing_seeds"]
    s = srs.SETTINGS["fast"]
    assert twenty["seeds"] == list(s.seeds) and set(twenty["speedup"]) == set(srs.ROUTINGS)
    numbers = srs.glue_routing_seeds(twenty)
    assert set(numbers) == set(srs.ROUTING_SEEDS_GLUE) and numbers["routing.twenty_n_seeds"] == len(s.seeds)
    for routing in srs.ROUTINGS:
        sgd = [sticky_run(seed, "sgd", routing, steps=s.steps) for seed in s.seeds]
        em = [sticky_run(seed, "em_like", routing, steps=s.steps) for seed in s.seeds]
        threshold = np.mean([r["final_loss"] for r in sgd])
        n = len(em[0]["losses"])
        first = [next((i for i, loss in enumerate(r["losses"]) if loss < threshold), n) for r in em]
        assert_book_close(numbers[f"routing.twenty_sgd_loss_{routing}"], threshold)
        assert_book_close(numbers[f"routing.twenty_speedup_{routing}"], n / np.mean(first))
    controls = fast_results["routing_controls"]["sticky"]
    shared = [str(seed) for seed in controls["seeds"] if seed in s.seeds]
    assert shared and controls["steps"] == s.steps  # the fast scales share seeds and budget
    for key in ("learned-sgd", "frozen-em_like", "identity-sgd"):
        assert [controls["final_loss"][key][k] for k in shared] == [twenty["final_loss"][key][k] for k in shared]
    with pytest.raises(ValueError, match="distinct"):
        srs.StickyRoutingSeedsSettings(seeds=(1, 1))
    with pytest.raises(ValueError, match="scales"):
        srs.routing_seeds_jobs("huge")


def test_the_twenty_seed_learned_runs_are_chapter_5s_paper_scale_runs():
    """The committed twenty-seed result's learned-routing runs against chapter 5's paper-scale file, computed
    separately (another job function, another time): the same seeds give the same final losses, so learned routing's
    twenty-seed speed-up is chapter 5's claim and is not recorded again."""
    from attention_dynamics.chapters.sticky_markov_chain.paper_scale import PAPER_SCALE
    from attention_dynamics.ledger import sticky_routing_seeds as srs

    twenty, heavy = srs.load_routing_seeds(), PAPER_SCALE.load()["ci"]["reference"]
    for schedule in ("sgd", "em_like"):
        seeds = heavy["seeds"][schedule]
        assert sorted(seeds) == sorted(twenty["seeds"])
        assert_book_close([twenty["final_loss"][f"learned-{schedule}"][str(s)] for s in seeds],
                          [r["loss"] for r in heavy["final"][schedule]])
    assert "routing_need.sticky.speedup_learned_routing_twenty_seeds" not in report.ROUTING_NEED_CLAIM_IDS


def test_the_hmm_and_grid_controls_are_the_routing_controls_runs_with_their_costs_recomputed(fast_results):
    """The result's jobs are the ones the routing controls would run for the same tasks (same names, functions and
    arguments); its costs, recomputed by hand from its per-seed runs; adding it to the routing controls refuses a
    task both hold."""
    from attention_dynamics.ledger import routing_controls as rc

    ours = {j.key: j for j in hgc.hmm_grid_jobs("fast")}
    theirs = {j.key: j for j in rc.routing_controls_jobs("fast") if j.key.startswith(("hmm-", "architectures-"))}
    assert set(ours) == set(theirs)
    for key, job in ours.items():
        assert (job.fn, job.kwargs) == (theirs[key].fn, theirs[key].kwargs)
    more = fast_results["hmm_grid_controls"]
    for block in (more["tunnels"]["hmm"], *more["architectures"].values()):
        runs = block["runs"]
        for control in ("uniform", "frozen"):
            ratios = [c["kl_bits"] / t["kl_bits"] for c, t in zip(runs[control], runs["learned"])]
            assert_book_close(block["costs"][control]["ratio"]["point"], np.exp(np.mean(np.log(ratios))))
            gaps = [(c["kl_bits"] - t["kl_bits"]) / (t["untrained_kl_bits"] - t["kl_bits"])
                    for c, t in zip(runs[control], runs["learned"])]
            assert_book_close(block["costs"][control]["gap_lost"]["point"], np.mean(gaps))
    numbers = hgc.hmm_grid_numbers(more)
    assert set(numbers) <= set(hgc.HMM_GRID_GLUE)  # the fast grid has two of the book's three tunnels
    hmm = more["tunnels"]["hmm"]["runs"]
    assert_book_close(numbers["routing.hmm_uniform_kl_bits"], np.mean([r["kl_bits"] for r in hmm["uniform"]]))
    assert_book_close(numbers["routing.hmm_untrained_kl_bits"],
                      np.mean([r["untrained_kl_bits"] for r in hmm["learned"]]))
    assert numbers["routing.grid_binding_frozen_kl_ratio"] == \
        more["architectures"]["binding"]["costs"]["frozen"]["ratio"]["point"]
    base = _as_at_the_book_scale(fast_results["routing_controls"])
    before = json.dumps(base, sort_keys=True)
    merged = hgc.with_hmm_grid_controls(base, more)
    assert set(merged["tunnels"]) == {"bijection", "hmm"} and merged["settings"]["hmm"] == more["settings"]["hmm"]
    assert json.dumps(base, sort_keys=True) == before  # the routing controls are left as they were
    with pytest.raises(ValueError, match="both results"):
        hgc.with_hmm_grid_controls(merged, more)


def test_the_committed_hmm_and_grid_controls_are_the_book_settings():
    more = hmm_grid_controls.HMM_GRID_CONTROLS.load()
    book = hgc.SETTINGS["book"]
    assert more["scale"] == "book" and more["settings"] == book.to_json()
    assert more["tunnels"]["hmm"]["seeds"] == list(book.hmm_seeds)
    assert set(more["architectures"]) == {t["name"] for t in book.architecture_tasks}
    assert set(hgc.hmm_grid_numbers(more)) == set(hgc.HMM_GRID_GLUE)  # every number the chapters state
    with pytest.raises(ValueError, match="hmm_seeds"):
        hgc.HmmGridControlSettings(hmm_seeds=(0,))
    with pytest.raises(ValueError, match="own seeds"):
        hgc.hmm_grid_jobs("fast", seeds=[0, 1])
