"""Chapter 7's HMM numbers against short memories: the memory each family matches on the grid's random HMMs and on
the sticky HMMs, and the long-memory tunnel's claims (``data/hmm_longmem.json``).

Every id is written out here: ``architectures.hmm_memory_steps_<family>``, ``hmm_sticky.memory_steps_<family>`` and
the sticky ladder ``hmm_sticky.window_kl_bits_k<k>``; on the long-memory tunnel ``hmm_longmem.context_blind_kl_bits``,
``hmm_longmem.window_kl_bits_k8``, ``hmm_longmem.kl_bits_<family>`` and ``hmm_longmem.memory_steps_<family>``.
Transport is decided by the window rule of :mod:`~attention_dynamics.diagnostics.memory_ladder` under Paper I's
verdicts (:data:`~attention_dynamics.chapters.architectures.settings.PAPER_I_RESULTS`), with the transformer as the
positive control (:func:`~attention_dynamics.diagnostics.memory_ladder.verdict_reason`).
"""

from __future__ import annotations

from typing import Any, Mapping

from ...diagnostics.memory_ladder import MemoryLadder, seed_interval, transport_bounds, verdict_reason
from ...ledger import claims
from ...ledger.memory_claims import memory_claim, window_claims
from ...models.registry import family_label, family_names
from ...science.settling import late_drop
from ...tasks.wind_tunnels import TaskBatch
from .hmm_longmem import HMM_LONGMEM, LONGER_FACTOR, RESULT_FILE
from .settings import PAPER_I_RESULTS

__all__ = ["memory_claim_id", "MEMORY_CLAIM_IDS", "STICKY_WINDOW_CLAIM_IDS", "record_chapter7_memory",
           "longmem_kl_claim_id", "LONGMEM_KL_CLAIM_IDS", "longmem_memory_claim_id", "LONGMEM_MEMORY_CLAIM_IDS",
           "longmem_design_text", "longmem_reading", "LONGMEM_GLUE", "LADDER_GLUE", "MEMORY_GLUE", "glue_ladder_numbers",
           "record_longmem_claims"]


def memory_claim_id(tunnel: str, family: str) -> str:
    """Return the id of chapter 7's memory claim of the registered ``family`` on ``tunnel`` (``"hmm"``: the grid's
    random-HMM rows, ``"hmm_sticky"``: the stored sticky-HMM runs)."""
    return {"hmm": f"architectures.hmm_memory_steps_{family}", "hmm_sticky": f"hmm_sticky.memory_steps_{family}"}[tunnel]


#: Chapter 7's memory claims of the book's families: :func:`memory_claim_id` written out, so that a search for an id
#: finds it (a test checks it).
MEMORY_CLAIM_IDS = {
    "hmm": {"transformer": "architectures.hmm_memory_steps_transformer", "mamba": "architectures.hmm_memory_steps_mamba",
            "lstm": "architectures.hmm_memory_steps_lstm", "mlp_window": "architectures.hmm_memory_steps_mlp_window",
            "mlp_blind": "architectures.hmm_memory_steps_mlp_blind"},
    "hmm_sticky": {"transformer": "hmm_sticky.memory_steps_transformer", "mamba": "hmm_sticky.memory_steps_mamba",
                   "lstm": "hmm_sticky.memory_steps_lstm", "mlp_window": "hmm_sticky.memory_steps_mlp_window",
                   "mlp_blind": "hmm_sticky.memory_steps_mlp_blind"},
}
#: The sticky HMMs' ladder claims at the training length, written out: window → id.
STICKY_WINDOW_CLAIM_IDS = {2: "hmm_sticky.window_kl_bits_k2", 3: "hmm_sticky.window_kl_bits_k3",
                           4: "hmm_sticky.window_kl_bits_k4"}


def record_chapter7_memory(tunnel: str, ladder: MemoryLadder, model_kl_bits: Mapping[str, float], *,
                           params: Mapping[str, Any], longer: Mapping[str, bool] | None = None,
                           batch: TaskBatch | None = None) -> dict[str, Any]:
    """Record chapter 7's memory claims on ``tunnel`` (``"hmm"``: the grid's rows, ``"hmm_sticky"``: the stored runs)
    for every family's KL (``model_kl_bits``), under the window rule and Paper I's verdicts, and with ``batch`` (the
    tunnel's evaluation set) the sticky HMMs' ladder claims. Returns the claims by id.

    ``longer``: whether a family's KL comes from a run 4× as long (then a miss is a finding); without it a miss is not
    decided; a "does not realise" row is not decided while the transformer misses the rule.
    """
    out = {}
    text = {"hmm": "Paper I's random HMMs (chapter 7's grid)", "hmm_sticky": "chapter 7's sticky HMMs"}[tunnel]
    if batch is not None and tunnel == "hmm_sticky":
        e = batch.extra
        out.update(window_claims(STICKY_WINDOW_CLAIM_IDS, e["transition"], e["emission"], e["observations"], batch.posterior, ladder,
                                 params=params, tunnel_text=text))
    control = model_kl_bits["transformer"] <= ladder.rule_level if "transformer" in model_kl_bits else None
    for family, kl in model_kl_bits.items():
        verdict = PAPER_I_RESULTS[family]["realises"]
        realises = None if verdict is None else bool(verdict["hmm"])
        meets = kl <= ladder.rule_level
        status = "new" if realises is None else ("pass" if meets == realises else "fail")
        because = verdict_reason(family, status, realises, control_realises=control,
                                 longer=bool((longer or {}).get(family)), late_drop=None, longer_factor=4)
        claim_id = memory_claim_id(tunnel, family)
        out[claim_id] = memory_claim(claim_id, kl, ladder, model=family_label(family), realises=realises,
                                     params={**params, "family": family}, tunnel_text=text, undecided_because=because)
    return out


def longmem_kl_claim_id(family: str) -> str:
    """Return the id of the long-memory tunnel's KL claim of the registered ``family``."""
    return f"hmm_longmem.kl_bits_{family}"


def longmem_memory_claim_id(family: str) -> str:
    """Return the id of the claim of the memory the registered ``family`` matches on the long-memory tunnel."""
    return f"hmm_longmem.memory_steps_{family}"


#: The long-memory tunnel's claims of the book's families, written out (a test checks them against
#: :func:`longmem_kl_claim_id` and :func:`longmem_memory_claim_id`): each family's KL and the memory it matches.
LONGMEM_KL_CLAIM_IDS = {
    "transformer": "hmm_longmem.kl_bits_transformer", "mamba": "hmm_longmem.kl_bits_mamba",
    "lstm": "hmm_longmem.kl_bits_lstm", "mlp_window": "hmm_longmem.kl_bits_mlp_window",
    "mlp_blind": "hmm_longmem.kl_bits_mlp_blind",
}
LONGMEM_MEMORY_CLAIM_IDS = {
    "transformer": "hmm_longmem.memory_steps_transformer", "mamba": "hmm_longmem.memory_steps_mamba",
    "lstm": "hmm_longmem.memory_steps_lstm", "mlp_window": "hmm_longmem.memory_steps_mlp_window",
    "mlp_blind": "hmm_longmem.memory_steps_mlp_blind",
}


def longmem_design_text(settings: Mapping[str, Any]) -> str:
    """Return the tunnel's design in words."""
    return (f"the long-memory HMMs (S = O = {settings['hmm_states']}, K = {settings['hmm_length']}; each transition row "
            f"{1 - settings['self_transition']:.2f}·Dirichlet(1) + {settings['self_transition']:.2f}·identity, each "
            f"emission row {1 - settings['emission_uniform_share']:.1f}·Dirichlet(1) + "
            f"{settings['emission_uniform_share']:.1f}·uniform)")


def _stated_runs(stored: Mapping[str, Any], family: str) -> tuple[dict[str, dict], bool]:
    """Return a family's runs that state its claim (the longest made) and whether they are the longer ones."""
    longer = stored.get("longer", {}).get(family)
    return (longer, True) if longer else (stored["runs"][family], False)


def longmem_reading(status: str, realises: bool | None, window: int, *, longer: bool = False) -> str:
    """Return what a family's claim status on the long-memory tunnel says, in the reader's words (``longer``: the
    claim is stated at a run four times as long, so an undecided one is left open by its seeds alone)."""
    if realises is None:
        return "not tested in Paper I"
    if status == "undecided":
        if not realises:  # a "does not realise" row is left open only by its positive control
            return "open at this scale: the transformer, the positive control, does not pass on this tunnel"
        return "open at this scale: its seeds disagree" if longer else "open at this scale"
    if realises:
        return (f"carries the belief beyond the {window}-step window, as Paper I reports" if status == "pass" else
                f"a short memory even in a run four times as long, against Paper I")
    return (f"does not carry the belief beyond the {window}-step window, as Paper I reports" if status == "pass" else
            f"carries the belief beyond the {window}-step window, against Paper I")


#: The glue names of each family's numbers on the long-memory tunnel, written out (the prose cites them): the steps of
#: the runs that state its claim, its outcome in words (:func:`longmem_reading`), its seeds' KLs and, where a longer
#: run states the claim, the mean KL, steps and late change of the chapter's own runs.
LONGMEM_GLUE = {
    "transformer": {"steps": "architectures.longmem_steps_transformer",
                    "reading": "architectures.longmem_reading_transformer",
                    "seeds": "architectures.longmem_seeds_transformer",
                    "base_kl": "architectures.longmem_base_kl_transformer",
                    "base_steps": "architectures.longmem_base_steps_transformer",
                    "base_late": "architectures.longmem_base_late_transformer",
                    "base_seeds": "architectures.longmem_base_seeds_transformer"},
    "mamba": {"steps": "architectures.longmem_steps_mamba", "reading": "architectures.longmem_reading_mamba",
              "seeds": "architectures.longmem_seeds_mamba", "base_kl": "architectures.longmem_base_kl_mamba",
              "base_steps": "architectures.longmem_base_steps_mamba", "base_late": "architectures.longmem_base_late_mamba",
              "base_seeds": "architectures.longmem_base_seeds_mamba"},
    "lstm": {"steps": "architectures.longmem_steps_lstm", "reading": "architectures.longmem_reading_lstm",
             "seeds": "architectures.longmem_seeds_lstm", "base_kl": "architectures.longmem_base_kl_lstm",
             "base_steps": "architectures.longmem_base_steps_lstm", "base_late": "architectures.longmem_base_late_lstm",
             "base_seeds": "architectures.longmem_base_seeds_lstm"},
    "mlp_window": {"steps": "architectures.longmem_steps_mlp_window",
                   "reading": "architectures.longmem_reading_mlp_window",
                   "seeds": "architectures.longmem_seeds_mlp_window",
                   "base_kl": "architectures.longmem_base_kl_mlp_window",
                   "base_steps": "architectures.longmem_base_steps_mlp_window",
                   "base_late": "architectures.longmem_base_late_mlp_window"},
    "mlp_blind": {"steps": "architectures.longmem_steps_mlp_blind", "reading": "architectures.longmem_reading_mlp_blind",
                  "seeds": "architectures.longmem_seeds_mlp_blind", "base_kl": "architectures.longmem_base_kl_mlp_blind",
                  "base_steps": "architectures.longmem_base_steps_mlp_blind",
                  "base_late": "architectures.longmem_base_late_mlp_blind"},
}


def _glue(names: Mapping[str, str], key: str, value: Any) -> None:
    if key in names:
        claims.glue(names[key], value)


#: The memory ladders' numbers the prose cites, per tunnel, written out: glue name → (what, window), ``what`` one of
#: ``level`` (bits), ``ratio`` (× the context-blind level), ``rule_window`` (steps) and ``rule_level`` (bits).
LADDER_GLUE = {
    "grid": {"architectures.grid_ladder_k2": ("level", 2), "architectures.grid_ladder_k3": ("level", 3),
             "architectures.grid_ladder_rule_window": ("rule_window", None),
             "architectures.grid_ladder_rule_level": ("rule_level", None)},
    "ch6": {"architectures.ch6_ladder_rule_window": ("rule_window", None)},
    "sticky": {"architectures.sticky_ladder_k2_ratio": ("ratio", 2), "architectures.sticky_ladder_k3_ratio": ("ratio", 3),
               "architectures.sticky_ladder_k4_ratio": ("ratio", 4),
               "architectures.sticky_ladder_rule_window": ("rule_window", None),
               "architectures.sticky_ladder_rule_level": ("rule_level", None)},
    "longmem": {"architectures.longmem_ladder_k8_ratio": ("ratio", 8)},
}

#: The memory each family's KL matches, in words, per tunnel (the grid's random HMMs, the sticky HMMs), written out.
MEMORY_GLUE = {
    "grid": {"transformer": "architectures.grid_transformer_memory", "mamba": "architectures.grid_mamba_memory",
             "lstm": "architectures.grid_lstm_memory", "mlp_window": "architectures.grid_mlp_window_memory",
             "mlp_blind": "architectures.grid_mlp_blind_memory"},
    "sticky": {"transformer": "architectures.sticky_transformer_memory", "mamba": "architectures.sticky_mamba_memory",
               "lstm": "architectures.sticky_lstm_memory", "mlp_window": "architectures.sticky_mlp_window_memory",
               "mlp_blind": "architectures.sticky_mlp_blind_memory"},
}


def glue_ladder_numbers(tunnel: str, ladder: MemoryLadder, model_kl_bits: Mapping[str, float] | None = None) -> None:
    """Glue the ladder's numbers of ``tunnel`` (:data:`LADDER_GLUE`) and, given each family's KL, the memory it matches
    in words (:data:`MEMORY_GLUE`)."""
    for name, (what, k) in LADDER_GLUE[tunnel].items():
        value = {"level": lambda: ladder.level(k), "ratio": lambda: ladder.level(k) / ladder.context_blind_kl_bits,
                 "rule_window": lambda: ladder.rule_window, "rule_level": lambda: ladder.rule_level}[what]()
        claims.glue(name, value)
    for family, kl in (model_kl_bits or {}).items():
        if family in MEMORY_GLUE.get(tunnel, {}):
            claims.glue(MEMORY_GLUE[tunnel][family], ladder.memory_text(kl))


def record_longmem_claims(stored: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Record the long-memory tunnel's claims and return ``{"claims": {id: claim}, "table": rows, "ladder": MemoryLadder}``.

    ``hmm_longmem.context_blind_kl_bits`` and ``hmm_longmem.window_kl_bits_k8`` (exact levels of the evaluation set);
    per family the KL to the filter, mean over seeds with its 95 % interval, bounded by Paper I's transport verdict
    under the window rule (:func:`transport_bounds`; no bounds for the whole-window MLP, which Paper I does not
    test), and the memory it matches (:func:`memory_claim`). A failing row without a longer run is undecided, with
    how much its KL curve still fell over the last 20 % of training (the learning rate decays to zero, so a flat end
    is no plateau evidence); with a 4× longer run the longer run states the claim.
    """
    stored = HMM_LONGMEM.load() if stored is None else stored
    ladder = MemoryLadder.from_json(stored["ladder"])
    settings = stored["settings"]
    design = longmem_design_text(settings)
    params = {"scale": stored["scale"], **settings, "source": f"data/{RESULT_FILE}"}
    out = {}
    out["hmm_longmem.context_blind_kl_bits"] = claims.record(
        "hmm_longmem.context_blind_kl_bits", ladder.context_blind_kl_bits, unit="bits",
        description=f"KL from the exact filter of the context-blind posterior (the one-step window) on {design}, "
                    f"{ladder.n_sequences} held-out sequences", params=params)
    out["hmm_longmem.window_kl_bits_k8"] = claims.record(
        "hmm_longmem.window_kl_bits_k8", ladder.level(8), unit="bits",
        description=f"KL from the exact filter of the exact posterior given only the last 8 observations and the "
                    f"matrices on {design} ({ladder.level(8) / ladder.context_blind_kl_bits:.2f} × the context-blind "
                    f"level): the level transport is decided against here", params={**params, "window": 8})
    rows = {}
    stated = {}
    for family in family_names():
        if family in stored["runs"]:
            runs, is_longer = _stated_runs(stored, family)
            stated[family] = ([r["metrics"]["kl_bits"] for r in runs.values()], runs, is_longer)
    control = None
    if "transformer" in stated:
        control = seed_interval(stated["transformer"][0])["high"] <= ladder.rule_level
    for family, (values, runs, is_longer) in stated.items():
        ci = seed_interval(values)
        verdict = PAPER_I_RESULTS[family]["realises"]
        realises = None if verdict is None else bool(verdict["hmm"])
        bounds = transport_bounds(realises, ladder)
        status = claims.claim_status(ci["mean"], interval=(ci["low"], ci["high"]), **bounds) \
            if realises is not None else "new"
        late = max(late_drop(r["kl_curve_bits"]) for r in runs.values())  # of the runs that state the claim
        steps = next(iter(runs.values()))["steps"]
        names = LONGMEM_GLUE.get(family, {})
        _glue(names, "steps", steps)
        if is_longer:  # the chapter's own runs, beside the longer ones that state the claim
            base = [r["metrics"]["kl_bits"] for r in stored["runs"][family].values()]
            _glue(names, "base_kl", seed_interval(base)["mean"])
            _glue(names, "base_steps", next(iter(stored["runs"][family].values()))["steps"])
            _glue(names, "base_late", max(late_drop(r["kl_curve_bits"]) for r in stored["runs"][family].values()))
            _glue(names, "base_seeds", ", ".join(f"{v:.3f}" for v in base))
        because = verdict_reason(family, status, realises, control_realises=control, longer=is_longer,
                                 late_drop=late, longer_factor=LONGER_FACTOR)
        explanation = None
        if status == "undecided" and because is None:  # a longer run made: only the seeds' spread leaves it open
            below = sum(v <= ladder.rule_level for v in values)
            because = (f"Not decided: the seeds disagree even in a run {LONGER_FACTOR}× as long ({steps} steps): "
                       f"{below} of {len(values)} end at or below the {ladder.rule_window}-step window's level "
                       f"({', '.join(f'{v:.3f}' for v in values)} bits against {ladder.rule_level:.3f}), so the "
                       f"interval of their mean reaches both sides of it.")
        if status == "fail" and because is None and realises is False:
            explanation = (f"Paper I reports that the {family_label(family)} does not realise transport; here it goes "
                           f"below the {ladder.rule_window}-step window's level on every seed ({ladder.memory_text(ci['mean'])}), "
                           f"so it carries the belief further back than any short look-back, and more training cannot "
                           f"undo a KL that is already this low")
        elif status == "fail" and because is None:
            explanation = (f"a run {LONGER_FACTOR}× as long ({steps} steps) stays on the other side of the "
                           f"{ladder.rule_window}-step window's level ({ladder.memory_text(ci['mean'])})")
        said = "no verdict in Paper I" if realises is None else \
            f"Paper I: {'realises' if realises else 'does not realise'} transport"
        run0 = next(iter(runs.values()))
        run_params = {**params, "family": family, "n_params": run0["n_params"], "width": run0["width"], "steps": steps,
                      "seeds": [int(s) for s in runs], "seeds_kl_bits": values, "interval": "Student-t 95% over seeds"}
        kl_id = longmem_kl_claim_id(family)
        out[kl_id] = claims.record(
            kl_id, ci["mean"], unit="bits",
            interval=(ci["low"], ci["high"]) if realises is not None else None,
            undecided_because=because, explanation=explanation,
            description=(f"{family_label(family)} on {design}: KL to the exact filter, mean over {ci['n']} seeds "
                         f"({ladder.memory_text(ci['mean'])}; {said}; transport: KL ≤ the "
                         f"{ladder.rule_window}-step window's level, {ladder.rule_level:.4f} bits)"),
            params=run_params, **bounds)
        out[longmem_memory_claim_id(family)] = memory_claim(
            longmem_memory_claim_id(family), values, ladder, model=family_label(family), realises=realises,
            params=run_params, tunnel_text=design, undecided_because=because)
        _glue(names, "reading", longmem_reading(out[kl_id].status, realises, ladder.rule_window, longer=is_longer))
        _glue(names, "seeds", ", ".join(f"{v:.3f}" for v in values))
        rows[family_label(family)] = {
            "KL (bits), mean": ci["mean"], "95% interval": f"{ci['low']:.4f}–{ci['high']:.4f}",
            "× context-blind": ci["mean"] / ladder.context_blind_kl_bits, "memory": ladder.memory_text(ci["mean"]),
            "KL fell over the last 20% by (max over seeds)": f"{late:.0%}", "steps": steps,
            "status": out[kl_id].status}
    return {"claims": out, "table": rows, "ladder": ladder}
