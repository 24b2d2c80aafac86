"""Paper I's key-orthogonality metric read off a model against a direct computation, the layer ablation against
exact identities, and the manifold regression against a planted relation."""

from __future__ import annotations

import numpy as np
import torch

from attention_dynamics.book.nbcompare import assert_book_close
from attention_dynamics.diagnostics import mechanism_controls as mc
from attention_dynamics.science import calibration, geometry
from attention_dynamics.tasks import bijection, hmm
from attention_dynamics.training.wind_tunnels import (
    bijection_log_probs,
    make_bijection_transformer,
    make_hmm_transformer,
)


def test_paper_key_orthogonality_reads_layer_0_keys_of_the_value_tokens():
    V = 5
    model = make_bijection_transformer(V, 4, d_model=8, n_layers=2, n_heads=2)
    got = mc.paper_key_orthogonality(model, V)
    D = 8
    w = model.blocks[0].attn.qkv.weight.detach().double()
    keys = model.embed.weight[V:2 * V].detach().double() @ w[D:2 * D].T  # (V, 8): both heads
    by_head = [geometry.signed_mean_offdiagonal_cosine(keys[:, h * 4:(h + 1) * 4]) for h in range(2)]
    assert_book_close(got["signed_by_head"], by_head, rtol=1e-10)
    assert_book_close(got["signed"], np.mean(by_head), rtol=1e-10)


def test_ablating_a_layer_whose_attention_adds_nothing_changes_nothing():
    torch.manual_seed(0)
    V, L = 5, 4
    model = make_bijection_transformer(V, L, d_model=8, n_layers=3, n_heads=2).eval()
    with torch.no_grad():
        model.blocks[1].attn.out.weight.zero_()  # layer 1's attention output is 0 whatever the input
    batch = bijection.sample_bijection_batch(16, V, L, generator=torch.Generator().manual_seed(1))
    got = mc.layer_ablation(model, batch)
    assert_book_close(got["ablated"][1]["kl_bits"], got["intact"]["kl_bits"], rtol=1e-12)
    # the context-blind level is the closed form of chapter 6
    assert_book_close(got["blind"]["entropy_mae_bits"], bijection.context_blind_entropy_error_bits(V, L), rtol=1e-9)
    direct = calibration.calibration_report(batch.posterior, bijection_log_probs(model, batch))
    assert_book_close(got["intact"]["kl_bits"], direct.kl_bits, rtol=1e-9)


def test_manifold_regression_finds_the_matrices_in_an_untrained_model_and_not_in_the_shuffled_null():
    """An untrained transformer's attention output is close to a linear map of its inputs, which are mostly the
    matrices: they must explain its leading directions, another sequence's matrices must not."""
    torch.manual_seed(0)
    model = make_hmm_transformer(5, 5, d_model=16, n_layers=1, n_heads=2).eval()
    batch = hmm.sample_hmm_batch(200, 6, generator=torch.Generator().manual_seed(3))
    got = mc.manifold_regression(model, batch)
    assert got["matrices"] > 0.5 and got["matrices_shuffled"] < 0.05
    assert 0 < got["pc_variance_share"] <= 1
    assert set(mc.MANIFOLD_EXPLANATIONS) == set(got) - {"pc_variance_share"}
