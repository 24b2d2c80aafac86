"""The runner end to end on a throw-away book: execution, normalisation, idempotence, and every bad input.

Each bad input must give one clear message, a non-zero exit status, and leave every committed
notebook and the ledger byte-for-byte unchanged.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from attention_dynamics.book.notebooks import book_chapters, normalise_notebook, select_chapters

pytestmark = pytest.mark.slow

PARAMS = 'seed = 0\nscale = "book"\ndevice = "auto"\nsteps = None'


def _chapter(body: list[str], params: str = PARAMS) -> nbformat.NotebookNode:
    cells = [new_markdown_cell("# A chapter"), new_code_cell(params, metadata={"tags": ["parameters"]})]
    cells += [new_code_cell(src) for src in body]
    nb = new_notebook(cells=cells)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    return nb


GOOD = [
    "from dataclasses import dataclass\n\nfrom attention_dynamics.ledger import claims\n"
    "from attention_dynamics.core.settings import ChapterSettings, resolve",
    "@dataclass(frozen=True)\nclass Toy(ChapterSettings):\n    steps: int = 1\n\n\n"
    'cfg = resolve({"book": Toy(steps=3), "fast": Toy(steps=1)}, scale, device=device, steps=steps)',
    'claims.record("toy.steps_used", cfg.steps, description="steps the chapter ran", unit="steps", lower=1)\nprint(cfg.steps)',
]
FAILS_HALFWAY = [
    "x = 1",
    'raise RuntimeError("the model diverged at step 7")',
    "print('never reached')",
]


def _make_book(root: Path) -> Path:
    (root / "book").mkdir(parents=True)
    (root / "_toc.yml").write_text(
        "format: jb-book\nroot: book/intro\nchapters:\n  - file: book/01-good-chapter\n  - file: book/02-failing-chapter\n"
    )
    nbformat.write(_chapter(GOOD), root / "book" / "01-good-chapter.ipynb")
    nbformat.write(_chapter(FAILS_HALFWAY), root / "book" / "02-failing-chapter.ipynb")
    return root


@pytest.fixture
def book(tmp_path: Path) -> Path:
    """A minimal book: _toc.yml, a good chapter 1 and a chapter 2 that fails in its second body cell."""
    return _make_book(tmp_path / "fresh")


@pytest.fixture(scope="module")
def _executed_template(tmp_path_factory) -> Path:
    root = _make_book(tmp_path_factory.mktemp("template"))
    res = run(root, "reproduce", "--chapter", "1", "--no-build")
    assert res.returncode == 0, res.stderr
    return root


@pytest.fixture
def executed_book(_executed_template: Path, tmp_path: Path) -> Path:
    """The minimal book with chapter 1 already executed and its ledger written (a private copy)."""
    dst = tmp_path / "executed"
    shutil.copytree(_executed_template, dst)
    return dst


def run(root: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "attention_dynamics", "--root", str(root), *args],
        capture_output=True, text=True, timeout=600,
    )


def snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted((root / "book").iterdir()) if p.is_file()}


def test_executes_normalises_and_is_idempotent(book):
    res = run(book, "reproduce", "--chapter", "1", "--no-build")
    assert res.returncode == 0, res.stderr
    nb_path = book / "book" / "01-good-chapter.ipynb"
    nb = json.loads(nb_path.read_text())
    assert "papermill" not in nb["metadata"]
    assert all("papermill" not in c["metadata"] and "execution" not in c["metadata"] for c in nb["cells"])
    assert [c["id"] for c in nb["cells"]] == [f"cell-{i:02d}" for i in range(len(nb["cells"]))]
    assert nb["cells"][-1]["outputs"], "the chapter was executed"
    ledger = json.loads((book / "book" / "claims.json").read_text())["claims"]
    assert [(c["id"], c["chapter"], c["value"], c["status"]) for c in ledger] == [("toy.steps_used", "01-good-chapter", 3, "pass")]
    # The first run knew no cell times: every code cell was announced, with the chapter's time so far.
    assert "01-good-chapter: cell 1/4" in res.stdout and "01-good-chapter: cell 4/4" in res.stdout, res.stdout
    status = json.loads((book / "book" / "status.json").read_text())["chapters"]["01-good-chapter"]
    assert status["executed"].endswith("Z") and isinstance(status["cells"], dict)
    before = snapshot(book)
    res = run(book, "reproduce", "--chapter", "good-chapter", "--no-build")
    assert res.returncode == 0 and "up to date" in res.stdout
    skipped = next(line for line in res.stdout.splitlines() if "01-good-chapter.ipynb" in line)
    assert f"up to date since {status['executed'][:10]}" in skipped and "--force re-executes it (about" in skipped
    assert "Nothing to execute: the chapter is up to date. Add --force" in res.stdout
    assert snapshot(book)["book/01-good-chapter.ipynb"] == before["book/01-good-chapter.ipynb"]
    res = run(book, "reproduce", "--chapter", "1", "--no-build", "--force")
    assert res.returncode == 0
    again = json.loads(snapshot(book)["book/01-good-chapter.ipynb"])
    assert again["cells"] == nb["cells"], "re-executing an unchanged chapter changed its cells"


def test_fast_and_overrides_go_to_a_scratch_folder(executed_book):
    book = executed_book
    before = snapshot(book)
    res = run(book, "reproduce", "--chapter", "1", "--scale", "fast")
    assert res.returncode == 0, res.stderr
    scratch = book / "build" / "runs" / "scale-fast"
    nb = nbformat.read(scratch / "01-good-chapter.ipynb", as_version=4)
    assert "1" in nb.cells[-1].outputs[-1]["text"]  # fast scale: 1 step
    res = run(book, "reproduce", "--chapter", "1", "--steps", "5", "--no-build")
    assert res.returncode == 0, res.stderr
    assert (book / "build" / "runs" / "steps-5" / "claims.json").exists()
    assert snapshot(book) == before, "a scratch run touched the committed book"


@pytest.mark.parametrize(
    "args, status, message",
    [
        (["--chapter", "9"], 1, "unknown chapter '9'"),
        (["--chapter", "no-such-chapter"], 1, "unknown chapter 'no-such-chapter'"),
        (["--steps", "-3"], 2, "must be a positive integer, got -3"),
        (["--steps", "0"], 2, "must be a positive integer, got 0"),
        (["--steps", "2.5"], 2, "must be a positive integer, got '2.5'"),
        (["--device", "tpu"], 2, "invalid choice: 'tpu'"),
        (["--scale", "huge"], 2, "invalid choice: 'huge'"),
        (["--chapter", "2"], 1, "chapter 2 (02-failing-chapter.ipynb) failed in cell 4 (RuntimeError: the model diverged at step 7)"),
        (["--chapter", "1", "--chapter", "2"], 1, "failed in cell 4"),
    ],
)
def test_bad_input_is_one_clear_error_and_changes_nothing(executed_book, args, status, message):
    book = executed_book
    (book / "book" / "01-good-chapter.ipynb").write_bytes(
        (book / "book" / "01-good-chapter.ipynb").read_bytes().replace(b"Toy(steps=3)", b"Toy(steps=4)")
    )  # make chapter 1 stale, so a multi-chapter run would rewrite it if it could
    before = snapshot(book)
    res = run(book, "reproduce", "--no-build", *args)
    assert res.returncode == status
    assert message in res.stderr
    assert len([line for line in res.stderr.splitlines() if line.startswith("error")]) <= 1
    assert snapshot(book) == before
    assert not list((book / "build").glob("staging-*")), "a failed run left its staging folder behind"


def test_a_failing_chapter_is_kept_with_its_error_for_inspection(book):
    res = run(book, "reproduce", "--chapter", "2", "--no-build")
    assert res.returncode == 1
    kept = book / "build" / "failed" / "02-failing-chapter.ipynb"
    assert str(kept) in res.stderr
    nb = nbformat.read(kept, as_version=4)
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []) if o.output_type == "error"]
    assert [e["evalue"] for e in errors] == ["the model diverged at step 7"]
    assert not (book / "book" / "claims.json").exists()


def _git(root: Path, *args: str) -> str:
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.org", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.org", "PATH": "/usr/bin:/bin"}
    return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, check=True, env=env).stdout


def test_the_colab_cell_pins_the_last_commit_of_the_package_and_is_kept_current(book):
    from attention_dynamics.book.notebooks import colab_pin

    (book / "_config.yml").write_text("repository:\n  url: https://github.com/example/book\n")
    (book / "pyproject.toml").write_text('[project]\nname = "toy"\n')
    _git(book, "init", "-q")
    _git(book, "add", "-A")
    _git(book, "commit", "-qm", "package")
    first = _git(book, "rev-parse", "HEAD").strip()
    assert run(book, "reproduce", "--chapter", "1", "--no-build").returncode == 0
    nb_path = book / "book" / "01-good-chapter.ipynb"
    assert colab_pin(nbformat.read(nb_path, as_version=4)) == ("https://github.com/example/book", first)
    _git(book, "add", "-A")
    _git(book, "commit", "-qm", "outputs")  # a commit without package changes does not move the pin
    (book / "pyproject.toml").write_text('[project]\nname = "toy"\nversion = "2"\n')
    res = run(book, "reproduce", "--chapter", "1", "--no-build")
    assert "uncommitted changes" in res.stderr
    _git(book, "commit", "-qam", "package again")
    second = _git(book, "rev-parse", "HEAD").strip()
    before = nbformat.read(nb_path, as_version=4)
    res = run(book, "reproduce", "--chapter", "1", "--no-build")
    assert res.returncode == 0 and "up to date" in res.stdout, res.stdout
    after = nbformat.read(nb_path, as_version=4)
    assert colab_pin(after) == ("https://github.com/example/book", second), "the runner did not refresh the pin"
    assert [c.get("outputs") for c in after.cells] == [c.get("outputs") for c in before.cells]


def test_colab_pin_reads_what_ensure_colab_cell_writes():
    from attention_dynamics.book.notebooks import colab_pin, ensure_colab_cell

    nb = _chapter(["1 + 1"])
    assert colab_pin(nb) is None
    ensure_colab_cell(nb, "https://github.com/example/book/", "0123abcd" * 5)
    assert colab_pin(nb) == ("https://github.com/example/book", "0123abcd" * 5)
    ensure_colab_cell(nb, "https://github.com/example/book", "v1.0")
    assert colab_pin(nb) == ("https://github.com/example/book", "v1.0")
    assert sum("colab" in " ".join(c.metadata.get("tags", [])) for c in nb.cells) == 1
    with pytest.raises(ValueError, match="not a git ref"):
        ensure_colab_cell(nb, "https://github.com/example/book", "main; rm -rf /")


def test_unknown_parameter_for_a_chapter(book):
    nbformat.write(_chapter(GOOD, params='seed = 0\nscale = "book"\ndevice = "auto"'), book / "book" / "01-good-chapter.ipynb")
    res = run(book, "reproduce", "--chapter", "1", "--steps", "5", "--no-build")
    assert res.returncode == 1 and "has no parameter 'steps'" in res.stderr


def test_chapter_selection_and_listing(book):
    chapters = book_chapters(book)
    assert [c.number for c in chapters] == [1, 2]
    assert select_chapters(chapters, ["02", "good-chapter"]) == chapters
    with pytest.raises(ValueError, match="the book's chapters are: 1 \\(good-chapter\\), 2 \\(failing-chapter\\)"):
        select_chapters(chapters, ["3"])
    res = run(book, "chapters", "--paths")
    assert res.stdout.split() == ["book/01-good-chapter.ipynb", "book/02-failing-chapter.ipynb"]


def test_normalise_removes_volatile_metadata():
    nb = _chapter(["1 + 1"])
    nb.metadata["papermill"] = {"start_time": "2026-01-01T00:00:00", "duration": 3.2}
    nb.cells[2].metadata["papermill"] = {"duration": 0.1}
    nb.cells[2].metadata["execution"] = {"iopub.execute_input": "2026"}
    normalise_notebook(nb)
    text = nbformat.writes(nb)
    assert "start_time" not in text and "duration" not in text and "iopub" not in text
    assert [c.id for c in nb.cells] == ["cell-00", "cell-01", "cell-02"]
