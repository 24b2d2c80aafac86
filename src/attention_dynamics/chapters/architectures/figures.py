"""Chapter 7's figures: training losses, the routing-law fits, the state clusters, the HMM's KL by step, binding
at runs four times as long, the sticky tunnel's KL curves, and the KL curves over seeds of the long-memory tunnel
and of the families at chapter 6's setting.

Each function returns its figure, made for the book's column (at most
:data:`~attention_dynamics.core.plotting.MAX_FIGURE_WIDTH_IN` wide, text of at least 8 pt, legends clear of the reference
lines), and every model family keeps its colour (its entry's in :mod:`attention_dynamics.models.registry`): the figures
draw every registered family found in their results."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import matplotlib.scale
import matplotlib.ticker
import numpy as np

from ...core import plotting
from ...diagnostics.memory_ladder import MemoryLadder
from ...diagnostics.routing_fit import AdvantageFit
from ...diagnostics.state_clusters import StateClustering
from ...models.registry import family_color, family_label, family_names
from ...science import stats
from ...tasks.wind_tunnels import STICKY_HMM_TASK, TASK_PRIMITIVES, WindTunnel
from ...training.families import RunResult
from .runs import ReferenceLevels, realised_threshold, sticky_levels
from .settings import REALISED_BINDING_ACCURACY

__all__ = []


def plot_training_losses(results: Mapping[tuple[str, str], RunResult], tasks: Sequence[WindTunnel],
                         floors_nats: Mapping[str, float], *, window: int = 25):
    """Return the figure of the training loss (nats, moving average over ``window`` steps) of every family, one panel
    per task (two panels to a row).

    ``floors_nats``: the Bayes floor of each task's loss (the mean posterior entropy), drawn dashed. The legend fills
    the spare panel of an odd number of tasks (three or more), and stands below the panels otherwise.
    """

    spare = len(tasks) >= 3 and len(tasks) % 2 == 1
    fig, axes = plotting.new_figure(len(tasks) + spare, width=3.6, height=2.8)
    axes = np.atleast_1d(axes)
    for ax, task in zip(axes, tasks):
        for family in family_names():
            if (family, task.name) not in results:
                continue
            losses = results[(family, task.name)].losses
            ax.plot(*stats.moving_average(losses, min(window, len(losses))), color=family_color(family), label=family_label(family))
        ax.axhline(floors_nats[task.name], color="black", ls="--", lw=1, label="Bayes floor")
        ax.set_title(f"{task.name} ({TASK_PRIMITIVES[task.name]})")
        ax.set_xlabel("training step")
        ax.set_ylabel("cross-entropy (nats)")
    handles, labels = axes[0].get_legend_handles_labels()
    if spare:
        axes[-1].axis("off")
        axes[-1].legend(handles, labels, loc="center", frameon=False)
    else:
        fig.legend(handles, labels, loc="outside lower center", ncols=3, frameon=False)
    return fig


def plot_advantage_fits(softmax: tuple[np.ndarray, np.ndarray], mamba: AdvantageFit, r2_rows: Mapping[str, Sequence[float]],
                        layer_labels: Sequence[str], *, mamba_title: str = "Mamba selective scan"):
    """Return the figure of (a) softmax routing, autograd vs the advantage form; (b) Mamba, true logit
    gradient vs its best advantage-form fit (``mamba_title`` above its $R^2$); (c) R² by layer for each Mamba model in
    ``r2_rows``, across the width of the figure below the two scatter plots. Its axes, in order: (a), (b), (c)."""

    import matplotlib.pyplot as plt

    fig = plt.figure(figsize=(7.6, 6.6), layout="constrained")
    grid = fig.add_gridspec(2, 2, height_ratios=(1.25, 1))
    axes = [fig.add_subplot(grid[0, 0]), fig.add_subplot(grid[0, 1]), fig.add_subplot(grid[1, :])]
    truth, law = softmax
    ax = axes[0]
    ax.scatter(law, truth, s=4, alpha=0.5, color=family_color("transformer"))
    lim = float(np.abs(np.concatenate([truth, law])).max()) * 1.05
    ax.plot([-lim, lim], [-lim, lim], color="black", lw=0.8, ls="--")
    ax.set(xlim=(-lim, lim), ylim=(-lim, lim), title="softmax routing,\nlogits from a network on content",
           xlabel=r"$\alpha_{ij}(b_{ij} - \mathbb{E}_{\alpha_i}[b])$ (nats)", ylabel=r"autograd $\partial L/\partial s_{ij}$ (nats)")
    ax = axes[1]
    ax.scatter(mamba.fitted, mamba.true, s=4, alpha=0.4, color=family_color("mamba"))
    lim = float(np.abs(np.concatenate([mamba.true, mamba.fitted])).max()) * 1.5
    ax.plot([-lim, lim], [-lim, lim], color="black", lw=0.8, ls="--")
    linthresh = float(np.quantile(np.abs(mamba.true[mamba.true != 0]), 0.5)) if np.any(mamba.true != 0) else 1.0
    powers = np.arange(np.ceil(np.log10(linthresh)), np.floor(np.log10(lim)) + 1)[::-2][::-1]  # every other decade
    ticks = [*(-(10.0 ** powers[::-1])), 0.0, *(10.0 ** powers)]
    for axis in (ax.xaxis, ax.yaxis):  # heavy-tailed: linear near 0, logarithmic beyond
        axis._set_axes_scale(matplotlib.scale.SymmetricalLogScale(axis, linthresh=linthresh))
        axis.set_ticks(ticks if axis is ax.yaxis or len(ticks) <= 3 else ticks[::2])  # the x labels are wider
    ax.set(xlim=(-lim, lim), ylim=(-lim, lim), title=f"{mamba_title}\n$R^2$ = {mamba.r2:.2f}",
           xlabel=r"best fit $\lambda_i A_{ij}$ (nats, symlog)",
           ylabel=r"true $\partial L/\partial \ln|w_{ij}|$ (nats, symlog)")
    ax = axes[2]
    n = len(r2_rows)
    width = 0.8 / max(n, 1)
    x = np.arange(len(layer_labels))
    for k, (label, values) in enumerate(r2_rows.items()):
        colour = "0.6" if k == 0 else plotting.PALETTE[(5, 8, 9, 6)[(k - 1) % 4]]
        ax.bar(x + (k - (n - 1) / 2) * width, values, width=width, label=label, color=colour)
    ax.axhline(1.0, color=family_color("transformer"), lw=1.2, ls="--", label="softmax routing (exact)")
    ax.set(xticks=x, xticklabels=list(layer_labels), ylim=(0, 1.05), yticks=np.linspace(0, 1, 6),
           ylabel=r"$R^2$ of the advantage form", title="advantage share of Mamba's routing gradient",
           xlabel="Mamba layer")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), frameon=False)  # clear of the softmax line
    return fig


def plot_state_clusters(result: StateClustering, *, title: str, max_points: int = 3000):
    """Return the figure of the states' first two principal components coloured by the most probable hidden
    state and by each labelling in ``result.other_labels``, and (below, across the figure) the k-means purity
    against each labelling next to chance and to the purity of clustering the exact posteriors."""

    import matplotlib.pyplot as plt

    colourings = {"most probable state": result.labels, **result.other_labels}
    fig = plt.figure(figsize=(7.6, 7.0), layout="constrained")
    grid = fig.add_gridspec(2, len(colourings), height_ratios=(1.35, 1))
    axes = [fig.add_subplot(grid[0, k]) for k in range(len(colourings))] + [fig.add_subplot(grid[1, :])]
    n = min(max_points, len(result.labels))
    for ax, (name, labels) in zip(axes, colourings.items()):
        for k, value in enumerate(np.unique(labels)):
            sel = np.flatnonzero(labels[:n] == value)
            ax.scatter(result.coords[sel, 0], result.coords[sel, 1], s=3, alpha=0.5, color=plotting.PALETTE[k % 10],
                       label=str(int(value)))
        ax.set(title=f"{title}\ncoloured by {name}", xlabel=f"PC 1 ({100 * result.explained_variance[0]:.0f}% of variance)",
               ylabel=f"PC 2 ({100 * result.explained_variance[1]:.0f}% of variance)")
        ax.legend(title=name, markerscale=3, loc="upper center", bbox_to_anchor=(0.5, -0.2), frameon=False,
                  ncols=len(np.unique(labels)), columnspacing=0.6, handletextpad=0.1)
    ax = axes[-1]
    names = ["chance", "most probable\nstate", *[k.replace(" ", "\n", 1) for k in result.other_purities], "exact\nposteriors"]
    values = [result.chance, result.purity, *result.other_purities.values(), result.posterior_purity]
    colours = [plotting.PALETTE[7], family_color("mamba"), *[plotting.PALETTE[9]] * len(result.other_purities), "0.4"]
    ax.bar(range(len(values)), values, color=colours, width=0.6)
    for i, v in enumerate(values):
        ax.text(i, v + 0.02, f"{v:.2f}", ha="center", fontsize=9)
    ax.set_xticks(range(len(values)), names)
    ax.set(ylim=(0, 1.15), ylabel="k-means purity\n(5 clusters)", title="purity of the clusters against each labelling")
    return fig


def plot_hmm_kl_by_position(results: Mapping[tuple[str, str], RunResult], levels: ReferenceLevels, *, task: str = "hmm",
                            families: Sequence[str] | None = None, ax=None):
    """Return the figure of the KL to the exact filter (bits) at every step of the HMM, per family (``families``;
    default: every registered family), with the context-blind level — what transport has to beat. The legend stands
    to the right of the axes, clear of the level."""

    if ax is None:
        fig, ax = plotting.new_figure(1, width=7.4, height=3.4)
    else:
        fig = ax.figure
    blind = levels.context_blind_kl_by_position[task]
    steps = np.arange(len(blind))
    for family in family_names() if families is None else families:
        run = results.get((family, task))
        if run is None or run.kl_by_position is None:
            continue
        ax.plot(steps, run.kl_by_position, marker="o", ms=3, color=family_color(family), label=family_label(family))
    # at t = 0 the context-blind posterior is the filter itself (KL 0, off a log axis)
    ax.plot(steps[1:], blind[1:], color="black", ls="--", lw=1.2, label="context-blind\n(exact best), $t \\geq 1$")
    ax.set(yscale="log", xlabel=r"step $t$", ylabel=r"$\mathrm{KL}(\mathrm{posterior}\,\|\,\mathrm{model})$ (bits)",
           title="HMM filtering, step by step")
    ax.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), frameon=False)
    return fig


def plot_binding_longer(spread: Mapping[str, Any], *, paper_accuracy: float, bag_accuracy: float, chance: float):
    """Return the figure of the evidence that decides the binding verdicts stated at a longer run (``spread``: the
    seed-spread results with their longer runs, :data:`~attention_dynamics.chapters.architectures.binding_spread.BINDING_SEED_SPREAD`).

    Top: the training loss of every seed's longer run, per family (block means; the last 20 % of training thick).
    Bottom: each seed's accuracy after the chapter's steps and after the longer run (paired), with the 95 % interval
    of the mean of each, the realised threshold, Paper I's accuracy for Mamba (``paper_accuracy``), the
    bag-of-values level and chance. The two panels are stacked, each with its legend to its right; its axes are
    ``fig.axes`` (loss, accuracy).
    """

    families = [f for f in family_names() if f"binding_{f}_longer" in spread["runs"]]
    if not families:
        raise ValueError("the spread results hold no longer binding runs")
    chapter_steps = spread["settings"]["binding"]["steps"]
    fig, (ax_loss, ax_acc) = plotting.new_figure(1, 2, width=7.6, height=3.1)
    for k, family in enumerate(families):
        short, longer = spread["runs"][f"binding_{family}"], spread["runs"][f"binding_{family}_longer"]
        if [r["seed"] for r in short] != [r["seed"] for r in longer]:
            raise ValueError(f"{family}: the longer runs must repeat the chapter-length runs' seeds")
        color = family_color(family)
        for i, run in enumerate(longer):
            curve = np.asarray(run["loss_curve"])
            x = (np.arange(len(curve)) + 0.5) * run["steps"] / len(curve)
            last = x >= 0.8 * run["steps"]
            ax_loss.plot(x, curve, color=color, lw=1.0, alpha=0.8,
                         label=f"{family_label(family)}, one line\nper seed" if i == 0 else None)
            ax_loss.plot(x[last], curve[last], color=color, lw=3.0, alpha=0.8)
        offset = 0.12 * k
        for i, (run_short, run_long) in enumerate(zip(short, longer)):
            ax_acc.plot([offset, 1 + offset], [run_short["accuracy"], run_long["accuracy"]], color=color, lw=1.0,
                        marker="o", ms=4, alpha=0.7, label=f"{family_label(family)}, each seed" if i == 0 else None)
        for x, key in ((0, f"binding_accuracy_{family}"), (1, f"binding_accuracy_{family}_longer")):
            ci = spread["intervals"][key]
            ax_acc.errorbar([x + offset + 0.06], [ci["mean"]], yerr=[[ci["mean"] - ci["low"]], [ci["high"] - ci["mean"]]],
                            color="black", marker="s", ms=4, capsize=3,
                            label="mean, 95 % interval" if (k, x) == (0, 0) else None)
    ax_loss.axvline(chapter_steps, color="grey", ls=":", lw=1.2, label="the chapter's\nrun ends")
    longer_steps = spread["runs"][f"binding_{families[0]}_longer"][0]["steps"]
    ax_loss.set(yscale="log", xlabel="training step", ylabel="training loss (nats)",
                title=f"Binding, trained {longer_steps // chapter_steps}× as long (last 20 % thick)")
    ax_loss.legend(loc="upper left", bbox_to_anchor=(1.01, 1), frameon=False)
    for level, style, label in ((paper_accuracy, "-", "Paper I, Mamba"),
                                (REALISED_BINDING_ACCURACY, "--", "realised threshold"),
                                (bag_accuracy, "-.", "bag of values (exact)"), (chance, ":", "chance")):
        ax_acc.axhline(level, color="black", ls=style, lw=1.0, label=label)
    ax_acc.set(xticks=[0.1, 1.1], xticklabels=[f"{chapter_steps} steps", f"{longer_steps} steps"], xlim=(-0.4, 1.6),
               ylim=(0, 1.02), ylabel="binding accuracy", title="Each seed, at both lengths")
    ax_acc.legend(loc="upper left", bbox_to_anchor=(1.01, 1), frameon=False)
    return fig


def plot_sticky_kl_curves(stored: Mapping[str, Any], *, ax=None):
    """Return the figure of every family's KL to the exact filter (bits) over training on the sticky tunnel — the
    exact KL on each step's fresh batch, averaged over blocks of steps, the last 20% of each run drawn thick, a
    longer run dashed — with the context-blind level and the transport threshold (a fraction of it). The legend
    stands to the right of the axes, clear of the two levels."""

    if ax is None:
        fig, ax = plotting.new_figure(1, width=7.6, height=3.6)
    else:
        fig = ax.figure
    levels = sticky_levels(stored)
    for family in family_names():
        run = stored["runs"].get(family)
        if run is None:
            continue
        curve = np.asarray(run["kl_curve_bits"])
        x = (np.arange(len(curve)) + 0.5) * run["steps"] / len(curve)
        ax.plot(x, curve, color=family_color(family), lw=1.0, label=family_label(family))
        last = x >= 0.8 * run["steps"]  # the last 20% of training, where a plateau is read
        ax.plot(x[last], curve[last], color=family_color(family), lw=3.0, alpha=0.8)
        longer = stored.get("longer", {}).get(family)
        if longer is not None:
            curve = np.asarray(longer["kl_curve_bits"])
            x = (np.arange(len(curve)) + 0.5) * longer["steps"] / len(curve)
            ax.plot(x, curve, color=family_color(family), lw=1.0, ls="--",
                    label=f"{family_label(family)}, {longer['steps'] // run['steps']}× longer")
    blind = levels.context_blind[STICKY_HMM_TASK]["kl_bits"]
    ax.axhline(blind, color="black", ls="--", lw=1.2, label="context-blind\n(exact best)")
    ax.axhline(realised_threshold(STICKY_HMM_TASK, "kl_bits", levels), color="black", ls=":", lw=1.2,
               label="transport threshold")
    ax.set(yscale="log", xlabel="training step", ylabel=r"$\mathrm{KL}(\mathrm{posterior}\,\|\,\mathrm{model})$ (bits)",
           title="Sticky HMMs: KL to the exact filter over training")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), frameon=False)
    return fig


def plot_seed_curves(stored: Mapping[str, Any], ladder: MemoryLadder, *, title: str, ax=None):
    """Return the figure of each family's KL to the exact filter (bits) over training on a stored tunnel (the
    long-memory tunnel, or the families at chapter 6's setting) — the exact KL on each step's fresh batch, mean over
    seeds with the seeds' range shaded, longer runs dashed — with the context-blind level and the rule window's level
    of the memory ladder. The legend stands to the right of the axes, clear of the two levels."""

    if ax is None:
        fig, ax = plotting.new_figure(1, width=7.6, height=3.6)
    else:
        fig = ax.figure
    for group, style in (("runs", "-"), ("longer", "--")):
        for family, runs in stored.get(group, {}).items():
            curves = np.array([r["kl_curve_bits"] for r in runs.values()])  # (seeds, points)
            steps = next(iter(runs.values()))["steps"]
            x = (np.arange(curves.shape[1]) + 0.5) * steps / curves.shape[1]
            label = family_label(family) + ("" if group == "runs" else f", {steps} steps")
            ax.plot(x, curves.mean(0), ls=style, color=family_color(family), lw=1.2, label=label)
            ax.fill_between(x, curves.min(0), curves.max(0), color=family_color(family), alpha=0.15, lw=0)
    ax.axhline(ladder.context_blind_kl_bits, color="black", ls="--", lw=1.0, label="context-blind\n(1-step window)")
    ax.axhline(ladder.rule_level, color="black", ls=":", lw=1.2, label=f"{ladder.rule_window}-step window\n(transport)")
    ax.set(yscale="log", xlabel="training step", ylabel=r"$\mathrm{KL}(\mathrm{filter}\,\|\,\mathrm{model})$ (bits)",
           title=title)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), frameon=False)
    return fig


def plot_primitive_map(data: Mapping[str, Any]):
    """Return the chapter's key figure: one cell per family (row) and tunnel (column), shaded by the share of what the
    context is worth that the model recovers (0: the context-blind level, 1: the exact posterior), with that share and
    the outcome beside Paper I written in it; a thick frame marks a primitive realised here, a dashed one an outcome
    open at this scale (``data``: :func:`~attention_dynamics.chapters.architectures.summary.primitive_map`)."""

    import matplotlib.patches
    import matplotlib.pyplot as plt

    rows, columns, cells = data["rows"], data["columns"], data["cells"]
    fig, ax = plt.subplots(figsize=(6.9, 0.9 * len(rows) + 1.3), layout="constrained")
    cmap = matplotlib.colormaps["Blues"]
    for i, row in enumerate(rows):
        for j, column in enumerate(columns):
            cell = cells.get((row, column))
            if cell is None:
                ax.add_patch(matplotlib.patches.Rectangle((j, i), 1, 1, fc="0.92", ec="white", lw=3))
                ax.text(j + 0.5, i + 0.5, "not run", ha="center", va="center", fontsize=8, color="0.35")
                continue
            shade = float(np.clip(cell.share, 0, 1))
            ax.add_patch(matplotlib.patches.Rectangle((j, i), 1, 1, fc=cmap(0.08 + 0.8 * shade), ec="white", lw=3))
            ink = "white" if shade > 0.55 else "black"
            percent = round(100 * cell.share)
            ax.text(j + 0.5, i + 0.36, f"{'−' if percent < 0 else ''}{abs(percent)}%", ha="center", va="center",
                    fontsize=12,
                    fontweight="bold", color=ink)
            words = (cell.outcome.replace(" (not tested in Paper I)", "\n(not in Paper I)").replace(", ", ",\n", 1)
                     .replace("open at this scale", "open at\nthis scale"))
            ax.text(j + 0.5, i + 0.7, words, ha="center", va="center", fontsize=8, color=ink, linespacing=1.0)
            if cell.realised or cell.open:
                ax.add_patch(matplotlib.patches.Rectangle((j + 0.07, i + 0.07), 0.86, 0.86, fill=False,
                                                          ec="black", lw=2.2 if not cell.open else 1.4,
                                                          ls="-" if not cell.open else "--"))
    ax.set(xlim=(0, len(columns)), ylim=(len(rows), 0))
    ax.set_xticks(np.arange(len(columns)) + 0.5, columns, fontsize=9)
    ax.set_yticks(np.arange(len(rows)) + 0.5, [r.replace(" (", "\n(") for r in rows], fontsize=9)
    ax.xaxis.tick_top()
    ax.tick_params(length=0)
    ax.grid(False)
    for side in ax.spines.values():
        side.set_visible(False)
    ax.set_title("share of what the context is worth that each model recovers\n(0%: the context-blind level, "
                 "100%: the exact posterior)", fontsize=9)
    return fig


#: The name each figure is glued under for the chapter's ``{glue:figure}`` directives, with the function that draws it.
FIGURES = {
    "fig-arch-primitives": plot_primitive_map,
    "fig-arch-training-losses": plot_training_losses,
    "fig-arch-hmm-kl-by-position": plot_hmm_kl_by_position,
    "fig-arch-ch6-setting-kl": plot_seed_curves,
    "fig-arch-binding-longer": plot_binding_longer,
    "fig-arch-sticky-kl": plot_sticky_kl_curves,
    "fig-arch-longmem-kl": plot_seed_curves,
    "fig-arch-advantage-fits": plot_advantage_fits,
    "fig-arch-state-clusters": plot_state_clusters,
}
