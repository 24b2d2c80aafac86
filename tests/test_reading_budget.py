"""The chapters' prose budget, measured on the built book (attention_dynamics.book.reading).

For each chapter page, its main flow only (no folded blocks, code cells and outputs, math, tables, captions, glued
tables): at most 3,500 words; a mean sentence of at most 22 words; at most 5 % of sentences over 40 words and none
over 60; at most 5 bookkeeping words (claim, verdict, ledger, reading, decided …). The README's chapter map gives
each chapter's reading time, within a minute of the measured one (``python -m attention_dynamics reading-times
--update-readme`` rewrites it). And the glue names the chapters' prose uses are found where they are made: at least
95 % of them occur literally in the package's source (``grep -rF NAME src/``), so that a reader can find where a
number comes from.

These tests read the book the session builds (tests/conftest.py, ``built_book``); they are slow for that reason
(and the glue test with them: it measures the chapters' prose, as the others do).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from attention_dynamics.book import reading
from attention_dynamics.book.notebooks import book_chapters

REPO_ROOT = Path(__file__).resolve().parents[1]
#: The least share of the prose's glue names that a search of the package's source must find.
MIN_GREPPABLE_SHARE = 0.95

pytestmark = [pytest.mark.slow, pytest.mark.book]

CHAPTERS = [c.path.stem for c in book_chapters(REPO_ROOT)]


@pytest.fixture(scope="module")
def readings(built_book) -> dict[str, reading.ChapterReading]:
    return {r.stem: r for r in reading.measure_book(REPO_ROOT, built_book.html)}


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_chapter_prose_fits_the_budget(readings, chapter):
    stats = readings[chapter].stats
    problems = reading.budget_problems(stats)
    longest = "\n".join(f"  - ({len(s.split())} words) {s[:160]}…" for s in stats["long_sentences"][:3])
    assert not problems, (f"{chapter}: " + "; ".join(problems)
                          + (f"\nits longest sentences:\n{longest}" if longest else ""))


def test_readme_reading_times_match_the_book(readings):
    listed = reading.readme_reading_times((REPO_ROOT / "README.md").read_text(encoding="utf-8"))
    wrong = {}
    for r in readings.values():
        if r.number not in listed or abs(listed[r.number] - r.stats["minutes"]) > 1:
            wrong[r.number] = (listed.get(r.number), r.stats["minutes"])
    assert not wrong, ("README's chapter map (listed, measured minutes): " + str(wrong)
                       + "; run python -m attention_dynamics reading-times --update-readme")


def test_the_prose_s_glue_names_are_found_in_the_source():
    share, missing, n = reading.glue_greppability(REPO_ROOT)
    assert share >= MIN_GREPPABLE_SHARE, (
        f"{share:.1%} of the {n} glue names the chapters' prose uses occur literally in src/ (at least "
        f"{MIN_GREPPABLE_SHARE:.0%}): write each name out where it is glued; not found, e.g.: {missing[:12]}")
