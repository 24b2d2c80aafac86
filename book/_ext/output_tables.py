"""A cell whose value is a dict (a summary the chapter returns) is shown as a small table, not as its repr.

A chapter's code cell may end with a dict of numbers, e.g. ``{"final_probe_loss": 0.0006, ...}``; Jupyter shows
its repr, which on the page is one long line (and, for numpy scalars, ``np.float64(...)``). At build time each
such plain-text output that reads back as a dict (``ast.literal_eval``, numpy scalar reprs unwrapped) becomes a
two-column table: the key, then the value, numbers to four significant digits, lists and tuples joined, nested
dicts as one row per inner key ("outer · inner"). A printed dict (a stream output of one dict) likewise. In output
tables a cell that holds only a missing value (pandas' NaN or None: a setting a scale does not have) reads "—".
Anything else is left as it is. The notebooks keep what the code returns (Jupyter, Binder and Colab show it).
"""

from __future__ import annotations

import ast
import re
from html import escape
from typing import Any

from docutils import nodes

#: numpy scalar reprs (numpy ≥ 2) and their plain value
_NUMPY_SCALAR = re.compile(r"np\.(?:float|int|uint|bool_?)\d*\((.*?)\)")


def parse_dict(text: str) -> dict | None:
    """Return the dict a plain-text output shows, or None if it is not one."""
    text = text.strip()
    if not (text.startswith("{") and text.endswith("}")):
        return None
    try:
        value = ast.literal_eval(_NUMPY_SCALAR.sub(r"\1", text))
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None
    return value if isinstance(value, dict) and value else None


def format_value(value: Any) -> str:
    """Return a cell's text: numbers to four significant digits, sequences joined, None as a dash."""
    if value is None:
        return "—"
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, float):
        if value != value:
            return "—"
        for digits in (4, 6, 8):  # four significant digits, more where four would round a non-integer to one
            text = f"{value:.{digits}g}"
            if value == round(value) or float(text) != round(float(text)):
                return text
        return text
    if isinstance(value, (list, tuple)):
        return ", ".join(format_value(v) for v in value)
    return str(value)


def dict_rows(value: dict, prefix: str = "") -> list[tuple[str, str]]:
    """Return ``(key, value text)`` rows; an inner dict gives one row per inner key ("outer · inner")."""
    rows = []
    for key, inner in value.items():
        name = f"{prefix} · {key}" if prefix else str(key)
        if isinstance(inner, dict) and inner:
            rows += dict_rows(inner, name)
        else:
            rows.append((name, format_value(inner)))
    return rows


def dict_table_html(value: dict) -> str:
    """Return the dict as an HTML table in the page's output style."""
    body = "".join(f"<tr><th>{escape(k)}</th><td>{escape(v)}</td></tr>" for k, v in dict_rows(value))
    return (f'<div class="output text_html"><table class="dataframe summary-table"><tbody>{body}</tbody>'
            "</table></div>")


#: a table cell that holds only a missing value, as pandas writes it
_MISSING_CELL = re.compile(r"<td([^>]*)>\s*(?:NaN|nan|None|NaT|<NA>)\s*</td>")


def dash_missing_cells(html: str) -> str:
    """Return an HTML table with each cell that holds only a missing value (NaN, None) shown as a dash."""
    return _MISSING_CELL.sub(r'<td\1 title="not measured here">—</td>', html)


def tables_for_dict_outputs(app, doctree: nodes.document) -> None:
    """Replace each plain-text (or printed) cell output that reads back as a dict with its table, and show missing
    values in output tables as a dash."""
    for block in list(doctree.findall(nodes.literal_block)):
        classes = block.get("classes", [])
        if "output" not in classes or not {"text_plain", "stream"} & set(classes):
            continue
        value = parse_dict(block.astext())
        if value is not None:
            block.replace_self(nodes.raw("", dict_table_html(value), format="html"))
    for raw in list(doctree.findall(nodes.raw)):
        if raw.get("format") == "html" and "<table" in raw.astext() and _MISSING_CELL.search(raw.astext()):
            raw.replace_self(nodes.raw("", dash_missing_cells(raw.astext()), format="html"))


def setup(app):
    app.connect("doctree-read", tables_for_dict_outputs)
    return {"version": "0.1", "parallel_read_safe": True, "parallel_write_safe": True}
