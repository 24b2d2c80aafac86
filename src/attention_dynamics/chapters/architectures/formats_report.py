"""Chapter 7's claims from the input-format runs (``data/hmm_formats.json``) and from the families at chapter 6's
setting (``data/hmm_ch6_setting.json``).

Ids written out here: ``<tunnel>.kl_bits_<family>_<format>`` and ``<tunnel>.memory_steps_<family>_<format>``
(tunnel ``hmm`` or ``hmm_sticky``, family ``lstm`` or ``transformer``, format ``every_step``, ``first_step`` or
``header``); ``architectures.hmm_kl_bits_<family>_long`` and ``architectures.hmm_memory_steps_<family>_long``.
"""

from __future__ import annotations

from typing import Any, Mapping

from ...diagnostics.memory_ladder import MemoryLadder, seed_interval, verdict_reason
from ...ledger import claims
from ...ledger.memory_claims import memory_claim
from ...models.registry import family_label
from ...science.settling import late_drop
from ...tasks import hmm
from ...tasks.wind_tunnels import FORMAT_TUNNELS, STICKY_HMM_TASK
from . import hmm_ch6_setting, hmm_formats
from .settings import PAPER_I_RESULTS, STICKY_TRANSPORT_FRACTION_OF_BLIND, TRANSPORT_FRACTION_OF_BLIND

__all__ = ["format_kl_claim_id", "format_memory_claim_id", "FORMAT_KL_CLAIM_IDS", "FORMAT_MEMORY_CLAIM_IDS",
           "FORMAT_LABELS", "record_format_claims", "format_verdict", "ch6_setting_kl_claim_id",
           "ch6_setting_memory_claim_id", "CH6_SETTING_KL_CLAIM_IDS", "CH6_SETTING_MEMORY_CLAIM_IDS",
           "record_ch6_setting_claims", "FORMAT_GLUE", "format_finding", "glue_formats", "format_table"]


def format_kl_claim_id(tunnel: str, family: str, input_format: str) -> str:
    """Return the id of the KL claim of ``family`` on ``tunnel`` (``"hmm"`` or ``"hmm_sticky"``) in ``input_format``."""
    return f"{tunnel}.kl_bits_{family}_{input_format}"


def format_memory_claim_id(tunnel: str, family: str, input_format: str) -> str:
    """Return the id of the memory claim of ``family`` on ``tunnel`` in ``input_format``."""
    return f"{tunnel}.memory_steps_{family}_{input_format}"


#: The claims of the format runs' families, written out (a test checks them against :func:`format_kl_claim_id` and
#: :func:`format_memory_claim_id`): [tunnel][family][format] → id.
FORMAT_KL_CLAIM_IDS = {
    "hmm": {
        "lstm": {"every_step": "hmm.kl_bits_lstm_every_step", "first_step": "hmm.kl_bits_lstm_first_step",
                 "header": "hmm.kl_bits_lstm_header"},
        "transformer": {"every_step": "hmm.kl_bits_transformer_every_step",
                        "first_step": "hmm.kl_bits_transformer_first_step",
                        "header": "hmm.kl_bits_transformer_header"},
    },
    STICKY_HMM_TASK: {
        "lstm": {"every_step": "hmm_sticky.kl_bits_lstm_every_step", "first_step": "hmm_sticky.kl_bits_lstm_first_step",
                 "header": "hmm_sticky.kl_bits_lstm_header"},
        "transformer": {"every_step": "hmm_sticky.kl_bits_transformer_every_step",
                        "first_step": "hmm_sticky.kl_bits_transformer_first_step",
                        "header": "hmm_sticky.kl_bits_transformer_header"},
    },
}
FORMAT_MEMORY_CLAIM_IDS = {
    "hmm": {
        "lstm": {"every_step": "hmm.memory_steps_lstm_every_step", "first_step": "hmm.memory_steps_lstm_first_step",
                 "header": "hmm.memory_steps_lstm_header"},
        "transformer": {"every_step": "hmm.memory_steps_transformer_every_step",
                        "first_step": "hmm.memory_steps_transformer_first_step",
                        "header": "hmm.memory_steps_transformer_header"},
    },
    STICKY_HMM_TASK: {
        "lstm": {"every_step": "hmm_sticky.memory_steps_lstm_every_step",
                 "first_step": "hmm_sticky.memory_steps_lstm_first_step",
                 "header": "hmm_sticky.memory_steps_lstm_header"},
        "transformer": {"every_step": "hmm_sticky.memory_steps_transformer_every_step",
                        "first_step": "hmm_sticky.memory_steps_transformer_first_step",
                        "header": "hmm_sticky.memory_steps_transformer_header"},
    },
}
FORMAT_LABELS = {"every_step": "matrices at every step (the book's format)", "first_step": "matrices at t = 0 only",
                 "header": "Paper I's header of probability tokens"}


def _chapter7_threshold(base: str, ladder: MemoryLadder) -> float:
    """Return chapter 7's transport threshold on ``base`` (a fraction of the context-blind level)."""
    fraction = STICKY_TRANSPORT_FRACTION_OF_BLIND if base == STICKY_HMM_TASK else TRANSPORT_FRACTION_OF_BLIND
    return fraction * ladder.context_blind_kl_bits


def record_format_claims(stored: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Record the format claims and return ``{"claims": {id: claim}, "table": rows, "ladders": {tunnel: MemoryLadder}}``.

    ``<tunnel>.kl_bits_<family>_<format>``: the KL to the exact filter, mean over seeds with its 95 % interval,
    bounded by Paper I's transport verdict (the transformer realises it, the LSTM does not) at chapter 7's threshold
    for the tunnel (0.6 × the context-blind level on random HMMs, 0.2 × on sticky ones), so that the rows speak to
    chapter 7's; ``<tunnel>.memory_steps_<family>_<format>``: the memory that KL matches, under the window rule.
    A "does not realise" row is undecided while the transformer in the same format misses its bound; a failing row
    without a longer run is undecided too (:func:`~attention_dynamics.diagnostics.memory_ladder.verdict_reason`); an
    LSTM below the threshold is a fail that no training can undo.
    """
    stored = hmm_formats.HMM_FORMATS.load() if stored is None else stored
    ladders = {b: MemoryLadder.from_json(v) for b, v in stored["ladders"].items()}
    settings = stored["settings"]
    out, rows = {}, {}
    for base in FORMAT_TUNNELS:
        ladder = ladders[base]
        threshold = _chapter7_threshold(base, ladder)
        tunnel_text = ("Paper I's random HMMs" if base == "hmm" else "chapter 7's sticky HMMs") + \
            f" (K = {settings['hmm_length']}, 0.01 grid)"
        for fmt in hmm.INPUT_FORMATS:
            stated = {}
            for family in hmm_formats.FORMAT_FAMILIES:
                longer = stored.get("longer", {}).get(base, {}).get(fmt, {}).get(family)
                runs = longer or stored["runs"].get(base, {}).get(fmt, {}).get(family)
                if runs:
                    stated[family] = (runs, longer is not None)
            control = control_rule = None  # no control run in this format: the control rule cannot apply
            if "transformer" in stated:
                control_values = [r["metrics"]["kl_bits"] for r in stated["transformer"][0].values()]
                control = seed_interval(control_values)["high"] <= threshold
                control_rule = seed_interval(control_values)["high"] <= ladder.rule_level
            for family in stated:
                runs, is_longer = stated[family]
                # on the random HMMs the runs are chapter 6's length, at least 4× chapter 7's grid run: the same rule
                # as the families at chapter 6's setting (a fail there is a finding)
                is_longer = is_longer or (base == "hmm" and next(iter(runs.values()))["steps"]
                                          >= 4 * hmm_ch6_setting.CHAPTER7_GRID_STEPS)
                values = [r["metrics"]["kl_bits"] for r in runs.values()]
                ci = seed_interval(values)
                realises = family == "transformer"
                bounds = {"lower": None, "upper": threshold} if realises else {"lower": threshold, "upper": None}
                status = claims.claim_status(ci["mean"], interval=(ci["low"], ci["high"]), **bounds)
                late = max(late_drop(r["kl_curve_bits"]) for r in stored["runs"][base][fmt][family].values())
                because = verdict_reason(family, status, realises, control_realises=control, longer=is_longer,
                                         late_drop=late, longer_factor=hmm_formats.LONGER_FACTOR)
                if control is None and not realises and status == "pass":
                    because = ("Not decided: the transformer, the positive control, was not trained in this format on "
                               "this tunnel, so nothing shows that a model that does realise transport learns it here.")
                if not realises and status == "pass" and ci["mean"] < ladder.context_blind_kl_bits and not is_longer:
                    because = because or (
                        "Not decided at this scale: the LSTM already uses the past (its KL is below the context-blind "
                        "level) and no longer run was made, so nothing shows that more training would not take it "
                        "below the threshold.")
                steps = next(iter(runs.values()))["steps"]
                params = {"scale": stored["scale"], **settings, "tunnel": base, "input_format": fmt, "family": family,
                          "steps": steps, "n_params": next(iter(runs.values()))["n_params"],
                          "seeds": [int(s) for s in runs], "seeds_kl_bits": values,
                          "interval": "Student-t 95% over seeds", "source": f"data/{hmm_formats.RESULT_FILE}"}
                claim = claims.record(
                    format_kl_claim_id(base, family, fmt), ci["mean"], unit="bits", interval=(ci["low"], ci["high"]),
                    undecided_because=because,
                    explanation=(f"Paper I reports that the {family_label(family)} "
                                 f"{'realises' if realises else 'does not realise'} transport; with "
                                 f"{FORMAT_LABELS[fmt]} ours is {ci['mean'] / ladder.context_blind_kl_bits:.2f} × the "
                                 f"context-blind level after {steps} steps ({ladder.memory_text(ci['mean'])})"),
                    description=(f"{family_label(family)} on {tunnel_text}, {FORMAT_LABELS[fmt]}: KL to the exact "
                                 f"filter, mean over {ci['n']} seeds ({ladder.memory_text(ci['mean'])}; Paper I: "
                                 f"{'realises' if realises else 'does not realise'} transport; bound: chapter 7's "
                                 f"{threshold / ladder.context_blind_kl_bits:.1f} × the context-blind level, "
                                 f"{threshold:.4f} bits)"),
                    params=params, **bounds)
                out[claim.id] = claim
                # the memory claim is decided by the window rule, with its own positive control
                rule_bounds = {"lower": None, "upper": ladder.rule_level} if realises else \
                    {"lower": ladder.rule_level, "upper": None}
                status_rule = claims.claim_status(ci["mean"], interval=(ci["low"], ci["high"]), **rule_bounds)
                because_rule = verdict_reason(family, status_rule, realises, control_realises=control_rule,
                                              longer=is_longer, late_drop=late, longer_factor=hmm_formats.LONGER_FACTOR)
                if control_rule is None and not realises and status_rule == "pass":
                    because_rule = because
                memory = memory_claim(format_memory_claim_id(base, family, fmt), values, ladder,
                                      model=f"{family_label(family)} ({FORMAT_LABELS[fmt]})", realises=realises,
                                      params=params, tunnel_text=tunnel_text, undecided_because=because_rule)
                out[memory.id] = memory
                rows[(base, family_label(family), fmt)] = {
                    "KL (bits), mean": ci["mean"], "95% interval": f"{ci['low']:.4f}–{ci['high']:.4f}",
                    "× context-blind": ci["mean"] / ladder.context_blind_kl_bits,
                    "memory": ladder.memory_text(ci["mean"]), "KL fell over the last 20% by": f"{late:.0%}",
                    "steps": steps, "status": claim.status}
    return {"claims": out, "table": rows, "ladders": ladders}


def format_verdict(recorded: Mapping[str, Any], base: str) -> dict[str, Any]:
    """Return what the format runs on ``base`` decide about the LSTM, from its claims' statuses.

    Per format the LSTM's row: *realises transport* (its claim fails Paper I's "does not realise": a finding), *does
    not* (passes, with the transformer control passing in the same format), or *not decided* (why: the control fails
    in this format, or the budget). The runs show the format as the cause of Paper I's verdict only if the LSTM
    realises transport in the book's format and does not in Paper I's header, with the control passing there.
    Returns ``{"by_format": {format: phrase}, "cause_shown": bool, "text": one sentence, "against_blind": {format:
    where each family's seed interval lies against the context-blind level}}``.
    """
    got = recorded["claims"]
    by_format: dict[str, str] = {}
    status = {}
    for fmt in hmm.INPUT_FORMATS:
        lstm = got[format_kl_claim_id(base, "lstm", fmt)]
        control = got[format_kl_claim_id(base, "transformer", fmt)]
        status[fmt] = lstm.status
        if lstm.status == "fail":
            by_format[fmt] = "the LSTM realises transport, against Paper I's verdict (a finding)"
        elif lstm.status == "pass":
            by_format[fmt] = "the LSTM does not realise transport while the transformer does, as Paper I says"
        elif control.status != "pass":
            by_format[fmt] = "not decided: the transformer, the positive control, misses the bound in this format too"
        else:
            by_format[fmt] = "not decided at this budget"
    blind = recorded["ladders"][base].context_blind_kl_bits
    against_blind = {}
    for fmt in hmm.INPUT_FORMATS:
        places = {}
        for family in hmm_formats.FORMAT_FAMILIES:
            low, high = got[format_kl_claim_id(base, family, fmt)].interval
            label = family_label(family)
            places[f"the {label if label.isupper() else label.lower()}"] = (
                "below" if high < blind else "above" if low > blind else "at")
        one = {"below": "is below the context-blind level (it uses the past)",
               "above": "is above the context-blind level (it has not learned even the context-blind posterior)",
               "at": "is not told apart from the context-blind level (its seeds' interval contains it)"}
        both = {"below": "are both below the context-blind level (both use the past)",
                "above": "are both above the context-blind level (neither has learned even the context-blind "
                         "posterior)"}
        where = next(iter(places.values()))
        if len(set(places.values())) == 1 and where == "at":
            against_blind[fmt] = f"neither {' nor '.join(places)} is told apart from the context-blind level (both " \
                                 f"seed intervals contain it)"
        elif len(set(places.values())) == 1:  # one place for both families: say it once
            against_blind[fmt] = f"{' and '.join(places)} {both[where]}"
        else:
            against_blind[fmt] = " and ".join(f"{who} {one[where]}" for who, where in places.items())
    cause = (status["every_step"] == "fail" and status["header"] == "pass")
    text = "; ".join(f"{FORMAT_LABELS[fmt]}: {phrase}" for fmt, phrase in by_format.items())
    text += (". So the input format is why the LSTM does not realise transport in Paper I" if cause else
             ". So these runs do not show that the input format is why the LSTM does not realise transport in Paper I")
    return {"by_format": by_format, "cause_shown": cause, "text": text, "against_blind": against_blind}


#: The glue names of the format runs' numbers, per tunnel, written out (the prose cites them): the finding row by row
#: (:func:`format_verdict`'s text), where each family stands against the context-blind level in Paper I's header
#: format, the context-blind level (bits) and, in a few words, what the header format shows about the LSTM.
FORMAT_GLUE = {
    "hmm": {"verdict": "architectures.formats_hmm_verdict", "header_vs_blind": "architectures.formats_hmm_header_vs_blind",
            "blind": "architectures.formats_hmm_blind", "finding": "architectures.formats_hmm_finding"},
    STICKY_HMM_TASK: {"verdict": "architectures.formats_hmm_sticky_verdict",
                      "header_vs_blind": "architectures.formats_hmm_sticky_header_vs_blind",
                      "blind": "architectures.formats_hmm_sticky_blind",
                      "finding": "architectures.formats_hmm_sticky_finding"},
}


def format_finding(recorded: Mapping[str, Any], base: str) -> str:
    """Return, in a few of the reader's words, what the LSTM does in Paper I's header format on ``base`` (a clause
    that follows "in Paper I's header format")."""
    got = recorded["claims"]
    lstm = got[format_kl_claim_id(base, "lstm", "header")]
    control = got[format_kl_claim_id(base, "transformer", "header")]
    if lstm.status == "fail":
        return "the LSTM carries the belief there too"
    if lstm.status == "pass":
        return "the LSTM does not carry the belief there, while the transformer does"
    if control.status != "pass":
        return ("whether the LSTM carries the belief there is open at this scale, since the transformer, the control, "
                "misses its bound there too")
    return "whether the LSTM carries the belief there is open at this scale"


def glue_formats(recorded: Mapping[str, Any]) -> None:
    """Glue the format runs' numbers of both tunnels (:data:`FORMAT_GLUE`), and what the header format shows on both
    (``architectures.formats_finding``)."""
    findings = {}
    for base, names in FORMAT_GLUE.items():
        verdict = format_verdict(recorded, base)
        claims.glue(names["verdict"], verdict["text"])
        claims.glue(names["header_vs_blind"], verdict["against_blind"]["header"])
        claims.glue(names["blind"], recorded["ladders"][base].context_blind_kl_bits)
        findings[base] = format_finding(recorded, base)
        claims.glue(names["finding"], findings[base])
    random, sticky = findings["hmm"], findings[STICKY_HMM_TASK]
    claims.glue("architectures.formats_finding", f"on both kinds of HMM, {random}" if random == sticky else
                f"on Paper I's random HMMs {random}; on the sticky ones {sticky}")


def format_table(recorded: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Return the format runs' rows with the reader's labels: tunnel, model and input format."""
    tunnels = {"hmm": "random HMMs", STICKY_HMM_TASK: "sticky HMMs"}
    return {f"{tunnels[base]}: {label}, {FORMAT_LABELS[fmt]}": row
            for (base, label, fmt), row in recorded["table"].items()}


def ch6_setting_kl_claim_id(family: str) -> str:
    """Return the id of the KL claim of the registered ``family`` at chapter 6's setting."""
    return f"architectures.hmm_kl_bits_{family}_long"


def ch6_setting_memory_claim_id(family: str) -> str:
    """Return the id of the claim of the memory the registered ``family`` matches at chapter 6's setting."""
    return f"architectures.hmm_memory_steps_{family}_long"


#: The claims of the book's families, written out (a test checks them against :func:`ch6_setting_kl_claim_id` and
#: :func:`ch6_setting_memory_claim_id`): each family's KL at chapter 6's setting and the memory it matches.
CH6_SETTING_KL_CLAIM_IDS = {
    "transformer": "architectures.hmm_kl_bits_transformer_long", "mamba": "architectures.hmm_kl_bits_mamba_long",
    "lstm": "architectures.hmm_kl_bits_lstm_long", "mlp_window": "architectures.hmm_kl_bits_mlp_window_long",
    "mlp_blind": "architectures.hmm_kl_bits_mlp_blind_long",
}
CH6_SETTING_MEMORY_CLAIM_IDS = {
    "transformer": "architectures.hmm_memory_steps_transformer_long",
    "mamba": "architectures.hmm_memory_steps_mamba_long", "lstm": "architectures.hmm_memory_steps_lstm_long",
    "mlp_window": "architectures.hmm_memory_steps_mlp_window_long",
    "mlp_blind": "architectures.hmm_memory_steps_mlp_blind_long",
}


def record_ch6_setting_claims(stored: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Record the random-HMM rows at chapter 6's setting; return ``{"claims", "table", "ladder"}``.

    ``architectures.hmm_kl_bits_<family>_long``: the KL to the exact filter, mean over seeds with its 95 %
    interval, bounded by Paper I's transport verdict at chapter 7's threshold for this tunnel (0.6 × the
    context-blind level: *uses the past*); every run is at least 4× chapter 7's grid run, so a fail is a finding;
    a "does not realise" row is undecided only while the transformer misses its bound.
    ``architectures.hmm_memory_steps_<family>_long``: the memory each KL matches, under the window rule (more than
    the rule window's steps for transport), with the same positive-control rule.
    """
    stored = hmm_ch6_setting.HMM_CH6_SETTING.load() if stored is None else stored
    ladder = MemoryLadder.from_json(stored["ladder"])
    settings = stored["settings"]
    threshold = TRANSPORT_FRACTION_OF_BLIND * ladder.context_blind_kl_bits
    tunnel_text = (f"Paper I's random HMMs at chapter 6's setting (K = {settings['hmm_length']}, lr {settings['lr']}, "
                   f"{settings['steps']} steps)")
    values = {f: [r["metrics"]["kl_bits"] for r in runs.values()] for f, runs in stored["runs"].items()}
    control_old = seed_interval(values["transformer"])["high"] <= threshold if "transformer" in values else None
    control_rule = seed_interval(values["transformer"])["high"] <= ladder.rule_level if "transformer" in values else None
    out, rows = {}, {}
    for family, vals in values.items():
        runs = stored["runs"][family]
        ci = seed_interval(vals)
        verdict = PAPER_I_RESULTS[family]["realises"]
        realises = None if verdict is None else bool(verdict["hmm"])
        bounds = ({"lower": None, "upper": None} if realises is None else
                  {"lower": None, "upper": threshold} if realises else {"lower": threshold, "upper": None})
        status = claims.claim_status(ci["mean"], interval=(ci["low"], ci["high"]), **bounds) \
            if realises is not None else "new"
        late = max(late_drop(r["kl_curve_bits"]) for r in runs.values())
        steps = next(iter(runs.values()))["steps"]
        longer = steps >= 4 * hmm_ch6_setting.CHAPTER7_GRID_STEPS
        because = verdict_reason(family, status, realises, control_realises=control_old, longer=longer,
                                 late_drop=late, longer_factor=4)
        params = {"scale": stored["scale"], **settings, "family": family, "steps": steps,
                  "n_params": next(iter(runs.values()))["n_params"], "seeds": [int(s) for s in runs],
                  "seeds_kl_bits": vals, "interval": "Student-t 95% over seeds", "source": f"data/{hmm_ch6_setting.RESULT_FILE}"}
        said = "no verdict in Paper I" if realises is None else \
            f"Paper I: {'realises' if realises else 'does not realise'} transport"
        claim = claims.record(
            ch6_setting_kl_claim_id(family), ci["mean"], unit="bits",
            interval=(ci["low"], ci["high"]) if realises is not None else None, undecided_because=because,
            explanation=(f"Paper I reports that the {family_label(family)} "
                         f"{'realises' if realises else 'does not realise'} transport; ours, trained "
                         f"{steps / hmm_ch6_setting.CHAPTER7_GRID_STEPS:.1f}× as long as chapter 7's grid, is "
                         f"{ci['mean'] / ladder.context_blind_kl_bits:.2f} × the context-blind level "
                         f"({ladder.memory_text(ci['mean'])})"),
            description=(f"{family_label(family)} on {tunnel_text}: KL to the exact filter, mean over {ci['n']} seeds "
                         f"({ladder.memory_text(ci['mean'])}; {said}; bound: chapter 7's "
                         f"{TRANSPORT_FRACTION_OF_BLIND} × the context-blind level, {threshold:.4f} bits)"),
            params=params, **bounds)
        out[claim.id] = claim
        status_rule = claims.claim_status(ci["mean"], interval=(ci["low"], ci["high"]),
                                          **({"lower": None, "upper": ladder.rule_level} if realises else
                                             {"lower": ladder.rule_level, "upper": None})) if realises is not None else "new"
        because_rule = verdict_reason(family, status_rule, realises, control_realises=control_rule, longer=longer,
                                      late_drop=late, longer_factor=4)
        memory = memory_claim(ch6_setting_memory_claim_id(family), vals, ladder, model=family_label(family), realises=realises,
                              params=params, tunnel_text=tunnel_text, undecided_because=because_rule)
        out[memory.id] = memory
        rows[family_label(family)] = {
            "KL (bits), mean": ci["mean"], "95% interval": f"{ci['low']:.4f}–{ci['high']:.4f}",
            "× context-blind": ci["mean"] / ladder.context_blind_kl_bits, "memory": ladder.memory_text(ci["mean"]),
            "KL fell over the last 20% by": f"{late:.0%}", "steps": steps,
            "status (0.6 × context-blind)": claim.status, f"status (window rule, > {ladder.rule_window} steps)":
                memory.status}
    return {"claims": out, "table": rows, "ladder": ladder}
