"""Chapter 5's stored result ``sticky_chain_paper_scale``: what the chapter's budget cannot run.

Twenty seeds of the paper's two schedules (bootstrap intervals), the controls on the paper's seeds on both chains,
an M-step ρ sweep, long runs with held-out evaluation and the reference script's deep variant. Computed once by
``python -m attention_dynamics compute sticky_chain_paper_scale`` (every run a job, resumable) and loaded by the
chapter from ``data/sticky_chain_paper_scale.json``."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd
import torch

from ...ledger.results import Job, StoredResult, save_results
from ...models import CausalTransformer, count_parameters
from ...science.speedup import bootstrap_speedup_ci, em_like_speedup_over, paper_speedup
from ...science.stats import paired_tests
from ...tasks import sticky_chain
from ...training import fit
from ...training.schedules import SCHEDULES
from .runs import train_sticky_head

__all__ = [
    "controls_table",
    "rho_sweep_table",
    "long_run_table",
    "train_deep_transformer",
    "PAPER_SCALE_FILE",
    "PAPER_SCALE_CONFIG",
    "heavy_job",
    "job_key",
    "paper_scale_jobs",
    "paper_scale_results",
    "assemble_paper_scale",
    "heavy_job_cache_path",
    "run_heavy_job",
    "compute_paper_scale_results",
    "CONFIGS",
    "PAPER_SCALE",
]


def controls_table(heavy: Mapping[str, Any], kind: str = "reference", digits: int = 4):
    """Return a pandas DataFrame comparing every schedule of the paper-scale file on one chain.

    One row per schedule: number of seeds, mean ± sd final loss (nats), the paper's speed-up over SGD
    on the same seeds with its 95% bootstrap interval, and EM-like's speed-up over the schedule
    (:func:`em_like_speedup_over`; 1 for EM-like itself); a dash where a schedule has no such number.
    """
    block = heavy["ci"][kind]
    rows = []
    for name, finals in block["final"].items():
        losses = np.array([f["loss"] for f in finals])
        ci = block["speedup_ci"].get(name)
        rows.append({
            "schedule": SCHEDULES[name].label if name in SCHEDULES else name,
            "seeds": len(losses),
            "final loss mean": losses.mean(),
            "final loss sd": losses.std(ddof=1) if len(losses) > 1 else 0.0,
            "speed-up over SGD": block["speedup"][name]["speedup"] if name in block["speedup"] else np.nan,
            "95% CI low": ci["low"] if ci else np.nan,
            "95% CI high": ci["high"] if ci else np.nan,
            "EM-like speed-up over it": (1.0 if name == "em_like"
                                         else block["em_like_speedup_over"].get(name, {}).get("ratio", np.nan)),
        })
    table = pd.DataFrame(rows).set_index("schedule").round(digits)
    return table.astype(object).where(table.notna(), "—")  # a dash where a schedule has no such number


def rho_sweep_table(heavy: Mapping[str, Any], digits: int = 4):
    """Return a pandas DataFrame of the M-step's rho sweep: mean final loss and the paper's speed-up per rho."""
    rows = [{"rho": v["rho"], "seeds": len(v["seeds"]), "final loss mean": float(np.mean(v["final_loss"])),
             "speed-up over SGD": v["speedup"]["speedup"], "mean first step": v["speedup"]["mean_first_step"]}
            for v in heavy["rho_sweep"].values()]
    return pd.DataFrame(rows).set_index("rho").sort_index().round(digits)


def long_run_table(heavy: Mapping[str, Any], digits: int = 4):
    """Return a pandas DataFrame of the long runs (nats): training and held-out losses, and their gaps to the floors.

    Per schedule (mean over the long-run seeds): final training loss; final held-out loss; the lowest
    held-out loss along the run and the step where it occurred; ``closest gap to H_min`` (lowest held-out
    loss minus H_min); ``final gap to filter`` (final held-out loss minus the exact Bayes filter's
    cross-entropy on the same held-out sequences, the floor for these noisy inputs).
    """
    long = heavy["long_run"]
    rows = []
    for name, rs in long["runs"].items():
        best = [int(np.argmin(r["heldout_curve"]["loss"])) for r in rs]
        best_loss = [r["heldout_curve"]["loss"][i] for r, i in zip(rs, best)]
        rows.append({
            "schedule": SCHEDULES[name].label if name in SCHEDULES else name,
            "final training loss": float(np.mean([r["final"]["loss"] for r in rs])),
            "final held-out loss": float(np.mean([r["heldout"]["loss"] for r in rs])),
            "lowest held-out loss": float(np.mean(best_loss)),
            "at step": float(np.mean([r["heldout_curve"]["steps"][i] for r, i in zip(rs, best)])),
            "closest gap to H_min": float(np.mean(best_loss)) - long["hmin_nats"],
            "final gap to filter": float(np.mean([r["heldout"]["loss"] - r["heldout"]["filtered_floor"] for r in rs])),
        })
    return pd.DataFrame(rows).set_index("schedule").round(digits)


def train_deep_transformer(
    seed: int,
    *,
    steps: int = 2000,
    n_layers: int = 4,
    n_heads: int = 4,
    d_model: int = 64,
    lr: float = 3e-4,
    weight_decay: float = 0.01,
    grad_clip: float = 1.0,
    dropout: float = 0.1,
    test_every: int | None = 100,
    kind: str = "reference",
    length: int = sticky_chain.SEQUENCE_LENGTH,
    test_seed_offset: int = 10_000,
) -> dict[str, Any]:
    """Return the deep variant's metrics: a causal transformer trained full-batch on one sequence.

    The reference script's deep variant: ``n_layers`` × ``n_heads``, width ``d_model``, AdamW (lr,
    weight decay 0.01), cosine schedule over ``steps``, gradient clipping at 1, a test sequence drawn
    with seed ``seed + test_seed_offset``, no positional encoding. The model is
    :class:`attention_dynamics.models.CausalTransformer`, which has no dropout; ``dropout`` is added by
    forward hooks where the script has it in the feed-forward layers (after the GELU and after the
    second linear map) and, instead of on the attention weights, on each attention layer's output.
    Keys: ``train`` and ``test`` (loss and entropy in nats, accuracy, with dropout off), ``test_curve``
    (test loss and entropy every ``test_every`` steps and at the end), ``losses`` (training loss every 10
    steps, with dropout on), ``n_parameters``.
    """
    train = sticky_chain.make_sticky_chain_data(seed, kind=kind, length=length)
    test = sticky_chain.make_sticky_chain_data(seed + test_seed_offset, kind=kind, length=length)
    torch.manual_seed(int(seed))
    model = CausalTransformer(n_out=sticky_chain.N_SYMBOLS, input_dim=train.x.shape[-1], d_model=d_model,
                              n_layers=n_layers, n_heads=n_heads, positional="none")
    for block in model.blocks:
        block.attn.fused = True  # PyTorch's fused kernel: the same function, several times faster on CPU
        if dropout:
            for module in (block.attn, block.mlp[1], block.mlp[2]):
                module.register_forward_hook(
                    lambda mod, inputs, out: torch.nn.functional.dropout(out, dropout, training=mod.training))
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, steps)

    def loss_fn(m: torch.nn.Module, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        x, y = batch
        return torch.nn.functional.cross_entropy(m(x[None])[0], y)

    def evaluate(step: int, m: torch.nn.Module, loss: float) -> dict[str, Any]:
        m.eval()
        out = _classifier_metrics(m, test)
        m.train()
        return {"test_loss": out["loss"], "test_entropy": out["entropy"]}

    history = fit(model, lambda step: (train.x, train.y), steps=steps, optimizer=optimizer, loss_fn=loss_fn,
                  scheduler=scheduler, grad_clip=grad_clip, callback=evaluate if test_every else None,
                  callback_steps=range(0, steps, test_every) if test_every else None)
    model.eval()
    records = history.records
    return {
        "seed": int(seed),
        "train": _classifier_metrics(model, train),
        "test": _classifier_metrics(model, test),
        "test_curve": {"steps": [r["step"] for r in records], "loss": [r["test_loss"] for r in records],
                       "entropy": [r["test_entropy"] for r in records]},
        "losses": np.round(history.losses[::10], 7).tolist(),
        "n_parameters": count_parameters(model),
    }


def _classifier_metrics(model: torch.nn.Module, data: sticky_chain.StickyChainData) -> dict[str, float]:
    with torch.no_grad():
        logits = model(data.x[None])[0]
        log_p = torch.log_softmax(logits, dim=-1)
        return {
            "loss": float(torch.nn.functional.cross_entropy(logits, data.y)),
            "entropy": float(-(log_p.exp() * log_p).sum(-1).mean()),
            "accuracy": float((logits.argmax(-1) == data.y).double().mean()),
        }


#: The committed file with the results too heavy for the book's budget (``--scale paper``).
PAPER_SCALE_FILE = "sticky_chain_paper_scale.json"


#: What the committed file holds (``--scale paper``): 20 seeds of the paper's two schedules (bootstrap CIs), the controls
#: on the paper's seeds on both chains, an M-step rho sweep, long runs with held-out evaluation and the
#: deep variant. ``ci_runs`` maps chain → schedule → seeds.
_PAPER = list(sticky_chain.PAPER_SEEDS)


_TWENTY = _PAPER + list(range(1, 16))


PAPER_SCALE_CONFIG: dict[str, Any] = {
    "steps": 1000,
    "length": sticky_chain.SEQUENCE_LENGTH,
    "ci_runs": {
        "reference": {"sgd": _TWENTY, "em_like": _TWENTY, "sgd_matched": _PAPER, "m_step": _PAPER},
        "nominal": {"sgd": _PAPER, "em_like": _PAPER, "sgd_matched": _PAPER},
    },
    "bootstrap_resamples": 10_000,
    "rho_values": [0.1, 0.3, 1.0, 3.0],
    "long_steps": 20_000,
    "long_seeds": [42],
    "long_schedules": ["sgd", "em_like", "sgd_matched", "m_step"],
    "long_loss_stride": 20,
    "long_heldout_every": 250,
    "heldout_sequences": 10,
    "deep_seeds": [42],
    "deep_steps": 2000,
    "deep": {"n_layers": 4, "n_heads": 4, "d_model": 64, "lr": 3e-4, "weight_decay": 0.01, "grad_clip": 1.0,
             "dropout": 0.1, "test_every": 100},
}


def heavy_job(task: str, group: str = "", **options: Any) -> dict[str, Any]:
    """Return the JSON-ready result of one paper-scale job (``task`` = ``"head"`` or ``"deep"``).

    ``"head"`` runs :func:`~attention_dynamics.chapters.sticky_markov_chain.runs.train_sticky_head` (``loss_stride`` sets how many losses are kept); ``"deep"``
    runs :func:`train_deep_transformer`. ``group`` only labels the job.
    """
    opts = dict(options)
    if task == "head":
        stride = opts.pop("loss_stride", 1)
        return train_sticky_head(**opts).to_json(loss_stride=stride)
    if task == "deep":
        return train_deep_transformer(**opts)
    raise ValueError(f"unknown job task {task!r}; choose 'head' or 'deep'")


def job_key(job: Mapping[str, Any]) -> str:
    """Return the file name of a job: its group, task and options (e.g. ``ci-reference-head-schedule=sgd-seed=42-…``)."""
    options = {k: v for k, v in job.items() if k not in ("task", "group")}
    return (f"{job['group']}-{job['task']}-" + "-".join(f"{k}={options[k]}" for k in sorted(options))).replace("/", "_")


def _job_dicts(config: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Return every job of ``config`` as the keyword arguments of :func:`heavy_job`."""
    cfg = dict(config)
    steps, length = cfg["steps"], cfg["length"]
    default_rho = SCHEDULES["m_step"].value_lr
    rho_seeds = cfg["ci_runs"]["reference"]["m_step"]
    jobs: list[dict[str, Any]] = []
    for kind, schedules in cfg["ci_runs"].items():
        for name, seeds in schedules.items():
            for seed in seeds:
                jobs.append(dict(task="head", group=f"ci-{kind}", seed=seed, schedule=name, kind=kind, steps=steps,
                                 length=length))
    for rho in cfg["rho_values"]:
        if rho != default_rho:  # the default M-step runs are part of the CI runs
            for seed in rho_seeds:
                jobs.append(dict(task="head", group=f"rho-{rho}", seed=seed, schedule="m_step", rho=rho, steps=steps,
                                 length=length))
    for name in cfg["long_schedules"]:
        for seed in cfg["long_seeds"]:
            jobs.append(dict(task="head", group="long", seed=seed, schedule=name, steps=cfg["long_steps"], length=length,
                             heldout_sequences=cfg["heldout_sequences"], heldout_every=cfg["long_heldout_every"],
                             loss_stride=cfg["long_loss_stride"]))
    for seed in cfg["deep_seeds"]:
        jobs.append(dict(task="deep", group="deep", seed=seed, steps=cfg["deep_steps"], length=length, **cfg["deep"]))
    return jobs


def paper_scale_jobs(scale: str, seeds: Sequence[int] | None = None) -> list[Job]:
    """Return the jobs of the paper-scale result at ``scale`` (a deep step costs about twenty head steps)."""
    if seeds is not None:
        raise ValueError("the paper-scale result's seeds are fixed by its configuration")
    return [Job(job_key(j), heavy_job, j, cost=j["steps"] * (20 if j["task"] == "deep" else 1))
            for j in _job_dicts(PAPER_SCALE.spec(scale))]


def paper_scale_results(config: Mapping[str, Any], outputs: Mapping[str, Any]) -> dict[str, Any]:
    """Return the paper-scale results from the jobs' outputs (``{job key: output}``): intervals, controls, ρ sweep,
    long runs and the deep variant. The M-step ρ sweep runs on the seeds of the reference chain's ``m_step`` entry;
    its default ρ reuses those runs."""
    cfg = dict(config)
    default_rho = SCHEDULES["m_step"].value_lr
    by_job = [(job, outputs[job_key(job)]) for job in _job_dicts(cfg)]

    def select(group: str, **match: Any) -> list[dict[str, Any]]:
        return [out for job, out in by_job if job["group"] == group and all(job.get(k) == v for k, v in match.items())]

    results: dict[str, Any] = {"config": cfg, "ci": {}, "rho_sweep": {}, "long_run": {}, "deep": {}}
    for kind, schedules in cfg["ci_runs"].items():
        runs = {name: select(f"ci-{kind}", schedule=name) for name in schedules}
        sgd_final = {r["seed"]: r["final"]["loss"] for r in runs["sgd"]}
        block: dict[str, Any] = {
            "hmin_nats": sticky_chain.bayes_floor_nats(sticky_chain.transition_matrix(kind)),
            "seeds": {name: list(seeds) for name, seeds in schedules.items()},
            "final": {}, "curves": {}, "speedup": {}, "speedup_ci": {}, "paired_test_vs_sgd": {},
            "em_like_speedup_over": {},
        }
        em_curves = {r["seed"]: r["losses"] for r in runs.get("em_like", [])}
        for name in schedules:
            curves = [r["losses"] for r in runs[name]]
            block["final"][name] = [r["final"] for r in runs[name]]
            block["curves"][name] = {"steps": runs[name][0]["loss_steps"][::10], "losses": [c[::10] for c in curves]}
            if name != "sgd":
                baseline = [sgd_final[r["seed"]] for r in runs[name]]  # SGD on the same seeds
                block["speedup"][name] = paper_speedup(baseline, curves)
                block["speedup_ci"][name] = bootstrap_speedup_ci(baseline, curves, n_resamples=cfg["bootstrap_resamples"])
                block["paired_test_vs_sgd"][name] = paired_tests([r["final"]["loss"] for r in runs[name]], baseline)
            if name not in ("sgd", "em_like") and all(r["seed"] in em_curves for r in runs[name]):
                block["em_like_speedup_over"][name] = em_like_speedup_over(
                    [sgd_final[r["seed"]] for r in runs[name]], [em_curves[r["seed"]] for r in runs[name]], curves)
        results["ci"][kind] = block
    ref_sgd = {r["seed"]: r["final"]["loss"] for r in select("ci-reference", schedule="sgd")}
    for rho in cfg["rho_values"]:
        runs = select("ci-reference", schedule="m_step") if rho == default_rho else select(f"rho-{rho}")
        results["rho_sweep"][str(rho)] = {
            "rho": rho, "seeds": [r["seed"] for r in runs], "final_loss": [r["final"]["loss"] for r in runs],
            "speedup": paper_speedup([ref_sgd[r["seed"]] for r in runs], [r["losses"] for r in runs]),
        }
    hmin = sticky_chain.bayes_floor_nats(sticky_chain.transition_matrix("reference"))
    results["long_run"] = {
        "hmin_nats": hmin, "steps": cfg["long_steps"], "seeds": cfg["long_seeds"],
        "runs": {name: select("long", schedule=name) for name in cfg["long_schedules"]},
    }
    results["deep"] = {"hmin_nats": hmin, "steps": cfg["deep_steps"], "settings": cfg["deep"], "runs": select("deep")}
    return results


def assemble_paper_scale(scale: str, outputs: Mapping[str, Any], folder: Path) -> None:
    """Write ``sticky_chain_paper_scale.json`` from the jobs' outputs."""
    save_results(paper_scale_results(PAPER_SCALE.spec(scale), outputs), folder / PAPER_SCALE_FILE)


#: The configurations: ``paper`` is the committed file's; ``fast`` the tests' reduced version of the same jobs.
CONFIGS: dict[str, dict[str, Any]] = {
    "paper": PAPER_SCALE_CONFIG,
    "fast": {"steps": 30, "length": 200,
             "ci_runs": {"reference": {"sgd": [42, 2024], "em_like": [42, 2024], "sgd_matched": [42, 2024],
                                       "m_step": [42, 2024]},
                         "nominal": {"sgd": [42, 2024], "em_like": [42, 2024], "sgd_matched": [42, 2024]}},
             "bootstrap_resamples": 200, "rho_values": [0.3, 1.0], "long_steps": 60, "long_seeds": [42],
             "long_schedules": ["sgd", "em_like"], "long_loss_stride": 5, "long_heldout_every": 20,
             "heldout_sequences": 2, "deep_seeds": [42], "deep_steps": 20,
             "deep": {"n_layers": 1, "n_heads": 2, "d_model": 16, "lr": 3e-4, "weight_decay": 0.01, "grad_clip": 1.0,
                      "dropout": 0.1, "test_every": 10}},
}

PAPER_SCALE = StoredResult(
    name="sticky_chain_paper_scale", chapter="sticky_markov_chain",
    about="the sticky chain beyond the chapter's budget: 20-seed intervals, controls on both chains, the M-step "
          "rho sweep, 20,000-step runs and the deep variant",
    files=(PAPER_SCALE_FILE,), specs=CONFIGS, committed_scale="paper", takes_seeds=False,
    expected={"fast": "19 jobs, about a minute", "paper": "85 jobs: 80 runs of 1,000 steps (~1 CPU-min each), "
                                                          "4 of 20,000 steps and the deep variant; ~3 CPU-hours"},
    jobs=paper_scale_jobs, assemble=assemble_paper_scale)

