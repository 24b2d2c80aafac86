"""The frame order over seeds (diagnostics.frame_order): the share against its Clopper–Pearson closed form, the
paired gap against scipy's t interval, the ratio of means against a direct bootstrap, the attention entropy against
scipy, and the frame row's verdict read from chapter 4's stored result (ledger.frame_results) against the claims' own
statuses."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.stats
import torch

from attention_dynamics.book.nbcompare import assert_book_close
from attention_dynamics.diagnostics import frame_order as fo
from attention_dynamics.ledger import claims, frame_results as fr, verdicts


@pytest.mark.parametrize("k, n", [(10, 10), (9, 10), (5, 5), (0, 10), (4, 8), (6, 6)])
def test_order_share_is_clopper_pearson(k, n):
    frame = [0] * k + [5] * (n - k)
    precision = [3] * n
    out = fo.order_share(frame, precision)
    low = scipy.stats.beta.ppf(0.025, k, n - k + 1) if k > 0 else 0.0
    high = scipy.stats.beta.ppf(0.975, k + 1, n - k) if k < n else 1.0
    assert out["share"] == k / n and (out["k"], out["n"]) == (k, n)
    assert_book_close(out["low"], low, rtol=0, atol=1e-9)
    assert_book_close(out["high"], high, rtol=0, atol=1e-9)
    expected = "frame first" if low > 0.5 else "precision first" if high < 0.5 else "undecided"
    assert out["verdict"] == expected and out["verdict"] in fo.ORDER_VERDICTS


def test_five_agreeing_seeds_cannot_decide_an_order_but_six_can():
    assert fo.order_share([0] * 5, [1] * 5)["verdict"] == "undecided"
    assert fo.order_share([0] * 6, [1] * 6)["verdict"] == "frame first"
    assert fo.order_share([2] * 10, [1] * 10)["verdict"] == "precision first"
    assert fo.order_share([0] * 4, [0] * 4)["share"] == 0.0  # a tie is not "frame first"
    with pytest.raises(ValueError):
        fo.order_share([0, 1], [1])


def test_paired_gap_is_the_paired_t_interval():
    frame, precision = np.array([10, 20, 30, 40.0]), np.array([15, 22, 39, 41.0])
    d = precision - frame
    res = scipy.stats.ttest_1samp(d, 0).confidence_interval(0.95)
    out = fo.paired_gap(frame, precision)
    assert_book_close(out["mean"], d.mean())
    assert_book_close(out["low"], res.low)
    assert_book_close(out["high"], res.high)
    assert fo.paired_gap([1, 2], [3, 4]) == {"mean": 2.0, "low": 2.0, "high": 2.0}  # no spread: no interval


def test_ratio_of_means_against_a_direct_bootstrap():
    num, den = np.array([4.0, 6.0, 9.0, 5.0]), np.array([2.0, 2.0, 3.0, 1.0])
    out = fo.ratio_of_means_ci(num, den, n_boot=500, seed=3)
    rng = np.random.default_rng(3)
    boot = []
    for idx in rng.integers(0, 4, size=(500, 4)):
        boot.append(num[idx].mean() / den[idx].mean())
    assert_book_close(out["point"], num.mean() / den.mean())
    assert_book_close(out["low"], np.quantile(boot, 0.025))
    assert_book_close(out["high"], np.quantile(boot, 0.975))
    assert fo.ratio_of_means_ci(num, np.zeros(4)) == {"point": None, "low": None, "high": None}


def test_attention_entropy_against_scipy():
    alpha = torch.softmax(torch.randn(3, 4, 7, generator=torch.Generator().manual_seed(0)), -1)
    alpha[0, 0] = torch.tensor([1.0, 0, 0, 0, 0, 0, 0])  # 0 log 0 = 0
    expected = scipy.stats.entropy(alpha.numpy(), axis=-1).mean()
    assert_book_close(fo.attention_entropy_nats(alpha), expected, rtol=1e-6)


def test_phrases_follow_the_statuses():
    assert fo.order_phrase("pass") == "the frame settles first"
    assert fo.order_phrase("fail") == "the values settle first"
    with pytest.raises(ValueError):
        fo.order_phrase("new")
    assert "below 1/2" in fo.order_explanation({"verdict": "precision first"})
    assert "straddles" in fo.order_explanation({"verdict": "undecided"})


def test_the_frame_row_is_decided_by_the_order_claims():
    row = next(pc for pc in verdicts.PAPER_CLAIMS if pc.id == "frame_precision_toy")
    assert set(row.deciding) == {cid for cid, _, _ in fr.TOY_ORDER_CLAIMS}


def test_the_frame_row_verdict_from_the_stored_result():
    """Each definition's verdict is the status its share's interval gives against 1/2 (claims.claim_status)."""
    result = fr.load_frame_definitions()
    x = fr.frame_row_verdict(result)
    H = str(result["main_horizon"])
    for claim_id, definition, optimiser in fr.TOY_ORDER_CLAIMS:
        r = result["toy"][optimiser]["horizons"][H][definition]
        status = claims.claim_status(r["share"], lower=0.5, interval=(r["low"], r["high"]))
        assert x.statuses[claim_id] == status
        assert status == {"frame first": "pass", "precision first": "fail", "undecided": "undecided"}[r["verdict"]]
    assert x.verdict in verdicts.VERDICTS and x.claim.id == "frame_precision_toy"


def _ratio_interval_high(ratios):
    """The upper end of the geometric mean's 95% Student-t interval, computed independently with scipy."""
    import scipy.stats

    logs = np.log(np.asarray(ratios, dtype=float))
    sem = scipy.stats.sem(logs)
    return float(np.exp(logs.mean() + scipy.stats.t.ppf(0.975, len(logs) - 1) * sem))


def test_freeze_frame_step_on_known_results():
    runs = []
    rows, unfrozen = [[0.9, 0.11, 0.105, 0.1], [0.8, 0.21, 0.3, 0.2]], [0.1, 0.2]
    for s, (row, u) in enumerate(zip(rows, unfrozen)):
        runs.append({"seed": s, "freeze_at": None, "initial": 1.0, "final": u})
        runs += [{"seed": s, "freeze_at": t, "initial": 1.0, "final": f} for t, f in zip([0, 10, 20, 40], row)]
    result = {"kind": "tunnel", "settings": {"steps": 100}, "seeds": [0, 1], "freeze_steps": [0, 10, 20, 40],
              "runs": runs}
    highs = [_ratio_interval_high([rows[0][k] / unfrozen[0], rows[1][k] / unfrozen[1]]) for k in range(4)]
    assert_book_close(fo.freeze_ratios(result)["high"], highs)
    assert highs[1] < 1.5 < highs[2]  # seed 1 leaves the bound again at 20
    assert fo.freeze_frame_step(result, 1.25) == 40
    assert fo.freeze_frame_step(result, highs[2] + 1.0) == 10
    summary = fo.freeze_frame_summary(result, 1.25)
    assert summary["total_steps"] == 100 and summary["free_ratio"] == 1.25
    assert_book_close(summary["ratio_point"][-1], 1.0)
    assert fr.load_frame_freeze()["tunnel"]["kind"] == "tunnel"
