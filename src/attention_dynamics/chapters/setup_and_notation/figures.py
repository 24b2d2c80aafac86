"""Chapter 1's figure: the worked example's attention and compatibility matrices."""

from __future__ import annotations

from ...core import plotting
from ...science import attention
from .runs import WorkedExample

__all__ = ["plot_worked_example"]


def plot_worked_example(ex: WorkedExample):
    """Plot α_ij and b_ij of the worked example side by side (key after query masked); return the figure."""
    T = ex.x.shape[0]
    mask = attention.causal_mask(T)
    fig, axes = plotting.new_figure(2, width=3.6, height=3.1)
    plotting.plot_matrix(axes[0], ex.fwd.alpha, mask=mask, title=r"attention $\alpha_{ij}$", cbar_label="weight")
    plotting.plot_matrix(axes[1], ex.fwd.b, mask=mask, diverging=True,
                         title=r"compatibility $b_{ij} = u_i \cdot v_j$", cbar_label="nats per unit of value")
    fig.suptitle(f"Worked example: one causal head, T = {T}")
    return fig
