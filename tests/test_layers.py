"""The package's shape: layers that import only downwards, chapters that share only the library, no import cycles,
no module too long to read.

What it protects: the science (laws, tasks, models) stays usable without the book's chapters, a reader can follow
the code from the bottom up, and every chapter folder can be read on its own. A layer is a folder, a top-level
sub-package of ``attention_dynamics``; they are, lowest first (the package docstring, ``attention_dynamics.__init__``,
draws the same):

- ``core``: the foundations every layer may use (seeding, settings, paths, provenance, shapes, plotting);
- ``science``: the head and the paper's laws (attention, gradients, em, calibration, geometry, dynamics, ...);
- ``tasks``: the wind tunnels with their exact posteriors;
- ``models``: every ``nn.Module``;
- ``training``: the one loop, the schedules, the closed-form engine, the trainers several chapters share;
- ``diagnostics``: tools for any model;
- ``ledger``: the claims ledger, the verdict rules, the stored results' declarations;
- ``chapters``: one folder per chapter (no chapter imports another);
- ``book``: the runner and its command line, the stored-result runner, the PDF, the launch notebooks, the nbval plugin.

The package root holds only ``__init__.py`` and ``__main__.py``, above every layer. A module may import from its own
layer or a lower one (``TYPE_CHECKING`` imports, for annotations, included); imports executed at import time form no
cycle.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "attention_dynamics"
#: The layers, lowest first: each is a folder of the package.
LAYERS = ("core", "science", "tasks", "models", "training", "diagnostics", "ledger", "chapters", "book")
#: The package root's own modules: above every layer (``python -m attention_dynamics`` and the version).
TOP = ("__init__", "__main__")
#: Folders of the package that hold no modules (the stored results' files).
DATA_FOLDERS = ("data",)
ORDER = [*LAYERS, "top"]
MAX_LINES = 600


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
    if parts[-1] == "__init__" and len(parts) > 1:
        parts = parts[:-1]
    return ".".join(parts)


def _layer(module: str) -> str:
    top = module.split(".")[0]
    if top in LAYERS:
        return top
    if module in TOP:
        return "top"
    raise AssertionError(f"module {module!r} belongs to no layer: put it in one of the folders {', '.join(LAYERS)}")


def test_the_package_root_shows_the_layers_as_folders():
    """Only ``__init__.py`` and ``__main__.py`` sit at the root; every folder is a declared layer (or the data)."""
    stray = sorted(p.name for p in PACKAGE.glob("*.py") if p.stem not in TOP)
    assert not stray, f"modules at the package root: {', '.join(stray)}; move each into its layer's folder"
    folders = {p.name for p in PACKAGE.iterdir() if p.is_dir() and not p.name.startswith(("_", "."))}
    unknown = sorted(folders - set(LAYERS) - set(DATA_FOLDERS))
    assert not unknown, f"folders that are not a layer: {', '.join(unknown)}; add them to LAYERS in their place"
    missing = sorted(set(LAYERS) - folders)
    assert not missing, f"layers without a folder: {', '.join(missing)}"
    for layer in LAYERS:
        assert (PACKAGE / layer / "__init__.py").exists(), f"{layer}/ has no __init__.py"


def test_every_module_belongs_to_a_layer():
    for module in _all_modules():
        _layer(module)


def _imports(path: Path) -> list[tuple[str, bool]]:
    """Return ``(imported package module, executed at import time)`` for every import of the file."""
    module = _module_name(path)
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    if module == "__init__":
        package = []
    tree = ast.parse(path.read_text())
    deferred: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) or (
            isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
        ):
            deferred |= {id(n) for n in ast.walk(node) if n is not node or isinstance(node, ast.If)}
    found = []
    for node in ast.walk(tree):
        targets = []
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
            elif node.module and node.module.split(".")[0] == "attention_dynamics":
                base = []
            else:
                continue
            mod = (node.module or "").removeprefix("attention_dynamics").lstrip(".") if not node.level else (node.module or "")
            stem = base + ([p for p in mod.split(".") if p])
            for alias in node.names:  # `from . import x` may import a module x
                candidate = stem + [alias.name]
                is_module = (PACKAGE.joinpath(*candidate).with_suffix(".py").exists()
                             or (PACKAGE.joinpath(*candidate) / "__init__.py").exists())
                targets.append(".".join(candidate if is_module else stem))
        elif isinstance(node, ast.Import):
            targets = [a.name.removeprefix("attention_dynamics").lstrip(".") for a in node.names
                       if a.name.split(".")[0] == "attention_dynamics"]
        for t in targets:
            if t:
                found.append((t, id(node) not in deferred))
    return found


def _all_modules() -> dict[str, Path]:
    return {_module_name(p): p for p in PACKAGE.rglob("*.py")}


def test_every_module_imports_only_its_own_layer_or_lower():
    offenders = []
    for module, path in sorted(_all_modules().items()):
        rank = ORDER.index(_layer(module))
        for target, _ in _imports(path):
            if ORDER.index(_layer(target)) > rank:
                offenders.append(f"{module} ({_layer(module)}) imports {target} ({_layer(target)})")
    assert not offenders, "imports that point upwards:\n" + "\n".join(sorted(set(offenders)))


def test_no_lower_layer_imports_a_chapter():
    offenders = [f"{m} imports {t}" for m, p in _all_modules().items() for t, _ in _imports(p)
                 if t.startswith("chapters") and _layer(m) not in ("chapters", "book", "top")]
    assert not offenders, "\n".join(offenders)


def _chapter(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if parts[0] == "chapters" and len(parts) > 1 else None


def test_no_chapter_imports_another_chapter():
    offenders = [f"{m} imports {t}" for m, p in _all_modules().items() if _chapter(m)
                 for t, _ in _imports(p) if _chapter(t) and _chapter(t) != _chapter(m)]
    assert not offenders, "chapters share only the library:\n" + "\n".join(offenders)


#: The modules every chapter folder has (a chapter may add modules named for what they hold).
CHAPTER_SHAPE = ("__init__", "settings", "runs", "report", "figures")


def test_every_chapter_folder_has_the_same_shape():
    folders = [p for p in (PACKAGE / "chapters").iterdir() if p.is_dir() and not p.name.startswith(("_", "."))]
    assert len(folders) >= 8
    for folder in folders:
        missing = [m for m in CHAPTER_SHAPE if not (folder / f"{m}.py").exists()]
        assert not missing, f"chapters/{folder.name} lacks {', '.join(m + '.py' for m in missing)}"


def test_the_layer_test_agrees_with_the_package_docstring():
    """The package docstring draws the layers, lowest at the bottom, in the order declared here."""
    import attention_dynamics

    doc = attention_dynamics.__doc__
    lines = [line for line in doc.splitlines() if any(line.lstrip().startswith(f"{layer}/") for layer in LAYERS)]
    drawn = [line.lstrip().split("/")[0] for line in lines]
    assert drawn == list(reversed(LAYERS)), f"the package docstring draws {drawn}, the layers are {list(LAYERS)}"


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Return the strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in list(graph):
        if v not in index:
            visit(v)
    return out


def _graph(eager_only: bool) -> dict[str, set[str]]:
    modules = _all_modules()
    graph: dict[str, set[str]] = {}
    for m, p in modules.items():
        for target, eager in _imports(p):
            if target in modules and target != m and (eager or not eager_only):
                # a package's __init__ re-exporting its own submodules is not a cycle with them
                if not (target.startswith(m + ".") or m.startswith(target + ".") and p.name != "__init__.py"):
                    graph.setdefault(m, set()).add(target)
    return graph


def test_no_import_cycles():
    assert _cycles(_graph(eager_only=True)) == []


def test_the_cycle_finder_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


@pytest.mark.parametrize("module", sorted(_all_modules()))
def test_no_module_is_too_long_to_read(module):
    lines = len(_all_modules()[module].read_text().splitlines())
    assert lines <= MAX_LINES, f"{module} has {lines} lines (at most {MAX_LINES}): split it by idea"
