"""The verdict rule: how the statuses of a paper claim's deciding ledger claims become its verdict.

A paper claim (:class:`PaperClaim`) is decided by one group of ledger claims (``evidence``), by several named
readings of what it measures (``definitions``: disagreement gives "depends on the definition",
:func:`combine_definitions`) or by the regimes one prediction is tested in (``parts``: their statuses are
pooled). :func:`verdict_from_statuses` decides one group; :func:`render_caveat` fills a caveat template from the
ledger, so that a caveat stating a number or a direction changes when the ledger does. The rows themselves are
in :mod:`attention_dynamics.ledger.verdicts.rows`; :mod:`attention_dynamics.ledger.verdicts` assesses them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Iterable, Mapping

from ..claims import format_value

__all__ = ["VERDICTS", "READER_LABELS", "reader_label", "STATUS_READER_LABELS", "status_label", "routing_gate", "Definition", "PaperClaim", "Verdict", "verdict_from_statuses", "combine_definitions",
           "render_caveat", "render_parts", "caveat_claim_ids"]

#: The verdicts, from best to worst. "not tested here": the task that would decide the claim is solved as well with
#: its routing removed (the same model with uniform attention), so it cannot test a claim about what routing does.
VERDICTS = ("reproduces", "reproduces where decided", "partly", "depends on the definition",
            "not decided at this scale", "not tested here", "does not reproduce where decided", "does not reproduce")

#: What a reader sees for each verdict: the fine-grained rule stays on the verdict page's rule section and the ledger.
READER_LABELS = {"reproduces": "holds", "reproduces where decided": "holds", "partly": "holds in part",
                 "depends on the definition": "holds in part", "not decided at this scale": "open at this scale",
                 "not tested here": "not tested here", "does not reproduce where decided": "does not hold",
                 "does not reproduce": "does not hold"}


#: What a reader sees for the status of one number of the ledger (the popover beside a glued number says it).
STATUS_READER_LABELS = {"pass": "holds", "fail": "does not hold", "undecided": "open at this scale",
                        "new": "the book's own number"}


def status_label(status: str) -> str:
    """Return the reader's words for one ledger number's status: holds, does not hold, open at this scale, the book's
    own number."""
    if status not in STATUS_READER_LABELS:
        raise ValueError(f"unknown claim status {status!r}")
    return STATUS_READER_LABELS[status]


def reader_label(verdict: str) -> str:
    """Return the reader's label of a verdict: holds, holds in part, does not hold, open at this scale, not tested
    here."""
    if verdict not in READER_LABELS:
        raise ValueError(f"unknown verdict {verdict!r}")
    return READER_LABELS[verdict]


@dataclass(frozen=True)
class Definition:
    """One reading of a paper claim (or one regime it is tested in): a name, what it measures, its deciding claims.

    ``requires_routing``: for a claim about what routing does, the ledger claims that say whether the task it is
    read on needs routing at all (:mod:`~attention_dynamics.diagnostics.routing_need`: ``pass`` = it does); where one
    of them fails, this reading's verdict is "not tested here".
    """

    name: str
    description: str
    evidence: tuple[str, ...]
    requires_routing: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.evidence:
            raise ValueError(f"definition {self.name!r} needs at least one deciding ledger claim")


@dataclass(frozen=True)
class PaperClaim:
    """One claim of the paper: what it says, where the book tests it, which ledger claims decide it.

    ``section``: ``(chapter docname, section anchor, section title)``. Exactly one of ``evidence`` (one group),
    ``definitions`` (alternative readings: disagreement gives "depends on the definition") or ``parts`` (regimes
    of one prediction: their statuses are pooled) holds the deciding claims. ``budget_limited``: the book's
    account of why its failing evidence is a matter of training budget, not a finding (a plateau or a longer run
    would be needed to call it a failure); the failures then count as undecided, except those of ``findings``:
    deciding claims measured at a plateau or on a run at least four times the chapter's, whose failure is a finding
    even in a budget-limited row. ``caveat``: what a reader must
    know to read the verdict, a template whose ``{claim.id:format}`` fields :func:`render_caveat` fills.
    ``reason``: the verdict in one short sentence for a reader (what the book finds and why it reads as it does), a
    template filled the same way; the verdict page leads with it, and folds the caveat and the rule's wording away.
    """

    id: str
    statement: str
    paper_value: str
    section: tuple[str, str, str]
    evidence: tuple[str, ...] = ()
    context: tuple[str, ...] = ()
    budget_limited: str | None = None
    caveat: str | None = None
    definitions: tuple[Definition, ...] = ()
    parts: tuple[Definition, ...] = ()
    findings: tuple[str, ...] = ()
    requires_routing: tuple[str, ...] = ()
    reason: str | None = None

    def __post_init__(self) -> None:
        if self.reason is not None and (not self.reason.strip() or "\n" in self.reason):
            raise ValueError(f"paper claim {self.id!r}: a reason is one non-empty sentence on one line")
        if self.requires_routing and (self.definitions or self.parts):
            raise ValueError(f"paper claim {self.id!r}: with definitions or parts, give requires_routing per group")
        given = [name for name in ("evidence", "definitions", "parts") if getattr(self, name)]
        if len(given) != 1:
            raise ValueError(f"paper claim {self.id!r}: give exactly one of evidence, definitions or parts, got {given}")
        if not set(self.findings) <= set(self.deciding):
            raise ValueError(f"paper claim {self.id!r}: findings must be deciding claims: "
                             f"{sorted(set(self.findings) - set(self.deciding))}")
        names = [g.name for g in (*self.definitions, *self.parts)]
        if not all(names) or len(set(names)) != len(names):
            raise ValueError(f"paper claim {self.id!r}: definitions and parts need distinct, non-empty names")

    @property
    def groups(self) -> tuple[Definition, ...]:
        """Return the named groups of deciding claims (one unnamed group for plain ``evidence``)."""
        return self.definitions or self.parts or (Definition("", "", self.evidence, self.requires_routing),)

    @property
    def routing_gates(self) -> tuple[str, ...]:
        """Return every ledger claim that says whether a group's task needs routing, in order, without repeats."""
        return tuple(dict.fromkeys(cid for g in self.groups for cid in g.requires_routing))

    @property
    def deciding(self) -> tuple[str, ...]:
        """Return every deciding ledger claim id, in order, without repeats."""
        return tuple(dict.fromkeys(cid for g in self.groups for cid in g.evidence))


@dataclass(frozen=True)
class Verdict:
    """The verdict on one :class:`PaperClaim`, with the statuses it was decided from.

    ``by_group``: definition or part name → its own verdict (empty for plain evidence); ``summary``: the verdict
    in words, naming what is decided and what is not; ``caveat``: the claim's caveat filled from the ledger;
    ``reason``: the claim's reason filled from the ledger (None when the row gives none).
    """

    claim: PaperClaim
    verdict: str
    statuses: Mapping[str, str] = field(default_factory=dict)
    by_group: Mapping[str, str] = field(default_factory=dict)
    summary: str = ""
    caveat: str | None = None
    undecided: tuple[str, ...] = ()
    reason: str | None = None

    @property
    def label(self) -> str:
        """Return the reader's label of the verdict (:data:`READER_LABELS`)."""
        return reader_label(self.verdict)

    def lines(self) -> list[str]:
        """Return what the verdict page shows under the verdict: each definition's or part's verdict, or the
        claims not decided at this scale when the rest is decided."""
        if self.by_group:
            return [f"{name}: {verdict}" for name, verdict in self.by_group.items()]
        if self.verdict in ("reproduces where decided", "does not reproduce where decided"):
            return [f"not decided at this scale: {', '.join(self.undecided)}"]
        return []

    def readings_text(self) -> str:
        """Return the definitions (or parts) grouped by their verdict, for prose: "does not reproduce (A), reproduces
        (B; C)" (worst first), or the verdict's own lines when there are no groups."""
        if not self.by_group:
            return "; ".join(self.lines())
        grouped: dict[str, list[str]] = {}
        for name, verdict in self.by_group.items():
            grouped.setdefault(verdict, []).append(name)
        order = sorted(grouped, key=lambda v: -VERDICTS.index(v))
        return ", ".join(f"{v} ({'; '.join(grouped[v])})" for v in order)

    def decided_by(self) -> list[str]:
        """Return the deciding ledger claims and their statuses, grouped by definition or part."""
        out = []
        for g in self.claim.groups:
            listed = ", ".join(f"{cid}: {self.statuses[cid]}" for cid in g.evidence)
            out.append(f"{g.name} — {listed}" if g.name else listed)
        return out


def _kinds(statuses: Iterable[str], budget_limited: bool) -> list[str]:
    kinds = []
    for status in statuses:
        if status not in ("pass", "fail", "undecided", "new"):
            raise ValueError(f"unknown claim status {status!r}")
        if status == "new":
            continue
        kinds.append("undecided" if status == "fail" and budget_limited else status)
    return kinds


def verdict_from_statuses(statuses: Iterable[str], *, budget_limited: bool = False) -> str:
    """Return the verdict that the statuses of one group of deciding ledger claims give.

    All pass: "reproduces"; all fail: "does not reproduce"; all undecided: "not decided at this scale"; pass
    and fail (with or without undecided): "partly"; pass and undecided only: "reproduces where decided"; fail and
    undecided only: "does not reproduce where decided". With ``budget_limited`` a failure counts as undecided
    (the book cannot call it a finding at its training budget). ``new`` statuses decide nothing; at least one
    deciding status is needed.
    """
    found = set(_kinds(statuses, budget_limited))
    if not found:
        raise ValueError("a verdict needs at least one deciding claim (pass, fail or undecided)")
    if found == {"pass"}:
        return "reproduces"
    if found == {"fail"}:
        return "does not reproduce"
    if found == {"undecided"}:
        return "not decided at this scale"
    if found == {"pass", "undecided"}:
        return "reproduces where decided"
    if found == {"fail", "undecided"}:
        return "does not reproduce where decided"
    return "partly"


#: What each verdict decides: the directions it contains (undecided parts add none).
_DIRECTIONS = {"not tested here": set(), "reproduces": {"pass"}, "reproduces where decided": {"pass"},
               "partly": {"pass", "fail"},
               "not decided at this scale": set(), "does not reproduce where decided": {"fail"},
               "does not reproduce": {"fail"}, "depends on the definition": {"pass", "fail"}}


def routing_gate(statuses: Iterable[str]) -> str | None:
    """Return "not tested here" if a routing-need claim fails (the task does not need routing), "not decided at this
    scale" if one is undecided, and None when every one passes (the task needs routing: its verdict stands)."""
    found = set(statuses)
    if "fail" in found:
        return "not tested here"
    if "undecided" in found:
        return "not decided at this scale"
    return None


def combine_definitions(verdicts: Iterable[str]) -> str:
    """Return the verdict of a claim decided under several definitions, from each definition's verdict.

    Definitions that decide something must decide the same thing (the same set of directions, pass and/or
    fail), else the verdict is "depends on the definition". When they agree: their common verdict if all are
    equal, else the agreed direction "where decided" (some definitions decide nothing at this scale) or
    "partly" (every deciding definition is mixed).
    """
    verdicts = list(verdicts)
    if not verdicts:
        raise ValueError("need at least one definition's verdict")
    if set(verdicts) == {"not tested here"}:
        return "not tested here"
    verdicts = [v for v in verdicts if v != "not tested here"]  # readings on tasks that do not test the claim
    unknown = set(verdicts) - set(_DIRECTIONS)
    if unknown:
        raise ValueError(f"unknown verdicts {sorted(unknown)}")
    decided = [frozenset(_DIRECTIONS[v]) for v in verdicts if _DIRECTIONS[v]]
    if not decided:
        return "not tested here" if set(verdicts) == {"not tested here"} else "not decided at this scale"
    if len(set(decided)) > 1 or "depends on the definition" in verdicts:
        return "depends on the definition"
    if len(set(verdicts)) == 1:
        return verdicts[0]
    agreed = decided[0]
    if agreed == {"pass"}:
        return "reproduces where decided"
    if agreed == {"fail"}:
        return "does not reproduce where decided"
    return "partly"


# ``{claim.id}``, ``{claim.id:.2f}``, ``{claim.id@low:.0%}`` (an interval end), ``{claim.id?if pass|if fail|if undecided}``
_FIELD = re.compile(r"\{(?P<id>[a-z][a-z0-9_]*(?:\.[a-z0-9_]+)+)(?:@(?P<end>low|high))?"
                    r"(?::(?P<spec>[^}?]*))?(?:\?(?P<choices>[^}]*))?\}")


def caveat_claim_ids(template: str | None) -> list[str]:
    """Return the ledger claim ids a caveat template reads, in order."""
    return list(dict.fromkeys(m["id"] for m in _FIELD.finditer(template or "")))


def render_caveat(template: str | None, ledger: Mapping[str, Mapping[str, object]]) -> str | None:
    """Return a caveat template filled from the ledger (claim id → the claim's JSON dict).

    ``{id}`` is the claim's value (four significant digits), ``{id:spec}`` the value formatted with ``spec``,
    ``{id@low:spec}`` / ``{id@high:spec}`` an end of its interval, ``{id?a|b|c}`` text chosen by its status
    (a: pass, b: fail, c: undecided). A claim missing from the ledger raises ``KeyError``.
    """
    if template is None:
        return None
    return _FIELD.sub(lambda m: _fill(m, ledger), template)


def _fill(m: re.Match, ledger: Mapping[str, Mapping[str, object]]) -> str:
    """Return the text of one template field (see :func:`render_caveat`)."""
    claim = ledger[m["id"]]
    if m["choices"] is not None:
        choices = m["choices"].split("|")
        if len(choices) != 3:
            raise ValueError(f"{m.group(0)!r}: give three texts, for pass, fail and undecided")
        status = claim["status"]
        if status not in ("pass", "fail", "undecided"):
            raise ValueError(f"{m['id']} is {status!r}: only a decided or undecided claim chooses a text")
        return choices[("pass", "fail", "undecided").index(status)]
    value = claim["value"] if m["end"] is None else claim["interval"][0 if m["end"] == "low" else 1]
    return format(value, m["spec"]) if m["spec"] else format_value(value)


def render_parts(template: str, ledger: Mapping[str, Mapping[str, object]]) -> list[tuple[str, str | None]]:
    """Return a template filled from the ledger as pieces ``(text, claim id)``: the id of the claim whose number a
    piece states (a ``{id}``, ``{id:spec}`` or ``{id@low:spec}`` field), None for the words between (and for a text
    chosen by status). ``"".join`` of the texts is :func:`render_caveat`'s result; a page links each number to its
    claim."""
    parts: list[tuple[str, str | None]] = []
    at = 0
    for m in _FIELD.finditer(template):
        if m.start() > at:
            parts.append((template[at:m.start()], None))
        parts.append((_fill(m, ledger), m["id"] if m["choices"] is None else None))
        at = m.end()
    if at < len(template):
        parts.append((template[at:], None))
    merged: list[tuple[str, str | None]] = []
    for text, cid in parts:  # words next to words (a chosen text) read as one piece
        if merged and cid is None and merged[-1][1] is None:
            merged[-1] = (merged[-1][0] + text, None)
        else:
            merged.append((text, cid))
    return merged
