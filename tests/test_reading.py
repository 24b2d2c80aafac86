"""How a chapter reads (attention_dynamics.book.reading), on small HTML snippets: what counts as its main flow,
sentences, the budget, the README's reading times, the glue names of the prose."""

from __future__ import annotations

from pathlib import Path

import pytest

from attention_dynamics.book import reading as r

REPO_ROOT = Path(__file__).resolve().parents[1]

PAGE = """<html><body><nav><p>Site navigation is not prose at all, not even one word of it.</p></nav>
<article class="bd-article"><section><h1>A chapter title</h1>
<div class="chapter-verdicts admonition"><p class="admonition-title">What this chapter finds</p>
<p>A verdict box the build adds, with a claim and the ledger.</p></div>
<p>The head moves its scores by the advantage. It moves the values by <span class="pasted-text">0.25</span> of the
errors, e.g. the queries' ones (<span class="math notranslate nohighlight">\\(\\alpha_{ij}\\)</span>).</p>
<ul><li><p>A list item counts as prose too.</p></li></ul>
<div class="cell docutils container"><div class="cell_input"><pre>import torch  # code is not prose</pre></div>
<div class="cell_output docutils container"><p>an output paragraph is not prose</p></div></div>
<details class="hide"><summary>Show</summary><p>Folded text is not prose either, whatever it says.</p></details>
<div class="admonition dropdown"><p>A dropdown's text is folded.</p></div>
<details class="sd-dropdown"><summary>More</summary><p>A sphinx-design dropdown.</p></details>
<div class="math notranslate nohighlight">\\[ x = y \\]</div>
<table><tr><td><p>A table cell is not prose.</p></td></tr></table>
<figure><img src="a.svg" alt="x"><figcaption><p>A caption is not prose.</p></figcaption></figure>
<p>The <span class="claim-number"><span class="pasted-text">2.18</span><span class="claim-popover">paper 2.3 here
holds its record</span></span> speed-up is a reading of a step size.</p>
<div class="admonition note"><p class="admonition-title">Note</p><p>An open note is read.</p></div>
</section></article><footer><p>A footer sentence.</p></footer></body></html>"""


def test_only_the_main_flow_is_prose():
    blocks = r.prose_blocks(PAGE)
    assert blocks == [
        "The head moves its scores by the advantage. It moves the values by 0.25 of the errors, e.g. the queries' "
        "ones ().",
        "A list item counts as prose too.",
        "The 2.18 speed-up is a reading of a step size.",
        "Note",
        "An open note is read.",
    ]


def test_chapter_prose_stats_count_words_sentences_and_bookkeeping_words():
    stats = r.chapter_prose_stats(PAGE)
    assert stats["sentences"] == 6  # "e.g." does not end a sentence; "Note" is one
    assert stats["words"] == 8 + 13 + 7 + 10 + 1 + 5
    assert stats["max_sentence"] == 13 and stats["share_over_40"] == 0
    assert stats["banned"] == 1 and stats["banned_words"] == {"reading": 1}
    assert stats["minutes"] == 1 and stats["mean_sentence"] == pytest.approx(44 / 6)  # tolerance: a ratio of counts


def test_sentences_break_after_full_stops_but_not_after_abbreviations():
    assert r.split_sentences("One. Two! Three? 4 is a number. ×10 is a step. et al. said so.") == [
        "One.", "Two!", "Three?", "4 is a number.", "×10 is a step. et al. said so."]
    assert r.split_sentences("Fig. 5.7 shows it, i.e. the left panel. Done") == [
        "Fig. 5.7 shows it, i.e. the left panel.", "Done"]


def test_the_budget_names_what_is_over():
    long = " ".join(["word"] * 61) + "."
    page = f"<article><p>{long} {' '.join(['Short one.'] * 3)}</p><p>Claims, claims, verdict, ledger, decided and decide.</p></article>"
    stats = r.chapter_prose_stats(page)
    problems = r.budget_problems(stats)
    assert any("a sentence of 61 words (at most 60)" in p for p in problems)
    assert any("of sentences over 40 words" in p for p in problems)
    assert any("mean sentence 25.0 words" in p for p in r.budget_problems({**stats, "mean_sentence": 25.0}))
    assert any("6 bookkeeping words" in p for p in problems)
    assert r.budget_problems({**stats, "words": 10, "mean_sentence": 10, "share_over_40": 0, "max_sentence": 10,
                              "banned": 0}) == []
    assert r.budget_problems({**stats, "words": 3501}, {**r.BUDGET, "max_mean_sentence": 99, "max_share_over_40": 1,
                                                        "max_sentence": 99, "max_banned": 99}) == [
        "3501 words (at most 3500)"]


README = """# Book

## Chapter map

| Paper | Chapter | Package modules |
|---|---|---|
| §2 | 1 Setup and notation | `science.attention` |
| §3 | 2 The gradient laws | `science.gradients` |

More text.
"""


def _reading(number: int, words: int) -> r.ChapterReading:
    return r.ChapterReading(number, f"0{number}-x", {"words": words, "minutes": r.reading_minutes(words)})


def test_the_readme_gets_a_reading_time_column_and_a_row_per_chapter():
    out = r.update_readme(README, [_reading(1, 460), _reading(2, 2600), _reading(9, 1000)], {9: "A new tunnel"})
    assert "| Paper | Chapter | Reading time | Package modules |\n|---|---|---|---|" in out
    assert "| §2 | 1 Setup and notation | 2 min | `science.attention` |" in out
    assert "| §3 | 2 The gradient laws | 11 min | `science.gradients` |" in out
    assert "| — | 9 A new tunnel | 4 min | — |" in out and out.endswith("More text.\n")
    assert r.readme_reading_times(out) == {1: 2, 2: 11, 9: 4}
    again = r.update_readme(out, [_reading(1, 230 * 5), _reading(2, 2600), _reading(9, 1000)])
    assert r.readme_reading_times(again) == {1: 5, 2: 11, 9: 4} and again.count("Reading time") == 1


def test_the_prose_s_glue_names():
    markdown = ("A {glue:text}`a.b:.3f`, {glue}`c.d`, {glue:}`e.f`, {glue:any}`g.h`, {glue:md}`i.j`, "
                "{glue:text}`other.ipynb::k.l:.0%`, {glue:text}`a.b:.1f` again.\n\n```{glue:figure} fig-x\n"
                ":name: fig-x\n```\n:::{glue:} tbl-y\n:::\n")
    assert r.prose_glue_names(markdown) == ["a.b", "c.d", "e.f", "g.h", "i.j", "k.l", "fig-x", "tbl-y"]


def test_glue_greppability_is_measured_against_the_source(tmp_path):
    (tmp_path / "book").mkdir()
    (tmp_path / "src").mkdir()
    (tmp_path / "_toc.yml").write_text("format: jb-book\nroot: book/intro\nchapters:\n  - file: book/01-toy\n")
    import nbformat
    from nbformat.v4 import new_markdown_cell, new_notebook

    nbformat.write(new_notebook(cells=[new_markdown_cell("{glue:text}`toy.a:.2f` and {glue:text}`toy.b:.2f`")]),
                   tmp_path / "book" / "01-toy.ipynb")
    (tmp_path / "src" / "report.py").write_text('claims.record("toy.a", 1.0)\nclaims.glue(f"toy.{name}", 2)\n')
    (tmp_path / "src" / "weights.pt").write_bytes(b"\xff\xfe\x00binary")
    share, missing, n = r.glue_greppability(tmp_path)
    assert (share, missing, n) == (0.5, ["toy.b"], 2)
