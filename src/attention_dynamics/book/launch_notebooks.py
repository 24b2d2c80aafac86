"""The notebooks the Binder and Colab buttons open: each chapter as a reader sees it, ready to run.

A chapter's Markdown is written for the book (MyST): its numbers are ``{glue:text}`` roles filled
in from the cell outputs when the book is built, its citations ``{cite}`` roles, its equation
references ``{eq}`` roles. JupyterLab and Colab show those roles as they are written. The runner
therefore writes, next to every executed chapter, a copy for running (``notebooks/NN-slug.ipynb``,
:data:`LAUNCH_DIR`; the launch buttons point there, see ``book/_ext/launch_notebooks.py``) in
which:

- every glued value is the text the book shows (the value from the chapter's own outputs,
  formatted as the role asks, exactly as myst-nb formats it);
- citations are the book's labels ("[Agarwal et al., 2025, Paper II]", from ``book/references.bib``);
- equation references are the book's numbers, "(2.5)", linked to the equation in the online book,
  and each numbered equation carries its number (``\\tag``); the book's TeX macros (``\\R``,
  ``\\softmax``, … from ``_config.yml``) are written out, since Jupyter and Colab do not know them;
- admonitions are block quotes, glossary and cross-reference roles their text (glossary terms
  linked to the online notation page), API roles inline code, links to the book's pages links to
  the online book;
- code cells are the chapter's own, unchanged, without outputs: the notebook runs top to bottom as
  the chapter does, and a note at its top says that the numbers in the text are those of the
  book's run.

The copies are derived data: :func:`write_launch_notebooks` rewrites them whenever the runner
writes the chapters' text forms, and a test checks that they are in sync and hold no MyST role.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Mapping

import nbformat

from .notebooks import COLAB_TAG, Chapter, notebook_text

__all__ = ["LAUNCH_DIR", "BookIndex", "book_index", "launch_notebook", "launch_notebook_path",
           "write_launch_notebooks", "citation_label", "equation_numbers", "figure_numbers"]

#: The folder (at the repository root) of the notebooks the launch buttons open.
LAUNCH_DIR = "notebooks"
#: Metadata tag of the note cell at the top of a launch notebook.
NOTE_TAG = "launch-note"

_ROLE = re.compile(r"\{(?P<role>[\w:-]+)\}`(?P<text>[^`]*)`")
# A directive may sit indented inside a list item: its closing fence has the same indentation.
_MATH_DIRECTIVE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>```+|:::+)\{math\}[^\n]*\n(?P<body>.*?)^(?P=indent)(?P=fence)[ \t]*$",
                             re.M | re.S)
_DIRECTIVE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>```+|:::+)\{(?P<name>[\w:-]+)\}(?P<arg>[^\n]*)\n"
                        r"(?P<body>.*?)^(?P=indent)(?P=fence)[ \t]*$", re.M | re.S)
_OPTION = re.compile(r"^[ \t]*:[\w-]+:.*(?:\n|$)", re.M)
# A directive's argument that names a picture file (a diagram in book/images/), not a glued figure's key.
_PICTURE = re.compile(r"^[\w./-]+\.(?:svg|png|jpe?g)$", re.I)
_DOLLAR_LABEL = re.compile(r"\$\$(?P<body>.+?)\$\$[ \t]*\((?P<label>[\w:-]+)\)", re.S)
_TARGET = re.compile(r"^\([\w:-]+\)=[ \t]*\n", re.M)
_LINK = re.compile(r"\]\((?P<target>[^)\s]+)\)")


def launch_notebook_path(chapter_path: Path) -> Path:
    """Return where the launch notebook of the chapter notebook ``chapter_path`` lives."""
    return chapter_path.parent.parent / LAUNCH_DIR / chapter_path.name


@dataclass(frozen=True)
class BookIndex:
    """What a launch notebook needs to know about the whole book.

    ``equations``: label → (chapter stem, number such as ``"2.5"``); ``citations``: bibliography key →
    label; ``glue``: chapter stem → {glue key → text/plain}; ``site``: address of the online book
    (ends with ``/``) or None; ``pages``: the book's page names (``book/verdicts`` …); ``macros``: the
    book's TeX macros, name → (replacement, number of arguments).
    """

    equations: Mapping[str, tuple[str, str]]
    citations: Mapping[str, str]
    glue: Mapping[str, Mapping[str, str]]
    site: str | None
    pages: frozenset[str]
    macros: Mapping[str, tuple[str, int]] = None  # type: ignore[assignment]
    figures: Mapping[str, tuple[str, str]] = None  # type: ignore[assignment]


def equation_numbers(chapters: Iterable[tuple[Chapter, nbformat.NotebookNode]]) -> dict[str, tuple[str, str]]:
    """Return ``{label: (chapter stem, "c.n")}``: the book's numbered equations, as Sphinx numbers them.

    A numbered equation is a ``{math}`` directive with a ``:label:`` or a ``$$ … $$ (label)`` block;
    chapter ``c``'s equations are numbered ``c.1``, ``c.2`` … in the order they appear.
    """
    numbers = {}
    for chapter, nb in chapters:
        count = 0
        for cell in nb.cells:
            if cell.cell_type != "markdown":
                continue
            found = []
            for m in _MATH_DIRECTIVE.finditer(cell.source):
                label = re.search(r"^[ \t]*:label:\s*(\S+)", m.group("body"), re.M)
                if label:
                    found.append((m.start(), label.group(1)))
            found += [(m.start(), m.group("label")) for m in _DOLLAR_LABEL.finditer(cell.source)]
            for _, label in sorted(found):
                count += 1
                numbers[label] = (chapter.name, f"{chapter.number}.{count}")
    return numbers


def citation_label(fields: Mapping[str, str], authors: list[str]) -> str:
    """Return the book's citation label of a bibliography entry: "Agarwal et al., 2025, Paper II".

    ``authors``: the family names, in order. One author: the name; two: "A and B"; more: "A et al.".
    The entry's ``shorthand`` field, where it has one, follows the year (as in the rendered book).
    """
    if not authors:
        who = fields.get("title", "?")
    elif len(authors) == 1:
        who = authors[0]
    elif len(authors) == 2:
        who = f"{authors[0]} and {authors[1]}"
    else:
        who = f"{authors[0]} et al."
    parts = [who, fields.get("year", "n.d.")]
    if fields.get("shorthand"):
        parts.append(fields["shorthand"])
    return ", ".join(parts)


def _citations(bib_path: Path) -> dict[str, str]:
    from pybtex.database import parse_file

    out = {}
    for key, entry in parse_file(str(bib_path)).entries.items():
        names = ["".join(p.last_names).replace("{", "").replace("}", "") for p in entry.persons.get("author", [])]
        fields = {k.lower(): str(v).replace("{", "").replace("}", "") for k, v in entry.fields.items()}
        out[key] = citation_label(fields, names)
    return out


def _glue_values(nb: nbformat.NotebookNode) -> dict[str, str]:
    """Return ``{glue key: text/plain}`` of a chapter's glued values (myst-nb's own reading of them)."""
    from myst_nb.ext.glue import extract_glue_data_cell

    values = {}
    for cell in nb.cells:
        if cell.cell_type == "code":
            for key, output in extract_glue_data_cell(copy.deepcopy(cell)):
                if "text/plain" in output.get("data", {}):
                    values[key] = output["data"]["text/plain"]
    return values


def tex_macros(root: Path) -> dict[str, tuple[str, int]]:
    """Return the book's TeX macros from ``_config.yml`` (MathJax's ``tex.macros``): name → (body, arguments)."""
    import yaml

    path = root / "_config.yml"
    config = yaml.safe_load(path.read_text(encoding="utf-8")) if path.exists() else {}
    macros = (((config or {}).get("sphinx", {}).get("config", {}).get("mathjax3_config", {})
               .get("tex", {}).get("macros", {})))
    return {name: (body[0], int(body[1])) if isinstance(body, list) else (str(body), 0)
            for name, body in macros.items()}


def expand_macros(text: str, macros: Mapping[str, tuple[str, int]]) -> str:
    """Return ``text`` with every use of the given TeX macros written out (``\\norm{v}`` → its body with v)."""
    for name, (body, nargs) in sorted(macros.items(), key=lambda kv: -len(kv[0])):
        pattern = re.compile(r"\\" + re.escape(name) + r"(?![A-Za-z])")
        out, pos = [], 0
        for m in pattern.finditer(text):
            if m.start() < pos:
                continue
            out.append(text[pos:m.start()])
            end, args = m.end(), []
            for _ in range(nargs):
                while end < len(text) and text[end] == " ":
                    end += 1
                if end >= len(text) or text[end] != "{":
                    raise LaunchNotebookError(f"\\{name} needs {nargs} argument(s): {text[m.start():m.start() + 40]!r}")
                depth, start = 0, end
                for end in range(start, len(text)):
                    depth += {"{": 1, "}": -1}.get(text[end], 0)
                    if depth == 0:
                        break
                args.append(text[start + 1:end])
                end += 1
            replacement = body
            for k, arg in enumerate(args, start=1):
                replacement = replacement.replace(f"#{k}", arg)
            # A macro's body followed by a letter would run into it (\\R x → \\mathbb{R}x is fine, but a
            # control word must stay separated): keep one space when the body ends in a letter.
            if nargs == 0 and re.search(r"\\[A-Za-z]+$", replacement) and end < len(text) and text[end].isalpha():
                replacement += " "
            out.append(replacement)
            pos = end
        out.append(text[pos:])
        text = "".join(out)
    return text


def figure_numbers(chapters: Iterable[tuple[Chapter, nbformat.NotebookNode]]) -> dict[str, tuple[str, str]]:
    """Return ``{name: (chapter stem, "c.n")}``: the book's numbered figures, as Sphinx numbers them.

    A numbered figure is a ``{glue:figure}`` or ``{figure}`` directive with a ``:name:``; chapter ``c``'s
    figures are numbered ``c.1``, ``c.2`` … in the order they appear.
    """
    numbers = {}
    for chapter, nb in chapters:
        count = 0
        for cell in nb.cells:
            if cell.cell_type != "markdown":
                continue
            for m in _DIRECTIVE.finditer(cell.source):
                if m.group("name") not in ("glue:figure", "figure"):
                    continue
                name = re.search(r"^[ \t]*:name:\s*(\S+)", m.group("body"), re.M)
                if name:
                    count += 1
                    numbers[name.group(1)] = (chapter.name, f"{chapter.number}.{count}")
    return numbers


def book_index(root: Path, chapters: list[Chapter]) -> BookIndex:
    """Return the :class:`BookIndex` of the book at ``root`` from its committed chapters and bibliography."""
    from .notebooks import repository_url
    from .pdf import online_book_url

    notebooks = [(c, nbformat.read(c.path, as_version=4)) for c in chapters]
    bib = root / "book" / "references.bib"
    pages = frozenset(f"book/{p.stem}" for p in (root / "book").glob("*") if p.suffix in (".md", ".ipynb"))
    return BookIndex(
        equations=equation_numbers(notebooks),
        citations=_citations(bib) if bib.exists() else {},
        glue={c.name: _glue_values(nb) for c, nb in notebooks},
        site=online_book_url(repository_url(root)),
        pages=pages,
        macros=tex_macros(root),
        figures=figure_numbers(notebooks),
    )


def _format_glue(text: str, fmt_spec: str) -> str:
    from myst_nb.core.variables import format_plain_text

    return format_plain_text(text, fmt_spec)


def _page_url(index: BookIndex, page: str, anchor: str = "") -> str | None:
    if index.site is None:
        return None
    return f"{index.site}{page}.html" + (f"#{anchor}" if anchor else "")


def _link(text: str, url: str | None) -> str:
    return f"[{text}]({url})" if url else text


def _glossary_anchor(term: str) -> str:
    from docutils.nodes import make_id

    return "term-" + make_id(term).removeprefix("term-")


class LaunchNotebookError(ValueError):
    """A chapter's Markdown uses something the launch notebook cannot render (named in the message)."""


def render_markdown(source: str, chapter: str, index: BookIndex) -> str:
    """Return a chapter's Markdown cell as plain Markdown for JupyterLab and Colab (see the module docstring).

    Raises :class:`LaunchNotebookError` on a glued key the chapter does not glue, an unknown citation
    or equation label, or a role this function does not know.
    """

    def math_block(m: re.Match) -> str:
        indent, body = m.group("indent"), m.group("body")
        label = re.search(r"^[ \t]*:label:\s*(\S+)", body, re.M)
        body = _OPTION.sub("", body).strip("\n")
        tag = ""
        if label:
            if label.group(1) not in index.equations:
                raise LaunchNotebookError(f"{chapter}: equation label {label.group(1)!r} has no number")
            tag = f" \\tag{{{index.equations[label.group(1)][1]}}}"
        return f"{indent}$$\n{body}{tag}\n{indent}$$"

    def dollar_label(m: re.Match) -> str:
        label = m.group("label")
        if label not in index.equations:
            raise LaunchNotebookError(f"{chapter}: equation label {label!r} has no number")
        return f"$${m.group('body').rstrip()} \\tag{{{index.equations[label][1]}}}$$"

    def directive(m: re.Match) -> str:
        indent, name, arg = m.group("indent"), m.group("name"), m.group("arg").strip()
        lines = [line[len(indent):] if line.startswith(indent) else line.lstrip()
                 for line in _OPTION.sub("", m.group("body")).strip("\n").splitlines()]
        picture = name in ("image", "figure") and _PICTURE.search(arg)
        if name == "image" and re.search(r"^[ \t]*:class:.*\bonly-dark\b", m.group("body"), re.M):
            return ""  # a diagram's dark variant: the notebook shows the light one
        if picture:  # a picture file (a diagram): shown from the repository, captioned
            alt = re.search(r"^[ \t]*:alt:[ \t]*(.*)$", m.group("body"), re.M)
            shown = f"{indent}![{alt.group(1).strip() if alt else ''}](../book/{arg})"
            text = " ".join(line.strip() for line in lines if line.strip())
            if name == "image" or not text:
                return shown
            label = re.search(r"^[ \t]*:name:\s*(\S+)", m.group("body"), re.M)
            number = (index.figures or {}).get(label.group(1)) if label else None
            return f"{shown}\n\n{indent}**Figure{' ' + number[1] if number else ''}.** {text}"
        if name.startswith("glue") or name == "figure":  # a figure or glued block: its caption; the cell above draws it
            title = ""
            if "figure" in name:
                label = re.search(r"^[ \t]*:name:\s*(\S+)", m.group("body"), re.M)
                number = (index.figures or {}).get(label.group(1)) if label else None
                title = f"**Figure {number[1]}** (drawn by the code cell above). " if number else "**Figure.** "
            text = " ".join(line.strip() for line in lines if line.strip())
            return indent + (f"{title}{text}" if text else f"*(shown by the code cell above: `{arg}`)*")
        # an admonition: its body's own directives (a figure inside a dropdown) first, then the quote
        inner = _OPTION.sub("", _DIRECTIVE.sub(directive, m.group("body"))).strip("\n")
        lines = [line[len(indent):] if line.startswith(indent) else line.lstrip() for line in inner.splitlines()]
        quoted = [f"> **{arg or name.capitalize()}**", ">"] + [f"> {line}" if line.strip() else ">" for line in lines]
        return "\n".join(indent + line for line in quoted)

    def role(m: re.Match) -> str:
        name, text = m.group("role"), m.group("text")
        if name in ("glue", "glue:", "glue:text", "glue:md", "glue:any"):
            key, _, fmt = text.rpartition(":") if ":" in text.split("::")[-1] else (text, "", "")
            doc, _, key = key.rpartition("::")
            source = Path(doc).stem if doc else chapter
            values = index.glue.get(source, {})
            if key not in values:
                raise LaunchNotebookError(f"{chapter}: no glued value {key!r} in {source}")
            return _format_glue(values[key], fmt or "s")
        if name.startswith("cite"):
            labels = []
            for key in (k.strip() for k in text.split(",")):
                if key not in index.citations:
                    raise LaunchNotebookError(f"{chapter}: no bibliography entry {key!r}")
                labels.append(index.citations[key])
            return "[" + "; ".join(labels) + "]"
        if name in ("eq", "math:numref"):
            if text not in index.equations:
                raise LaunchNotebookError(f"{chapter}: equation label {text!r} has no number")
            where, number = index.equations[text]
            return _link(f"({number})", _page_url(index, f"book/{where}", f"equation-{text}"))
        if name == "term":
            shown, _, target = text.partition(" <")
            target = target.rstrip(">") if target else shown
            return _link(shown, _page_url(index, "book/notation", _glossary_anchor(target)))
        if name == "numref" and text.split(" <")[-1].rstrip(">") in (index.figures or {}):
            label = text.split(" <")[-1].rstrip(">")
            where, number = index.figures[label]
            shown = text.split(" <")[0].replace("{number}", number).replace("%s", number) if " <" in text else f"Fig. {number}"
            return _link(shown, _page_url(index, f"book/{where}", label))
        if name in ("ref", "numref", "doc", "any"):
            shown = text.split(" <")[0] if " <" in text else text
            return shown
        if name.split(":")[-1] in ("func", "class", "mod", "meth", "attr", "obj", "data", "exc"):
            target = text.split(" <")[-1].rstrip(">") if " <" in text else text
            target = target.lstrip("~")
            shown = target.rsplit(".", 1)[-1] if text.startswith("~") else target
            return f"`{shown}`"
        raise LaunchNotebookError(f"{chapter}: the role {{{name}}} has no plain rendering")

    def link(m: re.Match) -> str:
        target = m.group("target")
        if "://" in target or target.startswith(("#", "mailto:")):
            return m.group(0)
        path, _, anchor = target.partition("#")
        page = f"book/{Path(path).with_suffix('')}" if path else None
        if page and re.fullmatch(r"book/\d\d-[a-z0-9-]+", page) and not anchor:
            return f"]({Path(path).with_suffix('.ipynb').name})"  # a chapter: its launch notebook, next door
        if page and page in index.pages and index.site:
            return f"]({_page_url(index, page, anchor)})"
        return m.group(0)

    text = _MATH_DIRECTIVE.sub(math_block, source)
    text = _DOLLAR_LABEL.sub(dollar_label, text)
    text = _DIRECTIVE.sub(directive, text)
    text = _TARGET.sub("", text)
    text = _ROLE.sub(role, text)
    text = expand_macros(text, index.macros or {})
    return _LINK.sub(link, text)


def launch_notebook(nb: nbformat.NotebookNode, chapter: Chapter, index: BookIndex) -> nbformat.NotebookNode:
    """Return the launch notebook of a chapter: Markdown rendered as text, code unchanged, no outputs."""
    out = copy.deepcopy(nb)
    for cell in out.cells:
        if cell.cell_type == "markdown":
            cell.source = render_markdown(cell.source, chapter.name, index)
        elif cell.cell_type == "code":
            cell.outputs = []
            cell.execution_count = None
    online = _page_url(index, f"book/{chapter.name}")
    note = (f"> This notebook is chapter {chapter.number} of the companion book to *Gradient Dynamics of "
            "Attention*, ready to run. The numbers in its text are the ones the book's own run computed; "
            "running the cells computes them again."
            + (f" The chapter with its figures, as the book shows it: [{online}]({online})." if online else ""))
    first_code = 1 if out.cells and COLAB_TAG in out.cells[0].metadata.get("tags", []) else 0
    out.cells.insert(first_code, nbformat.v4.new_markdown_cell(note, metadata={"tags": [NOTE_TAG]}))
    for i, cell in enumerate(out.cells):
        cell["id"] = f"cell-{i:02d}"
    out.metadata.pop("attention_dynamics", None)
    return out


def write_launch_notebooks(root: Path, chapters: list[Chapter]) -> list[Path]:
    """Write (or refresh) every chapter's launch notebook under ``root/notebooks/``; return those written."""
    from ..ledger.claims import atomic_write_text

    index = book_index(root, chapters)
    written = []
    for chapter in chapters:
        path = launch_notebook_path(chapter.path)
        text = notebook_text(launch_notebook(nbformat.read(chapter.path, as_version=4), chapter, index))
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_text(path, text)
            written.append(path)
    return written
