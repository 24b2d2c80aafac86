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

from pathlib import Path
from typing import Any, Mapping, Sequence

import torch

from ...core.seeding import stream, torch_generator
from ...diagnostics.memory_ladder import ladder_of_batch
from ...ledger.results import Job, StoredResult, save_results
from ...models.registry import family as family_entry
from ...tasks.wind_tunnels import (
    LONGMEM_EMISSION_UNIFORM_SHARE,
    LONGMEM_HMM,
    LONGMEM_SELF_TRANSITION,
    TaskBatch,
    WindTunnel,
)
from ...training.families import train_and_measure
from .hmm_tunnel import HMMTunnelSpec, family_seed_jobs, runs_by_family

__all__ = ["SPECS", "RESULT_FILE", "LONGER_FACTOR", "EVAL_INDEX", "longmem_task", "longmem_evaluation_set",
           "run_longmem", "longmem_jobs", "assemble_longmem", "HMM_LONGMEM"]

#: A longer run, for the evidence of a failing verdict, trains this many times as long.
LONGER_FACTOR = 4
#: The held-out stream index of the long-memory tunnel's evaluation set (after chapter 7's tunnels).
EVAL_INDEX = 20
#: What ``data/hmm_longmem.json`` records of the settings, in its order, and the tunnel's design after them.
_RECORD = ("hmm_states", "hmm_symbols", "hmm_length", "target_params", "steps", "steps_mamba", "batch_size", "lr",
           "eval_sequences", "seeds", "longer")
_DESIGN = {"self_transition": LONGMEM_SELF_TRANSITION, "emission_uniform_share": LONGMEM_EMISSION_UNIFORM_SHARE,
           "eval_stream": ["heldout", EVAL_INDEX], "longer_factor": LONGER_FACTOR}

#: The long-memory tunnel's runs: HMM sizes (K = 32 steps), chapter 7's model budget, chapter 6's learning rate for the
#: HMM (1e-3), the steps of every family except Mamba's, the batch, the evaluation set's size, the seeds, and the
#: families also trained :data:`LONGER_FACTOR` times as long on every seed (``longer``).
SPECS: dict[str, HMMTunnelSpec] = {
    "fast": HMMTunnelSpec(hmm_states=5, hmm_symbols=5, hmm_length=10, target_params=6000, steps=30,
                          steps_by_family={"mamba": 10}, batch_size=16, lr=1e-3, eval_sequences=64, seeds=(0, 1),
                          record=_RECORD, design=_DESIGN),
    "book": HMMTunnelSpec(hmm_states=5, hmm_symbols=5, hmm_length=32, target_params=60000, steps=6000,
                          steps_by_family={"mamba": 1500}, batch_size=64, lr=1e-3, eval_sequences=1000,
                          seeds=(0, 1, 2), longer=("transformer",), record=_RECORD, design=_DESIGN),
}
#: The committed results.
RESULT_FILE = "hmm_longmem.json"


def longmem_task(scale: str) -> WindTunnel:
    """Return the long-memory tunnel at ``scale``."""
    cfg = HMM_LONGMEM.spec(scale)
    return WindTunnel.make(LONGMEM_HMM, n_states=cfg.hmm_states, n_symbols=cfg.hmm_symbols, length=cfg.hmm_length)


def longmem_evaluation_set(scale: str) -> TaskBatch:
    """Return the long-memory tunnel's evaluation set: the same sequences for every family and seed."""
    return longmem_task(scale).sample(HMM_LONGMEM.spec(scale).eval_sequences,
                                      generator=torch_generator(stream(0, "heldout", EVAL_INDEX)))


def run_longmem(*, scale: str, family: str, seed: int, steps: int | None = None) -> dict[str, Any]:
    """Train ``family`` on the long-memory tunnel with ``seed`` (:func:`train_and_measure`); return its output.

    ``steps``: a longer run's steps (it runs the transformer's attention on the fused kernel, the same function).
    """
    cfg = HMM_LONGMEM.spec(scale)
    torch.set_num_threads(1)  # one core: results do not depend on the machine's core count
    return train_and_measure(family, longmem_task(scale), target_params=cfg.target_params,
                             steps=steps or cfg.family_steps(family), batch_size=cfg.batch_size, lr=cfg.lr,
                             seed=seed, eval_batch=longmem_evaluation_set(scale),
                             fused_adamw=family_entry(family).fused_adamw, fused_attention=steps is not None)


def longmem_jobs(scale: str, seeds: Sequence[int] | None = None, *, longer: Sequence[str] | None = None) -> list[Job]:
    """Return one job per family of the spec and seed (key ``<family>_seed<s>``); ``longer`` (default: the spec's):
    families also trained :data:`LONGER_FACTOR` times as long, on every seed (key ``<family>_seed<s>_x4``)."""
    cfg = HMM_LONGMEM.spec(scale)
    return family_seed_jobs(run_longmem, scale, cfg, seeds, longer=cfg.longer if longer is None else tuple(longer),
                            factor=LONGER_FACTOR)


def longmem_payload(scale: str, outputs: Mapping[str, dict]) -> dict[str, Any]:
    """Return the stored payload: settings, the evaluation set's memory ladder and every run by family and seed."""
    ladder = ladder_of_batch(longmem_evaluation_set(scale))
    is_longer = {key: key.endswith(f"_x{LONGER_FACTOR}") for key in outputs}
    return {"about": "The long-memory HMM tunnel: five parameter-matched families, several seeds; written by "
                     "`python -m attention_dynamics compute hmm_longmem`.",
            "scale": scale, "settings": HMM_LONGMEM.spec(scale).to_json(), "ladder": ladder.to_json(),
            "runs": runs_by_family([out for key, out in outputs.items() if not is_longer[key]]),
            "longer": runs_by_family([out for key, out in outputs.items() if is_longer[key]])}


def assemble_longmem(scale: str, outputs: Mapping[str, Any], folder: Path) -> None:
    """Write ``hmm_longmem.json`` (:func:`longmem_payload`) into ``folder``."""
    save_results(longmem_payload(scale, outputs), folder / RESULT_FILE)


HMM_LONGMEM = StoredResult(
    name="hmm_longmem", chapter="architectures",
    about="the long-memory HMM tunnel (windows of 8 steps far from the filter): the families on three seeds",
    files=(RESULT_FILE,), specs=SPECS, committed_scale="book",
    expected={"fast": "10 jobs, a minute",
              "book": "18 jobs (five families × 3 seeds, and the transformer 4× as long on each seed): 2-3 "
                      "CPU-min each, Mamba's (1,500 steps) about 7, the transformer's 24,000 steps about 10"},
    jobs=longmem_jobs, assemble=assemble_longmem)

