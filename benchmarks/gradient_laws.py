"""Time one training step of the paper's sticky-chain head: closed-form gradient laws vs autograd.

The head of the paper's sticky Markov-chain experiment (arXiv:2512.22473): one causal head on a sequence of T = 2000 positions, W_Q, W_K
(20 × 10), W_V (20 × 15), W_O (15 × 8), mean cross-entropy, float32, plain SGD with lr 0.01.
One step = forward pass, the four parameter gradients, and the update. The closed-form step gets its
gradients from ``gradients.single_head_parameter_gradients`` (the routing, value, query and key laws,
no autograd); the autograd step from ``loss.backward()`` on the same forward pass.

Prints the median milliseconds per step of each and their ratio (autograd / closed form), and how
far apart the two gradients are. Run alone: timings on a busy machine are inflated.

    python benchmarks/gradient_laws.py [--T 2000] [--threads 2] [--repeats 30]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
import torch.nn.functional as F

from attention_dynamics.science.attention import init_single_head, single_head_forward
from attention_dynamics.science.gradients import single_head_parameter_gradients

LEARNING_RATE = 0.01  # the paper's SGD step on all four matrices


def sticky_chain_like_batch(T: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """Return inputs ``(T, 20)`` and targets ``(T,)`` shaped like the sticky chain's (values do not affect timing)."""
    symbol_means = torch.randn(8, 20, generator=generator)  # (8, 20): mu
    symbols = torch.randint(0, 8, (T + 1,), generator=generator)  # y_0 .. y_T
    x = symbol_means[symbols[:-1]] + torch.randn(T, 20, generator=generator)  # x_t = mu[y_{t-1}] + noise
    return x, symbols[1:]


def closed_form_step(params, x, y) -> torch.Tensor:
    """One SGD step with gradients from the closed-form laws; return the loss before the step."""
    loss, grads = single_head_parameter_gradients(x, params, y)
    for name, weight in params.as_dict().items():
        weight.sub_(LEARNING_RATE * grads[name])
    return loss


def autograd_step(params, x, y) -> torch.Tensor:
    """One SGD step with gradients from autograd; return the loss before the step."""
    fwd = single_head_forward(x, params)  # no targets: skip the closed-form u and b
    loss = F.cross_entropy(fwd.logits, y)
    loss.backward()
    with torch.no_grad():
        for weight in params.as_dict().values():
            weight.sub_(LEARNING_RATE * weight.grad)
            weight.grad = None
    return loss.detach()


def time_steps(step, params, x, y, *, repeats: int, warmup: int = 3) -> float:
    """Return the median wall-clock time of one step, in milliseconds."""
    for _ in range(warmup):
        step(params, x, y)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        step(params, x, y)
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--T", type=int, default=2000, help="sequence length (default: 2000, the paper's)")
    parser.add_argument("--threads", type=int, default=2, help="torch CPU threads (default: 2)")
    parser.add_argument("--repeats", type=int, default=30, help="timed steps per method (default: 30)")
    args = parser.parse_args()

    torch.set_num_threads(args.threads)
    generator = torch.Generator().manual_seed(0)
    x, y = sticky_chain_like_batch(args.T, generator)
    start = init_single_head(20, 10, 15, 8, std=0.1, generator=generator)  # float32

    # The two routes agree on the gradients (float32 rounding only).
    _, closed = single_head_parameter_gradients(x, start, y)
    leaf = start.clone().requires_grad_(True)
    F.cross_entropy(single_head_forward(x, leaf).logits, y).backward()
    disagreement = max(
        ((closed[n] - t.grad).abs().max() / t.grad.abs().max()).item() for n, t in leaf.as_dict().items()
    )

    closed_ms = time_steps(closed_form_step, start.clone(), x, y, repeats=args.repeats)
    autograd_ms = time_steps(autograd_step, start.clone().requires_grad_(True), x, y, repeats=args.repeats)

    print(f"sticky-chain head: T = {args.T}, 20 -> 10/10/15 -> 8, float32, {args.threads} threads, "
          f"median of {args.repeats} steps")
    print(f"  closed-form laws : {closed_ms:8.2f} ms/step")
    print(f"  autograd         : {autograd_ms:8.2f} ms/step")
    print(f"  ratio autograd / closed form: {autograd_ms / closed_ms:.2f}x")
    print(f"  max relative gradient difference: {disagreement:.1e} (float32)")


if __name__ == "__main__":
    main()
