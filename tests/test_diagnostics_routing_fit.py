"""The routing law beyond attention (diagnostics.routing_fit): the advantage form under autograd, the fit against
least squares, Mamba's log-weight gradient, pooling, the scan's reproduction and the permutation null."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attention_dynamics.book.nbcompare import assert_book_close
from attention_dynamics.diagnostics import routing_fit, state_clusters
from attention_dynamics.models import factory, routing
from attention_dynamics.models.mamba import MambaSequenceModel, forward_with_explicit_routing
from attention_dynamics.science import gradients
from attention_dynamics.tasks import wind_tunnels as tunnels

SMALL_TASKS = [
    tunnels.WindTunnel.make("bijection", V=5, L=4),
    tunnels.WindTunnel.make("hmm", n_states=3, n_symbols=2, length=6),
    tunnels.WindTunnel.make("binding", n_pairs=3, n_queries=2, n_keys=5, n_values=4),
]


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
    assert_book_close(autograd_grad, law, rtol=1e-10)
    assert_book_close(law.sum(-1), torch.zeros(3, 7, dtype=torch.float64), rtol=0)
    fit = routing_fit.advantage_form_fit(autograd_grad, alpha, b)
    assert_book_close(fit.r2, 1.0, rtol=0)


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
    assert_book_close(fit.r2, 1 - residual / total, rtol=0)
    assert 0 < fit.r2 < 1


def test_advantage_fit_is_one_when_the_gain_term_vanishes_and_less_when_it_does_not():
    """G = Z alpha (b − E b) + Z alpha E b: without the gain term E_alpha[b] the fit is perfect."""
    gen = torch.Generator().manual_seed(8)
    alpha = torch.softmax(torch.randn(5, 8, dtype=torch.float64, generator=gen), -1)
    b = torch.randn(5, 8, dtype=torch.float64, generator=gen)
    b_centred = b - (alpha * b).sum(-1, keepdim=True)
    assert_book_close(routing_fit.advantage_form_fit(3.0 * alpha * b_centred, alpha, b_centred).r2, 1.0, rtol=0)
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
    assert_book_close(np.sort(fit.true), np.sort(grad_ell[visible].numpy()), rtol=1e-9)
    assert 0 <= fit.r2 <= 1


def test_pooled_r2_weights_fits_by_their_gradient_norms():
    gen = torch.Generator().manual_seed(3)
    alpha = torch.softmax(torch.randn(2, 6, dtype=torch.float64, generator=gen), -1)
    b1, b2 = torch.randn(2, 6, dtype=torch.float64, generator=gen), torch.randn(2, 6, dtype=torch.float64, generator=gen)
    f1, f2 = routing_fit.advantage_form_fit(alpha * b1, alpha, b1), routing_fit.advantage_form_fit(10 * alpha * b2, alpha, b2)
    both = routing_fit.advantage_form_fit(torch.cat([alpha * b1, 10 * alpha * b2]), torch.cat([alpha, alpha]), torch.cat([b1, b2]))
    assert_book_close(routing_fit.pooled_r2([f1, f2]), both.r2, rtol=0)


def test_scan_reproduction_error_is_rounding_level_and_final_states_match_the_read_out():
    task = SMALL_TASKS[2]
    torch.manual_seed(1)
    mamba = factory.build_model("mamba", task, 8)
    batch = task.sample(3, generator=torch.Generator().manual_seed(4))
    assert routing_fit.scan_reproduction_error(mamba, batch.inputs) < 1e-12
    for family in ("transformer", "mamba", "lstm"):
        model = factory.build_model(family, task, 8).eval()
        states = state_clusters.final_layer_states(model, batch.inputs)
        assert_book_close(model.head(states), model(batch.inputs))
    with pytest.raises(ValueError, match="no final-layer states"):
        state_clusters.final_layer_states(factory.build_model("mlp_blind", task, 8), batch.inputs)


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
    assert_book_close(routing_fit.advantage_form_fit(exact, alpha, b).r2, 1.0, rtol=0)
    null = routing_fit.advantage_form_fit(exact, alpha, routing_fit.permute_within_rows(b, alpha > 0, g))
    assert null.r2 < 0.5
