"""Chapter 7's report: its reference levels glued for the prose, its claims with their reasons, tables and figures.

The experiment itself (settings, runs, reference levels, verdict rules) is
:mod:`attention_dynamics.experiments.architectures`; this module reads its results.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from .. import stats
from ..diagnostics.routing_fit import AdvantageFit
from ..diagnostics.state_clusters import StateClustering
from ..models.factory import FAMILIES, FAMILY_LABELS
from ..seeding import stream, torch_generator
from ..tasks import associative_recall
from ..tasks.wind_tunnels import (
    TASK_PRIMITIVES,
    TaskBatch,
    WindTunnel,
)
from .architectures import (
    PAPER_I_RESULTS,
    ReferenceLevels,
    RunResult,
    book_tasks,
    evaluation_batch,
    evaluation_seed,
    not_decided_reason,
    pd_table,
    realises_primitive,
    record_table_claims,
    reference_levels,
    verdict_summary,
)

# --------------------------------------------------------------------------------------------
# Figures
# --------------------------------------------------------------------------------------------


def family_color(family: str):
    """Return the fixed colour of a model family (the same in every figure of the chapter)."""
    from ..plotting import PALETTE

    return PALETTE[FAMILIES.index(family) % len(PALETTE)]


def plot_training_losses(results: Mapping[tuple[str, str], RunResult], tasks: Sequence[WindTunnel],
                         floors_nats: Mapping[str, float], *, window: int = 25):
    """Return ``(fig, axes)``: the training loss (nats, moving average over ``window`` steps) of every family, one panel per task.

    ``floors_nats``: the Bayes floor of each task's loss (the mean posterior entropy), drawn dashed.
    """
    from .. import plotting

    fig, axes = plotting.new_figure(len(tasks), width=3.5, height=2.9)
    for ax, task in zip(np.atleast_1d(axes), tasks):
        for family in FAMILIES:
            if (family, task.name) not in results:
                continue
            losses = results[(family, task.name)].losses
            ax.plot(*stats.moving_average(losses, min(window, len(losses))), color=family_color(family), label=FAMILY_LABELS[family])
        ax.axhline(floors_nats[task.name], color="black", ls="--", lw=1, label="Bayes floor")
        ax.set_title(f"{task.name} ({TASK_PRIMITIVES[task.name]})")
        ax.set_xlabel("training step")
        ax.set_ylabel("cross-entropy (nats)")
    handles, labels = np.atleast_1d(axes)[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=len(labels), fontsize=8)
    return fig, axes


def plot_advantage_fits(softmax: tuple[np.ndarray, np.ndarray], mamba: AdvantageFit, r2_rows: Mapping[str, Sequence[float]],
                        layer_labels: Sequence[str]):
    """Return ``(fig, axes)``: (a) softmax routing, autograd vs the advantage form; (b) Mamba, true logit
    gradient vs its best advantage-form fit; (c) R² by layer for each Mamba model in ``r2_rows``."""
    import matplotlib.scale

    from .. import plotting

    fig, axes = plotting.new_figure(3, width=3.7, height=3.3)
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
        axis.set_ticks(ticks)
    ax.set(xlim=(-lim, lim), ylim=(-lim, lim), title=f"Mamba selective scan\n$R^2$ = {mamba.r2:.2f}",
           xlabel=r"best advantage-form fit $\lambda_i A_{ij}$ (nats, symlog)",
           ylabel=r"true $\partial L/\partial \ln|w_{ij}|$ (nats, symlog)")
    ax.tick_params(labelsize=7)
    ax = axes[2]
    n = len(r2_rows)
    width = 0.8 / max(n, 1)
    x = np.arange(len(layer_labels))
    for k, (label, values) in enumerate(r2_rows.items()):
        colour = "0.6" if k == 0 else plotting.PALETTE[(5, 8, 9, 6)[(k - 1) % 4]]
        ax.bar(x + (k - (n - 1) / 2) * width, values, width=width, label=label, color=colour)
    ax.axhline(1.0, color=family_color("transformer"), lw=1.2, ls="--", label="softmax routing (exact)")
    ax.set(xticks=x, xticklabels=list(layer_labels), ylim=(0, 1.5), yticks=np.linspace(0, 1, 6),
           ylabel=r"$R^2$ of the advantage form", title="advantage share of\nMamba's routing gradient",
           xlabel="Mamba layer")
    ax.legend(loc="upper center", ncol=2, fontsize=6.5, columnspacing=0.8, handlelength=1.5)
    return fig, axes


def plot_state_clusters(result: StateClustering, *, title: str, max_points: int = 3000):
    """Return ``(fig, axes)``: the states' first two principal components coloured by the most probable hidden
    state and by each labelling in ``result.other_labels``, and the k-means purity against each labelling next to
    chance and to the purity of clustering the exact posteriors."""
    from .. import plotting

    colourings = {"most probable state": result.labels, **result.other_labels}
    fig, axes = plotting.new_figure(len(colourings) + 1, width=3.6, height=3.3)
    n = min(max_points, len(result.labels))
    for ax, (name, labels) in zip(axes, colourings.items()):
        for k, value in enumerate(np.unique(labels)):
            sel = np.flatnonzero(labels[:n] == value)
            ax.scatter(result.coords[sel, 0], result.coords[sel, 1], s=3, alpha=0.5, color=plotting.PALETTE[k % 10],
                       label=str(int(value)))
        ax.set(title=f"{title}\ncoloured by {name}", xlabel=f"PC 1 ({100 * result.explained_variance[0]:.0f}% of variance)",
               ylabel=f"PC 2 ({100 * result.explained_variance[1]:.0f}% of variance)")
        ax.legend(title=name, fontsize=7, title_fontsize=7, markerscale=3, loc="upper center",
                  bbox_to_anchor=(0.5, -0.3), ncol=len(np.unique(labels)), columnspacing=0.6, handletextpad=0.1)
    ax = axes[-1]
    names = ["chance", "most\nprobable\nstate", *[k.replace(" ", "\n") for k in result.other_purities], "exact\nposteriors"]
    values = [result.chance, result.purity, *result.other_purities.values(), result.posterior_purity]
    colours = [plotting.PALETTE[7], family_color("mamba"), *[plotting.PALETTE[9]] * len(result.other_purities), "0.4"]
    ax.bar(range(len(values)), values, color=colours)
    for i, v in enumerate(values):
        ax.text(i, v + 0.02, f"{v:.2f}", ha="center", fontsize=8)
    ax.set_xticks(range(len(values)), names, fontsize=7)
    ax.set(ylim=(0, 1.12), ylabel="k-means purity (5 clusters)", title="purity of the clusters\nagainst each labelling")
    return fig, axes


def plot_hmm_kl_by_position(results: Mapping[tuple[str, str], RunResult], levels: ReferenceLevels, *, task: str = "hmm",
                            families: Sequence[str] = FAMILIES, ax=None):
    """Return ``(fig, ax)``: KL to the exact filter (bits) at every step of the HMM, per family, with the
    context-blind level — what transport has to beat."""
    import matplotlib.ticker

    from .. import plotting

    if ax is None:
        fig, ax = plotting.new_figure(1, width=5.0, height=3.2)
    else:
        fig = ax.figure
    blind = levels.context_blind_kl_by_position[task]
    steps = np.arange(len(blind))
    for family in families:
        run = results.get((family, task))
        if run is None or run.kl_by_position is None:
            continue
        ax.plot(steps, run.kl_by_position, marker="o", ms=3, color=family_color(family), label=FAMILY_LABELS[family])
    # at t = 0 the context-blind posterior is the filter itself (KL 0, off a log axis)
    ax.plot(steps[1:], blind[1:], color="black", ls="--", lw=1.2, label="context-blind (exact best), t ≥ 1")
    ax.set(yscale="log", xlabel="step t", ylabel="KL(posterior ‖ model) (bits)", title="HMM filtering, step by step")
    ax.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))
    ax.legend(fontsize=7, ncol=2)
    return fig, ax




# --------------------------------------------------------------------------------------------
# The chapter's reference levels, claims and tables, from its runs
# --------------------------------------------------------------------------------------------


@dataclass
class ChapterSetup:
    """Chapter 7's tasks with their shared evaluation sets and exact reference levels.

    ``paper_hmm_levels``: the reference levels of Paper I's own HMM (K = 20), for reading its numbers.
    """

    tasks: list[WindTunnel]
    eval_batches: dict[str, TaskBatch]
    levels: "ReferenceLevels"
    paper_hmm_levels: "ReferenceLevels"


def chapter_setup(cfg: Mapping[str, Any], *, seed: int) -> ChapterSetup:
    """Return the :class:`ChapterSetup` of chapter 7 at settings ``cfg`` (the same evaluation set for every model)."""
    tasks = book_tasks(cfg)
    eval_batches = {t.name: evaluation_batch(t, cfg["eval_sequences"], evaluation_seed(seed, i))
                    for i, t in enumerate(tasks)}
    paper_hmm = WindTunnel.make("hmm", n_states=cfg["hmm_states"], n_symbols=cfg["hmm_symbols"], length=20)
    paper_levels = reference_levels([paper_hmm], {"hmm": evaluation_batch(paper_hmm, cfg["eval_sequences"], seed)})
    return ChapterSetup(tasks, eval_batches, reference_levels(tasks, eval_batches), paper_levels)


def glue_reference_levels(cfg: Mapping[str, Any], setup: ChapterSetup) -> None:
    """Glue the task sizes, the context-blind levels and Paper I's numbers that chapter 7's prose cites."""
    from .. import claims

    blind, paper_blind = setup.levels.context_blind, setup.paper_hmm_levels.context_blind["hmm"]
    paper_i = PAPER_I_RESULTS
    values = {
        "paper_hmm_blind_mae_bits": paper_blind["entropy_mae_bits"],
        "paper_hmm_vs_blind": paper_i["transformer"]["hmm_mae_bits"] / paper_blind["entropy_mae_bits"],
        "paper_hmm_transformer": paper_i["transformer"]["hmm_mae_bits"],
        "paper_mlp_bijection": paper_i["mlp_blind"]["bijection_mae_bits"],
        **{f"paper_binding_{f}": paper_i[f]["binding_accuracy"] for f in ("transformer", "mamba", "lstm")},
        "V": cfg["bijection_V"], "L": cfg["bijection_L"], "n_states": cfg["hmm_states"],
        "n_symbols": cfg["hmm_symbols"], "K": cfg["hmm_length"], "N": cfg["binding_pairs"],
        "M": cfg["binding_queries"], "n_keys": cfg["binding_keys"], "n_values": cfg["binding_values"],
        "blind_bijection_bits": blind["bijection"]["entropy_mae_bits"],
        "blind_hmm_kl_bits": blind["hmm"]["kl_bits"],
        "blind_hmm_mae_bits": blind["hmm"]["entropy_mae_bits"],
        "blind_binding_accuracy": blind["binding"]["accuracy"],
        "bag_of_values_accuracy": associative_recall.bag_of_values_accuracy(cfg["binding_pairs"],
                                                                            cfg["binding_values"]),
        "eval_sequences": cfg["eval_sequences"],
    }
    for name, value in values.items():
        claims.glue(f"architectures.{name}", value)


def record_results(results: Mapping[tuple[str, str], RunResult], levels: "ReferenceLevels", cfg: Mapping[str, Any],
                   *, params: Mapping[str, Any], spread: Mapping[str, Any], floors: Mapping[str, float]) -> str:
    """Record the results table's claims, with the explanations of the fails and Mamba's binding as a mean over
    seeds (``spread``: :func:`attention_dynamics.experiments.seed_spread.load`); return the verdict summary (markdown).

    Mamba's and the LSTM's binding are stated at the longest run made: the spread file's 4× longer runs where it
    holds them (:func:`~attention_dynamics.experiments.seed_spread.compute_longer_binding`), decided by their
    interval.
    """
    from .. import claims

    blind = levels.context_blind["hmm"]
    hmm_account = (
        f"Paper I's random HMMs carry little information beyond the current observation: the exact "
        f"context-blind posterior is only {blind['kl_bits']:.3f} bits of KL ({blind['entropy_mae_bits']:.3f} bits "
        f"of entropy error) from the filter, so realising transport means getting well below that. Our "
        f"{cfg['target_params'] // 1000}k-parameter models after {cfg['steps']} steps have not yet learned the exact "
        f"update and sit above the context-blind level; the measurement cannot separate transport from no "
        f"transport at this scale (Paper I: ~2.7M parameters, 50k+ steps)."
    )
    # Mamba's binding accuracy varies across seeds more than its distance to the 90 % threshold: it is
    # stated as the mean over the seed-spread runs (this chapter's own training, seeds 0-4) with a 95 % interval,
    # at the longest run made: where the spread file holds the 4x longer runs, at those (so is the LSTM's).
    mamba_ci = {**spread["intervals"]["binding_accuracy_mamba"], "seeds": spread["seeds"]}
    still_falling = sum(r["loss_after"] < r["loss_before"] for r in spread["runs"]["binding_mamba"])
    others = (f"transformer {results[('transformer', 'binding')].metrics['accuracy']:.1%}, LSTM "
              f"{results[('lstm', 'binding')].metrics['accuracy']:.1%}, chance "
              f"{levels.context_blind['binding']['accuracy']:.1%}")
    seed_means = {"architectures.binding_accuracy_mamba": mamba_ci}
    explanations = {
        **{f"architectures.{m}_{f}": hmm_account for m in ("hmm_mae_bits", "hmm_kl_bits")
           for f in ("transformer", "mamba")},
        "architectures.binding_accuracy_mamba": (
            f"Mamba learns binding, but more slowly than the transformer: after {cfg['steps']} steps it answers "
            f"{mamba_ci['low']:.1%} to {mamba_ci['high']:.1%} of queries (95% interval over {mamba_ci['n']} seeds; "
            f"{others}), and its training loss is still falling on {still_falling} of {mamba_ci['n']} seeds: a "
            f"budget, not a finding. Paper I's 97.8% comes from a far longer run of a ~45× larger model."),
    }
    longer_steps = {}
    for family in ("mamba", "lstm"):
        stated = _binding_at_longest_run(family, spread, cfg, others)
        if stated is not None:
            claim_id = f"architectures.binding_accuracy_{family}"
            seed_means[claim_id], longer_steps[claim_id], explanations[claim_id] = stated
    longer_runs = [run for key, runs in spread["runs"].items() if key.endswith("_longer") for run in runs]
    if longer_runs:
        claims.glue("architectures.binding_longer_minutes", sum(run["cpu_seconds"] for run in longer_runs) / 60)
    recorded = record_table_claims(results, levels, params=params, explanations=explanations, seed_means=seed_means,
                                   floors=floors, longer_steps=longer_steps)
    headline = {"bijection": "bijection_mae_bits", "hmm": "hmm_kl_bits", "binding": "binding_accuracy"}
    statuses = {(family, task): recorded[f"architectures.{name}_{family}"].status
                for (family, task) in results if (name := headline.get(task)) is not None}
    longer = {}
    for claim_id, steps in longer_steps.items():
        family = claim_id.rsplit("_", 1)[-1]
        ci = seed_means[claim_id]
        longer[(family, "binding")] = (realises_primitive("binding", {"accuracy": ci["mean"]}, levels), steps)
    claims.glue("architectures.mamba_binding_this_seed", results[("mamba", "binding")].metrics["accuracy"])
    claims.glue("architectures.mamba_binding_mean", mamba_ci["mean"])
    claims.glue("architectures.mamba_binding_low", mamba_ci["low"])
    claims.glue("architectures.mamba_binding_high", mamba_ci["high"])
    claims.glue("architectures.mamba_binding_still_falling", still_falling)
    claims.glue("architectures.spread_n_seeds", mamba_ci["n"])
    return verdict_summary(results, levels, statuses=statuses, longer=longer)


def plot_binding_longer(spread: Mapping[str, Any], *, paper_accuracy: float, bag_accuracy: float, chance: float):
    """Return ``(fig, axes)``: the evidence that decides the binding verdicts stated at a longer run (``spread``: the
    seed-spread results with their longer runs, :func:`attention_dynamics.experiments.seed_spread.compute_longer_binding`).

    Left: the training loss of every seed's longer run, per family (block means; the last 20 % of training thick).
    Right: each seed's accuracy after the chapter's steps and after the longer run (paired), with the 95 % interval
    of the mean of each, the realised threshold, Paper I's accuracy for Mamba (``paper_accuracy``), the
    bag-of-values level and chance.
    """
    from .. import plotting
    from .architectures import REALISED_BINDING_ACCURACY

    families = [f for f in FAMILIES if f"binding_{f}_longer" in spread["runs"]]
    if not families:
        raise ValueError("the spread results hold no longer binding runs")
    chapter_steps = spread["settings"]["binding"]["steps"]
    fig, (ax_loss, ax_acc) = plotting.new_figure(2, width=8.4, height=3.4)
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
                         label=f"{FAMILY_LABELS[family]}, one line per seed" if i == 0 else None)
            ax_loss.plot(x[last], curve[last], color=color, lw=3.0, alpha=0.8)
        offset = 0.12 * k
        for run_short, run_long in zip(short, longer):
            ax_acc.plot([offset, 1 + offset], [run_short["accuracy"], run_long["accuracy"]], color=color, lw=1.0,
                        marker="o", ms=4, alpha=0.7)
        for x, key in ((0, f"binding_accuracy_{family}"), (1, f"binding_accuracy_{family}_longer")):
            ci = spread["intervals"][key]
            ax_acc.errorbar([x + offset + 0.06], [ci["mean"]], yerr=[[ci["mean"] - ci["low"]], [ci["high"] - ci["mean"]]],
                            color="black", marker="s", ms=4, capsize=3,
                            label="mean, 95 % interval" if (k, x) == (0, 0) else None)
    ax_loss.axvline(chapter_steps, color="grey", ls=":", lw=1.2, label="the chapter's run ends")
    longer_steps = spread["runs"][f"binding_{families[0]}_longer"][0]["steps"]
    ax_loss.set(yscale="log", xlabel="training step", ylabel="training loss (nats)",
                title=f"Binding, trained {longer_steps // chapter_steps}× as long (last 20 % thick)")
    ax_loss.legend(fontsize=7)
    for level, style, label in ((paper_accuracy, "-", "Paper I, Mamba"),
                                (REALISED_BINDING_ACCURACY, "--", "realised threshold"),
                                (bag_accuracy, "-.", "bag of values (exact)"), (chance, ":", "chance")):
        ax_acc.axhline(level, color="black", ls=style, lw=1.0, label=label)
    ax_acc.set(xticks=[0.1, 1.1], xticklabels=[f"{chapter_steps} steps", f"{longer_steps} steps"], xlim=(-0.4, 1.6),
               ylim=(0, 1.02), ylabel="binding accuracy", title="Each seed, at both lengths")
    ax_acc.legend(fontsize=7, loc="center right")
    return fig, (ax_loss, ax_acc)


def _binding_at_longest_run(family: str, spread: Mapping[str, Any], cfg: Mapping[str, Any],
                            others: str) -> tuple[dict[str, Any], int, str] | None:
    """Return ``(seed mean, steps, account)`` of ``family``'s binding accuracy at its 4× longer spread runs, and
    glue their numbers (``architectures.<family>_binding_longer_*``); None where the spread file has none."""
    from .. import claims
    from .architectures import PAPER_I_RESULTS, REALISED_BINDING_ACCURACY

    longer_ci = spread["intervals"].get(f"binding_accuracy_{family}_longer")
    if longer_ci is None:
        return None
    short_ci = spread["intervals"][f"binding_accuracy_{family}"]
    longer_runs = spread["runs"][f"binding_{family}_longer"]
    steps_long = int(longer_runs[0]["steps"])
    factor = steps_long // cfg["steps"]
    realises = PAPER_I_RESULTS[family]["realises"]["binding"]
    name = FAMILY_LABELS[family]
    verdict = claims.claim_status(longer_ci["mean"], interval=(longer_ci["low"], longer_ci["high"]),
                                  **({"lower": REALISED_BINDING_ACCURACY} if realises else
                                     {"upper": REALISED_BINDING_ACCURACY}))
    reached = {"pass": realises, "fail": not realises}.get(verdict)
    if reached is None:
        reading = "the interval of the longer run still reaches both sides of the threshold"
    elif reached:
        reading = (f"trained longer, it realises binding, {'as' if realises else 'against what'} Paper I reports"
                   + (": the shortfall at the chapter's budget was training time" if realises else ""))
    else:
        reading = (f"a run {factor} times as long leaves it below the {REALISED_BINDING_ACCURACY:.0%} threshold, "
                   f"{'against' if realises else 'as'} Paper I reports (at this model size)")
    falling = sum(r["loss_after"] < r["loss_before"] for r in longer_runs)
    late_change = max(abs(r["loss_before"] - r["loss_after"]) / r["loss_before"] for r in longer_runs)
    account = (
        f"Stated at the longest run made: after {steps_long} steps ({factor}× the chapter's) the {name} answers "
        f"{longer_ci['low']:.1%} to {longer_ci['high']:.1%} of queries (95% interval over {longer_ci['n']} seeds), "
        f"against {short_ci['low']:.1%} to {short_ci['high']:.1%} after the chapter's {cfg['steps']} steps "
        f"({others}); {reading}. Over the last 20% of the longer run its training loss changed by at most "
        f"{late_change:.1%} of its level (still falling on {falling} of {longer_ci['n']} seeds).")
    for key, value in (("steps", steps_long), ("factor", factor), ("mean", longer_ci["mean"]),
                       ("low", longer_ci["low"]), ("high", longer_ci["high"]), ("still_falling", falling),
                       ("late_change_max", late_change),
                       ("short_mean", short_ci["mean"]), ("short_low", short_ci["low"]),
                       ("short_high", short_ci["high"])):
        claims.glue(f"architectures.{family}_binding_longer_{key}", value)
    return {**longer_ci, "seeds": [r["seed"] for r in longer_runs]}, steps_long, account


def record_mamba_routing_fits(results: Mapping[tuple[str, str], RunResult], tasks: Sequence[WindTunnel],
                              cfg: Mapping[str, Any], *, seed: int, params: Mapping[str, Any]) -> dict[str, list[AdvantageFit]]:
    """Record how much of the trained Mamba models' routing gradient the advantage form explains, beside its
    permuted null and the scan's reproduction error; return the fits per model (initial, trained on each task),
    one per layer."""
    from .. import claims
    from ..diagnostics.routing_fit import mamba_advantage_fit, scan_reproduction_error

    analysis = {t.name: t.sample(cfg["analysis_sequences"], generator=torch_generator(stream(seed, "analysis", i)))
                for i, t in enumerate(tasks)}
    mamba_runs = {t.name: results[("mamba", t.name)] for t in tasks}
    scan_error = max(scan_reproduction_error(run.model(), analysis[name].inputs) for name, run in mamba_runs.items())
    claims.record("architectures.mamba_scan_weights_max_abs_err", scan_error, unit="",
                  description="max |mambapy block output − output rebuilt from the routing weights w_ij| (the three "
                              "trained Mamba models, every layer, float64)",
                  expected=0.0, tolerance=1e-9, params={"seed": seed, "sequences": cfg["analysis_sequences"]})
    fits = {"initial": [mamba_advantage_fit(mamba_runs["binding"].initial_model(), analysis["binding"], layer)
                        for layer in (0, 1)]}
    fits.update({f"trained on {name}": [mamba_advantage_fit(run.model(), analysis[name], layer) for layer in (0, 1)]
                 for name, run in mamba_runs.items()})
    trained_r2 = [f.r2 for name, layer_fits in fits.items() if name != "initial" for f in layer_fits]
    fit_params = {**params, "analysis_sequences": cfg["analysis_sequences"]}
    claims.record("architectures.mamba_advantage_fit", float(np.mean(trained_r2)), unit="fraction (R²)",
                  description="share of the trained Mamba models' routing-logit gradient ∂L/∂ln|w_ij| explained by "
                              "the best advantage-form fit (mean over 3 tasks × 2 layers); the paper leaves this open",
                  params=fit_params)
    # The null: the same fits with each row's compatibilities permuted among its visible keys.
    null_generator = torch_generator(stream(seed, "null"))
    null_r2 = [mamba_advantage_fit(run.model(), analysis[name], layer, permuted=True, generator=null_generator).r2
               for name, run in mamba_runs.items() for layer in (0, 1)]
    claims.record("architectures.mamba_advantage_fit_null", float(np.mean(null_r2)), unit="fraction (R²)",
                  description="the same advantage-form fit with each row's compatibilities permuted among its "
                              "visible keys (mean over 3 tasks × 2 layers): the R² that near-uniform weights alone "
                              "give",
                  params={**fit_params, "null_seed": stream(seed, "null")})
    claims.glue("architectures.analysis_sequences", cfg["analysis_sequences"])
    claims.glue("architectures.mamba_advantage_fit_min", min(trained_r2))
    claims.glue("architectures.mamba_advantage_fit_max", max(trained_r2))
    claims.glue("architectures.mamba_advantage_fit_initial", float(np.mean([f.r2 for f in fits["initial"]])))
    for name in mamba_runs:
        claims.glue(f"architectures.mamba_fit_{name}", float(np.mean([f.r2 for f in fits[f"trained on {name}"]])))
    return fits


def _cluster_account(mamba: StateClustering, results: Mapping[tuple[str, str], RunResult], cfg: Mapping[str, Any]) -> str:
    return (f"Our Mamba's states form five clusters too, but they are the five observation symbols: purity "
            f"{mamba.other_purities['current observation']:.2f} against the current observation and {mamba.purity:.2f} "
            f"against the most probable hidden state (chance {mamba.chance:.2f}); the observation explains "
            f"{mamba.between_group_variance:.0%} of the states' variance. The belief is inside the clusters: with each "
            f"observation's mean state removed, purity against the most probable state is {mamba.centred_purity:.2f}. "
            f"With as many symbols as states, five clusters alone do not say which of the two they are. (Our model: "
            f"{results[('mamba', 'hmm')].n_params} parameters, {cfg['steps']} steps.)")


def record_state_clusters(results: Mapping[tuple[str, str], RunResult], hmm_task: WindTunnel, cfg: Mapping[str, Any],
                          *, seed: int, params: Mapping[str, Any], floor_nats: float):
    """Cluster the final-layer HMM states of Mamba, the transformer and the LSTM; record Mamba's purity claim
    (against the most probable hidden state, with the current observation as the confound it is checked
    against; a failing purity is undecided, as in :func:`record_table_claims`: no longer run was made); return ``(Mamba's StateClustering, purity table)``."""
    from .. import claims
    from ..diagnostics.state_clusters import final_layer_states, state_clustering
    from ..models.factory import FAMILY_LABELS

    batch = hmm_task.sample(cfg["cluster_sequences"], generator=torch_generator(stream(seed, "clusters")))
    posterior_points = batch.posterior.reshape(-1, hmm_task.n_out)  # (sequences · K, S)
    observations = batch.extra["observations"].reshape(-1).numpy()  # (sequences · K,): the current symbol
    clusterings = {
        f: state_clustering(final_layer_states(results[(f, "hmm")].model(), batch.inputs).reshape(len(posterior_points), -1),
                            posterior_points, seed=seed, groups=observations,
                            other_labels={"current observation": observations})
        for f in ("mamba", "transformer", "lstm")
    }
    mamba = clusterings["mamba"]
    for name, value in {
        "cluster_points": len(posterior_points), "cluster_chance": mamba.chance,
        "cluster_posterior_purity": mamba.posterior_purity, "cluster_within_observation_purity": mamba.centred_purity,
        "cluster_observation_variance": mamba.between_group_variance,
        "cluster_observation_purity": mamba.other_purities["current observation"],
        "cluster_transformer_purity": clusterings["transformer"].purity,
        "cluster_transformer_observation_purity": clusterings["transformer"].other_purities["current observation"],
        "cluster_lstm_purity": clusterings["lstm"].purity,
    }.items():
        claims.glue(f"architectures.{name}", value)
    lower = mamba.chance + 0.5 * (mamba.posterior_purity - mamba.chance)
    not_decided = not_decided_reason(results[("mamba", "hmm")].losses, floor_nats)
    claims.record(
        "architectures.mamba_hmm_cluster_purity", mamba.purity, unit="fraction",
        undecided_because=(not_decided + "The clusters found: " + _cluster_account(mamba, results, cfg)
                           if mamba.purity < lower else None),
        description="k-means (5 clusters) purity of the trained Mamba's final-layer HMM states against the most "
                    "probable hidden state (Paper I v3: five discrete clusters); bound: halfway from chance to the "
                    "purity of clustering the exact posteriors",
        lower=lower,
        explanation="Paper I v3 reports five discrete clusters. " + _cluster_account(mamba, results, cfg),
        params={**params, "cluster_sequences": cfg["cluster_sequences"], "n_clusters": 5},
    )
    table = pd_table({FAMILY_LABELS[f]: {"vs most probable state": c.purity,
                                          "vs current observation": c.other_purities["current observation"],
                                          "vs most probable state, observation mean removed": c.centred_purity,
                                          "chance": c.chance, "exact posteriors": c.posterior_purity}
                      for f, c in clusterings.items()},
                     index_name="final-layer states of", column_suffix=" (purity)").round(3)
    return mamba, table


# --------------------------------------------------------------------------------------------
# The sticky-HMM tunnel (runs stored by :mod:`attention_dynamics.experiments.sticky_hmm`)
# --------------------------------------------------------------------------------------------


def sticky_levels(stored: Mapping[str, Any]) -> ReferenceLevels:
    """Return the sticky tunnel's :class:`ReferenceLevels` from its stored results."""
    from ..tasks.wind_tunnels import STICKY_HMM

    ref = stored["reference"]
    return ReferenceLevels(bayes={STICKY_HMM: {"kl_bits": 0.0, "entropy_mae_bits": 0.0}},
                           context_blind={STICKY_HMM: dict(ref["context_blind"])},
                           context_blind_kl_by_position={STICKY_HMM: np.asarray(ref["context_blind_kl_by_position"])})


def plot_sticky_kl_curves(stored: Mapping[str, Any], *, ax=None):
    """Return ``(fig, ax)``: every family's KL to the exact filter (bits) over training on the sticky tunnel — the
    exact KL on each step's fresh batch, averaged over blocks of steps, the last 20% of each run drawn thick, a
    longer run dashed — with the context-blind level and the transport threshold (a fraction of it)."""
    from .. import plotting
    from ..tasks.wind_tunnels import STICKY_HMM
    from .architectures import realised_threshold

    if ax is None:
        fig, ax = plotting.new_figure(1, width=5.6, height=3.4)
    else:
        fig = ax.figure
    levels = sticky_levels(stored)
    for family in FAMILIES:
        run = stored["runs"].get(family)
        if run is None:
            continue
        curve = np.asarray(run["kl_curve_bits"])
        x = (np.arange(len(curve)) + 0.5) * run["steps"] / len(curve)
        ax.plot(x, curve, color=family_color(family), lw=1.0, label=FAMILY_LABELS[family])
        last = x >= 0.8 * run["steps"]  # the last 20% of training, where a plateau is read
        ax.plot(x[last], curve[last], color=family_color(family), lw=3.0, alpha=0.8)
        longer = stored.get("longer", {}).get(family)
        if longer is not None:
            curve = np.asarray(longer["kl_curve_bits"])
            x = (np.arange(len(curve)) + 0.5) * longer["steps"] / len(curve)
            ax.plot(x, curve, color=family_color(family), lw=1.0, ls="--",
                    label=f"{FAMILY_LABELS[family]}, {longer['steps'] // run['steps']}× longer")
    blind = levels.context_blind[STICKY_HMM]["kl_bits"]
    ax.axhline(blind, color="black", ls="--", lw=1.2, label="context-blind (exact best)")
    ax.axhline(realised_threshold(STICKY_HMM, "kl_bits", levels), color="black", ls=":", lw=1.2,
               label="transport threshold")
    ax.set(yscale="log", xlabel="training step", ylabel="KL(posterior ‖ model) (bits)",
           title="Sticky HMMs: KL to the exact filter over training")
    ax.legend(fontsize=7, ncol=2)
    return fig, ax


def record_sticky_claims(stored: Mapping[str, Any]):
    """Record the sticky tunnel's claims (``hmm_sticky.context_blind_kl_bits``, ``hmm_sticky.kl_bits_<family>``) and
    return the table (KL, multiple of the context-blind level, late change, status).

    Each family's KL carries Paper I's transport verdict as bounds (:func:`paper_verdict_bounds`: at most
    :data:`~attention_dynamics.experiments.architectures.STICKY_TRANSPORT_FRACTION_OF_BLIND` of the
    context-blind level for a family that realises transport, above it for one that does not). As in chapter
    7's grid, a "does not realise" row is undecided while the transformer misses its bound. Where a 4× longer run
    was made (``stored["longer"]``), the claim is stated at it (the longest run made decides; the table shows
    both). Without one, a model that misses a "realises" bound is undecided
    (:func:`not_decided_reason`: its learning rate decays to zero), and so is a "does not realise" pass by a model
    already below the context-blind level (it carries the belief part of the way; more training may take it over
    the threshold). A "does not realise" row that a model beats is a fail no training can undo.
    """
    from types import SimpleNamespace

    from .. import claims
    from ..settling import late_drop
    from ..tasks.wind_tunnels import STICKY_HMM, STICKY_SELF_TRANSITION
    from .sticky_hmm import LONGER_FACTOR
    from .architectures import (
        STICKY_TRANSPORT_FRACTION_OF_BLIND,
        paper_verdict_bounds,
        positive_control_fails,
        realised_threshold,
    )

    levels = sticky_levels(stored)
    blind = levels.context_blind[STICKY_HMM]["kl_bits"]
    settings, runs = stored["settings"], stored["runs"]
    params = {"seed": stored["seed"], "scale": stored["scale"], **settings, "source": "data/sticky_hmm.json"}
    design = (f"HMM filtering with S = {settings['hmm_states']}, O = {settings['hmm_symbols']}, K = "
              f"{settings['hmm_length']}, each transition row {1 - STICKY_SELF_TRANSITION:.1f}·Dirichlet(1) row + "
              f"{STICKY_SELF_TRANSITION:.1f}·identity")
    claims.record("hmm_sticky.context_blind_kl_bits", blind, unit="bits",
                  description=f"KL from the exact filter of the exact context-blind posterior q_t ∝ (π₀Tᵗ)·E(·, o_t), on "
                              f"{settings['eval_sequences']} held-out sequences; {design}",
                  params=params)
    threshold = realised_threshold(STICKY_HMM, "kl_bits", levels)
    results = {(f, STICKY_HMM): SimpleNamespace(metrics=run["metrics"]) for f, run in runs.items()}
    rows = {}
    for family, run in runs.items():
        longer = stored.get("longer", {}).get(family)
        stated = longer or run  # the longest run made for the claim states it
        value = stated["metrics"]["kl_bits"]
        bounds = paper_verdict_bounds(family, STICKY_HMM, levels)
        verdict = PAPER_I_RESULTS[family]["realises"]
        said = ("no verdict in Paper I" if verdict is None else
                f"Paper I: {'realises' if verdict['hmm'] else 'does not realise'} transport")
        bound_text = ("" if bounds == {"lower": None, "upper": None} else
                      f"; bound: KL {'≤' if bounds['upper'] is not None else '≥'} "
                      f"{STICKY_TRANSPORT_FRACTION_OF_BLIND:.1f} × the context-blind level ({threshold:.4f} bits)")
        status = claims.claim_status(value, **bounds)
        because, explanation = None, None
        history = (f"{run['metrics']['kl_bits'] / blind:.2f} × the context-blind level after {run['steps']} steps"
                   + ("" if longer is None else f", {value / blind:.2f} × after {longer['steps']} steps "
                                                f"(a {longer['steps'] // run['steps']}× longer run)"))
        if (verdict is not None and not verdict["hmm"] and family != "transformer"
                and positive_control_fails(STICKY_HMM, results, levels)):
            because = ("The positive control fails: the transformer misses its transport bound on the sticky HMMs at "
                       "this budget, so this model's missing it too says nothing about its architecture: not decided "
                       "at this scale.")
        elif status == "fail" and bounds["upper"] is not None:
            if longer is None:
                because = not_decided_reason(run["kl_curve_bits"], 0.0) + f"Its KL: {history}."  # KL = excess over floor
            else:
                explanation = f"A longer run does not change the verdict: {history}."
        elif status == "pass" and bounds["lower"] is not None and value < blind and longer is None:
            because = (f"Not decided at this scale: the model already carries the belief part of the way ({history}, "
                       f"where no model without memory gets below 1 ×), and no longer run was made, so nothing shows "
                       f"that more training would not take it below the threshold.")
        elif status == "fail":
            explanation = (f"Paper I reports that the {FAMILY_LABELS[family]} does not realise transport (on its random "
                           f"HMMs, where transport is worth little); on the sticky HMMs ours does: {history}, below the "
                           f"threshold, and more training cannot undo a KL that is already this low.")
        claim = claims.record(
            f"hmm_sticky.kl_bits_{family}", value, unit="bits", undecided_because=because, explanation=explanation,
            description=f"{FAMILY_LABELS[family]} on sticky HMMs: KL to the exact filter in bits ({said}{bound_text}); "
                        f"{design}",
            params={**params, "family": family, "n_params": run["n_params"], "width": run["width"],
                    "steps": stated["steps"]}, **bounds)
        rows[FAMILY_LABELS[family]] = {
            "KL (bits)": round(run["metrics"]["kl_bits"], 4), "× context-blind": round(run["metrics"]["kl_bits"] / blind, 3),
            "KL fell over the last 20% of training by": f"{late_drop(run['kl_curve_bits']):.0%}",
            f"{LONGER_FACTOR}× longer run: × context-blind": "—" if longer is None else
            round(longer["metrics"]["kl_bits"] / blind, 3),
            "steps": run["steps"], "parameters": run["n_params"], "status": claim.status}
    rows["context-blind (exact best)"] = {"KL (bits)": round(blind, 4), "× context-blind": 1.0,
                                          "KL fell over the last 20% of training by": "—",
                                          f"{LONGER_FACTOR}× longer run: × context-blind": "—", "steps": "—",
                                          "parameters": "—", "status": "—"}
    return pd_table(rows, index_name="model")



def glue_sticky(stored: Mapping[str, Any], setup: ChapterSetup) -> None:
    """Glue the numbers of chapter 7's sticky-HMM section: the design, its levels beside Paper I's random HMMs at
    the same length, the threshold, and each family's KL as a multiple of the context-blind level with its late
    change."""
    from .. import claims
    from ..settling import late_drop
    from ..tasks.wind_tunnels import STICKY_SELF_TRANSITION
    from .architectures import STICKY_TRANSPORT_FRACTION_OF_BLIND

    blind = stored["reference"]["context_blind"]["kl_bits"]
    random_blind = setup.paper_hmm_levels.context_blind["hmm"]["kl_bits"]
    values = {
        "sticky_mix": STICKY_SELF_TRANSITION, "sticky_random_share": 1 - STICKY_SELF_TRANSITION,
        "sticky_K": stored["settings"]["hmm_length"], "sticky_steps": stored["settings"]["steps"],
        "sticky_steps_mamba": stored["runs"]["mamba"]["steps"] if "mamba" in stored["runs"] else None,
        "sticky_eval_sequences": stored["settings"]["eval_sequences"],
        "sticky_random_blind_kl_bits": random_blind, "sticky_vs_random": blind / random_blind,
        "sticky_blind_mae_bits": stored["reference"]["context_blind"]["entropy_mae_bits"],
        "sticky_fraction": STICKY_TRANSPORT_FRACTION_OF_BLIND,
        "sticky_threshold_bits": STICKY_TRANSPORT_FRACTION_OF_BLIND * blind,
    }
    for family, run in stored["runs"].items():
        values[f"sticky_ratio_{family}"] = run["metrics"]["kl_bits"] / blind
        values[f"sticky_late_drop_{family}"] = late_drop(run["kl_curve_bits"])
    for family, run in stored.get("longer", {}).items():
        values[f"sticky_longer_ratio_{family}"] = run["metrics"]["kl_bits"] / blind
        values[f"sticky_longer_steps_{family}"] = run["steps"]
    for name, value in values.items():
        claims.glue(f"architectures.{name}", value)
