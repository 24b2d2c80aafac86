"""Chapter 1's ledger claims: the three exactness checks of the worked example (float64, rounding-level bounds), and
the numbers its prose glues."""

from __future__ import annotations

from ...ledger import claims
from .runs import WorkedExample
from .settings import SetupSettings

__all__ = ["record_exactness"]


def record_exactness(errors: dict[str, float], ex: WorkedExample, cfg: SetupSettings, *,
                     seed: int) -> dict[str, str]:
    """Record the three exactness claims (tolerance 1e-12), glue the example's loss and the attention rows' largest
    departure from summing to one, and return the checks as a reader's table: what is compared → largest
    difference."""
    example = {"seed": seed, "T": cfg.T, "d_in": cfg.d_in, "d_k": cfg.d_k, "d_v": cfg.d_v,
               "n_classes": cfg.n_classes, "dtype": "float64"}
    claims.record("setup.forward_vs_sdpa_max_abs_err", errors["forward"], unit="",
                  description="max |g − g_sdpa| between the head and PyTorch's fused attention (float64)",
                  expected=0.0, tolerance=1e-12, params=example)
    claims.record("setup.upstream_grad_vs_autograd_max_abs_err", errors["upstream"], unit="",
                  description="max |u − ∂L/∂g (autograd)| for the closed-form error signal (float64)",
                  expected=0.0, tolerance=1e-12, params=example)
    claims.record("setup.expected_compatibility_identity_max_abs_err", errors["identity"], unit="",
                  description="max |Σ_j α_ij b_ij − u_i·g_i| (the identity in eq. compatibility, float64)",
                  expected=0.0, tolerance=1e-12, params=example)
    claims.glue("setup.loss", ex.fwd.loss.item())
    claims.glue("setup.attention_row_sum_max_abs_err", errors["row_sum"])
    return {
        "context vectors g against PyTorch's fused attention": f"{errors['forward']:.1e}",
        "error signal u (closed form) against autograd": f"{errors['upstream']:.1e}",
        "Σ_j α_ij b_ij against u_i · g_i": f"{errors['identity']:.1e}",
        "each attention row's sum against one": f"{errors['row_sum']:.1e}",
    }
