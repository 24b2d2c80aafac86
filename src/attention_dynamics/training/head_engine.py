"""A fast closed-form training engine for the single causal head: the paper's laws, block by block.

The engine computes the loss and the four weight gradients of the head of
:mod:`attention_dynamics.science.attention` without autograd, from the closed forms of
:mod:`attention_dynamics.science.gradients` (the paper's gradient laws, chapter 2):

- the error signal ``u_i = W_O (p_i − e_{y_i}) / N`` (:func:`~attention_dynamics.science.attention.upstream_gradient`),
- the advantage routing law ``∂L/∂s_ij = alpha_ij (b_ij − E_{alpha_i}[b])`` with ``b_ij = u_i·v_j``
  (:func:`~attention_dynamics.science.gradients.advantage_routing_gradient`),
- the responsibility-weighted value law ``∂L/∂v_j = Σ_i alpha_ij u_i``
  (:func:`~attention_dynamics.science.gradients.responsibility_weighted_value_gradient`),
- the query and key laws ``∂L/∂q_i = scale Σ_j (∂L/∂s_ij) k_j``, ``∂L/∂k_j = scale Σ_i (∂L/∂s_ij) q_i``,

then the chain rule through the four linear maps. Why it is fast: with one head and no layer
above it, the error signal ``u_i`` depends on query row i alone, so the forward and the backward
pass of a block of query rows can be done together, while the block's ``(rows, keys)`` slice of
the attention matrix is still in cache. Each block only visits the keys it may see (j ≤ i), so
the masked upper triangle is never computed, and the ``T × T`` matrices are never stored.
:func:`attention_dynamics.science.gradients.single_head_parameter_gradients` is the same computation on
the whole matrix at once (the explicit formula, kept for checking).

:class:`SingleHeadModule` wraps the head as an ``nn.Module`` and :func:`closed_form_backward`
is the ``backward=`` routine that lets :func:`attention_dynamics.training.fit` train it with this
engine.
"""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Callable

import torch
import torch.nn.functional as F

from ..models.single_head import SingleHeadModule
from ..science.attention import SingleHeadParams, single_head_forward

__all__ = [
    "DEFAULT_QUERY_ROWS_PER_BLOCK",
    "HeadPass",
    "closed_form_head_pass",
    "closed_form_backward",
    "autograd_head_loss",
    "head_metrics",
    "identity_routing_pass",
]

#: Query rows per block: a (128 × T) float32 slice of the attention matrix stays in cache for T ≈ 2000.
DEFAULT_QUERY_ROWS_PER_BLOCK = 128


@dataclass
class HeadPass:
    """What one closed-form pass returns: the loss (nats), the weight gradients and the soft counts.

    ``grads`` maps ``"W_Q", "W_K", "W_V", "W_O"`` to tensors of the weights' shapes.
    ``soft_counts`` ``(T,)`` holds ``N_j = Σ_i alpha_ij``, the attention mass each key position
    receives (the responsibilities' column sums; they add up to the number of queries).
    ``grad_values`` ``(T, d_v)`` is ∂L/∂v_j, the responsibility-weighted value gradient.
    """

    loss: torch.Tensor
    grads: dict[str, torch.Tensor]
    soft_counts: torch.Tensor
    grad_values: torch.Tensor


def closed_form_head_pass(
    x: torch.Tensor,
    params: SingleHeadParams,
    targets: torch.Tensor,
    *,
    block_size: int = DEFAULT_QUERY_ROWS_PER_BLOCK,
    workers: int | None = None,
) -> HeadPass:
    """Return the mean cross-entropy (nats) and its weight gradients for one causal head, without autograd.

    ``x`` is one sequence ``(T, d_in)``, ``targets`` ``(T,)`` class indices; the loss is the mean over
    the T positions, exactly as :func:`attention_dynamics.science.attention.single_head_forward` with
    ``reduction="mean"``. Query rows are processed in blocks of ``block_size``; block r sees keys
    ``0 … end of block`` only (see the module docstring). ``workers`` (default: PyTorch's thread
    count) threads share the blocks, each running its products single-threaded: the products are
    too small for PyTorch's own threads, whose synchronisation costs more than it saves.
    """
    if x.ndim != 2 or x.shape[-1] != params.W_Q.shape[0]:
        raise ValueError(f"x must be one sequence (T, {params.W_Q.shape[0]}), got {tuple(x.shape)}")
    if targets.shape != x.shape[:1]:
        raise ValueError(f"targets must have shape ({x.shape[0]},), got {tuple(targets.shape)}")
    if not isinstance(block_size, int) or block_size < 1:
        raise ValueError(f"block_size must be a positive integer, got {block_size!r}")
    workers = torch.get_num_threads() if workers is None else workers
    if not isinstance(workers, int) or workers < 1:
        raise ValueError(f"workers must be a positive integer, got {workers!r}")
    with torch.no_grad():
        W_Q, W_K, W_V, W_O = (t.detach() for t in (params.W_Q, params.W_K, params.W_V, params.W_O))
        T = x.shape[0]
        scale = 1.0 / math.sqrt(W_Q.shape[1])
        # Transposed copies: BLAS is several times faster on (small × rows) @ (rows × keys) products
        # than on (rows × keys) @ (keys × small) ones, so every product below keeps the long axis last.
        shared = _SharedInputs(
            q_t=((x @ W_Q) * scale).T.contiguous(),  # (d_k, T), the score scale folded into the queries
            k_t=(x @ W_K).T.contiguous(),  # (d_k, T)
            v_t=(x @ W_V).T.contiguous(),  # (d_v, T)
            W_O=W_O,
            W_O_t=W_O.T.contiguous(),  # (C, d_v)
            targets=targets,
            grad_q_t=torch.empty(W_Q.shape[1], T, dtype=x.dtype, device=x.device),  # ∂L/∂(scaled q)ᵀ, written per block
            block_size=block_size,
        )
        starts = list(range(0, T, block_size))
        groups = _balanced_groups(starts, block_size, T, min(workers, len(starts)))
        if len(groups) == 1:
            partials = [_block_group(shared, groups[0])]
        else:
            threads = torch.get_num_threads()
            torch.set_num_threads(1)
            try:
                partials = list(_thread_pool(len(groups)).map(lambda g: _block_group(shared, g), groups))
            finally:
                torch.set_num_threads(threads)
        loss, grad_k_t, grad_v_t, grad_W_O, soft_counts = (sum(parts) for parts in zip(*partials))
        grads = {
            "W_Q": (shared.grad_q_t @ x).T * scale,  # q_scaled = scale · x W_Q
            "W_K": (grad_k_t @ x).T,
            "W_V": (grad_v_t @ x).T,
            "W_O": grad_W_O,
        }
    return HeadPass(loss=(loss / T).to(x.dtype), grads=grads, soft_counts=soft_counts, grad_values=grad_v_t.T)


@dataclass
class _SharedInputs:
    q_t: torch.Tensor
    k_t: torch.Tensor
    v_t: torch.Tensor
    W_O: torch.Tensor
    W_O_t: torch.Tensor
    targets: torch.Tensor
    grad_q_t: torch.Tensor
    block_size: int


def _block_group(sh: _SharedInputs, starts: list[int]) -> tuple[torch.Tensor, ...]:
    """Run the fused forward/backward of the query blocks beginning at ``starts``; return their sums.

    Returns (summed −log p, ∂L/∂kᵀ, ∂L/∂vᵀ, ∂L/∂W_O, soft counts); ∂L/∂qᵀ is written into ``sh.grad_q_t``
    (each block owns its columns). The two ``(rows, keys)`` matrices of a block (the attention
    weights, then the compatibilities turned in place into ∂L/∂s) live in two buffers allocated once
    per call, every product writes into its destination, and the soft counts come out of the value
    gradient's product (a column of ones beside the error signals), so a block makes five passes
    over its keys: scores, softmax, compatibilities, their advantage, and the three products that read them.
    """
    q_t, k_t, v_t = sh.q_t, sh.k_t, sh.v_t
    d_v, T = v_t.shape
    bs, dtype, device = sh.block_size, q_t.dtype, q_t.device
    grad_k_t = torch.zeros_like(k_t)  # (d_k, T)
    grad_vn_t = torch.zeros(d_v + 1, T, dtype=dtype, device=device)  # (∂L/∂vᵀ; soft counts)
    grad_W_O = torch.zeros_like(sh.W_O)  # (d_v, C)
    loss = torch.zeros((), dtype=torch.float64, device=device)
    longest = max(min(s + bs, T) for s in starts) * bs
    alpha_buf = torch.empty(longest, dtype=dtype, device=device)
    grad_s_buf = torch.empty(longest, dtype=dtype, device=device)
    u_ones = torch.ones(bs, d_v + 1, dtype=dtype, device=device)  # (error signal u_i, 1)
    future = torch.ones(bs, bs, dtype=torch.bool, device=device).triu(1)  # key after query
    row_index = torch.arange(bs, device=device)
    for start in starts:
        end = min(start + bs, T)
        rows = end - start
        q_block = q_t[:, start:end].T  # (rows, d_k)
        alpha = alpha_buf[: rows * end].view(rows, end)
        torch.mm(q_block, k_t[:, :end], out=alpha)  # scores: only keys j < end
        alpha[:, start:end].masked_fill_(future[:rows, :rows], float("-inf"))
        torch.softmax(alpha, dim=1, out=alpha)  # attention over the visible keys, in place
        g = (v_t[:, :end] @ alpha.T).T  # context g_i = Σ_j alpha_ij v_j  (rows, d_v)
        log_p = torch.log_softmax(g @ sh.W_O, dim=1)  # (rows, C)
        y = sh.targets[start:end]
        loss -= log_p.gather(1, y[:, None]).sum().double()
        delta = log_p.exp_()  # p, in place
        delta[row_index[:rows], y] -= 1.0
        delta /= T  # ∂L/∂logits of the mean loss  (rows, C)
        grad_W_O.addmm_(g.T, delta)
        u = u_ones[:rows, :d_v]
        torch.mm(delta, sh.W_O_t, out=u)  # error signal u_i = ∂L/∂g_i  (rows, d_v)
        grad_s = grad_s_buf[: rows * end].view(rows, end)
        torch.mm(u, v_t[:, :end], out=grad_s)  # compatibility b_ij = u_i·v_j
        expected_b = (u * g).sum(dim=1, keepdim=True)  # E_alpha_i[b] = u_i·g_i  (rows, 1)
        grad_s.sub_(expected_b).mul_(alpha)  # advantage routing law, in place  (rows, end)
        torch.mm(k_t[:, :end], grad_s.T, out=sh.grad_q_t[:, start:end])  # Σ_j ∂L/∂s_ij k_j
        grad_k_t[:, :end].addmm_(q_block.T, grad_s)  # += Σ_i ∂L/∂s_ij q_i
        grad_vn_t[:, :end].addmm_(u_ones[:rows].T, alpha)  # += Σ_i alpha_ij (u_i, 1): value law, soft counts
    return loss, grad_k_t, grad_vn_t[:d_v], grad_W_O, grad_vn_t[d_v]


def _balanced_groups(starts: list[int], block_size: int, T: int, n_groups: int) -> list[list[int]]:
    # Block r visits end(r) keys; hand blocks, largest first, to the group with the least work so far.
    groups: list[list[int]] = [[] for _ in range(max(n_groups, 1))]
    load = [0] * len(groups)
    for start in sorted(starts, key=lambda s: -min(s + block_size, T)):
        k = load.index(min(load))
        groups[k].append(start)
        load[k] += min(start + block_size, T)
    return [sorted(g) for g in groups if g]


_POOLS: dict[int, ThreadPoolExecutor] = {}


def _thread_pool(n: int) -> ThreadPoolExecutor:
    if n not in _POOLS:
        _POOLS[n] = ThreadPoolExecutor(max_workers=n, thread_name_prefix="head-engine")
    return _POOLS[n]


def closed_form_backward(
    *, block_size: int = DEFAULT_QUERY_ROWS_PER_BLOCK
) -> Callable[[SingleHeadModule, tuple], torch.Tensor]:
    """Return a ``backward(model, (x, y))`` routine for :func:`attention_dynamics.training.fit` that fills ``.grad`` from the engine."""

    def backward(model: SingleHeadModule, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        x, y = batch
        result = closed_form_head_pass(x, model.head_params(), y, block_size=block_size)
        for name, grad in result.grads.items():
            getattr(model, name).grad = grad
        return result.loss

    return backward


def autograd_head_loss(model: SingleHeadModule, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
    """Return the mean cross-entropy (nats) of the dense head, differentiable (the ``loss_fn=`` for autograd)."""
    x, y = batch
    logits = model(x)
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))


def identity_routing_pass(x: torch.Tensor, params: SingleHeadParams, targets: torch.Tensor) -> HeadPass:
    """Return the loss and weight gradients of the head with its attention pinned to the identity (alpha = I).

    Each query reads only its own value, g_i = v_i = W_Vᵀ x_i: the sticky chain's Bayes routing (its posterior needs
    only the current symbol, which x_i carries). W_Q and W_K do not enter, so their gradients are zero; every soft
    count is 1. Autograd on the three-line forward; the mean cross-entropy in nats, as the engine.
    """
    W_V = params.W_V.detach().requires_grad_(True)
    W_O = params.W_O.detach().requires_grad_(True)
    with torch.enable_grad():
        values = x @ W_V  # (T, d_v): g_i = v_i
        values.retain_grad()
        loss = F.cross_entropy(values @ W_O, targets)
        loss.backward()
    zeros = {n: torch.zeros_like(getattr(params, n)) for n in ("W_Q", "W_K")}
    return HeadPass(loss=loss.detach(), grads={**zeros, "W_V": W_V.grad, "W_O": W_O.grad},
                    soft_counts=torch.ones(x.shape[0], dtype=x.dtype), grad_values=values.grad)


def head_metrics(
    x: torch.Tensor, params: SingleHeadParams, targets: torch.Tensor, key_symbols: torch.Tensor | None = None,
    *, identity_routing: bool = False,
) -> dict[str, float]:
    """Return the head's mean cross-entropy and predictive entropy (nats) and its accuracy on one sequence.

    With ``key_symbols`` ``(T,)`` (the symbol each input carries), also ``same_symbol_attention``: the
    mean over queries of the attention mass on keys that carry the query's own symbol, and
    ``same_symbol_chance``, that mass under uniform causal attention. ``identity_routing``: the head with its
    attention pinned to the identity (:func:`identity_routing_pass`).
    """
    with torch.no_grad():
        fwd = single_head_forward(x, params, targets)
        if identity_routing:
            fwd.alpha = torch.eye(x.shape[0], dtype=fwd.alpha.dtype)
            fwd.logits = (x @ params.W_V) @ params.W_O
            fwd.loss = F.cross_entropy(fwd.logits, targets)
        log_p = torch.log_softmax(fwd.logits, dim=-1)
        out = {
            "loss": float(fwd.loss),
            "entropy": float(-(log_p.exp() * log_p).sum(-1).mean()),
            "accuracy": float((fwd.logits.argmax(-1) == targets).double().mean()),
        }
        if key_symbols is not None:
            same = (key_symbols[:, None] == key_symbols[None, :]).tril()  # (T, T): key j ≤ i carries i's symbol
            out["same_symbol_attention"] = float((fwd.alpha * same).sum(-1).double().mean())
            positions = torch.arange(1, x.shape[0] + 1, dtype=torch.float64)
            out["same_symbol_chance"] = float((same.sum(-1) / positions).mean())
    return out
