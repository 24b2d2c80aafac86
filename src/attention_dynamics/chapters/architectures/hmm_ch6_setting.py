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

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

import torch

from ...core.paths import data_path
from ...core.settings import check_positive_int
from ...diagnostics.memory_ladder import ladder_of_batch
from ...ledger.results import Job, StoredResult, load_results, save_results
from ...models.factory import FAMILIES
from ...tasks.wind_tunnels import TaskBatch, WindTunnel
from ...training.families import train_and_measure
from ...training.wind_tunnels import HMM_TUNNELS, HMMTraining, hmm_batch_for_eval

__all__ = ["Chapter6SettingSpec", "SPECS", "spec", "RESULT_FILE", "CHAPTER7_GRID_STEPS", "ch6_task",
           "ch6_evaluation_set", "run_ch6_setting", "ch6_setting_jobs", "assemble_ch6_setting", "HMM_CH6_SETTING",
           "load"]

#: Chapter 7's grid run on this tunnel (steps), the unit of "4× as long".
CHAPTER7_GRID_STEPS = 800


@dataclass(frozen=True)
class Chapter6SettingSpec:
    """Chapter 6's HMM setting with chapter 7's model budget: ``ch6_scale`` names chapter 6's tunnel
    (:data:`~attention_dynamics.training.wind_tunnels.HMM_TUNNELS`, whose held-out set evaluates the runs); the
    steps of every family but Mamba (``steps_mamba``: 4× chapter 7's grid run), the batch, the learning rate, the
    seeds, the evaluation set's size and the ``families`` trained."""

    ch6_scale: str
    target_params: int
    steps: int
    steps_mamba: int
    batch_size: int
    lr: float
    seeds: tuple[int, ...]
    eval_sequences: int
    families: tuple[str, ...] = FAMILIES

    def __post_init__(self) -> None:
        if self.ch6_scale not in HMM_TUNNELS:
            raise ValueError(f"ch6_scale must be one of {', '.join(HMM_TUNNELS)}, got {self.ch6_scale!r}")
        for name in ("target_params", "steps", "steps_mamba", "batch_size", "eval_sequences"):
            check_positive_int(name, getattr(self, name))
        if not self.lr > 0:
            raise ValueError(f"lr must be positive, got {self.lr}")
        if not self.seeds or len(set(self.seeds)) != len(self.seeds):
            raise ValueError(f"seeds must be distinct and at least one, got {self.seeds}")
        if not self.families or set(self.families) - set(FAMILIES):
            raise ValueError(f"families must be among {FAMILIES}, got {self.families}")

    @property
    def tunnel(self) -> HMMTraining:
        """Return chapter 6's HMM tunnel at ``ch6_scale``."""
        return HMM_TUNNELS[self.ch6_scale]

    def family_steps(self, family: str) -> int:
        """Return the training steps of ``family``."""
        return self.steps_mamba if family == "mamba" else self.steps

    def to_json(self) -> dict[str, Any]:
        """Return the settings as the stored file records them (with chapter 6's HMM sizes)."""
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "families"}
        t = self.tunnel
        return {**out, "seeds": list(self.seeds), "hmm_length": t.length, "hmm_states": t.n_states,
                "hmm_symbols": t.n_symbols, "chapter7_grid_steps": CHAPTER7_GRID_STEPS,
                "eval_set": "chapter 6's hmm_batch_for_eval at the training length, seed 0"}


SPECS: dict[str, Chapter6SettingSpec] = {
    "fast": Chapter6SettingSpec(ch6_scale="fast", target_params=6000, steps=30, steps_mamba=10, batch_size=16,
                                lr=2e-3, seeds=(0, 1), eval_sequences=64),
    "book": Chapter6SettingSpec(ch6_scale="book", target_params=60000, steps=10_000, steps_mamba=3200, batch_size=64,
                                lr=1e-3, seeds=(0, 1, 2), eval_sequences=2000),
}
#: The committed results.
RESULT_FILE = "hmm_ch6_setting.json"


def spec(scale: str) -> Chapter6SettingSpec:
    """Return the :class:`Chapter6SettingSpec` of ``scale``, or raise ``ValueError`` naming the scales there are."""
    if scale not in SPECS:
        raise ValueError(f"the chapter-6-setting runs have scales {', '.join(SPECS)}, got {scale!r}")
    return SPECS[scale]


def ch6_task(scale: str) -> WindTunnel:
    """Return Paper I's random-HMM tunnel at chapter 6's training length."""
    t = spec(scale).tunnel
    return WindTunnel.make("hmm", n_states=t.n_states, n_symbols=t.n_symbols, length=t.length)


def ch6_evaluation_set(scale: str) -> TaskBatch:
    """Return chapter 6's held-out HMM set at the training length (seed 0), as a :class:`TaskBatch`."""
    cfg = spec(scale)
    b = hmm_batch_for_eval(cfg.tunnel, cfg.tunnel.length, seed=0, n=cfg.eval_sequences)
    return TaskBatch(inputs=b.inputs, positions=torch.arange(b.length), targets=None, posterior=b.posterior,
                     extra={"transition": b.transition, "emission": b.emission, "states": b.states,
                            "observations": b.observations})


def run_ch6_setting(*, scale: str, family: str, seed: int) -> dict[str, Any]:
    """Train ``family`` at chapter 6's setting with ``seed`` (:func:`train_and_measure`); return its output."""
    cfg = spec(scale)
    torch.set_num_threads(1)
    return train_and_measure(family, ch6_task(scale), target_params=cfg.target_params,
                             steps=cfg.family_steps(family), batch_size=cfg.batch_size, lr=cfg.lr, seed=seed,
                             eval_batch=ch6_evaluation_set(scale), fused_adamw=family == "mamba", fused_attention=True)


def ch6_setting_jobs(scale: str, seeds: Sequence[int] | None = None) -> list[Job]:
    """Return one job per family of the spec and seed (key ``<family>_seed<s>``)."""
    cfg = spec(scale)
    seeds = [int(s) for s in (cfg.seeds if seeds is None else seeds)]
    cost = {"mamba": 15.0}
    return [Job(f"{f}_seed{s}", run_ch6_setting, {"scale": scale, "family": f, "seed": s},
                cost=cfg.family_steps(f) * cost.get(f, 1.0)) for f in cfg.families for s in seeds]


def ch6_setting_payload(scale: str, outputs: Mapping[str, dict]) -> dict[str, Any]:
    """Return the stored payload: settings, the evaluation set's memory ladder, runs by family and seed."""
    runs: dict[str, dict] = {}
    for out in outputs.values():
        runs.setdefault(out["family"], {})[str(out["seed"])] = out
    return {"about": "Chapter 7's five families on Paper I's random HMMs at chapter 6's setting; written by "
                     "`python -m attention_dynamics compute hmm_ch6_setting`.",
            "scale": scale, "settings": spec(scale).to_json(),
            "ladder": ladder_of_batch(ch6_evaluation_set(scale)).to_json(),
            "runs": {f: runs[f] for f in FAMILIES if f in runs}}


def assemble_ch6_setting(scale: str, outputs: Mapping[str, Any], folder: Path) -> None:
    """Write ``hmm_ch6_setting.json`` (:func:`ch6_setting_payload`) into ``folder``."""
    save_results(ch6_setting_payload(scale, outputs), folder / RESULT_FILE)


HMM_CH6_SETTING = StoredResult(
    name="hmm_ch6_setting", chapter="architectures",
    about="chapter 7's families on Paper I's random HMMs at chapter 6's learning rate and run length, three seeds",
    files=(RESULT_FILE,), scales=("fast", "book"), committed_scale="book",
    expected={"fast": "10 jobs, a minute",
              "book": "15 jobs (five families × 3 seeds): 2-3 CPU-min each at 10,000 steps, Mamba's (3,200 "
                      "steps) about 9"},
    jobs=ch6_setting_jobs, assemble=assemble_ch6_setting)


def load() -> dict[str, Any]:
    """Return the committed results (``data/hmm_ch6_setting.json``)."""
    return load_results(data_path(RESULT_FILE))
