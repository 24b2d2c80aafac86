"""The API page: complete, rendered as its docstrings are written, with resolving cross-references.

Three pieces, all for ``book/api.md`` (the rest of the book uses only the third):

``remaining-modules`` directive
    ``book/api.md`` lists the package's modules by theme, one ``automodule`` each. Modules are
    added to the package over time; this directive, placed at the end of the page, finds every
    module of the package (``pkgutil.walk_packages``) that no ``automodule`` has documented so
    far and documents it, so the page is always complete and a new module's docstrings are
    checked by the nitpicky build from the day it lands. Private modules (``_name``,
    ``__main__``) are skipped. Use it inside an ``eval-rst`` block (it generates
    reStructuredText)::

        ```{eval-rst}
        .. remaining-modules:: attention_dynamics
        ```

Docstrings as written
    The package's docstrings are prose with maths in plain text (``|i − j|``, ``mean |cos|``),
    not reStructuredText. Before napoleon reads them, :func:`plain_text_docstring` escapes the
    ``|`` of absolute values (which reStructuredText would take for substitution references)
    outside literals and roles, and keeps napoleon from reading the first line of a constant's
    ``#:`` comment (or an attribute's or property's docstring) as a type
    (``#: Query rows per block: ...``); types come from annotations.

Package-relative references
    Inside the package a docstring may say :func:`training.fit` or :class:`SingleHeadParams`
    (an annotation string) where Sphinx wants ``attention_dynamics.training.fit``. When a
    Python reference does not resolve, :func:`resolve_in_package` links to the one documented
    object of the package whose dotted name ends with the target; a real but undocumented
    object of the package (not in its module's ``__all__``) is shown as plain code. A target
    that names nothing in the package is left alone and the nitpicky build reports it.
"""

from __future__ import annotations

import importlib
import pkgutil
import re

from docutils import nodes
from sphinx.application import Sphinx
from sphinx.util.docutils import SphinxDirective
from sphinx.util.nodes import make_refnode

PACKAGE = "attention_dynamics"

# Spans that reStructuredText reads literally or as a role: ``code``, :role:`target`, `text`.
_PROTECTED_SPAN = re.compile(r"``.+?``|:[\w:.+-]+:`[^`]*`|`[^`]*`")
# A row of a grid or simple table starts and ends with |: leave such lines alone.
_TABLE_ROW = re.compile(r"^\s*[|+].*[|+]\s*$")
# An unescaped |.
_PIPE = re.compile(r"(?<!\\)\|")


def package_modules(package: str) -> list[str]:
    """Return the dotted names of the public modules and subpackages of ``package``, sorted."""
    pkg = importlib.import_module(package)
    names = [package]
    for info in pkgutil.walk_packages(pkg.__path__, prefix=package + "."):
        if any(part.startswith("_") for part in info.name.split(".")):
            continue
        names.append(info.name)
    return sorted(names)


def escape_pipes(line: str) -> str:
    """Return ``line`` with every ``|`` outside literals and roles escaped as ``\\|``."""
    if _TABLE_ROW.match(line):
        return line
    out, start = [], 0
    for span in _PROTECTED_SPAN.finditer(line):
        out.append(_PIPE.sub(r"\\|", line[start:span.start()]))
        out.append(span.group(0))
        start = span.end()
    out.append(_PIPE.sub(r"\\|", line[start:]))
    return "".join(out)


# Docstrings of constants, attributes and properties as they were before napoleon (by object name).
_UNPARSED: dict[str, list[str]] = {}
_INLINE_TYPE_WHAT = ("data", "attribute", "property")


def plain_text_docstring(app, what: str, name: str, obj, options, lines: list[str]) -> None:
    """Make a package docstring render as written (runs before napoleon; edits ``lines`` in place)."""
    if not name.startswith(PACKAGE):
        return
    lines[:] = [escape_pipes(line) for line in lines]
    if what in _INLINE_TYPE_WHAT:
        _UNPARSED[name] = list(lines)


def restore_inline_text(app, what: str, name: str, obj, options, lines: list[str]) -> None:
    """Undo napoleon on a constant's, attribute's or property's docstring (runs after napoleon).

    napoleon reads a first line ``text: more`` as ``type: description``; in this package such a
    line is prose (``#: Query rows per block: ...``) and types come from annotations.
    """
    if what in _INLINE_TYPE_WHAT and name in _UNPARSED:
        lines[:] = _UNPARSED.pop(name)


def _package_object_exists(dotted: str) -> bool:
    """Return whether ``dotted`` names a real object of the package (module, class, function, ...)."""
    if not dotted.startswith(PACKAGE + "."):
        return False
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        try:
            for attr in parts[cut:]:
                obj = getattr(obj, attr)
        except AttributeError:
            return False
        return True
    return False


def resolve_in_package(app: Sphinx, env, node, contnode):
    """Resolve a Python reference that Sphinx could not resolve, if it names an object of the package.

    1. The one documented object whose dotted name ends with the target: a link to it
       (``training.fit`` → ``attention_dynamics.training.fit``).
    2. A real object of the package that the API page does not document (not in its module's
       ``__all__``, e.g. a private helper type in an annotation): its name as plain code, no link.
    Anything else (a typo, a removed function) stays unresolved and the nitpicky build reports it.
    """
    if node.get("refdomain") != "py":
        return None
    target = node.get("reftarget", "").lstrip(".~")
    if not target:
        return None
    domain = env.get_domain("py")
    if not target.startswith(PACKAGE + "."):
        matches = [
            (name, obj) for name, obj in domain.objects.items()
            if name.startswith(PACKAGE + ".") and name.endswith("." + target)
        ]
        if len(matches) == 1:
            name, obj = matches[0]
            return make_refnode(app.builder, node["refdoc"], obj.docname, obj.node_id, contnode, name)
    module, cls = node.get("py:module") or "", node.get("py:class") or ""
    candidates = [target, f"{module}.{target}", f"{module}.{cls}.{target}", f"{PACKAGE}.{target}"]
    if any(_package_object_exists(c) for c in candidates if c and not c.startswith(".")):
        return contnode
    return None


class RemainingModules(SphinxDirective):
    """Document, with ``automodule``, the modules of a package that the page has not documented."""

    required_arguments = 1

    def run(self) -> list[nodes.Node]:
        # A module added to the package must appear without an edit to the page: re-read it
        # on every build.
        self.env.note_reread()
        documented = set(self.env.get_domain("py").data["modules"])
        missing = [name for name in package_modules(self.arguments[0]) if name not in documented]
        if not missing:
            return [nodes.paragraph(text="Every module of the package is documented above.")]
        text = "\n\n".join(f".. rubric:: ``{name}``\n\n.. automodule:: {name}" for name in missing)
        return self.parse_text_to_nodes(text)


def setup(app: Sphinx):
    app.add_directive("remaining-modules", RemainingModules)
    # Before napoleon (priority 500), which turns the docstring into reStructuredText fields.
    app.connect("autodoc-process-docstring", plain_text_docstring, priority=400)
    app.connect("autodoc-process-docstring", restore_inline_text, priority=600)
    app.connect("missing-reference", resolve_in_package)
    return {"version": "0.1", "parallel_read_safe": True, "parallel_write_safe": True}
