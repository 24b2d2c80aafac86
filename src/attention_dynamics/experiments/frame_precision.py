"""Frame versus precision, decided: a unit-free settling criterion and the freeze-the-frame intervention.

Chapter 4 asks whether the routing frame (the attention pattern, set by ``W_Q`` and ``W_K``) is in place
before the values finish refining. Two measurements answer it here:

- **Path settling** (:func:`path_settling_step`, :func:`settling_comparison`): each quantity's remaining
  path to its final state as a fraction of its whole path. The fraction has no unit, so one threshold
  serves the attention pattern and the values alike; it is read at a recording resolution finer than
  the differences it decides, and the order is stated only where a paired interval over seeds
  excludes zero.
- **Freezing the frame** (:func:`freeze_frame_experiment`): stop ``W_Q`` and ``W_K`` at step t and train
  everything else to the end. If the frame is in place at t, the final loss matches the unfrozen run's;
  :func:`freeze_frame_step` is the first t from which it does, within a margin stated against the
  untrained model's gap. Run on chapter 4's recall head and on chapter 6's bijection wind tunnel (all
  query/key weights, :func:`attention_dynamics.experiments.wind_tunnel.freeze_query_key`).

The wind-tunnel runs are heavy: ``python -m attention_dynamics.experiments.frame_precision`` computes them once
(resumable from a per-run cache) into ``data/frame_freeze.json``, which chapter 4 loads.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import scipy.stats

from ..paths import data_path
from ..seeding import stream
from ..settling import path_settling_step
from ..results import load_results, save_results

__all__ = [
    "settling_comparison",
    "plot_settling_comparison",
    "order_statistics",
    "head_freeze_run",
    "tunnel_freeze_run",
    "freeze_frame_experiment",
    "freeze_frame_step",
    "freeze_frame_summary",
    "plot_freeze_frame",
    "DATA_PATH",
    "HEAVY_SETTINGS",
    "load_freeze_results",
    "main",
]


# ---------------------------------------------------------------------------------------------
# Path settling: a unit-free criterion
# ---------------------------------------------------------------------------------------------


# ---------------------------------------------------------------------------------------------
# Freezing the frame
# ---------------------------------------------------------------------------------------------


# ---------------------------------------------------------------------------------------------
# The heavy computation: one entry point, one committed JSON
# ---------------------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    """Compute the freeze-the-frame results and write them as JSON with their provenance (``--out``, default :data:`DATA_PATH`)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(DATA_PATH))
    parser.add_argument("--cache", default="build/frame_freeze_cache", help="per-run cache (resumable)")
    parser.add_argument("--kinds", nargs="+", default=["head", "tunnel"])
    args = parser.parse_args(argv)
    results = compute(cache_dir=args.cache, kinds=args.kinds, log=lambda m: print(m, flush=True))
    save_results(results, args.out)
    print(f"wrote {args.out}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
