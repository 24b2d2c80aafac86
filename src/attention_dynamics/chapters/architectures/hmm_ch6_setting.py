"""Chapter 7's random-HMM rows at chapter 6's setting: the five families trained as chapter 6 trains its HMM model.

Chapter 7's grid trains every family for 800 steps at learning rate 2e-3, a rate chapter 6 found worse for this
tunnel; its transformer, the positive control, then misses transport and every other "does not realise" row is
left undecided. Here the five parameter-matched families of chapter 7 are trained on Paper I's random HMMs at
chapter 6's setting for the tunnel — K = 20, learning rate 1e-3, 10,000 steps, batch 64 (12.5× the grid's run;
Mamba, whose pure-PyTorch scan costs about fifteen times a transformer step on a CPU, 3,200 steps = 4× the grid's
run, with AdamW's fused kernel) — three seeds each, with
:func:`~attention_dynamics.training.families.train_and_measure`, and evaluated on chapter 6's own held-out set at
K = 20 (:func:`~attention_dynamics.training.wind_tunnels.hmm_batch_for_eval` of the library's
:data:`~attention_dynamics.training.wind_tunnels.HMM_TUNNELS`), so that they stand on the same memory ladder as
chapter 6's transformer. Computed once by ``python -m attention_dynamics compute hmm_ch6_setting`` into
``data/hmm_ch6_setting.json``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

import torch

from ...diagnostics.memory_ladder import ladder_of_batch
from ...ledger.results import Job, StoredResult, save_results
from ...models.registry import family as family_entry
from ...tasks.wind_tunnels import TaskBatch, WindTunnel
from ...training.families import train_and_measure
from ...training.wind_tunnels import hmm_batch_for_eval
from .hmm_tunnel import HMMTunnelSpec, family_seed_jobs, runs_by_family

__all__ = ["SPECS", "RESULT_FILE", "CHAPTER7_GRID_STEPS", "ch6_task", "ch6_evaluation_set", "run_ch6_setting",
           "ch6_setting_jobs", "assemble_ch6_setting", "HMM_CH6_SETTING"]

#: Chapter 7's grid run on this tunnel (steps), the unit of "4× as long".
CHAPTER7_GRID_STEPS = 800
#: What ``data/hmm_ch6_setting.json`` records of the settings, in its order (chapter 6's HMM sizes last), and the
#: evaluation set after them.
_RECORD = ("ch6_scale", "target_params", "steps", "steps_mamba", "batch_size", "lr", "seeds", "eval_sequences",
           "hmm_length", "hmm_states", "hmm_symbols")
_DESIGN = {"chapter7_grid_steps": CHAPTER7_GRID_STEPS,
           "eval_set": "chapter 6's hmm_batch_for_eval at the training length, seed 0"}

#: Chapter 6's HMM setting with chapter 7's model budget: ``ch6_scale`` names chapter 6's tunnel
#: (:data:`~attention_dynamics.training.wind_tunnels.HMM_TUNNELS`: its sizes, and its held-out set evaluates the
#: runs); the steps of every family but Mamba (4× chapter 7's grid run), the batch, the learning rate, the seeds and
#: the evaluation set's size.
SPECS: dict[str, HMMTunnelSpec] = {
    "fast": HMMTunnelSpec(ch6_scale="fast", target_params=6000, steps=30, steps_by_family={"mamba": 10},
                          batch_size=16, lr=2e-3, seeds=(0, 1), eval_sequences=64, record=_RECORD, design=_DESIGN),
    "book": HMMTunnelSpec(ch6_scale="book", target_params=60000, steps=10_000, steps_by_family={"mamba": 3200},
                          batch_size=64, lr=1e-3, seeds=(0, 1, 2), eval_sequences=2000, record=_RECORD,
                          design=_DESIGN),
}
#: The committed results.
RESULT_FILE = "hmm_ch6_setting.json"


def ch6_task(scale: str) -> WindTunnel:
    """Return Paper I's random-HMM tunnel at chapter 6's training length."""
    t = HMM_CH6_SETTING.spec(scale).tunnel
    return WindTunnel.make("hmm", n_states=t.n_states, n_symbols=t.n_symbols, length=t.length)


def ch6_evaluation_set(scale: str) -> TaskBatch:
    """Return chapter 6's held-out HMM set at the training length (seed 0), as a :class:`TaskBatch`."""
    cfg = HMM_CH6_SETTING.spec(scale)
    b = hmm_batch_for_eval(cfg.tunnel, cfg.tunnel.length, seed=0, n=cfg.eval_sequences)
    return TaskBatch(inputs=b.inputs, positions=torch.arange(b.length), targets=None, posterior=b.posterior,
                     extra={"transition": b.transition, "emission": b.emission, "states": b.states,
                            "observations": b.observations})


def run_ch6_setting(*, scale: str, family: str, seed: int) -> dict[str, Any]:
    """Train ``family`` at chapter 6's setting with ``seed`` (:func:`train_and_measure`); return its output."""
    cfg = HMM_CH6_SETTING.spec(scale)
    torch.set_num_threads(1)
    return train_and_measure(family, ch6_task(scale), target_params=cfg.target_params,
                             steps=cfg.family_steps(family), batch_size=cfg.batch_size, lr=cfg.lr, seed=seed,
                             eval_batch=ch6_evaluation_set(scale), fused_adamw=family_entry(family).fused_adamw,
                             fused_attention=True)


def ch6_setting_jobs(scale: str, seeds: Sequence[int] | None = None) -> list[Job]:
    """Return one job per family of the spec and seed (key ``<family>_seed<s>``)."""
    return family_seed_jobs(run_ch6_setting, scale, HMM_CH6_SETTING.spec(scale), seeds)


def ch6_setting_payload(scale: str, outputs: Mapping[str, dict]) -> dict[str, Any]:
    """Return the stored payload: settings, the evaluation set's memory ladder, runs by family and seed."""
    return {"about": "Chapter 7's five families on Paper I's random HMMs at chapter 6's setting; written by "
                     "`python -m attention_dynamics compute hmm_ch6_setting`.",
            "scale": scale, "settings": HMM_CH6_SETTING.spec(scale).to_json(),
            "ladder": ladder_of_batch(ch6_evaluation_set(scale)).to_json(),
            "runs": runs_by_family(list(outputs.values()))}


def assemble_ch6_setting(scale: str, outputs: Mapping[str, Any], folder: Path) -> None:
    """Write ``hmm_ch6_setting.json`` (:func:`ch6_setting_payload`) into ``folder``."""
    save_results(ch6_setting_payload(scale, outputs), folder / RESULT_FILE)


HMM_CH6_SETTING = StoredResult(
    name="hmm_ch6_setting", chapter="architectures",
    about="chapter 7's families on Paper I's random HMMs at chapter 6's learning rate and run length, three seeds",
    files=(RESULT_FILE,), specs=SPECS, committed_scale="book",
    expected={"fast": "10 jobs, a minute",
              "book": "15 jobs (five families × 3 seeds): 2-3 CPU-min each at 10,000 steps, Mamba's (3,200 "
                      "steps) about 9"},
    jobs=ch6_setting_jobs, assemble=assemble_ch6_setting)

