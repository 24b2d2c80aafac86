"""CONTRIBUTING.md's walkthroughs, done: each test follows one walkthrough's steps at the fast scale, so that the
walkthrough cannot go stale without a test failing.

- "Adding a claim": :func:`test_adding_a_claim_records_it_and_measures_its_cross_machine_tolerance`;
- "Adding a model family": :func:`test_adding_a_model_family_takes_one_registry_entry`.

("Adding a stored result" is ``tests/test_compute.py``'s and each stored result's own tests: every result there is
declared as the walkthrough says, regenerated at the fast scale through ``compute``.)
"""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import json

import nbformat
import numpy as np
import torch
import torch.nn as nn

from attention_dynamics.book import cli
from attention_dynamics.book.nbcompare import assert_book_close
from attention_dynamics.chapters.architectures import binding_spread, figures, memory_report, report, runs, settings
from attention_dynamics.core import plotting
from attention_dynamics.diagnostics.memory_ladder import ladder_of_batch
from attention_dynamics.ledger import claims
from attention_dynamics.ledger.claims import CLAIM_GLUE_PREFIX, CLAIM_MIME_TYPE, load_ledger, write_ledger
from attention_dynamics.models import factory, registry
from attention_dynamics.training import families


class TinyGRU(nn.Module):
    """A throw-away family: embedding → one GRU layer → read-out, per-position logits ``(B, T, n_out)``."""

    def __init__(self, task, width: int):
        super().__init__()
        self.embed = nn.Embedding(task.vocab_size, width) if task.vocab_size else nn.Linear(task.input_dim, width)
        self.gru = nn.GRU(width, width, batch_first=True)
        self.head = nn.Linear(width, task.n_out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.gru(self.embed(x))[0])


#: The walkthrough's entry: a name, a label, a colour, a builder and the widths to match a budget over.
TINY_GRU = registry.ModelFamily("tiny_gru", "Tiny GRU", "#56B4E9", TinyGRU, range(4, 257, 4), step_cost=1.0)


def test_adding_a_model_family_takes_one_registry_entry():
    """CONTRIBUTING.md, "Adding a model family": one registry entry, and chapter 7 builds the family at its matched
    size, trains it, draws it in its colour and records its claims (ids made from its name, no verdict in Paper I)
    at the fast scale, beside the book's five; no package file changes."""
    cfg = settings.SETTINGS["fast"]
    torch.set_num_threads(1)
    with registry.registered_family(TINY_GRU):
        tasks = runs.book_tasks(cfg)
        # 1. build: the factory matches its size to the chapter's budget
        model = factory.build_matched_model("tiny_gru", tasks[0], cfg.target_params)
        assert 0.75 * cfg.target_params <= sum(p.numel() for p in model.parameters()) <= 1.25 * cfg.target_params
        # 2. train: the chapter's grid, every registered family on every tunnel (one process: a family registered
        #    at run time is not in a fresh worker process)
        results = families.compare_architectures(tasks, target_params=cfg.target_params, steps=cfg.steps,
                                                 batch_size=cfg.batch_size, lr=cfg.lr, seed=0,
                                                 eval_sequences=cfg.eval_sequences, processes=1)
        assert {f for f, _ in results} == set(registry.FAMILIES) | {"tiny_gru"}
        assert results[("tiny_gru", "binding")].steps == cfg.steps
        # 3. plot: the figures that colour by family draw it in its colour, labelled
        setup = runs.chapter_setup(cfg, seed=0)
        floors = runs.bayes_floor_nats(setup.eval_batches)
        for fig in (figures.plot_training_losses(results, tasks, floors),
                    figures.plot_hmm_kl_by_position(results, setup.levels)):
            plotting.check_figure(fig)
            lines = [line for ax in fig.axes for line in ax.lines if line.get_label() == "Tiny GRU"]
            assert lines and all(line.get_color() == "#56B4E9" for line in lines)
        # 4. record: the results table's claims, the verdict summary and the memory claims
        summary = report.record_results(results, setup.levels, cfg, params={"scale": "fast"},
                                        spread=binding_spread.BINDING_SEED_SPREAD.load(), floors=floors)
        assert "- **Tiny GRU** realises here:" in summary and "Paper I does not test this model" in summary
        recorded = {c.id: c for c in claims.recorded_claims()}
        for name, *_ in report.TABLE_CLAIMS:
            claim = recorded[report.table_claim_id(name, "tiny_gru")]
            assert claim.id == f"architectures.{name}_tiny_gru" and claim.status == "new"
        assert "Tiny GRU" in runs.results_table(results, setup.levels).index
        ladder = ladder_of_batch(setup.eval_batches["hmm"])
        memory = memory_report.record_chapter7_memory(
            "hmm", ladder, {f: results[(f, "hmm")].metrics["kl_bits"] for f in registry.family_names()}, params={})
        assert memory["architectures.hmm_memory_steps_tiny_gru"].status == "new"
    assert "tiny_gru" not in registry.family_names()


# --------------------------------------------------------------------------------------------
# Adding a claim
# --------------------------------------------------------------------------------------------

CLAIM_ID = "toy.throwaway_ratio"


def _record(value: float) -> claims.Claim:
    """What the chapter's ``report.py`` does (step 1): the claim, its id written out, decided by its bound."""
    return claims.record("toy.throwaway_ratio", value, unit="fraction", lower=0.2, params={"seed": 0},
                         description="a throw-away ratio, at least 0.2")


def _executed_chapter(root, claim: claims.Claim) -> None:
    """A one-chapter book at ``root`` whose executed notebook holds ``claim`` as the kernel glues it (steps 2, 4)."""
    (root / "book").mkdir(parents=True)
    (root / "_toc.yml").write_text("format: jb-book\nroot: book/intro\nchapters:\n  - file: book/09-toy\n")
    prefix = "application/papermill.record/"
    output = nbformat.v4.new_output(
        "display_data", data={prefix + CLAIM_MIME_TYPE: claim.to_json(), prefix + "text/plain": repr(claim.id)},
        metadata={"scrapbook": {"name": CLAIM_GLUE_PREFIX + claim.id, "mime_prefix": prefix}})
    cell = nbformat.v4.new_code_cell("report.record_throwaway_ratio(...)", outputs=[output])
    nbformat.write(nbformat.v4.new_notebook(cells=[cell]), root / "book" / "09-toy.ipynb")


def test_adding_a_claim_records_it_and_measures_its_cross_machine_tolerance(tmp_path, capsys):
    """CONTRIBUTING.md, "Adding a claim": record it (status from its bound), the re-executed chapter's ledger holds
    it, `ledger --compare` refuses it until its tolerance is measured, `ledger --measure-spread` with two seed runs
    and a perturbed run writes it into book/claim_tolerances.json, and the rebuilt ledger then compares."""
    root = tmp_path / "checkout"
    claim = _record(0.5)  # 1. record it
    assert claim.status == "pass" and claims.recorded_claims()[-1].id == CLAIM_ID
    _executed_chapter(root, claim)  # 2.-4. glued in the chapter, which is re-executed
    assert cli.main(["--root", str(root), "ledger"]) == 0
    (committed,) = load_ledger(root / "book" / "claims.json")
    assert committed.id == CLAIM_ID and committed.chapter == "09-toy" and committed.cross_machine_rtol is None

    # 5. the perturbed re-execution does not compare: the claim declares no tolerance yet
    runs = {name: root / "build" / "runs" / name for name in ("seed-1", "seed-2", "nbval-ch9")}
    for (name, folder), value in zip(runs.items(), (0.52, 0.47, 0.5000001)):
        folder.mkdir(parents=True)
        write_ledger([_record(value)], folder / "claims.json")  # the chapter re-executed: another seed, machine
    capsys.readouterr()
    assert cli.main(["--root", str(root), "ledger", "--compare", str(runs["nbval-ch9"] / "claims.json")]) == 1
    assert f"{CLAIM_ID}: declares no cross-machine tolerance" in capsys.readouterr().err

    # ... until the seed runs and the perturbed run measure it
    assert cli.main(["--root", str(root), "ledger", "--measure-spread", str(runs["seed-1"]), str(runs["seed-2"]),
                     "--perturbed", str(runs["nbval-ch9"])]) == 0
    entry = json.loads((root / "book" / "claim_tolerances.json").read_text())["claims"][CLAIM_ID]
    values = [0.5, 0.52, 0.47]
    assert entry["values"] == values and entry["perturbed_values"] == [0.5000001]
    mean = np.mean(values + [0.5000001])
    assert_book_close(entry["rtol"], max(1e-6, 3 * np.std(values, ddof=1) / mean, 3 * 1e-7 / mean), rtol=1e-2)
    assert entry["runs"] == [str(runs["seed-1"]), str(runs["seed-2"])]

    # the rebuilt ledger carries it, and the perturbed re-execution compares
    assert cli.main(["--root", str(root), "ledger"]) == 0
    assert load_ledger(root / "book" / "claims.json")[0].cross_machine_rtol == entry["rtol"]
    assert cli.main(["--root", str(root), "ledger", "--compare", str(runs["nbval-ch9"] / "claims.json")]) == 0
