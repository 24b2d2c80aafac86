"""Comparing a re-executed chapter's outputs with its committed ones, across machines.

nbval compares a re-executed notebook with the committed one output by output. Another CPU, kernel
dispatch level (``ATEN_CPU_CAPABILITY``) or thread count changes the last digits of every float,
and the outcome of a training run in its third or fourth digit. Rounding to a fixed number of
significant digits cannot absorb that: every rounding grid has boundaries that a last-digit change
crosses (0.12349 and 0.12351 round to the same four digits, 0.12345 and 0.12355 do not). So the
book compares numbers the way the claims ledger does, by tolerance:

- the text around the numbers must be identical (runs of white space folded, since a table pads
  its columns to the widest number);
- every number is parsed and compared with the tolerance of its kind (:class:`NumberTolerance`),
  plus half a unit in the last digit each is written with (a number printed with k digits stands
  for any value that rounds to it, so two close values can print one unit apart): integers
  exactly, computed floats to a relative ``1e-5`` (float32 arithmetic on another kernel
  moves the sixth digit), trained results (cells tagged :data:`TRAINED_TAG`) to a relative
  tolerance measured from their seed-to-seed spread, and anything below the round-off floor
  ``1e-12`` is "zero to round-off" whatever its digits;
- when two outputs agree in that sense the re-executed one is replaced by the committed one
  before nbval's own comparison, so nbval's report (and failure) stays for real differences;
- a figure is a text too (SVG): a computed figure's coordinates are compared like any computed
  number; a trained figure's pixels are not compared at all (another machine's training run moves
  every bar and curve by a fraction of a pixel, and an axis may then pick other ticks), because what
  it draws is compared where it is stated: in its cell's text outputs and in the claims.

For nbval's diff, :func:`canonical_text` rounds every number to :data:`DISPLAY_DIGITS`
significant digits and shows round-off-level numbers as ``<1e-12``, which is what they mean.

The unit tests compare floats by the same policy: :func:`assert_book_close` (and :func:`book_close`, its
element-wise form) takes anything below the round-off floor as zero and compares the rest by relative
tolerance, the computed outputs' ``1e-5`` unless a test asks for a tighter one (a closed form against an
independent float64 computation) or a looser one (a Monte Carlo estimate, a trained result). A test never uses
an absolute tolerance below the floor: ``tests/test_tolerance_policy.py`` keeps every float comparison of the
tests on this one helper.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np

__all__ = [
    "TRAINED_TAG",
    "ROUNDOFF_FLOOR",
    "DISPLAY_DIGITS",
    "NumberTolerance",
    "COMPUTED",
    "TRAINED",
    "split_numbers",
    "last_digit_unit",
    "IMAGE_MIME_TYPES",
    "canonical_text",
    "texts_agree",
    "cell_tolerance",
    "snap_outputs",
    "book_close",
    "assert_book_close",
]

#: Cell tag of a chapter cell whose outputs show results of training runs (see TRAINED).
TRAINED_TAG = "trained-output"
#: Below this magnitude a number is round-off (float64 identities agree to ~1e-15 here).
ROUNDOFF_FLOOR = 1e-12
#: The MIME types of a figure in a notebook output.
IMAGE_MIME_TYPES = ("image/svg+xml", "image/png", "image/jpeg")
#: Significant digits a number is shown with in a diff.
DISPLAY_DIGITS = 6

# A number: optional sign, digits with an optional fraction (or a bare fraction), optional exponent.
# Not preceded by a letter, digit or '.', so identifiers like "W_Q2" or "v4" keep their digits as text.
_NUMBER = re.compile(r"(?<![\w.])[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?")
_SPACE = re.compile(r"\s+")


@dataclass(frozen=True)
class NumberTolerance:
    """How closely two numbers in the same place of two outputs must agree."""

    rtol: float
    atol: float = ROUNDOFF_FLOOR
    #: whether integers (no '.', no exponent) may differ within ``rtol`` too (step counts of a
    #: training run) or must be equal (sizes, counts, seeds).
    integers_within_rtol: bool = False

    def agree(self, ref: str, test: str) -> bool:
        """Return whether the numbers written ``ref`` and ``test`` agree within this tolerance."""
        if ref == test:
            return True
        a, b = float(ref), float(test)
        if _is_integer(ref) and _is_integer(test) and not self.integers_within_rtol:
            return a == b
        if math.isnan(a) or math.isnan(b):
            return False
        # A number written with k digits stands for any value within half a unit of its last digit
        # (0.0034 and 0.0025 print as 0.003 and 0.002): two texts disagree only when no two values
        # they stand for lie within the tolerance, so half a unit of each is allowed on top.
        rounding = (last_digit_unit(ref) + last_digit_unit(test)) / 2
        return abs(a - b) <= self.atol + self.rtol * max(abs(a), abs(b)) + rounding


#: Outputs of computations that do not train: float32 on another kernel moves the sixth digit.
COMPUTED = NumberTolerance(rtol=1e-5)
#: Outputs of training runs. A training run on another CPU is a run with the same seed whose every
#: step differs in its last digits; after hundreds of steps its result moves by a fraction of its
#: seed-to-seed spread. 0.3 lies between the median (0.12) and the upper quartile (0.42) of the
#: claims' measured cross-machine tolerances (book/claim_tolerances.json: 3 × seed sd / |mean|)
#: and still catches a result that halves or doubles.
TRAINED = NumberTolerance(rtol=0.3, atol=1e-6, integers_within_rtol=True)


def _is_integer(token: str) -> bool:
    return not any(ch in token for ch in ".eE")


def last_digit_unit(token: str) -> float:
    """Return the value of one unit in the last digit of a number as written.

    ``"0.003"`` gives ``0.001``, ``"4.75e-03"`` gives ``1e-05``, ``"12"`` gives ``1``, ``"2."`` gives ``1``.
    """
    mantissa, _, exponent = token.lower().partition("e")
    decimals = len(mantissa.partition(".")[2])
    return 10.0 ** (int(exponent or 0) - decimals)


def split_numbers(text: str) -> tuple[list[str], list[str]]:
    """Return ``(pieces, numbers)``: the text between the numbers and the numbers as written.

    ``pieces`` has one more element than ``numbers``; joining them alternately gives ``text``.
    """
    pieces: list[str] = []
    numbers: list[str] = []
    last = 0
    for m in _NUMBER.finditer(text):
        pieces.append(text[last : m.start()])
        numbers.append(m.group(0))
        last = m.end()
    pieces.append(text[last:])
    return pieces, numbers


def _display(token: str, digits: int) -> str:
    if _is_integer(token):
        return token
    value = float(token)
    if value != 0 and abs(value) < ROUNDOFF_FLOOR:
        return f"<{ROUNDOFF_FLOOR:.0e}"
    return f"{value:.{digits}g}"


def canonical_text(text: str, digits: int = DISPLAY_DIGITS) -> str:
    """Return ``text`` with every number rounded to ``digits`` significant digits.

    Round-off-level numbers (below :data:`ROUNDOFF_FLOOR`) become ``<1e-12``; integers stay as
    written. Used for readable diffs; agreement itself is decided by :func:`texts_agree`.
    """
    pieces, numbers = split_numbers(text)
    out = [pieces[0]]
    for number, piece in zip(numbers, pieces[1:]):
        out.append(_display(number, digits))
        out.append(piece)
    return "".join(out)


def texts_agree(ref: str, test: str, tolerance: NumberTolerance) -> bool:
    """Return whether two output texts agree: same words, numbers within ``tolerance``."""
    if ref == test:
        return True
    ref_pieces, ref_numbers = split_numbers(ref)
    test_pieces, test_numbers = split_numbers(test)
    if len(ref_numbers) != len(test_numbers):
        return False
    if [_SPACE.sub(" ", p) for p in ref_pieces] != [_SPACE.sub(" ", p) for p in test_pieces]:
        return False
    return all(tolerance.agree(a, b) for a, b in zip(ref_numbers, test_numbers))


def cell_tolerance(cell: Mapping[str, Any]) -> NumberTolerance:
    """Return the tolerance for a notebook cell's numbers: TRAINED if tagged so, else COMPUTED."""
    tags = cell.get("metadata", {}).get("tags", [])
    return TRAINED if TRAINED_TAG in tags else COMPUTED


def _text(value: Any) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return "".join(value)
    return None


def _output_key(output: Mapping[str, Any]) -> tuple:
    data = output.get("data") or {}
    return (output.get("output_type"), output.get("name"), tuple(sorted(data)))


def snap_outputs(
    test: Sequence[Mapping[str, Any]],
    ref: Sequence[Mapping[str, Any]],
    tolerance: NumberTolerance,
    sanitize: Callable[[str], str] | None = None,
) -> list[dict[str, Any]]:
    """Return ``test`` with every text that agrees with ``ref`` (within ``tolerance``) replaced by it.

    Outputs are paired in order; where the two lists do not pair up (different count or kinds),
    ``test`` is returned unchanged so that the comparison reports the difference. ``sanitize``
    (nbval's sanitiser) is applied to both texts before they are compared.
    """
    if sanitize is None:
        sanitize = str
    test_out = [dict(o) for o in test]
    if len(test) != len(ref) or [_output_key(o) for o in test] != [_output_key(o) for o in ref]:
        return test_out
    for t, r in zip(test_out, ref):
        if t.get("output_type") == "stream":
            rt, tt = _text(r.get("text")), _text(t.get("text"))
            if rt is not None and tt is not None and texts_agree(sanitize(rt), sanitize(tt), tolerance):
                t["text"] = r.get("text")
            continue
        data = t.get("data")
        if not isinstance(data, Mapping):
            continue
        snapped = dict(data)
        for mime, value in data.items():
            if mime.startswith("image/") and mime != "image/svg+xml":
                continue
            rt, tt = _text(r["data"].get(mime)), _text(value)
            if rt is not None and tt is not None and texts_agree(sanitize(rt), sanitize(tt), tolerance):
                snapped[mime] = r["data"][mime]
        t["data"] = snapped
    return test_out


def claim_output_names(outputs: Iterable[Mapping[str, Any]], prefix: str) -> set[str]:
    """Return the claim ids whose records (glue names ``prefix + id``) appear among ``outputs``."""
    names = set()
    for o in outputs:
        name = (o.get("metadata") or {}).get("scrapbook", {}).get("name", "")
        if name.startswith(prefix):
            names.add(name[len(prefix) :])
    return names


def _as_float_array(x: Any) -> np.ndarray:
    """``x`` (a number, a sequence, a NumPy array or a tensor on any device) as a float64 array."""
    if hasattr(x, "detach"):  # a torch tensor: the package's layers below book/ import torch, this one need not
        x = x.detach().cpu().numpy()
    return np.asarray(x, dtype=np.float64)


def book_close(actual: Any, expected: Any, *, rtol: float = COMPUTED.rtol, atol: float = ROUNDOFF_FLOOR) -> np.ndarray:
    """Return, entry by entry, whether ``actual`` agrees with ``expected`` by the book's policy.

    Two entries agree when both are below the round-off floor (:data:`ROUNDOFF_FLOOR`: zero to round-off,
    whatever their digits), or when ``|a - e| <= atol + rtol * max(|a|, |e|)`` (``rtol``: the relative tolerance,
    by default :data:`COMPUTED`'s; ``atol``: the absolute one, the round-off floor unless a comparison on a known
    scale asks for more, never less). NaN agrees only with NaN, an infinity only with itself. ``expected`` is an
    array of ``actual``'s shape or a number that every entry must equal; other shapes raise ``ValueError``.
    """
    if not (0 <= rtol < 1):
        raise ValueError(f"rtol must lie in [0, 1), got {rtol}")
    if not atol >= ROUNDOFF_FLOOR:
        raise ValueError(f"atol must be at least the round-off floor {ROUNDOFF_FLOOR:g}, got {atol}")
    a, e = _as_float_array(actual), _as_float_array(expected)
    if e.shape != a.shape:
        if e.ndim != 0:
            raise ValueError(f"shapes differ: actual {a.shape}, expected {e.shape}")
        e = np.broadcast_to(e, a.shape)
    with np.errstate(invalid="ignore", over="ignore"):
        both_nan = np.isnan(a) & np.isnan(e)
        roundoff = (np.abs(a) < ROUNDOFF_FLOOR) & (np.abs(e) < ROUNDOFF_FLOOR)
        within = np.abs(a - e) <= atol + rtol * np.maximum(np.abs(a), np.abs(e))
        return both_nan | (a == e) | roundoff | (np.isfinite(a) & np.isfinite(e) & within)


def assert_book_close(actual: Any, expected: Any, *, rtol: float = COMPUTED.rtol, atol: float = ROUNDOFF_FLOOR,
                      what: str = "") -> None:
    """Assert that ``actual`` agrees with ``expected`` entry by entry by the book's policy (:func:`book_close`).

    The one float comparison of the tests: round-off (below :data:`ROUNDOFF_FLOOR`) is zero, the rest agrees
    to ``rtol`` (by default :data:`COMPUTED`'s ``1e-5``; a closed form against an independent float64 computation
    may ask for less). Shapes must match (``expected`` may be one number for every entry); two mappings must have
    the same keys and each value agree (words, flags and ``None`` among them exactly). On failure the message
    names ``what`` is compared, the tolerance, how many entries differ and the first of them with both values.
    """
    label = f"{what}: " if what else ""
    if isinstance(actual, Mapping) or isinstance(expected, Mapping):  # a dict of numbers: the same keys, each close
        if not (isinstance(actual, Mapping) and isinstance(expected, Mapping)) or set(actual) != set(expected):
            raise AssertionError(f"{label}not the same keys: actual {actual!r}, expected {expected!r}")
        for key in expected:
            assert_book_close(actual[key], expected[key], rtol=rtol, atol=atol, what=f"{what}[{key!r}]")
        return
    if isinstance(expected, (str, bool, type(None))) or isinstance(actual, (str, bool, type(None))):
        if actual != expected:  # words and flags inside a dict of numbers are compared exactly
            raise AssertionError(f"{label}actual {actual!r}, expected {expected!r}")
        return
    a, e = _as_float_array(actual), _as_float_array(expected)
    try:
        close = book_close(a, e, rtol=rtol, atol=atol)
    except ValueError as err:
        if "shapes differ" not in str(err):
            raise
        raise AssertionError(f"{label}{err}") from None
    if close.all():
        return
    e = np.broadcast_to(e, a.shape)
    bad = np.argwhere(~close) if a.ndim else np.zeros((1, 0), dtype=int)
    shown = []
    for index in bad[:5]:
        where = f"[{', '.join(str(int(i)) for i in index)}]" if a.ndim else "value"
        shown.append(f"{where}: actual {float(a[tuple(index)])!r}, expected {float(e[tuple(index)])!r}")
    more = f" (and {len(bad) - 5} more)" if len(bad) > 5 else ""
    tolerance = f"rtol={rtol:g}" + (f", atol={atol:g}" if atol != ROUNDOFF_FLOOR else "")
    raise AssertionError(f"{label}{len(bad)} of {a.size} entries differ beyond {tolerance} "
                         f"(below {ROUNDOFF_FLOOR:g} is zero): " + "; ".join(shown) + more)
