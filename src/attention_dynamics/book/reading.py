"""How a chapter reads: its prose measured on the built HTML page, against the book's prose budget.

:func:`chapter_prose_stats` takes a chapter's built page and measures its main flow only: the paragraphs and list
items a reader reads from top to bottom. Left out: folded blocks (``<details>``, sphinx-design dropdowns,
admonitions with class ``dropdown``, toggles), code cells and their outputs, math, tables, figures and their
captions, glued tables, headings, asides and footnotes, the box the build puts under each chapter's title, and the
popovers of glued numbers. Glued numbers in the prose count as words.

The budget (:data:`BUDGET`), per chapter: at most 3,500 words; a mean sentence of at most 22 words; at most 5 % of
sentences over 40 words and none over 60; and at most 5 uses in all of the bookkeeping words (:data:`BANNED_WORDS`:
claim, verdict, ledger, reading, decided …), which belong to the verdict and reproducibility pages, not to the
chapters' prose. ``python -m attention_dynamics reading-times`` prints the table for every chapter
(:func:`reading_table`) and with ``--update-readme`` writes the reading times into the README's chapter map
(:func:`update_readme`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path

__all__ = ["BUDGET", "BANNED_WORDS", "WORDS_PER_MINUTE", "chapter_prose_stats", "prose_blocks", "split_sentences",
           "budget_problems", "reading_minutes", "measure_book", "reading_table", "update_readme",
           "readme_reading_times", "prose_glue_names", "glue_greppability"]

#: A reader's pace for the book's prose (words per minute).
WORDS_PER_MINUTE = 230
#: The prose budget of a chapter's main flow.
BUDGET = {"max_words": 3500, "max_mean_sentence": 22.0, "max_share_over_40": 0.05, "max_sentence": 60,
          "max_banned": 5}
#: Words that belong to the book's bookkeeping pages, not to a chapter's prose (counted whole-word, any case).
BANNED_WORDS = ("claim", "claims", "verdict", "verdicts", "ledger", "reading", "readings", "decided", "decides",
                "decide")

#: Elements whose whole subtree is not the main flow (by tag).
_SKIP_TAGS = {"details", "script", "style", "pre", "table", "figure", "figcaption", "aside", "nav", "footer", "svg",
              "math", "mjx-container", "img", "button", "form", "h1", "h2", "h3", "h4", "h5", "h6", "summary",
              "noscript", "template", "select", "textarea"}
#: Elements whose whole subtree is not the main flow (by class).
_SKIP_CLASSES = {"cell", "cell_input", "cell_output", "output", "math", "dropdown", "sd-dropdown", "toggle",
                 "chapter-verdicts", "claim-popover", "headerlink", "footnote", "footnote-list", "bibliography",
                 "pasted-inline", "sd-card", "margin", "sidebar", "prev-next-area", "toc", "caption",
                 "sphinx-tabs", "toggle-details"}
#: Elements that end a block of text (a paragraph, an item, a cell of a definition list).
_BLOCK_TAGS = {"p", "li", "dt", "dd", "div", "section", "blockquote", "ul", "ol", "dl", "article", "body", "main",
               "br", "hr"}
_VOID = {"br", "hr", "img", "input", "meta", "link", "area", "base", "col", "embed", "source", "track", "wbr"}

#: Abbreviations whose full stop does not end a sentence.
_ABBREVIATIONS = ("e.g.", "i.e.", "et al.", "cf.", "vs.", "Fig.", "fig.", "Eq.", "eq.", "approx.", "resp.", "etc.)",
                  "Ch.", "No.", "p.", "pp.", "Sec.", "sec.")
_SENTENCE_BREAK = re.compile(r"(?<=[.!?])[\"”’)\]]*\s+(?=[^\sa-z])")
_WORD = re.compile(r"[A-Za-z0-9]")


class _MainFlow(HTMLParser):
    """Collect the text blocks of a page's main flow (inside ``<article>`` when the page has one)."""

    def __init__(self, *, whole_page: bool):
        super().__init__(convert_charrefs=True)
        self.stack: list[tuple[str, bool]] = []  # (tag, skipped)
        self.skip_depth = 0
        self.in_main = whole_page
        self.main_depth = 0 if whole_page else -1
        self.blocks: list[str] = []
        self.buffer: list[str] = []

    def _flush(self) -> None:
        text = re.sub(r"\s+", " ", "".join(self.buffer)).strip()
        if text:
            self.blocks.append(text)
        self.buffer = []

    def handle_starttag(self, tag, attrs):
        attributes = dict(attrs)
        classes = set((attributes.get("class") or "").split())
        if not self.in_main and tag == "article":
            self.in_main, self.main_depth = True, len(self.stack)
        skip = tag in _SKIP_TAGS or bool(classes & _SKIP_CLASSES)
        if self.in_main and tag in _BLOCK_TAGS and not self.skip_depth:
            self._flush()
        if tag in _VOID:
            return
        self.stack.append((tag, skip))
        if skip:
            self.skip_depth += 1

    def handle_endtag(self, tag):
        if tag in _VOID:
            return
        while self.stack:  # close the element (and any left open inside it)
            open_tag, skipped = self.stack.pop()
            if skipped:
                self.skip_depth -= 1
            if open_tag == tag:
                break
        if self.in_main and tag in _BLOCK_TAGS and not self.skip_depth:
            self._flush()
        if self.in_main and tag == "article" and len(self.stack) == self.main_depth and self.main_depth >= 0:
            self._flush()
            self.in_main = False

    def handle_data(self, data):
        if self.in_main and not self.skip_depth:
            self.buffer.append(data)

    def close(self):
        super().close()
        self._flush()


def prose_blocks(html: str) -> list[str]:
    """Return the text blocks (paragraphs, list items) of a page's main flow, in order (see the module's docstring
    for what is left out)."""
    parser = _MainFlow(whole_page="<article" not in html)
    parser.feed(html)
    parser.close()
    return parser.blocks


def split_sentences(block: str) -> list[str]:
    """Return the sentences of a block of text: it breaks after a full stop, question or exclamation mark followed
    by anything but a lower-case letter (a capital, a digit, a symbol), never after a known abbreviation (e.g., i.e.,
    et al., …)."""
    protected = block
    for k, abbreviation in enumerate(_ABBREVIATIONS):
        protected = protected.replace(abbreviation, f"\x00{k}\x00")
    out = []
    for sentence in _SENTENCE_BREAK.split(protected):
        for k, abbreviation in enumerate(_ABBREVIATIONS):
            sentence = sentence.replace(f"\x00{k}\x00", abbreviation)
        if sentence.strip():
            out.append(sentence.strip())
    return out


def _words(text: str) -> list[str]:
    return [t for t in text.split() if _WORD.search(t)]


def chapter_prose_stats(html: str) -> dict:
    """Return the prose statistics of a chapter's built page (its main flow only).

    Keys: ``words``, ``minutes`` (at :data:`WORDS_PER_MINUTE`), ``sentences``, ``mean_sentence`` (words),
    ``share_over_40`` (of sentences), ``max_sentence`` (words), ``banned`` (the count of :data:`BANNED_WORDS`),
    ``banned_words`` (each one's count), ``long_sentences`` (the sentences over 40 words, longest first).
    """
    sentences = [s for block in prose_blocks(html) for s in split_sentences(block)]
    lengths = [len(_words(s)) for s in sentences]
    counted = [(s, n) for s, n in zip(sentences, lengths) if n]
    words = sum(n for _, n in counted)
    banned: dict[str, int] = {}
    for s, _ in counted:
        for w in re.findall(r"[A-Za-z]+", s):
            if w.lower() in BANNED_WORDS:
                banned[w.lower()] = banned.get(w.lower(), 0) + 1
    n = len(counted)
    return {
        "words": words,
        "minutes": reading_minutes(words),
        "sentences": n,
        "mean_sentence": words / n if n else 0.0,
        "share_over_40": sum(k > 40 for _, k in counted) / n if n else 0.0,
        "max_sentence": max((k for _, k in counted), default=0),
        "banned": sum(banned.values()),
        "banned_words": dict(sorted(banned.items())),
        "long_sentences": [s for s, k in sorted(counted, key=lambda x: -x[1]) if k > 40],
    }


def reading_minutes(words: int) -> int:
    """Return the reading time of ``words`` in whole minutes at :data:`WORDS_PER_MINUTE` (at least 1)."""
    return max(1, round(words / WORDS_PER_MINUTE))


def budget_problems(stats: dict, budget: dict | None = None) -> list[str]:
    """Return how a chapter's prose statistics exceed the budget (default :data:`BUDGET`), one line each."""
    b = BUDGET if budget is None else budget
    out = []
    if stats["words"] > b["max_words"]:
        out.append(f"{stats['words']} words (at most {b['max_words']})")
    if stats["mean_sentence"] > b["max_mean_sentence"]:
        out.append(f"mean sentence {stats['mean_sentence']:.1f} words (at most {b['max_mean_sentence']:g})")
    if stats["share_over_40"] > b["max_share_over_40"]:
        out.append(f"{stats['share_over_40']:.1%} of sentences over 40 words (at most {b['max_share_over_40']:.0%})")
    if stats["max_sentence"] > b["max_sentence"]:
        out.append(f"a sentence of {stats['max_sentence']} words (at most {b['max_sentence']})")
    if stats["banned"] > b["max_banned"]:
        listed = ", ".join(f"{w} {n}" for w, n in stats["banned_words"].items())
        out.append(f"{stats['banned']} bookkeeping words ({listed}; at most {b['max_banned']})")
    return out


@dataclass(frozen=True)
class ChapterReading:
    """One chapter's measured prose: its number, notebook stem, title and :func:`chapter_prose_stats`."""

    number: int
    stem: str
    stats: dict


def measure_book(root: Path, html_dir: Path | None = None) -> list[ChapterReading]:
    """Return the prose statistics of every chapter of ``root/_toc.yml``, read from the built HTML (default
    ``root/_build/html``). Raises FileNotFoundError when a chapter's page has not been built."""
    from .notebooks import book_chapters

    html_dir = Path(html_dir) if html_dir is not None else Path(root) / "_build" / "html"
    out = []
    for chapter in book_chapters(Path(root)):
        page = html_dir / chapter.path.relative_to(root).with_suffix(".html")
        if not page.is_file():
            raise FileNotFoundError(f"no built page {page}: build the book first (python -m attention_dynamics build)")
        out.append(ChapterReading(chapter.number, chapter.path.stem, chapter_prose_stats(page.read_text("utf-8"))))
    return out


def reading_table(readings: list[ChapterReading]) -> str:
    """Return the per-chapter table that ``reading-times`` prints: words, minutes, mean sentence, share over 40
    words, longest sentence, bookkeeping words, and what is over the budget."""
    header = f"{'chapter':<34} {'words':>6} {'min':>4} {'mean':>5} {'>40':>6} {'max':>4} {'bkp':>4}  over budget"
    lines = [header, "-" * len(header)]
    for r in readings:
        s = r.stats
        over = "; ".join(budget_problems(s)) or "—"
        lines.append(f"{r.stem:<34} {s['words']:>6} {s['minutes']:>4} {s['mean_sentence']:>5.1f} "
                     f"{s['share_over_40']:>6.1%} {s['max_sentence']:>4} {s['banned']:>4}  {over}")
    return "\n".join(lines)


_MAP_HEADING = "## Chapter map"


def _map_table(text: str) -> tuple[int, int]:
    """Return the (start, end) line indices of the README's chapter-map table."""
    lines = text.splitlines()
    at = lines.index(_MAP_HEADING)
    start = next(i for i in range(at, len(lines)) if lines[i].startswith("|"))
    end = next((i for i in range(start, len(lines)) if not lines[i].startswith("|")), len(lines))
    return start, end


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def readme_reading_times(readme: str) -> dict[int, int]:
    """Return ``{chapter number: minutes}`` from the README's chapter map (its "Reading time" column)."""
    lines = readme.splitlines()
    start, end = _map_table(readme)
    header = _cells(lines[start])
    col, chapter_col = header.index("Reading time"), header.index("Chapter")
    out = {}
    for line in lines[start + 2:end]:
        cells = _cells(line)
        number = re.match(r"(\d+)\b", cells[chapter_col])
        minutes = re.match(r"(\d+)", cells[col])
        if number and minutes:
            out[int(number.group(1))] = int(minutes.group(1))
    return out


def update_readme(readme: str, readings: list[ChapterReading], titles: dict[int, str] | None = None) -> str:
    """Return the README with its chapter map's "Reading time" column set from ``readings`` (the column is added
    after "Chapter" if missing; a chapter without a row gets one, titled from ``titles``)."""
    lines = readme.splitlines()
    start, end = _map_table(readme)
    header = _cells(lines[start])
    if "Reading time" not in header:
        at = header.index("Chapter") + 1
        for i in range(start, end):
            cells = _cells(lines[i])
            cells.insert(at, "Reading time" if i == start else ("---" if i == start + 1 else ""))
            lines[i] = "|" + "|".join(cells) + "|" if i == start + 1 else "| " + " | ".join(cells) + " |"
        header = _cells(lines[start])
    col, chapter_col = header.index("Reading time"), header.index("Chapter")
    minutes = {r.number: r.stats["minutes"] for r in readings}
    seen = set()
    for i in range(start + 2, end):
        cells = _cells(lines[i])
        number = re.match(r"(\d+)\b", cells[chapter_col])
        if number and int(number.group(1)) in minutes:
            seen.add(int(number.group(1)))
            cells[col] = f"{minutes[int(number.group(1))]} min"
            lines[i] = "| " + " | ".join(cells) + " |"
    added = []
    for r in readings:
        if r.number not in seen:
            cells = ["—"] * len(header)
            cells[chapter_col] = f"{r.number} {(titles or {}).get(r.number, r.stem)}"
            cells[col] = f"{r.stats['minutes']} min"
            added.append("| " + " | ".join(cells) + " |")
    lines[end:end] = added
    return "\n".join(lines) + ("\n" if readme.endswith("\n") else "")


_GLUE_ROLE = re.compile(r"\{glue(?::(?P<kind>text|any|md|math|))?\}`(?P<body>[^`]+)`")
_GLUE_DIRECTIVE = re.compile(r"^[ \t]*(?:`{3,}|:{3,})\{glue(?::\w*)?\}[ \t]+(?P<name>\S+)", re.M)


def prose_glue_names(markdown: str) -> list[str]:
    """Return the glue names a chapter's Markdown uses, in order without repeats: ``{glue:text}`name:fmt```,
    ``{glue}`name```, ``{glue:any}``, ``{glue:md}``, and the ``{glue:figure}`` / ``{glue:}`` / ``{glue:math}`` …
    directives (a ``doc::`` prefix is dropped)."""
    names = []
    for m in _GLUE_ROLE.finditer(markdown):
        body = m["body"]
        if m["kind"] == "text" and ":" in body.replace("::", ""):
            body = body.rsplit(":", 1)[0]
        names.append(body.split("::", 1)[-1].strip())
    names += [m["name"].split("::", 1)[-1] for m in _GLUE_DIRECTIVE.finditer(markdown)]
    return list(dict.fromkeys(names))


def glue_greppability(root: Path, source: Path | None = None) -> tuple[float, list[str], int]:
    """Return (the share of the glue names the chapters' prose uses that occur literally in the package's source, as
    ``grep -rF NAME src/`` would find them; the names it would not find; how many names there are). A name made by
    an f-string cannot be searched for: the prose's reader cannot find where its number comes from."""
    import nbformat

    from .notebooks import book_chapters

    root = Path(root)
    source = Path(source) if source is not None else root / "src"
    texts = []
    for path in sorted(source.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            try:
                texts.append(path.read_bytes().decode("utf-8"))
            except UnicodeDecodeError:
                continue  # a binary file (stored weights)
    corpus = "\n".join(texts)
    names: list[str] = []
    for chapter in book_chapters(root):
        nb = nbformat.read(chapter.path, as_version=4)
        names += prose_glue_names("\n".join(c.source for c in nb.cells if c.cell_type == "markdown"))
    names = list(dict.fromkeys(names))
    missing = [n for n in names if n not in corpus]
    return (1 - len(missing) / len(names) if names else 1.0), missing, len(names)
