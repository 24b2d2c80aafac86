"""Diagnostics (the paper's §3, result 8) against known answers and independent computations.

What each group protects:
- known answers: one-hot attention has a zero advantage matrix; an unattended value is starved;
  orthogonal keys have orthogonality 0; label-exclusive routing has normalized MI 1;
- the single head: diagnostics equal the closed forms of ``attention.single_head_forward`` and
  autograd's ∂L/∂S;
- hooks on the package's transformer: captured alpha, v, u reproduce autograd's ∂L/∂q and ∂L/∂v
  at the probes;
- hooks on ``torch.nn.MultiheadAttention`` / ``TransformerEncoderLayer``: captured alpha equals a
  direct computation from the weights, and the laws reproduce autograd's ``in_proj_weight``
  gradient; the caller's outputs, the parameters' ``.grad`` and the training mode are untouched.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from attention_dynamics import diagnostics as D
from attention_dynamics.book.nbcompare import assert_book_close
from attention_dynamics.models import CausalTransformer, Probe
from attention_dynamics.models.encoder import TorchCausalEncoder
from attention_dynamics.science.attention import SingleHeadParams, causal_mask, init_single_head, single_head_forward
from attention_dynamics.science.gradients import key_gradient, query_gradient

torch.set_default_dtype(torch.float32)


def _capture(alpha, u=None, v=None, keys=None, visible=None, seed=0):
    """Return a HeadCapture around hand-built tensors (batch of one if alpha is 2-D)."""
    g = torch.Generator().manual_seed(seed)
    alpha = alpha.to(torch.float64)
    if alpha.dim() == 2:
        alpha = alpha[None]
    B, Tq, Tk = alpha.shape
    v = torch.randn(B, Tk, 3, generator=g, dtype=torch.float64) if v is None else v
    u = torch.randn(B, Tq, 3, generator=g, dtype=torch.float64) if u is None else u
    visible = torch.ones(B, Tq, Tk, dtype=torch.bool) if visible is None else visible.expand(B, Tq, Tk)
    return D.HeadCapture(layer=0, head=0, module="hand", alpha=alpha, values=v, u=u, visible=visible,
                         context=alpha @ v, keys=keys)


# ----------------------------------------------------------------------------- known answers


@pytest.mark.parametrize("T", [1, 4, 9])
def test_one_hot_attention_gives_a_zero_advantage_matrix(T):
    g = torch.Generator().manual_seed(T)
    top = torch.stack([torch.randint(0, i + 1, (1,), generator=g)[0] for i in range(T)])  # a key j <= i per query
    alpha = F.one_hot(top, T).to(torch.float64)  # (T, T), causal one-hot rows
    head = D.HeadDiagnostics(_capture(alpha, visible=causal_mask(T)))
    assert torch.equal(head.advantage_matrix, torch.zeros_like(head.advantage_matrix))
    assert head.metrics.routing_gradient_norm == 0.0
    if T > 1:  # (a single key gives no entropy to normalise)
        assert head.metrics.normalized_attention_entropy == 0.0
    assert head.metrics.attention_entropy_nats == 0.0
    assert head.metrics.mean_max_attention == 1.0


def test_soft_attention_gives_a_nonzero_advantage_matrix_whose_rows_sum_to_zero():
    g = torch.Generator().manual_seed(1)
    alpha = torch.softmax(torch.randn(5, 5, generator=g, dtype=torch.float64), -1)
    head = D.HeadDiagnostics(_capture(alpha))
    assert head.metrics.routing_gradient_norm > 1e-3
    assert head.metrics.max_abs_routing_row_sum < 1e-14


def test_a_value_no_query_attends_to_is_starved():
    T, dead = 6, 2
    alpha = torch.ones(T, T, dtype=torch.float64)
    alpha[:, dead] = 0.0
    alpha /= alpha.sum(-1, keepdim=True)  # every query ignores key `dead`
    head = D.HeadDiagnostics(_capture(alpha))
    expected = torch.zeros(1, T, dtype=torch.bool)
    expected[0, dead] = True
    assert torch.equal(head.starved, expected)
    assert_book_close(head.metrics.starved_fraction, 1 / T)
    # ... and it receives no value gradient and no routing gradient
    assert head.value_gradient[0, dead].abs().max() == 0
    assert head.routing_gradient[0, :, dead].abs().max() == 0


def test_uniform_causal_attention_starves_nothing_and_masked_keys_are_not_starved():
    T = 7
    vis = causal_mask(T)
    alpha = vis.to(torch.float64) / vis.sum(-1, keepdim=True)
    assert not D.starved_keys(alpha, vis).any()
    # uniform soft counts are the harmonic tails sum_{i >= j} 1/(i+1)
    expected = torch.tensor([sum(1 / (i + 1) for i in range(j, T)) for j in range(T)], dtype=torch.float64)
    assert_book_close(D.uniform_soft_counts(vis), expected)
    # a key that nobody may see (fully masked column) is not "starved"
    vis2 = torch.ones(3, 3, dtype=torch.bool)
    vis2[:, 1] = False
    a2 = vis2.to(torch.float64) / vis2.sum(-1, keepdim=True)
    assert not D.starved_keys(a2, vis2).any()


def test_starved_threshold_is_validated():
    with pytest.raises(ValueError, match="threshold"):
        D.starved_keys(torch.eye(3), threshold=1.5)


def test_hand_built_orthogonal_keys_have_orthogonality_zero():
    scales = torch.tensor([1.0, 3.0, 0.5, 2.0], dtype=torch.float64)
    Q, _ = torch.linalg.qr(torch.randn(6, 6, generator=torch.Generator().manual_seed(0), dtype=torch.float64))
    keys = (Q[:, :4].T * scales[:, None])[None]  # (1, 4, 6): four orthogonal keys of different lengths
    cos, baseline = D.key_orthogonality(keys)
    assert_book_close(cos, 0.0, rtol=0)
    assert_book_close(baseline, math.gamma(3) / (math.sqrt(math.pi) * math.gamma(3.5)))
    # with labels: repeated keys of the same hypothesis are averaged first
    keys_rep = torch.cat([keys, 2 * keys], dim=1)  # (1, 8, 6)
    labels = torch.tensor([[0, 1, 2, 3, 0, 1, 2, 3]])
    assert_book_close(D.key_orthogonality(keys_rep, labels)[0], 0.0, rtol=0)
    # and through the head diagnostics
    head = D.HeadDiagnostics(_capture(torch.full((4, 4), 0.25), keys=keys))
    assert_book_close(head.metrics.key_mean_abs_cosine, 0.0, rtol=0)
    assert_book_close(head.metrics.key_orthogonality_ratio, 0.0, rtol=0, atol=1e-11)


def test_parallel_keys_have_orthogonality_one():
    keys = torch.tensor([[[1.0, 2.0], [-2.0, -4.0], [0.5, 1.0]]], dtype=torch.float64)
    assert_book_close(D.key_orthogonality(keys)[0], 1.0)


def test_value_spectrum_of_values_on_a_line_is_one_component():
    t = torch.linspace(-1, 1, 11, dtype=torch.float64)
    direction = torch.tensor([1.0, -2.0, 0.5], dtype=torch.float64)
    spectrum = D.value_spectrum((t[:, None] * direction + torch.tensor([3.0, 0.0, 1.0]))[None])
    assert_book_close(spectrum[0], 1.0)
    head = D.HeadDiagnostics(_capture(torch.full((11, 11), 1 / 11), v=(t[:, None] * direction)[None]))
    assert_book_close(head.metrics.value_effective_dimension, 1.0)


def test_attention_entropy_of_uniform_rows_is_log_n():
    alpha = causal_mask(5).to(torch.float64)
    alpha /= alpha.sum(-1, keepdim=True)
    head = D.HeadDiagnostics(_capture(alpha, visible=causal_mask(5)))
    assert_book_close(head.metrics.normalized_attention_entropy, 1.0)


def test_specialization_of_label_exclusive_routing():
    # queries labelled a attend uniformly to the keys labelled a only: routing matrix = identity, NMI = 1
    labels = torch.tensor([[0, 1, 2, 0, 1, 2, 0, 1, 2]])
    same = (labels[0][:, None] == labels[0][None, :]).to(torch.float64)
    alpha = same / same.sum(-1, keepdim=True)
    spec = D.specialization(_capture(alpha), labels, labels)
    assert_book_close(spec.routing_matrix, np.eye(3))
    assert_book_close(spec.mutual_information_nats, math.log(3))
    assert_book_close(spec.normalized_mutual_information, 1.0)
    assert_book_close(spec.key_exclusivity, 1.0)
    np.testing.assert_array_equal(spec.key_serves, [0, 1, 2])
    assert_book_close(spec.diagonal_mass, 1.0)
    # uniform attention over balanced labels is the chance level: MI 0, diagonal mass 1/3
    assert_book_close(spec.chance_mutual_information_nats, 0.0, rtol=0)
    assert_book_close(spec.chance_diagonal_mass, 1 / 3)
    uniform = D.specialization(_capture(torch.full((9, 9), 1 / 9)), labels, labels)
    assert_book_close(uniform.mutual_information_nats, 0.0, rtol=0)


def test_advantage_by_label_is_the_label_sum_of_the_advantage_matrix():
    g = torch.Generator().manual_seed(2)
    alpha = torch.softmax(torch.randn(2, 6, 6, generator=g, dtype=torch.float64), -1)
    cap = _capture(alpha, seed=2)
    ql = torch.tensor([[0, 1, 0, 1, 0, 1], [1, 1, 0, 0, 1, 0]])
    kl = torch.tensor([[2, 2, 3, 3, 4, 4], [4, 3, 2, 4, 3, 2]])
    spec = D.specialization(cap, ql, kl)
    adv = D.HeadDiagnostics(cap).advantage_matrix
    for a_idx, a in enumerate((0, 1)):
        for c_idx, c in enumerate((2, 3, 4)):
            total = sum(float(adv[b, i, j]) for b in range(2) for i in range(6) for j in range(6)
                        if ql[b, i] == a and kl[b, j] == c)
            n = int((ql == a).sum())
            assert_book_close(spec.advantage_by_label[a_idx, c_idx], total / n, rtol=0)
    assert_book_close(spec.advantage_by_label.sum(1), 0.0)  # mass is moved, not created


def test_routing_stability_known_answers():
    a = F.one_hot(torch.tensor([0, 1, 2, 0]), 4).to(torch.float64)
    b = F.one_hot(torch.tensor([1, 1, 3, 0]), 4).to(torch.float64)
    v = torch.randn(1, 4, 3, dtype=torch.float64)
    d_a = D.AttentionDiagnostics([D.HeadDiagnostics(_capture(a, v=v))], loss=0.0)
    d_b = D.AttentionDiagnostics([D.HeadDiagnostics(_capture(b, v=2 * v))], loss=0.0)
    (same,) = D.routing_stability(d_a, d_a)
    assert (same.attention_tv, same.top_key_agreement, same.value_relative_change) == (0.0, 1.0, 0.0)
    (moved,) = D.routing_stability(d_a, d_b)
    assert_book_close(moved.attention_tv, 0.5)  # two of four rows moved all their mass
    assert_book_close(moved.top_key_agreement, 0.5)
    assert_book_close(moved.value_relative_change, 1.0)


# ----------------------------------------------------------------------------- the single head


def _head_example(B=3, T=7, d_in=5, d_k=3, d_v=4, C=3, std=0.8, seed=0):
    g = torch.Generator().manual_seed(seed)
    params = init_single_head(d_in, d_k, d_v, C, std=std, generator=g, dtype=torch.float64)
    x = torch.randn(B, T, d_in, generator=g, dtype=torch.float64)
    y = torch.randint(0, C, (B, T), generator=g)
    return params, x, y


def _autograd_score_gradient(x, params, y):
    """Return ∂L/∂S by autograd through the single head (independent of the routing law)."""
    p = params.clone().requires_grad_()
    fwd = single_head_forward(x, p, y)
    fwd.scores.retain_grad()
    fwd.loss.backward()
    return torch.nan_to_num(fwd.scores.grad), fwd


def test_single_head_diagnostics_equal_the_closed_forms_and_autograd():
    params, x, y = _head_example()
    diag = D.diagnose_single_head(x, params, y)
    head = diag.head(0, 0)
    dS, fwd = _autograd_score_gradient(x, params, y)
    assert_book_close(head.compatibility, fwd.b.detach(), rtol=0)
    assert_book_close(head.routing_gradient, dS, rtol=0)
    assert_book_close(head.advantage_matrix, -dS, rtol=0)
    assert_book_close(diag.loss, fwd.loss.item())


class ProbedSingleHead(nn.Module):
    """The book's single head as an nn.Module whose tensors pass through probes (test-only model)."""

    def __init__(self, params):
        super().__init__()
        self.W = nn.ParameterDict({n: nn.Parameter(t.clone()) for n, t in params.as_dict().items()})
        self.queries, self.keys, self.values, self.attn_weights, self.context = (Probe() for _ in range(5))
        self.causal = True

    def forward(self, x):
        q, k, v = self.queries(x @ self.W["W_Q"]), self.keys(x @ self.W["W_K"]), self.values(x @ self.W["W_V"])
        s = (q @ k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
        s = s.masked_fill(~causal_mask(x.shape[-2]), float("-inf"))
        g = self.context(self.attn_weights(torch.softmax(s, -1)) @ v)
        return g @ self.W["W_O"]


def test_hooks_on_a_probed_single_head_match_the_laws():
    params, x, y = _head_example(seed=3)
    model = ProbedSingleHead(params)
    diag = D.diagnose(model, x, y)
    (head,) = diag.heads
    fwd = single_head_forward(x, params, y)
    assert_book_close(head.capture.u, fwd.u, rtol=0)
    assert_book_close(head.compatibility, fwd.b, rtol=0)
    dS, _ = _autograd_score_gradient(x, params, y)
    assert_book_close(head.routing_gradient, dS, rtol=0)
    ref = D.diagnose_single_head(x, params, y)
    for key, value in ref.heads[0].metrics.as_dict().items():
        if key not in ("module",):
            assert_book_close(head.metrics.as_dict()[key], value, rtol=1e-9, what=key)
    assert all(p.grad is None for p in model.parameters())


class ModuleWithHeadParams(nn.Module):
    """A module exposing the single head's weights through ``head_params()`` (as the book's head modules do)."""

    def __init__(self, params):
        super().__init__()
        self.W = nn.ParameterDict({n: nn.Parameter(t.clone()) for n, t in params.as_dict().items()})

    def head_params(self):
        return SingleHeadParams(**{n: p.detach() for n, p in self.W.items()})


def _autograd_head_score_gradient(x, params, y):
    """∂L/∂s by autograd through a forward pass written out here (the routing law says it is the advantage)."""
    import math

    W = {n: t.detach().clone() for n, t in params.as_dict().items()}
    q, k, v = x @ W["W_Q"], x @ W["W_K"], x @ W["W_V"]
    scores = (q @ k.T / math.sqrt(W["W_Q"].shape[1])).requires_grad_(True)
    T = x.shape[0]
    masked = scores.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))
    loss = torch.nn.functional.cross_entropy(torch.softmax(masked, -1) @ v @ W["W_O"], y)
    loss.backward()
    return scores.grad, float(loss)


@pytest.mark.parametrize("wrap", ["weights", "SingleHeadModule", "any module with head_params()"])
def test_diagnose_accepts_a_single_head_module_or_its_weights(wrap):
    """Every way a single head is held is diagnosed as that head, checked against autograd."""
    from attention_dynamics.models.single_head import SingleHeadModule

    params, x, y = _head_example(B=1, seed=5)
    model = {"weights": lambda: params, "SingleHeadModule": lambda: SingleHeadModule(params),
             "any module with head_params()": lambda: ModuleWithHeadParams(params)}[wrap]()
    grad, loss = _autograd_head_score_gradient(x[0], params, y[0])
    diag = D.diagnose(model, x[0], y[0])
    assert len(diag.heads) == 1
    # the book's advantage is E_alpha[b] − b: minus the gradient of the loss with respect to the scores
    assert_book_close(diag.heads[0].advantage_matrix.reshape(grad.shape), -grad, rtol=1e-10)
    assert_book_close(diag.loss, loss, rtol=1e-12)


# ----------------------------------------------------------------------------- the package's transformer


def test_causal_transformer_capture_reproduces_autograd_at_the_probes():
    torch.manual_seed(0)
    model = CausalTransformer(n_out=4, vocab_size=6, d_model=12, n_layers=2, n_heads=3).double()
    for p in model.parameters():  # larger weights so attention is far from uniform
        p.data.mul_(8.0)
    x = torch.randint(0, 6, (2, 8))
    y = torch.randint(0, 4, (2, 8))
    diag = D.diagnose(model, x, y)
    assert [h.name for h in diag.heads] == [f"L{l}H{h}" for l in range(2) for h in range(3)]
    assert [h.capture.module for h in diag.heads[::3]] == ["blocks.0.attn", "blocks.1.attn"]
    # independent route: retain the probes' outputs and let autograd differentiate the loss
    seen = {}

    def keep(key):
        def hook(_module, _args, out):
            out.retain_grad()
            seen[key] = out

        return hook

    handles = [getattr(attn, probe).register_forward_hook(keep((l, probe)))
               for l, attn in enumerate(model.attention_modules()) for probe in ("queries", "keys", "values")]
    loss = F.cross_entropy(model(x).reshape(-1, 4), y.reshape(-1))
    loss.backward()
    for h in handles:
        h.remove()
    assert_book_close(diag.loss, loss.item())
    scale = 1 / math.sqrt(model.attention_modules()[0].d_head)
    for head in diag.heads:
        l, h = head.capture.layer, head.capture.head
        cap = head.capture
        assert_book_close(head.value_gradient, seen[(l, "values")].grad[:, h], rtol=1e-9)
        assert_book_close(query_gradient(cap.alpha, head.compatibility, cap.keys, scale),
                          seen[(l, "queries")].grad[:, h], rtol=1e-9)
        assert_book_close(key_gradient(cap.alpha, head.compatibility, cap.queries, scale),
                          seen[(l, "keys")].grad[:, h], rtol=1e-9)
        assert torch.equal(cap.visible[0], causal_mask(8))


def test_fused_attention_flag_is_restored():
    model = CausalTransformer(n_out=3, vocab_size=5, d_model=8, n_layers=1, n_heads=2)
    model.blocks[0].attn.fused = True
    diag = D.diagnose(model, torch.randint(0, 5, (2, 6)), torch.randint(0, 3, (2, 6)))
    assert len(diag.heads) == 2
    assert model.blocks[0].attn.fused is True


def test_model_without_attention_is_rejected():
    with pytest.raises(ValueError, match="no attention module"):
        D.diagnose(nn.Linear(3, 2), torch.randn(4, 3), torch.randint(0, 2, (4,)))


# ----------------------------------------------------------------------------- torch.nn.MultiheadAttention


class EncoderModel(nn.Module):
    """Embedding → TransformerEncoderLayer(s) → linear readout, batch-first or not, optionally causal."""

    def __init__(self, *, batch_first=True, causal=True, n_layers=1, norm_first=False, vocab=7, d=16, H=4, C=5):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        layer = nn.TransformerEncoderLayer(d, H, dim_feedforward=24, dropout=0.1, batch_first=batch_first,
                                           norm_first=norm_first)
        self.encoder = nn.TransformerEncoder(layer, n_layers, enable_nested_tensor=False)
        self.readout = nn.Linear(d, C)
        self.batch_first, self.causal = batch_first, causal

    def forward(self, x):  # x (B, T) token ids -> logits (B, T, C)
        h = self.embed(x)
        T = x.shape[1]
        mask = nn.Transformer.generate_square_subsequent_mask(T, dtype=h.dtype) if self.causal else None
        if not self.batch_first:
            h = h.transpose(0, 1)
        h = self.encoder(h, mask=mask, is_causal=self.causal)
        if not self.batch_first:
            h = h.transpose(0, 1)
        return self.readout(h)


def _mha_inputs(model, x):
    """Return the input of every MultiheadAttention call (as the module saw it), via our own hooks."""
    seen = []
    hs = [m.register_forward_pre_hook(lambda mod, args, kw: seen.append(args[0] if args else kw["query"]), with_kwargs=True)
          for m in model.modules() if isinstance(m, nn.MultiheadAttention)]
    return seen, hs


@pytest.mark.parametrize("batch_first", [True, False])
@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("norm_first", [False, True])
def test_multihead_attention_capture_matches_direct_computation_and_autograd(batch_first, causal, norm_first):
    torch.manual_seed(1)
    model = EncoderModel(batch_first=batch_first, causal=causal, n_layers=2, norm_first=norm_first).double()
    model.train()
    x = torch.randint(0, 7, (3, 6))
    y = torch.randint(0, 5, (3, 6))
    diag = D.diagnose(model, x, y)
    assert model.training  # mode restored
    assert all(p.grad is None for p in model.parameters())  # .grad untouched
    mhas = [m for m in model.modules() if isinstance(m, nn.MultiheadAttention)]
    assert all(not m._forward_hooks and not m._forward_pre_hooks for m in mhas)  # hooks removed
    assert len(diag.heads) == 8

    # independent route: the MHA inputs, then autograd in eval mode (dropout off, as the diagnostics run)
    model.eval()
    seen, handles = _mha_inputs(model, x)
    loss = F.cross_entropy(model(x).reshape(-1, 5), y.reshape(-1))
    loss.backward()
    for h in handles:
        h.remove()
    assert_book_close(diag.loss, loss.item())
    E, H = 16, 4
    dh = E // H
    for layer, (mha, inp) in enumerate(zip(mhas, seen)):
        inp = inp if batch_first else inp.transpose(0, 1)  # (B, T, E)
        W_q, W_k, W_v = mha.in_proj_weight.detach().chunk(3)
        b_q, b_k, b_v = mha.in_proj_bias.detach().chunk(3)
        q = (inp @ W_q.T + b_q).view(3, 6, H, dh).transpose(1, 2)  # (B, H, T, dh)
        k = (inp @ W_k.T + b_k).view(3, 6, H, dh).transpose(1, 2)
        s = q @ k.transpose(-1, -2) / math.sqrt(dh)
        if causal:
            s = s.masked_fill(~causal_mask(6), float("-inf"))
        alpha = torch.softmax(s, -1)  # (B, H, T, T)
        heads = [h for h in diag.heads if h.capture.layer == layer]
        grad_q = torch.zeros(3, H, 6, dh, dtype=torch.float64)
        grad_k, grad_v = torch.zeros_like(grad_q), torch.zeros_like(grad_q)
        for h in heads:
            assert_book_close(h.alpha, alpha[:, h.capture.head].detach(), rtol=0)
            expect_vis = causal_mask(6) if causal else torch.ones(6, 6, dtype=torch.bool)
            assert torch.equal(h.capture.visible[0], expect_vis)
            grad_q[:, h.capture.head] = query_gradient(h.alpha, h.compatibility, h.capture.keys, 1 / math.sqrt(dh))
            grad_k[:, h.capture.head] = key_gradient(h.alpha, h.compatibility, h.capture.queries, 1 / math.sqrt(dh))
            grad_v[:, h.capture.head] = h.value_gradient
        # the laws, pushed through the input projection, give autograd's in_proj_weight gradient
        concat = lambda t: t.transpose(1, 2).reshape(3, 6, E)  # (B, H, T, dh) -> (B, T, E)
        from_laws = torch.cat([torch.einsum("bte,btd->ed", concat(t), inp.detach()) for t in (grad_q, grad_k, grad_v)])
        assert_book_close(from_laws, mha.in_proj_weight.grad, rtol=1e-9)


def test_multihead_attention_caller_gets_what_it_asked_for():
    torch.manual_seed(0)
    mha = nn.MultiheadAttention(8, 2, batch_first=True)
    x = torch.randn(2, 5, 8)
    ref_out, ref_w = mha(x, x, x)  # default: averaged weights
    outputs = {}

    class Wrap(nn.Module):
        def __init__(self):
            super().__init__()
            self.mha, self.readout = mha, nn.Linear(8, 3)

        def forward(self, x):
            out, w = self.mha(x, x, x)  # need_weights=True, average_attn_weights=True by default
            out2, w2 = self.mha(x, x, x, need_weights=False)
            outputs.update(w=w, w2=w2)
            return self.readout(out + out2)

    diag = D.diagnose(Wrap(), x, torch.randint(0, 3, (2, 5)))
    assert_book_close(outputs["w"], ref_w)
    assert outputs["w2"] is None
    # the same module called twice: two captured layers, named by call
    assert [h.capture.module for h in diag.heads] == ["mha", "mha", "mha[call 2]", "mha[call 2]"]
    assert_book_close(diag.heads[0].alpha, diag.heads[2].alpha)


def test_multihead_attention_unbatched_input():
    torch.manual_seed(0)
    mha = nn.MultiheadAttention(6, 3)

    class Wrap(nn.Module):
        def __init__(self):
            super().__init__()
            self.mha, self.readout = mha, nn.Linear(6, 2)

        def forward(self, x):  # x (T, E), unbatched
            return self.readout(self.mha(x, x, x)[0])

    diag = D.diagnose(Wrap(), torch.randn(4, 6), torch.randint(0, 2, (4,)))
    assert len(diag.heads) == 3 and diag.heads[0].alpha.shape == (1, 4, 4)


def test_a_key_suppressed_by_an_attention_bias_is_starved_in_a_real_model():
    torch.manual_seed(0)
    mha = nn.MultiheadAttention(8, 2, batch_first=True)
    bias = torch.zeros(6, 6)
    bias[:, 3] = -40.0  # a finite bias: key 3 is visible but no query attends to it

    class Wrap(nn.Module):
        def __init__(self):
            super().__init__()
            self.mha, self.readout = mha, nn.Linear(8, 3)

        def forward(self, x):
            return self.readout(self.mha(x, x, x, attn_mask=bias, need_weights=False)[0])

    diag = D.diagnose(Wrap(), torch.randn(2, 6, 8), torch.randint(0, 3, (2, 6)))
    for head in diag.heads:
        expected = torch.zeros(2, 6, dtype=torch.bool)
        expected[:, 3] = True
        assert torch.equal(head.starved, expected)
        assert head.capture.visible.all()


def test_key_padding_mask_hides_keys_instead_of_starving_them():
    torch.manual_seed(0)
    mha = nn.MultiheadAttention(8, 2, batch_first=True)
    pad = torch.tensor([[False] * 6, [False] * 4 + [True] * 2])

    class Wrap(nn.Module):
        def __init__(self):
            super().__init__()
            self.mha, self.readout = mha, nn.Linear(8, 3)

        def forward(self, x):
            return self.readout(self.mha(x, x, x, key_padding_mask=pad)[0])

    diag = D.diagnose(Wrap(), torch.randn(2, 6, 8), torch.randint(0, 3, (2, 6)))
    head = diag.heads[0]
    assert not head.capture.visible[1, :, 4:].any() and head.capture.visible[0].all()
    assert not head.starved.any()


# ----------------------------------------------------------------------------- result object


def test_summary_labels_and_plots():
    import matplotlib

    matplotlib.use("Agg")
    torch.manual_seed(0)
    model = CausalTransformer(n_out=3, vocab_size=4, d_model=8, n_layers=2, n_heads=2)
    x = torch.randint(0, 4, (3, 10))
    diag = D.diagnose(model, x, torch.randint(0, 3, (3, 10)), query_labels=x, key_labels=x)
    text = diag.summary()
    assert "L1H1" in text and "MI nats" in text and len(diag.metrics()) == 4
    assert len(diag.specializations) == 4
    fig = diag.plot_head(1, 0, queries=slice(2, 8), keys=slice(0, 8))
    assert len(fig.axes) == 6  # three panels and their colour bars
    fig2 = D.plot_overview([diag, diag], labels=["a", "b"])
    assert len(fig2.axes) == 4
    for kind in ("attention", "excess", "advantage"):
        D.plot_routing_matrix(diag.specializations[0], kind=kind)
    with pytest.raises(ValueError, match="kind"):
        D.plot_routing_matrix(diag.specializations[0], kind="nope")
    with pytest.raises(KeyError, match="L5H0"):
        diag.head(5, 0)
    matplotlib.pyplot.close("all")


# ----------------------------------------------------------------------------- autograd self-check


@pytest.mark.parametrize("kind", ["probes", "mha", "single_head"])
def test_verify_against_autograd_is_at_rounding_level(kind):
    torch.manual_seed(0)
    x = torch.randint(0, 7, (3, 9))
    y = torch.randint(0, 5, (3, 9))
    if kind == "probes":
        model = CausalTransformer(n_out=5, vocab_size=7, d_model=16, n_layers=2, n_heads=2).double()
    elif kind == "mha":
        model = TorchCausalEncoder(7, 5, d_model=16, n_heads=4, n_layers=2, max_len=9).double()
    else:
        model, x, y = _head_example(B=1, seed=1)
        x, y = x[0], y[0]
    check = D.verify_against_autograd(model, x, y)
    assert check.max_abs_gradient > 0
    assert check.relative_error < 1e-12


class MisScaledHead(ProbedSingleHead):
    """A head whose scores use 2/sqrt(d_k): the query law at scale 1/sqrt(d_k) no longer matches autograd."""

    def forward(self, x):
        q, k, v = self.queries(x @ self.W["W_Q"]), self.keys(x @ self.W["W_K"]), self.values(x @ self.W["W_V"])
        s = 2 * (q @ k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
        s = s.masked_fill(~causal_mask(x.shape[-2]), float("-inf"))
        return self.context(self.attn_weights(torch.softmax(s, -1)) @ v) @ self.W["W_O"]


def test_verify_against_autograd_detects_a_mismatch():
    params, x, y = _head_example(seed=4)
    assert D.verify_against_autograd(ProbedSingleHead(params), x, y).relative_error < 1e-12
    assert D.verify_against_autograd(MisScaledHead(params), x, y).relative_error > 0.1


# ----------------------------------------------------------------------------- traces and alarms


def test_loss_falls_behind_known_answers():
    ref = np.array([3.0, 2.0, 1.5, 1.0, 0.8])
    assert D.loss_falls_behind([2.5, 1.9, 1.6, 1.2, 1.1], ref) == 2
    assert D.loss_falls_behind([3.5, 2.5, 1.6, 1.2, 1.1], ref) == 0
    assert D.loss_falls_behind([2.5, 2.1, 1.4, 1.2, 0.7], ref) is None  # ahead at the end
    with pytest.raises(ValueError, match="lengths"):
        D.loss_falls_behind([1.0], ref)


def _trace_with(entropies, starved):
    metrics = [[{"normalized_attention_entropy": e, "starved_fraction": s}] for e, s in zip(entropies, starved)]
    return D.DiagnosticsTrace("t", np.zeros(4), np.array([0, 5, 10, 15]), metrics, {})


def test_collapse_alarm_known_answers():
    assert D.collapse_alarm(_trace_with([0.9, 0.5, 0.05, 0.01], [0, 0, 0, 0])) == 10
    assert D.collapse_alarm(_trace_with([0.9, 0.8, 0.7, 0.7], [0, 0.6, 0.7, 0.8])) == 5
    assert D.collapse_alarm(_trace_with([0.9, 0.8, 0.7, 0.7], [0, 0, 0, 0])) is None


def test_traced_fit_records_and_keeps_diagnostics():
    torch.manual_seed(0)
    model = TorchCausalEncoder(6, 3, d_model=8, n_heads=2, n_layers=1, max_len=5)
    x, y = torch.randint(0, 6, (4, 5)), torch.randint(0, 3, (4, 5))
    trace = D.traced_fit(model, lambda step: (x, y), steps=6, optimizer=torch.optim.SGD(model.parameters(), lr=0.1),
                         loss_fn=lambda m, b: D.default_loss(m(b[0]), b[1]), diagnose_inputs=x, diagnose_targets=y,
                         track_steps=[0, 3], keep_steps=[3, 6], orthogonality_labels=x)
    np.testing.assert_array_equal(trace.steps, [0, 3, 6])
    assert sorted(trace.kept) == [3, 6] and len(trace.losses) == 6
    assert_book_close(trace.metric("loss")[0], trace.losses[0], rtol=1e-6)  # same batch, same weights
    assert trace.metric("loss", head=1).shape == (3,)
    assert_book_close(trace.at(6).loss, trace.metric("loss")[-1])
    with pytest.raises(KeyError, match="kept"):
        trace.at(0)


def test_large_negative_float_mask_hides_keys():
    torch.manual_seed(0)
    mha = nn.MultiheadAttention(8, 2, batch_first=True)
    bias = torch.zeros(5, 5)
    bias[:, 4] = torch.finfo(torch.float32).min  # a "mask" written as the most negative float, not −inf

    class Wrap(nn.Module):
        def __init__(self):
            super().__init__()
            self.mha, self.readout = mha, nn.Linear(8, 3)

        def forward(self, x):
            return self.readout(self.mha(x, x, x, attn_mask=bias)[0])

    head = D.diagnose(Wrap(), torch.randn(2, 5, 8), torch.randint(0, 3, (2, 5))).heads[0]
    assert not head.capture.visible[:, :, 4].any() and head.capture.visible[:, :, :4].all()
    assert not head.starved.any()

