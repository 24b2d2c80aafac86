"""A map of the book: its parts and chapters, each chapter with the paper's claims it decides.

Which claims a chapter decides is read from the verdict rows
(:data:`attention_dynamics.ledger.verdicts.rows.PAPER_CLAIMS`, each row's ``section`` names its chapter), so the map follows the rows: a claim moved to another chapter moves
on the map when the diagrams are regenerated (a test fails until they are).
"""

from __future__ import annotations

from ...core.plotting import PALETTE
from ...ledger.verdicts import PAPER_CLAIMS
from .kit import Canvas, Theme, contrast_ratio, hex_colour, mix, wrap

__all__ = ["book_map", "CHAPTERS", "PARTS", "CLAIM_LABELS", "chapter_claims"]

#: The book's parts: numeral and title.
PARTS = {"I": "The mechanics", "II": "The dynamics", "III": "Experiments", "IV": "Practice",
         "V": "Where routing is needed"}
#: The chapters: number, notebook stem, short title, part.
CHAPTERS = (
    (1, "01-setup-and-notation", "Setup and notation", "I"),
    (2, "02-gradient-laws", "The gradient laws", "I"),
    (3, "03-routing-content-feedback", "Routing–content feedback", "II"),
    (4, "04-two-timescale-em", "Two-timescale EM", "II"),
    (5, "05-sticky-markov-chain", "The sticky Markov chain", "III"),
    (6, "06-bayesian-manifolds", "Bayesian manifolds in wind tunnels", "III"),
    (7, "07-architectures", "Content-based routing across architectures", "III"),
    (8, "08-diagnostics", "Diagnostics", "IV"),
    (9, "09-binding-tunnel", "A tunnel that needs routing", "V"),
)
#: What a chapter that decides no claim row of its own does.
_NOTES = {
    1: "the head and every symbol, each checked against an independent computation",
    9: "the paper's dynamic claims on the binding tunnel; which tasks need routing",
}
#: Short labels of the paper's claims, for the map (a claim without one is named by its statement).
CLAIM_LABELS = {
    "routing_law": "the routing law",
    "routing_law_properties": "routing freezes first",
    "value_law": "the value law",
    "query_key_laws": "the query and key laws",
    "feedback_first_order": "positive feedback, to first order",
    "frame_precision_toy": "routing settles before the values",
    "frame_precision_wind_tunnel": "frame before precision",
    "sticky_speedup": "the 2.3× speed-up",
    "sticky_m_step_on_values": "the speed-up as an M-step",
    "sticky_plateau": "the plateau near ln 8",
    "sticky_trajectories": "value trajectories",
    "bijection_calibration": "calibration",
    "hmm_filtering": "HMM filtering",
    "geometry": "the geometry",
    "transformer_primitives": "transformer",
    "mamba_primitives": "Mamba",
    "lstm_primitives": "LSTM",
    "mlp_primitives": "MLP",
    "content_routing": "the routing law beyond attention",
    "diagnostics": "the compatibility and advantage diagnostics",
}
#: How the labels of a chapter's claims are joined into a line (chapter 7's primitives rows read as one list).
_PRIMITIVES = ("transformer_primitives", "mamba_primitives", "lstm_primitives", "mlp_primitives")


def _label(claim) -> str:
    if claim.id in CLAIM_LABELS:
        return CLAIM_LABELS[claim.id]
    return claim.statement.split(":", 1)[0].strip().rstrip(".")


def chapter_claims() -> dict[str, list[str]]:
    """Return ``{notebook stem: [claim label, …]}``: the paper's claims each chapter decides, in the paper's order."""
    found: dict[str, list[str]] = {}
    for claim in PAPER_CLAIMS:
        stem = claim.section[0].split("/")[-1]
        found.setdefault(stem, []).append(claim.id)
    out = {}
    for stem, ids in found.items():
        labels = [_label(next(c for c in PAPER_CLAIMS if c.id == i)) for i in ids if i not in _PRIMITIVES]
        primitives = [CLAIM_LABELS.get(i, i) for i in ids if i in _PRIMITIVES]
        if primitives:
            labels.insert(0, "primitives: " + ", ".join(primitives))
        out[stem] = labels
    return out


def book_map(theme: Theme) -> Canvas:
    """The book's parts and chapters down a spine, each chapter with the claims of the paper it decides."""
    t = theme
    claims = chapter_claims()
    part_colours = [hex_colour(PALETTE[i]) for i in (0, 1, 2, 4, 3)]
    if t.name == "dark":
        part_colours[0] = hex_colour(PALETTE[9])
    entries = []
    for number, stem, title, part in CHAPTERS:
        text = "; ".join(claims.get(stem, [])) or _NOTES.get(number, "")
        entries.append((number, stem, title, part, text))
    desc = "The book's chapters down a line, grouped in its parts, each with the claims of the paper it decides. "
    desc += " ".join((f"Part {p}, {PARTS[p]}: " if k == 0 or entries[k - 1][3] != p else "")
                     + f"chapter {n}, {title}: {text}." for k, (n, _, title, p, text) in enumerate(entries))
    c = Canvas(400, 1000, theme, name="book-map", title="A map of the book: its parts, chapters and the claims "
               "each decides", desc=desc)
    spine_x, text_x = 26, 50
    y = c.lines(12, 20, ["Each chapter with the claims of the paper it decides"], size=13.5, anchor="start",
                colour=t.muted, italic=True) - 8
    previous_part = None
    for number, stem, title, part, text in entries:
        colour = part_colours[list(PARTS).index(part)]
        if part != previous_part:
            y += 18 if previous_part else 0
            c.rect(4, y, 392, 28, fill=mix(colour, t.page, 0.85), stroke=None, radius=5)
            c.text(12, y + 19, f"Part {part} · {PARTS[part]}", size=14.5, weight="bold", anchor="start",
                   colour=t.text)
            y += 28
            previous_part = part
        top = y + 8
        title_rows = wrap(title, 15, 396 - text_x - 4, weight="bold")
        claim_rows = wrap(text, 13.5, 396 - text_x - 4)
        row_y = top + 16
        row_y = c.lines(text_x, row_y, title_rows, size=15, weight="bold", anchor="start", leading=1.25)
        row_y = c.lines(text_x, row_y - 2, claim_rows, size=13.5, anchor="start", colour=t.muted,
                        italic=number in _NOTES and stem not in claims)
        c.line([(spine_x, top - 8), (spine_x, row_y - 4)], stroke=colour, width=4)
        c.circle(spine_x, top + 11, 13, fill=colour)
        ink = max(("#ffffff", "#14181e"), key=lambda ink: contrast_ratio(ink, colour))
        c.text(spine_x, top + 16, str(number), size=14, weight="bold", colour=ink)
        y = row_y - 6
    c.height = y + 10
    return c
