"""The paper's claims, one by one, and what the book's ledger says about each.

The claims ledger holds every *number* the book states; a reader wants the verdict on each *claim of the
paper*. :data:`PAPER_CLAIMS` lists those claims in the paper's order, each with its statement, the paper's
own value, the section of the book that tests it, and the ledger claims that decide it or only describe it
(``context``). :func:`assess` turns the statuses of the deciding claims into a verdict by one rule, so the
verdict page (``book/verdicts.md``) is generated from the ledger and changes when the ledger does.

A claim is decided in one of three ways:

- by its ``evidence``: one group of ledger claims, decided by :func:`verdict_from_statuses`;
- by ``definitions``: several reasonable readings of what the claim measures (settling by the parameter
  path or by the function, under SGD or Adam, …), each a group of ledger claims decided separately. When the
  readings agree the row takes their common verdict; when one reading reproduces and another does not, the
  verdict is **"depends on the definition"** (:func:`combine_definitions`), and the page shows each reading's
  verdict;
- by ``parts``: the regimes in which one prediction is tested (free activations early, after routing forms,
  weight steps); the row's verdict pools their statuses and the page names the verdict of each part.

A pass beside a measurement that cannot decide is not "partly": the verdict says which part is decided
("reproduces where decided; not decided at this scale: …"). Caveats that state a number or a direction are
templates filled from the ledger (:func:`render_caveat`), so they change when the ledger does; so is a row's
``reason``, the one sentence the verdict page leads with.

The book's own cross-checks (results that are not claims of the paper, such as the Xu–Jordan bridge) are
listed in :data:`CROSS_CHECKS` and rendered on the same page. Each row is defined once, in
:mod:`attention_dynamics.ledger.verdicts.rows`, and no two rows share an id.

The rule and its data types are in :mod:`attention_dynamics.ledger.verdicts.rule`, the rows in
:mod:`attention_dynamics.ledger.verdicts.rows`; this module puts them together and assesses them against a ledger.
"""

from __future__ import annotations

import dataclasses
from typing import Iterable, Mapping, Sequence

from .rows import CROSS_CHECKS, PAPER_CLAIMS
from .rule import (
    READER_LABELS,
    STATUS_READER_LABELS,
    VERDICTS,
    Definition,
    PaperClaim,
    Verdict,
    _kinds,
    caveat_claim_ids,
    combine_definitions,
    routing_gate,
    render_caveat,
    render_parts,
    reader_label,
    status_label,
    verdict_from_statuses,
)

__all__ = ["VERDICTS", "READER_LABELS", "reader_label", "STATUS_READER_LABELS", "status_label", "Definition", "PaperClaim", "Verdict", "PAPER_CLAIMS", "CROSS_CHECKS", "verdict_from_statuses",
           "combine_definitions", "render_caveat", "render_parts", "caveat_claim_ids", "assess", "verdict_of", "problems"]


def _ledger_index(ledger: Iterable[object]) -> dict[str, dict]:
    out = {}
    for c in ledger:
        d = c if isinstance(c, Mapping) else c.to_json()
        out[d["id"]] = d
    return out


def _summary(verdict: str, groups: Sequence[tuple[str, str]], undecided: Sequence[str], *, by_definition: bool) -> str:
    """The verdict in words: each definition's (or part's) verdict, or which claims are not decided."""
    if groups and any(name for name, _ in groups):
        joined = "; ".join(f"{name}: {v}" for name, v in groups)
        if by_definition and len({v for _, v in groups}) == 1:
            return f"{verdict} under every definition ({', '.join(name for name, _ in groups)})"
        return f"{verdict} — {joined}"
    if verdict in ("reproduces where decided", "does not reproduce where decided"):
        return f"{verdict}; not decided at this scale: {', '.join(undecided)}"
    return verdict


def assess(ledger: Iterable[object], paper_claims: Sequence[PaperClaim] | None = None) -> list[Verdict]:
    """Return the verdict on every paper claim (default :data:`PAPER_CLAIMS`) from a ledger (Claim objects or their
    JSON dicts)."""
    index = _ledger_index(ledger)
    verdicts = []
    for pc in PAPER_CLAIMS if paper_claims is None else paper_claims:
        missing = [cid for cid in pc.deciding if cid not in index]
        if missing:
            raise KeyError(f"paper claim {pc.id!r}: the ledger has no claim {', '.join(missing)}")
        budget = pc.budget_limited is not None
        statuses = {cid: index[cid]["status"] for cid in pc.deciding}
        # in a budget-limited row a failure counts as undecided, unless it is a finding (a plateau, a 4x longer run)
        counted = {cid: "undecided" if budget and st == "fail" and cid not in pc.findings else st
                   for cid, st in statuses.items()}
        missing = [cid for cid in pc.routing_gates if cid not in index]
        if missing:
            raise KeyError(f"paper claim {pc.id!r}: the ledger has no routing-need claim {', '.join(missing)}")
        groups, tested = [], []
        for g in pc.groups:
            group_statuses = [counted[cid] for cid in g.evidence]
            gate = routing_gate(index[cid]["status"] for cid in g.requires_routing)
            if gate is not None:
                groups.append((g.name, gate))
                continue
            tested.extend(g.evidence)
            groups.append((g.name, verdict_from_statuses(group_statuses)
                           if _kinds(group_statuses, False) else "not decided at this scale"))
        if pc.definitions:
            verdict = combine_definitions(v for _, v in groups)
        elif not tested:  # every part (or the one group) sits on a task that does not test it
            verdict = combine_definitions(v for _, v in groups)
        else:
            verdict = verdict_from_statuses(counted[cid] for cid in dict.fromkeys(tested))
        undecided = [cid for cid, st in counted.items() if st == "undecided"]
        named = [(n, v) for n, v in groups if n]
        verdicts.append(Verdict(pc, verdict, statuses, dict(named),
                                _summary(verdict, named, undecided, by_definition=bool(pc.definitions)),
                                render_caveat(pc.caveat, index), tuple(undecided), render_caveat(pc.reason, index)))
    return verdicts


def verdict_of(row_id: str, ledger: Iterable[object]) -> Verdict:
    """Return the verdict on one paper claim (or cross-check) from the claims at hand, e.g. those a chapter has just
    recorded, so that its prose can state the verdict the page will show. Its caveat is filled only when every
    claim it reads is at hand (else ``None``)."""
    rows = {pc.id: pc for pc in (*PAPER_CLAIMS, *CROSS_CHECKS)}
    if row_id not in rows:
        raise KeyError(f"no paper claim {row_id!r}")
    pc = rows[row_id]
    index = _ledger_index(ledger)
    pc = _at_hand(pc, set(index))
    if not set(caveat_claim_ids(pc.caveat)) <= set(index):
        pc = dataclasses.replace(pc, caveat=None)
    if not set(caveat_claim_ids(pc.reason)) <= set(index):
        pc = dataclasses.replace(pc, reason=None)
    return assess(index.values(), [pc])[0]


def _at_hand(pc: PaperClaim, ids: set[str]) -> PaperClaim:
    """Return ``pc`` restricted to what a chapter has at hand: definitions or parts whose claims another chapter
    records are left out, and a routing gate recorded elsewhere (chapter 9) is not applied, so that a chapter states
    the readings it measured. The verdict page applies every group and gate."""
    def gate(g: Definition) -> Definition:
        return dataclasses.replace(g, requires_routing=tuple(c for c in g.requires_routing if c in ids))

    if pc.definitions or pc.parts:
        kept = tuple(gate(g) for g in pc.groups if set(g.evidence) <= ids)
        if not kept or len(kept) == len(pc.groups) and all(k == g for k, g in zip(kept, pc.groups)):
            return pc
        field = "definitions" if pc.definitions else "parts"
        return dataclasses.replace(pc, **{field: kept}, findings=tuple(c for c in pc.findings if c in ids))
    return dataclasses.replace(pc, requires_routing=tuple(c for c in pc.requires_routing if c in ids))


def problems(ledger: Iterable[object], paper_claims: Sequence[PaperClaim] | None = None) -> list[str]:
    """Return what is wrong with the paper-claim list (default: :data:`PAPER_CLAIMS` and :data:`CROSS_CHECKS`)
    against a ledger (empty when sound).

    Unknown evidence, context, caveat or reason ids, duplicate paper-claim ids, a paper claim (or one of its definitions
    or parts) whose evidence decides nothing (only ``new`` claims), a caveat that cannot be filled.
    """
    rows = (*PAPER_CLAIMS, *CROSS_CHECKS) if paper_claims is None else tuple(paper_claims)
    index = _ledger_index(ledger)
    ids = set()
    out = []
    for pc in rows:
        if pc.id in ids:
            out.append(f"{pc.id}: duplicate paper-claim id")
        ids.add(pc.id)
        for cid in (*pc.deciding, *pc.routing_gates, *pc.context, *caveat_claim_ids(pc.caveat),
                    *caveat_claim_ids(pc.reason)):
            if cid not in index:
                out.append(f"{pc.id}: {cid} is not in the ledger")
        for g in pc.groups:
            if all(index.get(cid, {}).get("status") in (None, "new") for cid in g.evidence):
                where = f" ({g.name})" if g.name else ""
                out.append(f"{pc.id}{where}: no deciding evidence (every evidence claim is 'new' or missing)")
        if not any(p.startswith(f"{pc.id}: ") and "not in the ledger" in p for p in out):
            for name in ("caveat", "reason"):
                try:
                    render_caveat(getattr(pc, name), index)
                except (KeyError, ValueError, TypeError) as err:
                    out.append(f"{pc.id}: {name} cannot be filled ({err})")
    return out
