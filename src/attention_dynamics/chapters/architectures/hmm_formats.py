"""Chapter 7's LSTM against Paper I, by input format: how the matrices reach the model decides what an LSTM can do.

Chapter 7 gives every position the observation *and* both matrices (vec(T), vec(E)); Paper I's authors write
the matrices once, as a header of probability tokens before the observations (``encode_instance`` in their
repository's ``src/data/hmm.py``), so a model must store them and look up the emission column of each observation by content. Here the
LSTM and the transformer (the control) are trained in the three formats of
:class:`~attention_dynamics.tasks.wind_tunnels.FormattedHMMTunnel` (:data:`~attention_dynamics.tasks.hmm.INPUT_FORMATS`:
matrices at every step, at t = 0 only, Paper I's header) on chapter 7's sticky HMMs drawn on the 0.01 grid (the
transition matrices rounded back onto it after the sticky mix, so that the header says exactly what the exact filter
uses), three seeds each, with :func:`~attention_dynamics.training.families.train_and_measure` at one setting for
every format, and on Paper I's random HMMs (``hmm``, the same grid) with chapter 6's 10,000 steps (``steps_hmm``).
Computed once by ``python -m attention_dynamics compute hmm_formats`` into ``data/hmm_formats.json`` and read
against each tunnel's memory ladder.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

import torch

from ...core.seeding import stream, torch_generator
from ...diagnostics.memory_ladder import ladder_of_batch
from ...ledger.results import Job, StoredResult, check_seeds, save_results
from ...tasks import hmm
from ...tasks.wind_tunnels import FORMAT_TUNNELS, STICKY_HMM_TASK, STICKY_SELF_TRANSITION, FormattedHMMTunnel, TaskBatch
from ...training.families import train_and_measure
from .hmm_tunnel import HMMTunnelSpec

__all__ = ["FORMAT_FAMILIES", "SPECS", "RESULT_FILE", "LONGER_FACTOR", "EVAL_INDEX", "format_tunnel",
           "format_evaluation_set", "run_format", "format_jobs", "assemble_formats", "HMM_FORMATS"]

#: The two families compared: the LSTM, and the transformer as the control.
FORMAT_FAMILIES = ("lstm", "transformer")
#: A longer run, for the evidence of a failing verdict, trains this many times as long.
LONGER_FACTOR = 4
#: Held-out stream indices of the two tunnels' evaluation sets (the same sequences in every format).
EVAL_INDEX = {"hmm": 21, STICKY_HMM_TASK: 22}
#: What ``data/hmm_formats.json`` records of the settings, in its order, and the grid, the sticky mix and the
#: evaluation streams after them.
_RECORD = ("hmm_states", "hmm_symbols", "hmm_length", "target_params", "steps", "steps_hmm", "batch_size", "lr",
           "eval_sequences", "seeds")
_DESIGN = {"grid": 0.01, "sticky_self_transition": STICKY_SELF_TRANSITION,
           "eval_streams": {b: ["heldout", i] for b, i in EVAL_INDEX.items()}, "longer_factor": LONGER_FACTOR}

#: The format runs: Paper I's K = 20, chapter 7's budget, chapter 6's HMM learning rate, the steps on each tunnel
#: (``steps``; ``steps_hmm`` on the random HMMs, chapter 6's run length, where 4,000 steps leave both families above
#: the context-blind level), the seeds, the two families and the ``tunnels`` the scale trains.
SPECS: dict[str, HMMTunnelSpec] = {
    "fast": HMMTunnelSpec(hmm_states=5, hmm_symbols=5, hmm_length=6, target_params=6000, steps=20, batch_size=16,
                          lr=1e-3, eval_sequences=64, seeds=(0, 1), families=FORMAT_FAMILIES, tunnels=FORMAT_TUNNELS,
                          record=_RECORD, design=_DESIGN),
    "book": HMMTunnelSpec(hmm_states=5, hmm_symbols=5, hmm_length=20, target_params=60000, steps=4000,
                          steps_hmm=10_000, batch_size=64, lr=1e-3, eval_sequences=1000, seeds=(0, 1, 2),
                          families=FORMAT_FAMILIES, tunnels=FORMAT_TUNNELS, record=_RECORD, design=_DESIGN),
}
#: The committed results.
RESULT_FILE = "hmm_formats.json"


def format_tunnel(scale: str, base: str, input_format: str) -> FormattedHMMTunnel:
    """Return the ``base`` tunnel in ``input_format`` at ``scale``."""
    cfg = HMM_FORMATS.spec(scale)
    return FormattedHMMTunnel(base, input_format, cfg.hmm_states, cfg.hmm_symbols, cfg.hmm_length)


def format_evaluation_set(scale: str, base: str, input_format: str) -> TaskBatch:
    """Return the evaluation set of ``base`` in ``input_format``: the same HMMs and observations in every format."""
    return format_tunnel(scale, base, input_format).sample(
        HMM_FORMATS.spec(scale).eval_sequences, generator=torch_generator(stream(0, "heldout", EVAL_INDEX[base])))


def run_format(*, scale: str, base: str, input_format: str, family: str, seed: int,
               steps: int | None = None) -> dict[str, Any]:
    """Train ``family`` on ``base`` in ``input_format`` with ``seed``; return its output (plus tunnel and format)."""
    cfg = HMM_FORMATS.spec(scale)
    torch.set_num_threads(1)
    out = train_and_measure(family, format_tunnel(scale, base, input_format), target_params=cfg.target_params,
                            steps=steps or cfg.tunnel_steps(base), batch_size=cfg.batch_size, lr=cfg.lr, seed=seed,
                            eval_batch=format_evaluation_set(scale, base, input_format), fused_attention=True)
    return {**out, "base": base, "input_format": input_format}


def format_jobs(scale: str, seeds: Sequence[int] | None = None, *, longer: Sequence[str] = ()) -> list[Job]:
    """Return the runs: tunnel × format × family × seed (key ``<tunnel>_<format>_<family>_seed<s>``); ``longer``:
    ``"<tunnel>/<family>/<format>"`` also trained :data:`LONGER_FACTOR` times as long."""
    cfg = HMM_FORMATS.spec(scale)
    seeds = check_seeds(seeds, cfg.seeds, at_least=1)
    cost = {"header": 3.0}  # the header makes the sequence 3 + 50 tokens longer
    jobs = [Job(f"{base}_{fmt}_{family}_seed{s}", run_format,
                {"scale": scale, "base": base, "input_format": fmt, "family": family, "seed": s},
                cost=cfg.tunnel_steps(base) * cost.get(fmt, 1.0))
            for base in cfg.tunnels for fmt in hmm.INPUT_FORMATS for family in cfg.families for s in seeds]
    for item in longer:
        base, family, fmt = item.split("/")
        jobs += [Job(f"{base}_{fmt}_{family}_seed{s}_x{LONGER_FACTOR}", run_format,
                     {"scale": scale, "base": base, "input_format": fmt, "family": family, "seed": s,
                      "steps": LONGER_FACTOR * cfg.tunnel_steps(base)},
                     cost=LONGER_FACTOR * cfg.tunnel_steps(base) * cost.get(fmt, 1.0)) for s in seeds]
    return jobs


def formats_payload(scale: str, outputs: Mapping[str, dict]) -> dict[str, Any]:
    """Return the stored payload: settings, each tunnel's memory ladder, runs as ``[tunnel][format][family][seed]``."""
    ladders = {base: ladder_of_batch(format_evaluation_set(scale, base, "every_step")).to_json()
               for base in FORMAT_TUNNELS}
    runs: dict[str, Any] = {}
    longer: dict[str, Any] = {}
    for key, out in outputs.items():
        target = longer if key.endswith(f"_x{LONGER_FACTOR}") else runs
        target.setdefault(out["base"], {}).setdefault(out["input_format"], {}).setdefault(out["family"], {})[
            str(out["seed"])] = out
    return {"about": "LSTM and transformer on HMM filtering in three input formats (matrices at every step, at the "
                     "first step only, Paper I's header of probability tokens); written by "
                     "`python -m attention_dynamics compute hmm_formats`.",
            "scale": scale, "settings": HMM_FORMATS.spec(scale).to_json(), "ladders": ladders, "runs": runs, "longer": longer}


def assemble_formats(scale: str, outputs: Mapping[str, Any], folder: Path) -> None:
    """Write ``hmm_formats.json`` (:func:`formats_payload`) into ``folder``."""
    save_results(formats_payload(scale, outputs), folder / RESULT_FILE)


HMM_FORMATS = StoredResult(
    name="hmm_formats", chapter="architectures",
    about="the LSTM and the transformer in three input formats (Paper I's header among them), three seeds",
    files=(RESULT_FILE,), specs=SPECS, committed_scale="book",
    expected={"fast": "24 jobs, a few minutes",
              "book": "36 jobs (2 tunnels × 2 families × 3 formats × 3 seeds): on the sticky HMMs (4,000 steps) about "
                      "1 CPU-min each in the feature formats, 2 (LSTM) and 7 (transformer) in the header format; on "
                      "the random HMMs (10,000 steps) 2.5 times as long"},
    jobs=format_jobs, assemble=assemble_formats)

