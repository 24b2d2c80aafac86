"""Chapter 9's declaration of the stored result ``routing_controls`` (the jobs, the assembly and the loader are the
ledger's: :mod:`attention_dynamics.ledger.routing_controls`, so that chapters 4 to 6 read their own experiments'
controls from the same file)."""

from __future__ import annotations

from ...ledger.results import StoredResult
from ...ledger.routing_controls import FILE, SETTINGS, assemble_routing_controls, routing_controls_jobs

__all__ = ["ROUTING_CONTROLS"]

ROUTING_CONTROLS = StoredResult(
    name="routing_controls", chapter="binding_tunnel",
    about="every trained experiment beside the same model with routing removed, frozen or pinned: the sticky chain "
          "(the paper's five seeds, learned, frozen, uniform and identity routing, SGD and EM-like), chapter 6's "
          "bijection transformer and chapter 4's recall head (learned, uniform, frozen; three seeds each)",
    files=(FILE,), specs=SETTINGS, committed_scale="book",
    expected={"fast": "46 jobs, a minute",
              "book": "58 jobs: 40 sticky-chain heads (~40 CPU-s each, the identity ones seconds), 9 bijection "
                      "runs (~1 CPU-min), 9 recall heads (~1 CPU-min); ~40 CPU-min"},
    jobs=routing_controls_jobs, assemble=assemble_routing_controls)
