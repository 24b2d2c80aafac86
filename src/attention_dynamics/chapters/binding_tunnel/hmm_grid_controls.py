"""Chapter 9's declaration of the stored result ``hmm_grid_controls`` (the jobs, the assembly and the loader are the
ledger's: :mod:`attention_dynamics.ledger.hmm_grid_controls`, so that chapters 6 and 7 state their own experiments'
controls from the same file)."""

from __future__ import annotations

from ...ledger.hmm_grid_controls import FILE, SETTINGS, assemble_hmm_grid, hmm_grid_jobs
from ...ledger.results import StoredResult

__all__ = ["HMM_GRID_CONTROLS"]

HMM_GRID_CONTROLS = StoredResult(
    name="hmm_grid_controls", chapter="binding_tunnel",
    about="chapter 6's HMM transformer (four seeds) and chapter 7's transformer on its three tunnels (five seeds), "
          "each with its routing learned, removed (uniform attention) and frozen at initialisation",
    files=(FILE,), specs=SETTINGS, committed_scale="book",
    expected={"fast": "18 jobs, a minute",
              "book": "57 jobs: 12 HMM transformers (10,000 steps, ~7 CPU-min each) and 45 chapter-7 transformers "
                      "(800 steps, 15-25 CPU-s each); ~1.7 CPU-hours"},
    jobs=hmm_grid_jobs, assemble=assemble_hmm_grid)
