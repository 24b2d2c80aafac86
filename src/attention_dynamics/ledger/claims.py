"""The claims ledger: every number the book states, with the paper's value and a status.

Inside a chapter, :func:`record` computes a claim's status, glues its value under the claim id
(so the prose can say ``{glue:text}`claim.id:.3f```) and stores the whole claim, as JSON, in the
notebook's own outputs. The runner (:mod:`attention_dynamics.book.reproduce`) then rebuilds
``book/claims.json`` from the executed notebooks, so the ledger and the committed notebooks can
never disagree. Ledger format: ``{"claims": [{"id", "chapter", "description",
"value", "unit", "paper_value", "expected", "tolerance", "lower", "upper", "status",
"explanation", "params"}, ...]}``.
"""

from __future__ import annotations

import json
import math
import os
import re
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

__all__ = [
    "Claim",
    "record",
    "glue",
    "claim_status",
    "claims_from_notebook",
    "write_ledger",
    "load_ledger",
    "ledger_problems",
    "format_value",
    "ClaimTolerance",
    "claim_tolerance",
    "attach_tolerances",
    "load_tolerances",
    "measure_tolerances",
    "compare_ledgers",
    "margin_problems",
    "recorded_claims",
]

#: Prefix of the glue names under which a claim's full record is stored in a notebook.
CLAIM_GLUE_PREFIX = "claim::"
#: The claim's own MIME type (a ``+json`` type, so notebooks store it as a JSON object).
CLAIM_MIME_TYPE = "application/vnd.attention-dynamics.claim+json"
#: "undecided": an interval claim (a mean over seeds with its confidence interval) whose interval
#: reaches both sides of a bound: the measurement cannot decide the paper's claim at this scale.
STATUSES = ("pass", "fail", "undecided", "new")
_ID_PATTERN = re.compile(r"^[a-z][a-z0-9_]*(\.[a-z0-9_]+)+$")


@dataclass
class Claim:
    """One ledger entry: a number the book states, how it was obtained and how it compares."""

    id: str
    description: str
    value: float | int
    unit: str
    status: str
    chapter: str | None = None
    paper_value: float | int | None = None
    expected: float | int | None = None
    tolerance: float | None = None
    lower: float | None = None
    upper: float | None = None
    #: ``[low, high]``: the confidence interval of ``value`` (a mean over seeds); with bounds, the
    #: status is decided by the whole interval (see :func:`claim_status`).
    interval: list[float] | None = None
    explanation: str | None = None
    params: dict[str, Any] = field(default_factory=dict)
    #: Relative tolerance within which a re-execution on another machine must reproduce the value
    #: (measured from the seed-to-seed spread, see :func:`measure_tolerances`); ``None`` for a
    #: claim with a closed form (``expected``), whose own ``tolerance`` applies.
    cross_machine_rtol: float | None = None
    #: Why the measurement cannot decide this claim whatever its value (e.g. its positive control
    #: fails at this budget, so a "does not realise" row would pass vacuously): the status is then
    #: ``"undecided"`` (see :func:`claim_status`).
    undecided_because: str | None = None

    def to_json(self) -> dict[str, Any]:
        """Return the claim as a JSON-ready dict (key order fixed)."""
        return asdict(self)


def claim_status(
    value: float,
    *,
    expected: float | None = None,
    paper_value: float | None = None,
    tolerance: float | None = None,
    lower: float | None = None,
    upper: float | None = None,
    interval: Sequence[float] | None = None,
    undecided_because: str | None = None,
) -> str:
    """Return ``"pass"``, ``"fail"``, ``"undecided"`` or ``"new"`` for a value against its reference.

    With ``undecided_because`` (a reason the measurement cannot decide the claim, such as a failing
    positive control) a claim that the references would decide is ``"undecided"``.

    Precedence: an ``expected`` closed form within ``tolerance``; else bounds ``[lower, upper]``
    (either may be open); else the ``paper_value`` within ``tolerance``; else ``"new"`` (a number
    the paper does not state and nothing pins down). With an ``interval`` (low, high) and bounds,
    the whole interval decides: ``"pass"`` if it lies within the bounds, ``"fail"`` if it lies
    entirely outside them, ``"undecided"`` if it reaches both sides.
    """
    status = _reference_status(value, expected=expected, paper_value=paper_value, tolerance=tolerance,
                               lower=lower, upper=upper, interval=interval)
    return "undecided" if undecided_because and status in ("pass", "fail") else status


def _reference_status(value, *, expected, paper_value, tolerance, lower, upper, interval) -> str:
    if interval is not None:
        if lower is None and upper is None:
            raise ValueError("an interval claim needs a bound (lower and/or upper) to be decided against")
        low, high = (float(v) for v in interval)
        if not low <= value <= high:
            raise ValueError(f"the interval [{low}, {high}] does not contain the value {value}")

        def inside(v: float) -> bool:
            return (lower is None or v >= lower) and (upper is None or v <= upper)

        ends = {inside(low), inside(high)}
        if upper is not None and lower is not None and low < lower and high > upper:
            ends = {True, False}  # the interval spans the whole band
        return "pass" if ends == {True} else "fail" if ends == {False} else "undecided"
    if expected is not None:
        if tolerance is None:
            raise ValueError("a claim with an expected value needs a tolerance")
        return "pass" if abs(value - expected) <= tolerance else "fail"
    if lower is not None or upper is not None:
        ok = (lower is None or value >= lower) and (upper is None or value <= upper)
        return "pass" if ok else "fail"
    if paper_value is not None and tolerance is not None:
        return "pass" if abs(value - paper_value) <= tolerance else "fail"
    return "new"


def record(
    claim_id: str,
    value: Any,
    *,
    description: str,
    unit: str,
    paper_value: float | None = None,
    expected: float | None = None,
    tolerance: float | None = None,
    lower: float | None = None,
    upper: float | None = None,
    interval: Sequence[float] | None = None,
    explanation: str | None = None,
    params: Mapping[str, Any] | None = None,
    glue_value: bool = True,
    undecided_because: str | None = None,
) -> Claim:
    """Record a claim from inside a chapter and return it (with its status computed).

    ``explanation`` is the chapter's account of why a number does not reproduce, or why it cannot be
    decided; it is kept when the status is ``"fail"`` or ``"undecided"`` (the tests reject an
    unexplained one). ``interval`` (low, high): the value's confidence interval, which then decides
    the status against the bounds. ``undecided_because``: why the measurement cannot decide the claim
    at all (the status is then ``"undecided"`` and this reason is its explanation). The value is glued
    under ``claim_id`` for the prose, and the claim itself under ``"claim::" + claim_id``.
    """
    if not isinstance(claim_id, str) or not _ID_PATTERN.match(claim_id):
        raise ValueError(f"claim id must look like 'chapter.name' (lower case, dots), got {claim_id!r}")
    if not description or not isinstance(description, str):
        raise ValueError(f"claim {claim_id!r} needs a description")
    value = _plain_number(value, f"claim {claim_id!r} value")
    refs = {
        k: (None if v is None else _plain_number(v, f"claim {claim_id!r} {k}"))
        for k, v in dict(paper_value=paper_value, expected=expected, tolerance=tolerance, lower=lower, upper=upper).items()
    }
    if interval is not None:
        interval = [_plain_number(v, f"claim {claim_id!r} interval") for v in interval]
        if len(interval) != 2:
            raise ValueError(f"claim {claim_id!r}: interval must be (low, high), got {interval}")
    status = claim_status(value, interval=interval, undecided_because=undecided_because,
                          **{k: refs[k] for k in ("expected", "paper_value", "tolerance", "lower", "upper")})
    if status == "undecided" and undecided_because:
        explanation = undecided_because
    claim = Claim(
        id=claim_id,
        description=description,
        value=value,
        unit=unit,
        status=status,
        interval=interval,
        explanation=explanation if status in ("fail", "undecided") else None,
        params=_jsonable(dict(params or {})),
        undecided_because=undecided_because or None,
        **refs,
    )
    _glue_claim(claim, glue_value=glue_value)
    _RECORDED[claim.id] = claim
    return claim


#: The claims recorded in this process (a chapter's kernel), by id: the latest record of an id wins.
_RECORDED: dict[str, Claim] = {}


def recorded_claims() -> list[Claim]:
    """Return the claims recorded so far in this process (e.g. by the chapter running now), in recording order,
    so that a chapter can state what follows from them (:func:`attention_dynamics.ledger.verdicts.verdict_of`)."""
    return list(_RECORDED.values())


def glue(name: str, value: Any) -> None:
    """Glue a number (or short text) the prose states that is not a ledger claim, for ``{glue:text}``."""
    if hasattr(value, "item") and callable(value.item):
        value = value.item()
    if _in_kernel():
        from myst_nb import glue as _glue

        _glue(name, value, display=False)


def _in_kernel() -> bool:
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover
        return False
    return get_ipython() is not None


class _ClaimRecord:
    """Wrapper whose display is the claim as JSON (what the runner reads back)."""

    def __init__(self, claim: Claim):
        self.claim = claim

    def _repr_mimebundle_(self, include=None, exclude=None) -> dict[str, Any]:
        return {CLAIM_MIME_TYPE: self.claim.to_json(), "text/plain": repr(self)}

    def __repr__(self) -> str:
        return f"{self.claim.id} = {format_value(self.claim.value)} {self.claim.unit} [{self.claim.status}]"


def _glue_claim(claim: Claim, *, glue_value: bool) -> None:
    if not _in_kernel():  # plain Python: there is no notebook to store the outputs in
        return
    from myst_nb import glue

    if glue_value:
        glue(claim.id, claim.value, display=False)
    glue(CLAIM_GLUE_PREFIX + claim.id, _ClaimRecord(claim), display=False)


def claims_from_notebook(nb: Mapping[str, Any], chapter: str) -> list[Claim]:
    """Return the claims recorded in an executed notebook (an ``nbformat`` node or plain dict)."""
    out: list[Claim] = []
    for cell in nb.get("cells", []):
        if cell.get("cell_type") != "code":
            continue
        for output in cell.get("outputs", []):
            name = output.get("metadata", {}).get("scrapbook", {}).get("name", "")
            if not name.startswith(CLAIM_GLUE_PREFIX):
                continue
            data = output.get("data", {})
            payload = next((v for k, v in data.items() if k.endswith(CLAIM_MIME_TYPE)), None)
            if payload is None:
                raise ValueError(f"{chapter}: claim {name!r} has no JSON payload")
            if isinstance(payload, str):
                payload = json.loads(payload)
            payload = dict(payload)
            payload["chapter"] = chapter
            out.append(Claim(**payload))
    return out


def ledger_problems(claims: Iterable[Claim | Mapping[str, Any]]) -> list[str]:
    """Return a list of human-readable problems with a ledger (empty when it is sound).

    Problems: a missing field, an unknown status, a duplicate id, a ``fail`` with no explanation,
    a status that does not follow from the stored value and references.
    """
    problems: list[str] = []
    seen: set[str] = set()
    required = {f for f in Claim.__dataclass_fields__}
    for c in claims:
        d = c.to_json() if isinstance(c, Claim) else dict(c)
        cid = d.get("id", "<no id>")
        missing = required - d.keys()
        if missing:
            problems.append(f"{cid}: missing fields {sorted(missing)}")
            continue
        if cid in seen:
            problems.append(f"{cid}: duplicate id")
        seen.add(cid)
        if d["status"] not in STATUSES:
            problems.append(f"{cid}: unknown status {d['status']!r}")
            continue
        if d["status"] == "fail" and not (d.get("explanation") or "").strip():
            problems.append(f"{cid}: status 'fail' without an explanation of why it does not reproduce")
        if d["status"] == "undecided" and not (d.get("explanation") or "").strip():
            problems.append(f"{cid}: status 'undecided' without an explanation of what would decide it")
        try:
            recomputed = claim_status(
                d["value"], expected=d["expected"], paper_value=d["paper_value"],
                tolerance=d["tolerance"], lower=d["lower"], upper=d["upper"], interval=d["interval"],
                undecided_because=d.get("undecided_because"),
            )
        except (TypeError, ValueError) as exc:
            problems.append(f"{cid}: cannot recompute status ({exc})")
            continue
        if recomputed != d["status"]:
            problems.append(f"{cid}: stored status {d['status']!r} but the value gives {recomputed!r}")
    return problems


def write_ledger(claims: Iterable[Claim], path: str | os.PathLike) -> Path:
    """Write ``{"claims": [...]}`` to ``path`` atomically (temporary file, then rename); return the path."""
    path = Path(path)
    payload = {"claims": [c.to_json() for c in claims]}
    text = json.dumps(payload, indent=2, ensure_ascii=False, allow_nan=False) + "\n"
    atomic_write_text(path, text)
    return path


def load_ledger(path: str | os.PathLike) -> list[Claim]:
    """Return the claims stored in a ledger file."""
    with open(path, encoding="utf-8") as fh:
        payload = json.load(fh)
    if not isinstance(payload, dict) or not isinstance(payload.get("claims"), list):
        raise ValueError(f"{path}: a ledger is a JSON object with a 'claims' list")
    return [Claim(**c) for c in payload["claims"]]


def atomic_write_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` via a temporary file in the same folder and an atomic rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def format_value(value: float | int | None, digits: int = 4) -> str:
    """Return a value as text with ``digits`` significant digits (integers unchanged)."""
    if value is None:
        return "—"
    if isinstance(value, bool) or isinstance(value, int):
        return str(value)
    if value == 0:
        return "0"
    if abs(value) >= 1e-3 and abs(value) < 1e5:
        return f"{value:.{digits}g}"
    return f"{value:.{max(digits - 1, 1)}e}"


def _plain_number(value: Any, what: str) -> float | int:
    if hasattr(value, "item") and callable(value.item):  # numpy / torch scalars
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{what} must be a real number, got {type(value).__name__}")
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"{what} is not finite ({value}); a ledger holds finite numbers only")
    return value


def _jsonable(obj: Any) -> Any:
    if isinstance(obj, Mapping):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, np.generic):
        return obj.item()
    if hasattr(obj, "tolist") and callable(obj.tolist):
        return obj.tolist()
    if isinstance(obj, (str, int, float, bool)) or obj is None:
        return obj
    return str(obj)


# --- Cross-machine tolerances and the ledger comparator ----------------------------------------
#
# A re-execution on another machine (another CPU, kernel dispatch level or thread count) must give
# the same claims with the same statuses and values within each claim's cross-machine tolerance:
#
# - a claim with a closed form (``expected``) keeps its own ``tolerance``: an identity holds to
#   round-off everywhere, and the tolerance already says how close "holds" is;
# - every other claim (a trained result, an estimate) carries ``cross_machine_rtol``, measured from
#   the seed-to-seed spread of its value (book/claim_tolerances.json, written by
#   ``python -m attention_dynamics ledger --measure-spread RUN ...``): a training run on another
#   machine follows the same seed through steps that differ in their last digits, so its result
#   moves by at most the spread that a change of seed produces.

#: Relative tolerance = SPREAD_FACTOR × (sample standard deviation over seeds) / |mean|.
SPREAD_FACTOR = 3.0
#: Smallest relative tolerance (values that do not move with the seed: data files, exact counts).
RTOL_FLOOR = 1e-6
#: Absolute slack below which two values are equal whatever their tolerance (round-off).
ATOL_FLOOR = 1e-12


@dataclass(frozen=True)
class ClaimTolerance:
    """How closely a re-executed claim value must match the committed one: |Δ| ≤ atol + rtol·|v|."""

    rtol: float
    atol: float
    basis: str

    def agree(self, reference: float, other: float) -> bool:
        """Return whether ``other`` reproduces ``reference`` within this tolerance."""
        return abs(other - reference) <= self.atol + self.rtol * abs(reference)


def claim_tolerance(claim: Claim) -> ClaimTolerance | None:
    """Return the cross-machine tolerance of a claim, or None if it declares none."""
    if claim.expected is not None and claim.tolerance is not None:
        return ClaimTolerance(rtol=0.0, atol=max(float(claim.tolerance), ATOL_FLOOR), basis="closed form")
    if claim.cross_machine_rtol is not None:
        return ClaimTolerance(rtol=float(claim.cross_machine_rtol), atol=ATOL_FLOOR, basis="seed spread")
    return None


def load_tolerances(path: str | os.PathLike) -> dict[str, float]:
    """Return ``{claim id: cross-machine relative tolerance}`` from a tolerances file (empty if absent)."""
    path = Path(path)
    if not path.exists():
        return {}
    payload = json.loads(path.read_text(encoding="utf-8"))
    return {cid: float(entry["rtol"]) for cid, entry in payload.get("claims", {}).items()}


def attach_tolerances(claims: Iterable[Claim], tolerances: Mapping[str, float]) -> list[Claim]:
    """Return the claims with ``cross_machine_rtol`` set from ``tolerances`` (closed forms: None)."""
    out = []
    for c in claims:
        rtol = None if c.expected is not None else tolerances.get(c.id)
        out.append(Claim(**{**c.to_json(), "cross_machine_rtol": rtol}))
    return out


def measure_tolerances(
    reference: Iterable[Claim], others: Iterable[Iterable[Claim]], *, factor: float = SPREAD_FACTOR,
    perturbed: Iterable[Iterable[Claim]] = (),
) -> dict[str, dict[str, Any]]:
    """Return each non-closed-form claim's measured spread and its relative tolerance.

    ``reference`` is the committed ledger (the chapters' default seeds); ``others`` are ledgers of
    the same chapters re-executed with other seeds; ``perturbed`` are ledgers re-executed with the
    default seed under another machine's numerics (``perturbed-env``). Two spreads are measured:

    - over seeds: ``factor`` · sample sd / |mean| of the values over the reference and ``others``;
    - across machines: ``factor`` · max |perturbed − reference| / |mean|. This one matters where the
      seeds do not vary a result (a chapter that trains on the paper's fixed seeds, a stored result),
      or where a result moves between discrete levels (a settling step read off checkpoints).

    rtol = max(RTOL_FLOOR, both). A claim needs at least one other value to be measured.
    """
    others = [{c.id: c for c in ledger} for ledger in others]
    perturbed = [{c.id: c for c in ledger} for ledger in perturbed]
    measured: dict[str, dict[str, Any]] = {}
    for c in reference:
        if c.expected is not None:
            continue
        values = [c.value] + [o[c.id].value for o in others if c.id in o]
        moved = [p[c.id].value for p in perturbed if c.id in p]
        if len(values) < 2 and not moved:
            continue
        arr = np.asarray(values + moved, dtype=float)
        scale = max(abs(float(arr.mean())), float(np.abs(arr).max()) * 1e-3, ATOL_FLOOR)
        sd = float(np.asarray(values, dtype=float).std(ddof=1)) if len(values) > 1 else 0.0
        shift = max((abs(float(v) - float(c.value)) for v in moved), default=0.0)
        rtol = max(RTOL_FLOOR, factor * sd / scale, factor * shift / scale)
        entry = {"rtol": float(f"{rtol:.3g}"), "values": values, "sd": sd}
        if moved:
            entry.update(perturbed_values=moved, perturbed_shift=shift)
        measured[c.id] = entry
    return measured


def compare_ledgers(reference: Iterable[Claim], other: Iterable[Claim]) -> list[str]:
    """Return one line per claim of ``other`` that does not reproduce ``reference`` (empty: all do).

    A claim reproduces when it exists in both, has the same status, and its value lies within the
    reference claim's cross-machine tolerance (:func:`claim_tolerance`). A reference claim with no
    tolerance is itself a problem: its value could never be checked.
    """
    ref = {c.id: c for c in reference}
    oth = {c.id: c for c in other}
    problems = [f"{cid}: in the committed ledger, missing from the re-executed one" for cid in ref if cid not in oth]
    problems += [f"{cid}: in the re-executed ledger, not in the committed one" for cid in oth if cid not in ref]
    for cid, r in ref.items():
        o = oth.get(cid)
        if o is None:
            continue
        tol = claim_tolerance(r)
        if tol is None:
            problems.append(f"{cid}: declares no cross-machine tolerance (no closed form, no measured spread)")
            continue
        if o.status != r.status:
            problems.append(f"{cid}: status {r.status} committed, {o.status} re-executed "
                            f"(value {format_value(r.value)} → {format_value(o.value)})")
        elif not tol.agree(r.value, o.value):
            problems.append(f"{cid}: value {format_value(r.value, 6)} committed, {format_value(o.value, 6)} "
                            f"re-executed, beyond its tolerance ({tol.basis}: atol {tol.atol:.2g}, rtol {tol.rtol:.2g})")
    return problems


def margin_problems(claims: Iterable[Claim]) -> list[str]:
    """Return the claims whose status could flip within their cross-machine tolerance.

    Such a claim is stated too close to its threshold: a re-execution elsewhere may land on the
    other side. Closed-form claims are checked with their own tolerance around the expected value.
    """
    problems = []
    for c in claims:
        tol = claim_tolerance(c)
        # An identity's tolerance is its threshold: its status is checked as it stands.
        if tol is None or c.status == "new" or c.expected is not None:
            continue
        slack = tol.atol + tol.rtol * abs(c.value)
        statuses = {
            claim_status(v, paper_value=c.paper_value, tolerance=c.tolerance, lower=c.lower, upper=c.upper,
                         undecided_because=c.undecided_because,
                         interval=None if c.interval is None else [end + (v - c.value) for end in c.interval])
            for v in (c.value - slack, c.value, c.value + slack)
        }
        if len(statuses) > 1:
            problems.append(f"{c.id}: value {format_value(c.value)} ± {format_value(slack)} "
                            f"(rtol {tol.rtol:.2g}) straddles its threshold; state it as a mean over seeds "
                            "with an interval, or against the paper's own threshold")
    return problems
