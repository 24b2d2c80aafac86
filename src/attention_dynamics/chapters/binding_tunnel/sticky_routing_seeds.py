"""Chapter 9's declaration of the stored result ``sticky_routing_seeds`` (the jobs, the assembly and the loader are
the ledger's: :mod:`attention_dynamics.ledger.sticky_routing_seeds`, so that chapter 5 states the same numbers)."""

from __future__ import annotations

from ...ledger.results import StoredResult
from ...ledger.sticky_routing_seeds import FILE, SETTINGS, assemble_routing_seeds, routing_seeds_jobs

__all__ = ["STICKY_ROUTING_SEEDS"]

STICKY_ROUTING_SEEDS = StoredResult(
    name="sticky_routing_seeds", chapter="binding_tunnel",
    about="the sticky chain's speed-up with learned, frozen and identity routing on twenty seeds (SGD and EM-like, "
          "1000 steps each)",
    files=(FILE,), specs=SETTINGS, committed_scale="book",
    expected={"fast": "18 jobs, seconds",
              "book": "120 jobs: 20 seeds × 2 schedules × (learned and frozen ~40 CPU-s, identity ~8); ~1 CPU-hour"},
    jobs=routing_seeds_jobs, assemble=assemble_routing_seeds)
