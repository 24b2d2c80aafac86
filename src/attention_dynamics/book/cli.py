"""The command line, ``python -m attention_dynamics <command>``: its parser and what each command calls.

The commands: ``reproduce`` (the runner, :func:`attention_dynamics.book.reproduce.reproduce`), ``chapters``,
``format``, ``ledger`` (:mod:`attention_dynamics.book.ledger_commands`), ``perturbed-env``, ``build``, ``pdf``
(:mod:`attention_dynamics.book.pdf`), ``compute`` (:mod:`attention_dynamics.book.compute`) and ``diagrams``
(:mod:`attention_dynamics.book.diagrams`). The help texts are
plain text (argparse prints them as they are); a test checks that no command's ``--help`` shows markup.
``reading-times`` (:mod:`attention_dynamics.book.reading`) measures each chapter's prose on the built book.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Sequence

from ..core import paths
from ..core.settings import DEVICES, SCALES
from . import compute
from .ledger_commands import (
    ledger_command,
    ledger_compare_command,
    margins_command,
    measure_spread_command,
    perturbed_environment,
)
from .diagrams import DIAGRAMS_DIR, stale_diagrams, write_diagrams
from .notebooks import BookError, book_chapters
from .reproduce import build_html, format_command, reproduce

__all__ = ["DESCRIPTION", "COMMANDS", "diagrams_command", "main"]


#: What ``python -m attention_dynamics --help`` and each command's ``--help`` say (plain text: argparse prints it
#: as it is, so no reStructuredText here).
DESCRIPTION = (
    "The companion book's command line: re-execute the chapters and build the book (reproduce, build, pdf), check "
    "and compare the claims ledger (ledger), compute the stored results (compute), list and format the chapters."
)
COMMANDS = {
    "reproduce": ("execute chapters, write the ledger, build the HTML book",
                  "Re-execute the chapters whose inputs changed (all of them with --force), rebuild book/claims.json "
                  "from the executed notebooks, record the run times in book/status.json and build the HTML book. "
                  "A run with another scale, device, step count or seed writes into build/runs/<run-name>/ (for "
                  "example build/runs/scale-fast/) and never over the committed chapters. A failing chapter leaves "
                  "every committed file as it was."),
    "chapters": ("list the chapters in reading order", "List the chapters of _toc.yml in reading order."),
    "format": ("format the chapters' code cells with ruff (100 characters a line)",
               "Format every chapter's code cells with ruff (100 characters a line), leaving the outputs as they "
               "are, and refresh the text forms and launch notebooks."),
    "ledger": ("rebuild book/claims.json from the committed notebooks",
               "Rebuild the claims ledger, book/claims.json, from the committed notebooks; or check it, compare a "
               "re-executed ledger with it, measure the claims' cross-machine tolerances, or list the claims too "
               "close to their thresholds."),
    "perturbed-env": ("print the numerical environment of another machine (for the env command)",
                      "Print the environment variables that make this machine compute like another one (a lower "
                      "ATen CPU capability and another thread count), as NAME=value words for the env command."),
    "build": ("build the HTML book from committed outputs (warnings are errors)",
              "Build the HTML book from the committed outputs, with warnings as errors, into _build/html/."),
    "pdf": ("build the book as one PDF from committed outputs (headless Chromium)",
            "Print the book as one PDF from the committed outputs with headless Chromium (default: "
            "_build/pdf/book.pdf)."),
    "compute": ("compute a stored result (heavy runs), locally or on a SLURM cluster", compute.DESCRIPTION),
    "reading-times": ("measure each chapter's prose on the built book (words, reading time, sentence lengths)",
                      "Measure each chapter's prose on the built HTML book (its main flow only: no code, outputs, "
                      "math, tables, captions or folded blocks): words, reading time at 230 words a minute, mean "
                      "sentence length, the share of sentences over 40 words, the longest sentence and the "
                      "bookkeeping words, against the book's prose budget; with --update-readme, write the reading "
                      "times into the README's chapter map."),
    "diagrams": ("draw the book's diagrams into book/images/diagrams/ (light and dark SVG)",
                 "Draw the book's diagrams (the mechanism, the feedback loop, the wind tunnels, the map of the book) "
                 "and write each as <name>-light.svg and <name>-dark.svg into book/images/diagrams/; with --check, "
                 "write nothing and exit 1 if a committed file differs from what the code draws."),
}


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m attention_dynamics", description=DESCRIPTION)
    parser.add_argument("--root", type=Path, default=paths.REPO_ROOT,
                        help="repository root holding _toc.yml (default: this checkout); compute writes under it too")
    sub = parser.add_subparsers(dest="command", required=True)

    def command(name: str) -> argparse.ArgumentParser:
        short, long = COMMANDS[name]
        return sub.add_parser(name, help=short, description=long)

    rep = command("reproduce")
    rep.add_argument("--chapter", action="append", metavar="N", help="chapter number or slug (repeatable; default: all)")
    rep.add_argument("--scale", choices=SCALES, default="book",
                     help="settings scale: fast is a smoke run in seconds, book what the committed chapters show, "
                          "paper the paper's own sizes (GPU-sized) (default: book)")
    rep.add_argument("--device", choices=DEVICES, default="auto", help="torch device for the chapters (default: auto)")
    rep.add_argument("--steps", type=compute.positive_int,
                     help="override the training steps of chapters that have a 'steps' parameter")
    rep.add_argument("--seed", type=int, help="run every chapter with this seed instead of its own (a scratch run: seed-to-seed spread)")
    rep.add_argument("--force", action="store_true", help="re-execute chapters even if their inputs are unchanged")
    rep.add_argument("--no-build", action="store_true", help="skip the HTML build")
    rep.add_argument("--timeout", type=compute.positive_int, default=3600,
                     help="per-cell timeout in seconds (default: 3600)")

    ch = command("chapters")
    ch.add_argument("--paths", action="store_true", help="print notebook paths only (for scripts)")

    command("format")

    led = command("ledger")
    led.add_argument("--check", action="store_true", help="only check that claims.json matches the notebooks")
    led.add_argument("--compare", type=Path, metavar="OTHER.json",
                     help="compare a re-executed ledger with the committed one (ids, statuses, values within "
                          "each claim's cross-machine tolerance); exit 1 with one line per offending claim")
    led.add_argument("--measure-spread", type=Path, nargs="+", metavar="RUN",
                     help="ledgers (or run folders) of the chapters re-executed with other seeds: write the "
                          "claims' measured cross-machine tolerances to book/claim_tolerances.json")
    led.add_argument("--perturbed", type=Path, nargs="+", metavar="RUN",
                     help="with --measure-spread: ledgers (or folders) of the default seed re-executed under "
                          "perturbed-env, whose change also sets each claim's tolerance")
    led.add_argument("--margins", action="store_true",
                     help="list the claims whose status could flip within their cross-machine tolerance")

    command("perturbed-env")

    command("build")

    pdf = command("pdf")
    pdf.add_argument("--out", type=Path, help="where to write the PDF (default: _build/pdf/book.pdf)")

    compute.add_arguments(command("compute"))

    times = command("reading-times")
    times.add_argument("--html", type=Path, help="the built HTML book (default: _build/html under the root)")
    times.add_argument("--update-readme", action="store_true",
                       help="write the measured reading times into the chapter map of README.md")
    times.add_argument("--check", action="store_true", help="exit 1 when a chapter exceeds the prose budget")

    dia = command("diagrams")
    dia.add_argument("--check", action="store_true",
                     help="write nothing; list the files that differ from what the code draws (exit 1 if any)")
    dia.add_argument("--out", type=Path, help="folder to write into or check (default: book/images/diagrams/ "
                                                "under the root)")
    return parser


def diagrams_command(folder: Path, *, check: bool = False) -> int:
    """Write the diagrams into ``folder``, or with ``check`` list the files that differ; return the exit status."""
    if check:
        stale = stale_diagrams(folder)
        for line in stale:
            print(f"{folder / line}", file=sys.stderr)
        if stale:
            print("the diagrams differ from their code: run python -m attention_dynamics diagrams", file=sys.stderr)
            return 1
        print(f"the diagrams in {folder} are what the code draws")
        return 0
    written = write_diagrams(folder)
    print(f"wrote {len(written)} diagrams into {folder}")
    return 0


def reading_times_command(root: Path, html: Path | None, *, update: bool, check: bool) -> int:
    """Print every chapter's prose measures; write the reading times into README.md with ``update``; with ``check``
    return 1 when a chapter exceeds the prose budget."""
    from .reading import budget_problems, measure_book, reading_table, update_readme

    readings = measure_book(root, html)
    print(reading_table(readings))
    if update:
        readme = root / "README.md"
        titles = {c.number: c.slug.replace("-", " ").capitalize() for c in book_chapters(root)}
        readme.write_text(update_readme(readme.read_text(encoding="utf-8"), readings, titles), encoding="utf-8")
        print(f"Wrote the reading times into {readme}")
    return 1 if check and any(budget_problems(r.stats) for r in readings) else 0


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit status."""
    args = _parser().parse_args(argv)
    root = args.root.resolve()
    try:
        if args.command == "chapters":
            for c in book_chapters(root):
                print(c.path.relative_to(root) if args.paths else f"{c.number:2d}  {c.slug:40s} {c.path.relative_to(root)}")
            return 0
        if args.command == "format":
            return format_command(root)
        if args.command == "ledger":
            if args.compare is not None:
                return ledger_compare_command(root, args.compare)
            if args.measure_spread:
                return measure_spread_command(root, args.measure_spread, args.perturbed or [])
            if args.margins:
                return margins_command(root)
            return ledger_command(root, check=args.check)
        if args.command == "perturbed-env":
            print(" ".join(f"{k}={v}" for k, v in perturbed_environment(root).items()))
            return 0
        if args.command == "build":
            return build_html(root)
        if args.command == "compute":
            return compute.main(args, root)
        if args.command == "reading-times":
            return reading_times_command(root, args.html, update=args.update_readme, check=args.check)
        if args.command == "diagrams":
            return diagrams_command(args.out or root / DIAGRAMS_DIR.relative_to(paths.REPO_ROOT), check=args.check)
        if args.command == "pdf":
            from .pdf import build_pdf

            print(f"The PDF is ready: {build_pdf(root, args.out)}")
            return 0
        return reproduce(root, args)
    except (BookError, ValueError, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted: no committed notebook or ledger was changed", file=sys.stderr)
        return 130
