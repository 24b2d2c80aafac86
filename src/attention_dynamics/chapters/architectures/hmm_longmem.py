"""Chapter 7's long-memory tunnel: HMM filtering that no short look-back solves, the five families on three seeds.

On Paper I's random HMMs a 2-step window already passes every transport bound, and on the sticky ones a 3-step
window does (the memory ladder, :mod:`~attention_dynamics.diagnostics.memory_ladder`). Here the chains keep their
state for about 20 steps (each transition row ``0.05·Dirichlet(1) + 0.95·identity``) and are seen through weak
emissions (each emission row ``0.5·Dirichlet(1) + 0.5·uniform``), K = 32
(:data:`~attention_dynamics.tasks.wind_tunnels.LONGMEM_HMM`): windows of 8 steps stay far from the filter, so only
carrying the belief forward scores well. The five parameter-matched families of chapter 7 are trained with
:func:`~attention_dynamics.training.families.train_and_measure` (chapter 7's training with the exact KL on each
step's fresh batch as the plateau evidence) at chapter 6's HMM learning rate, three seeds each; Mamba's
pure-PyTorch scan costs about twenty times a transformer step on a CPU, so it trains fewer steps, with AdamW's fused
kernel. Computed once by ``python -m attention_dynamics compute hmm_longmem`` (one job per run, resumable) into
``data/hmm_longmem.json``; chapter 7 loads it and the tests regenerate it at the fast scale.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

import torch

from ...core.paths import data_path
from ...core.seeding import stream, torch_generator
from ...core.settings import check_positive_int
from ...diagnostics.memory_ladder import ladder_of_batch
from ...ledger.results import Job, StoredResult, load_results, save_results
from ...models.factory import FAMILIES
from ...tasks.wind_tunnels import (
    LONGMEM_EMISSION_UNIFORM_SHARE,
    LONGMEM_HMM,
    LONGMEM_SELF_TRANSITION,
    TaskBatch,
    WindTunnel,
)
from ...training.families import train_and_measure

__all__ = ["LongMemorySpec", "SPECS", "spec", "RESULT_FILE", "LONGER_FACTOR", "EVAL_INDEX", "longmem_task",
           "longmem_evaluation_set", "run_longmem", "longmem_jobs", "assemble_longmem", "HMM_LONGMEM", "load"]


@dataclass(frozen=True)
class LongMemorySpec:
    """The long-memory tunnel's runs: HMM sizes (K = 32 steps), chapter 7's model budget, chapter 6's learning rate for
    the HMM (1e-3), the steps of every family except Mamba's (``steps_mamba``), the batch, the evaluation set's size,
    the seeds, the families trained (``families``: all five unless a scale leaves some out) and those also trained
    :data:`LONGER_FACTOR` times as long on every seed (``longer``: the evidence a failing or undecided verdict needs)."""

    hmm_states: int
    hmm_symbols: int
    hmm_length: int
    target_params: int
    steps: int
    steps_mamba: int
    batch_size: int
    lr: float
    eval_sequences: int
    seeds: tuple[int, ...]
    families: tuple[str, ...] = FAMILIES
    longer: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for name in ("hmm_states", "hmm_symbols", "hmm_length", "target_params", "steps", "steps_mamba", "batch_size",
                     "eval_sequences"):
            check_positive_int(name, getattr(self, name))
        if not self.lr > 0:
            raise ValueError(f"lr must be positive, got {self.lr}")
        if not self.seeds or len(set(self.seeds)) != len(self.seeds):
            raise ValueError(f"seeds must be distinct and at least one, got {self.seeds}")
        unknown = set(self.families) - set(FAMILIES)
        if unknown or not self.families:
            raise ValueError(f"families must be among {FAMILIES}, got {self.families}")
        if set(self.longer) - set(self.families):
            raise ValueError(f"longer must name trained families ({self.families}), got {self.longer}")

    def family_steps(self, family: str) -> int:
        """Return the training steps of ``family``."""
        return self.steps_mamba if family == "mamba" else self.steps

    def to_json(self) -> dict[str, Any]:
        """Return the settings as the stored file records them (with the tunnel's design and evaluation stream)."""
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name not in ("families", "longer")}
        return {**out, "seeds": list(self.seeds), "longer": list(self.longer), "self_transition": LONGMEM_SELF_TRANSITION,
                "emission_uniform_share": LONGMEM_EMISSION_UNIFORM_SHARE, "eval_stream": ["heldout", EVAL_INDEX],
                "longer_factor": LONGER_FACTOR}


SPECS: dict[str, LongMemorySpec] = {
    "fast": LongMemorySpec(hmm_states=5, hmm_symbols=5, hmm_length=10, target_params=6000, steps=30, steps_mamba=10,
                           batch_size=16, lr=1e-3, eval_sequences=64, seeds=(0, 1)),
    "book": LongMemorySpec(hmm_states=5, hmm_symbols=5, hmm_length=32, target_params=60000, steps=6000,
                           steps_mamba=1500, batch_size=64, lr=1e-3, eval_sequences=1000, seeds=(0, 1, 2),
                           longer=("transformer",)),
}
#: The committed results.
RESULT_FILE = "hmm_longmem.json"
#: A longer run, for the evidence of a failing verdict, trains this many times as long.
LONGER_FACTOR = 4
#: The held-out stream index of the long-memory tunnel's evaluation set (after chapter 7's tunnels).
EVAL_INDEX = 20


def spec(scale: str) -> LongMemorySpec:
    """Return the :class:`LongMemorySpec` of ``scale``, or raise ``ValueError`` naming the scales there are."""
    if scale not in SPECS:
        raise ValueError(f"the long-memory tunnel has scales {', '.join(SPECS)}, got {scale!r}")
    return SPECS[scale]


def longmem_task(scale: str) -> WindTunnel:
    """Return the long-memory tunnel at ``scale``."""
    cfg = spec(scale)
    return WindTunnel.make(LONGMEM_HMM, n_states=cfg.hmm_states, n_symbols=cfg.hmm_symbols, length=cfg.hmm_length)


def longmem_evaluation_set(scale: str) -> TaskBatch:
    """Return the long-memory tunnel's evaluation set: the same sequences for every family and seed."""
    return longmem_task(scale).sample(spec(scale).eval_sequences,
                                      generator=torch_generator(stream(0, "heldout", EVAL_INDEX)))


def run_longmem(*, scale: str, family: str, seed: int, steps: int | None = None) -> dict[str, Any]:
    """Train ``family`` on the long-memory tunnel with ``seed`` (:func:`train_and_measure`); return its output.

    ``steps``: a longer run's steps (it runs the transformer's attention on the fused kernel, the same function).
    """
    cfg = spec(scale)
    torch.set_num_threads(1)  # one core: results do not depend on the machine's core count
    return train_and_measure(family, longmem_task(scale), target_params=cfg.target_params,
                             steps=steps or cfg.family_steps(family), batch_size=cfg.batch_size, lr=cfg.lr,
                             seed=seed, eval_batch=longmem_evaluation_set(scale), fused_adamw=family == "mamba",
                             fused_attention=steps is not None)


def longmem_jobs(scale: str, seeds: Sequence[int] | None = None, *, longer: Sequence[str] | None = None) -> list[Job]:
    """Return one job per family of the spec and seed (key ``<family>_seed<s>``); ``longer`` (default: the spec's):
    families also trained :data:`LONGER_FACTOR` times as long, on every seed (key ``<family>_seed<s>_x4``)."""
    cfg = spec(scale)
    longer = cfg.longer if longer is None else tuple(longer)
    seeds = [int(s) for s in (cfg.seeds if seeds is None else seeds)]
    cost = {"mamba": 20.0}
    jobs = [Job(f"{f}_seed{s}", run_longmem, {"scale": scale, "family": f, "seed": s},
                cost=cfg.family_steps(f) * cost.get(f, 1.0)) for f in cfg.families for s in seeds]
    jobs += [Job(f"{f}_seed{s}_x{LONGER_FACTOR}", run_longmem,
                 {"scale": scale, "family": f, "seed": s, "steps": LONGER_FACTOR * cfg.family_steps(f)},
                 cost=LONGER_FACTOR * cfg.family_steps(f) * cost.get(f, 1.0)) for f in longer for s in seeds]
    return jobs


def longmem_payload(scale: str, outputs: Mapping[str, dict]) -> dict[str, Any]:
    """Return the stored payload: settings, the evaluation set's memory ladder and every run by family and seed."""
    ladder = ladder_of_batch(longmem_evaluation_set(scale))
    runs: dict[str, dict[str, Any]] = {}
    longer: dict[str, dict[str, Any]] = {}
    for key, out in outputs.items():
        target = longer if key.endswith(f"_x{LONGER_FACTOR}") else runs
        target.setdefault(out["family"], {})[str(out["seed"])] = out
    return {"about": "The long-memory HMM tunnel: five parameter-matched families, several seeds; written by "
                     "`python -m attention_dynamics compute hmm_longmem`.",
            "scale": scale, "settings": spec(scale).to_json(), "ladder": ladder.to_json(),
            "runs": {f: runs[f] for f in FAMILIES if f in runs}, "longer": {f: longer[f] for f in FAMILIES if f in longer}}


def assemble_longmem(scale: str, outputs: Mapping[str, Any], folder: Path) -> None:
    """Write ``hmm_longmem.json`` (:func:`longmem_payload`) into ``folder``."""
    save_results(longmem_payload(scale, outputs), folder / RESULT_FILE)


HMM_LONGMEM = StoredResult(
    name="hmm_longmem", chapter="architectures",
    about="the long-memory HMM tunnel (windows of 8 steps far from the filter): the families on three seeds",
    files=(RESULT_FILE,), scales=("fast", "book"), committed_scale="book",
    expected={"fast": "10 jobs, a minute",
              "book": "18 jobs (five families × 3 seeds, and the transformer 4× as long on each seed): 2-3 "
                      "CPU-min each, Mamba's (1,500 steps) about 7, the transformer's 24,000 steps about 10"},
    jobs=longmem_jobs, assemble=assemble_longmem)


def load() -> dict[str, Any]:
    """Return the committed results (``data/hmm_longmem.json``)."""
    return load_results(data_path(RESULT_FILE))
