"""The package's shape: layers that import only downwards, no import cycles, no module too long to read.

What it protects: the science (laws, tasks, models) stays usable without the book's experiments, and a
reader can follow the code from the bottom up. The layers, lowest first:

- ``base``: the book's machinery every layer may use (seeding, settings, paths, plotting, the claims
  ledger, notebooks) and small shared helpers (stats, settling);
- ``science``: the head and the paper's laws (attention, gradients, em, calibration, geometry);
- ``tasks``: the wind tunnels with their exact posteriors;
- ``models``: every ``nn.Module``;
- ``training``: the one loop, the schedules, the closed-form engine;
- ``diagnostics``: tools for any model, and the measures of the recall head's dynamics (``dynamics``);
- ``experiments``: one module per chapter's runs;
- ``runner``: the command line, the PDF, the launch notebooks, the nbval plugin.

A module may import from its own layer or a lower one (``TYPE_CHECKING`` imports, for annotations,
included); imports executed at import time form no cycle.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "attention_dynamics"
LAYERS = {
    "base": {"seeding", "settings", "paths", "plotting", "claims", "notebooks", "nbcompare", "verdicts",
             "stats", "settling"},
    "science": {"attention", "gradients", "em", "calibration", "geometry"},
    "tasks": {"tasks"},
    "models": {"models"},
    "training": {"training"},
    "diagnostics": {"diagnostics", "dynamics"},
    "experiments": {"experiments"},
    "runner": {"reproduce", "pdf", "launch_notebooks", "nbval_plugin", "__main__", "__init__"},
}
ORDER = list(LAYERS)
MAX_LINES = 800


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
    if parts[-1] == "__init__" and len(parts) > 1:
        parts = parts[:-1]
    return ".".join(parts)


def _layer(module: str) -> str:
    top = module.split(".")[0]
    for name, members in LAYERS.items():
        if top in members:
            return name
    raise AssertionError(f"module {module!r} belongs to no layer: add it to LAYERS in {__file__}")


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


def test_no_lower_layer_imports_the_experiments():
    offenders = [f"{m} imports {t}" for m, p in _all_modules().items() for t, _ in _imports(p)
                 if t.startswith("experiments") and _layer(m) not in ("experiments", "runner")]
    assert not offenders, "\n".join(offenders)


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
