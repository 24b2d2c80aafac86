"""The notebooks the Binder and Colab buttons open: the chapters with their numbers as text, runnable.

Checked against what they are made from: the glued values in the chapters' own outputs (formatted as
myst-nb does), the bibliography, the equation labels; the committed launch notebooks must be the ones
the current chapters give, with the chapters' code unchanged and no MyST role left.
"""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

from attention_dynamics.book.launch_notebooks import (
    LAUNCH_DIR,
    BookIndex,
    LaunchNotebookError,
    book_index,
    citation_label,
    equation_numbers,
    expand_macros,
    figure_numbers,
    launch_notebook,
    launch_notebook_path,
    render_markdown,
    tex_macros,
)
from attention_dynamics.book.notebooks import Chapter, book_chapters, notebook_text

REPO_ROOT = Path(__file__).resolve().parents[1]
#: What must not reach a launch notebook: MyST roles and directives that Jupyter shows as written.
MYST_LEFTOVERS = re.compile(r"\{glue|\{cite|\{eq\}|\{numref\}|\{term\}|\{(?:py:)?(?:func|class|mod)\}|```\{|:::\{|^\([\w-]+\)=", re.M)


def _index(**overrides) -> BookIndex:
    values = dict(equations={"eq-a": ("01-one", "1.1"), "eq-b": ("02-two", "2.3")},
                  citations={"k1": "Agarwal et al., 2025, Paper II", "k2": "Xu and Jordan, 1996"},
                  glue={"02-two": {"x": "0.123456", "n": "20", "frac": "0.25", "name": "'cpu'"}},
                  site="https://o.github.io/b/", pages=frozenset({"book/verdicts", "book/notation"}),
                  macros={"R": ("\\mathbb{R}", 0), "norm": ("\\left\\lVert #1 \\right\\rVert", 1)})
    values.update(overrides)
    return BookIndex(**values)


def test_glue_roles_become_the_book_s_text():
    text = "x = {glue:text}`x:.3f`, n = {glue:text}`n`, {glue:text}`frac:.0%` of runs on {glue:text}`name`"
    assert render_markdown(text, "02-two", _index()) == "x = 0.123, n = 20, 25% of runs on cpu"
    with pytest.raises(LaunchNotebookError, match="no glued value 'missing'"):
        render_markdown("{glue:text}`missing:.2f`", "02-two", _index())


def test_citations_equations_and_terms_become_text_and_links():
    out = render_markdown("As {cite}`k1` and {cite}`k1,k2` say, {eq}`eq-a` and {eq}`eq-b`; the {term}`advantage`.",
                          "02-two", _index())
    assert out == ("As [Agarwal et al., 2025, Paper II] and [Agarwal et al., 2025, Paper II; Xu and Jordan, 1996] say, "
                   "[(1.1)](https://o.github.io/b/book/01-one.html#equation-eq-a) and "
                   "[(2.3)](https://o.github.io/b/book/02-two.html#equation-eq-b); the "
                   "[advantage](https://o.github.io/b/book/notation.html#term-advantage).")
    with pytest.raises(LaunchNotebookError, match="no bibliography entry 'nope'"):
        render_markdown("{cite}`nope`", "02-two", _index())


def test_directives_math_and_links_become_plain_markdown():
    source = ("(sec-x)=\n## A section\n\n   ```{math}\n   :label: eq-b\n   y = \\norm{x}\n   ```\n\n"
              ":::{admonition} Lemma\n:class: important\nText with $\\R$.\n:::\n\n"
              "See the [verdicts](verdicts.md), [chapter 1](01-one.ipynb), [a site](https://x.org) and "
              "{py:func}`attention.single_head_forward`, {func}`~attention_dynamics.training.fit`.")
    out = render_markdown(source, "02-two", _index())
    assert "(sec-x)=" not in out and "## A section" in out
    assert "   $$\n   y = \\left\\lVert x \\right\\rVert \\tag{2.3}\n   $$" in out
    assert "> **Lemma**\n>\n> Text with $\\mathbb{R}$." in out and ":class:" not in out
    assert "[verdicts](https://o.github.io/b/book/verdicts.html)" in out and "[chapter 1](01-one.ipynb)" in out
    assert "[a site](https://x.org)" in out
    assert "`attention.single_head_forward`" in out and "`fit`." in out


def test_equations_are_numbered_per_chapter_in_order():
    one = new_notebook(cells=[new_markdown_cell("```{math}\n:label: a\nx\n```\n\n$$y$$ (b)\n\n```{math}\nz\n```"),
                              new_markdown_cell("   ```{math}\n   :label: c\n   w\n   ```")])
    two = new_notebook(cells=[new_markdown_cell("```{math}\n:label: d\nv\n```")])
    chapters = [(Chapter(1, "one", Path("01-one.ipynb")), one), (Chapter(2, "two", Path("02-two.ipynb")), two)]
    assert equation_numbers(chapters) == {"a": ("01-one", "1.1"), "b": ("01-one", "1.2"), "c": ("01-one", "1.3"),
                                          "d": ("02-two", "2.1")}


def test_figures_are_numbered_per_chapter_and_captioned_with_their_number():
    one = new_notebook(cells=[new_markdown_cell("```{glue:figure} a\n:name: fig-a\n:alt: x\n\nCaption A.\n```\n\n"
                                                "```{glue:figure} untitled\nno name, no number\n```"),
                              new_markdown_cell("```{figure} b.png\n:name: fig-b\n\nCaption B.\n```")])
    two = new_notebook(cells=[new_markdown_cell("```{glue:figure} c\n:alt: y\n:name: fig-c\n\nCaption C.\n```")])
    chapters = [(Chapter(1, "one", Path("01-one.ipynb")), one), (Chapter(2, "two", Path("02-two.ipynb")), two)]
    numbers = figure_numbers(chapters)
    assert numbers == {"fig-a": ("01-one", "1.1"), "fig-b": ("01-one", "1.2"), "fig-c": ("02-two", "2.1")}
    index = _index(figures=numbers)
    out = render_markdown(one.cells[0].source + "\n\nAs {numref}`fig-c` and {numref}`Figure {number} <fig-a>` show.",
                          "01-one", index)
    assert out.startswith("**Figure 1.1** (drawn by the code cell above). Caption A.")
    assert ":alt:" not in out and ":name:" not in out
    assert ("As [Fig. 2.1](https://o.github.io/b/book/02-two.html#fig-c) and "
            "[Figure 1.1](https://o.github.io/b/book/01-one.html#fig-a) show.") in out


def test_citation_labels_follow_the_book_s_style():
    assert citation_label({"year": "2025", "shorthand": "Paper I"}, ["Agarwal", "Dalal", "Misra"]) == (
        "Agarwal et al., 2025, Paper I")
    assert citation_label({"year": "1996"}, ["Xu", "Jordan"]) == "Xu and Jordan, 1996"
    assert citation_label({"year": "1997"}, ["Hochreiter"]) == "Hochreiter, 1997"


def test_book_macros_are_written_out():
    macros = tex_macros(REPO_ROOT)
    assert expand_macros(r"$x \in \R^d$, $\norm{v_j}^2$, $\softmax(z)$, $\Rightarrow$", macros) == (
        r"$x \in \mathbb{R}^d$, $\left\lVert v_j \right\rVert^2$, $\operatorname{softmax}(z)$, $\Rightarrow$")


def test_launch_notebook_keeps_the_code_and_drops_the_outputs():
    glue = new_output("display_data", data={"text/plain": "0.5"},
                      metadata={"scrapbook": {"name": "x", "mime_prefix": ""}})
    nb = new_notebook(cells=[new_code_cell("%pip install x", metadata={"tags": ["colab-install"]}),
                             new_markdown_cell("# Two\n\nx is {glue:text}`x:.2f`."),
                             new_code_cell("glue('x', 0.5)", outputs=[glue], execution_count=3)])
    chapter = Chapter(2, "two", Path("book/02-two.ipynb"))
    out = launch_notebook(nb, chapter, _index(glue={"02-two": {"x": "0.5"}}))
    assert [c.cell_type for c in out.cells] == ["code", "markdown", "markdown", "code"]
    assert "chapter 2 of the companion book" in out.cells[1].source
    assert out.cells[2].source == "# Two\n\nx is 0.50."
    assert out.cells[3].source == "glue('x', 0.5)" and out.cells[3].outputs == [] and out.cells[3].execution_count is None
    assert nb.cells[2].outputs, "the chapter itself is left alone"


def test_committed_launch_notebooks_are_the_chapters_with_their_numbers():
    """notebooks/NN-slug.ipynb is what the current chapter gives (`make book` or `make format` writes it)."""
    chapters = book_chapters(REPO_ROOT)
    index = book_index(REPO_ROOT, chapters)
    assert sum(len(v) for v in index.glue.values()) > 100, "the chapters glue their numbers"
    for chapter in chapters:
        path = launch_notebook_path(chapter.path)
        assert path.parent == REPO_ROOT / LAUNCH_DIR
        assert path.exists(), f"{chapter}: no launch notebook at {path} (run `make format`)"
        source = nbformat.read(chapter.path, as_version=4)
        expected = notebook_text(launch_notebook(source, chapter, index))
        text = path.read_text(encoding="utf-8")
        assert text == expected, f"{path.name} is out of date: run `make format`"
        nb = nbformat.reads(text, as_version=4)
        leftovers = [m.group(0) for c in nb.cells if c.cell_type == "markdown" for m in MYST_LEFTOVERS.finditer(c.source)]
        assert not leftovers, f"{path.name} still holds MyST markup: {sorted(set(leftovers))}"
        code = [c.source for c in nb.cells if c.cell_type == "code"]
        assert code == [c.source for c in source.cells if c.cell_type == "code"], f"{path.name}: the code differs"
        assert all(not c.outputs for c in nb.cells if c.cell_type == "code")


@pytest.mark.slow
def test_a_launch_notebook_runs_top_to_bottom(monkeypatch):
    """Chapter 1's launch notebook runs as it is (from its own folder, as Binder opens it) without an error."""
    from nbclient import NotebookClient

    chapter = book_chapters(REPO_ROOT)[0]
    nb = nbformat.read(launch_notebook_path(chapter.path), as_version=4)
    monkeypatch.setenv("MPLBACKEND", "Agg")
    monkeypatch.setenv("PYTHONPATH", str(REPO_ROOT / "src"))  # the kernel imports this checkout's package
    NotebookClient(nb, timeout=600, kernel_name="python3",
                   resources={"metadata": {"path": str(REPO_ROOT / LAUNCH_DIR)}}).execute()
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    assert not errors
    assert any(c.outputs for c in nb.cells if c.cell_type == "code"), "the cells produced their outputs"
