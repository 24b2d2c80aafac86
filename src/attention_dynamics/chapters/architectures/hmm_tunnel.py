"""The one settings dataclass of chapter 7's stored HMM runs, and the pieces its four results share.

Four stored results train chapter 7's parameter-matched families on HMM filtering: the sticky HMMs
(:mod:`~attention_dynamics.chapters.architectures.sticky_hmm`), the long-memory HMMs
(:mod:`~attention_dynamics.chapters.architectures.hmm_longmem`), the input formats
(:mod:`~attention_dynamics.chapters.architectures.hmm_formats`) and Paper I's random HMMs at chapter 6's setting
(:mod:`~attention_dynamics.chapters.architectures.hmm_ch6_setting`). Each declares its settings at each scale as an
:class:`HMMTunnelSpec`: the HMM's sizes (or chapter 6's tunnel, ``ch6_scale``), the model budget and the optimiser,
and, as fields, what differs between them: the steps of a family that trains fewer (``steps_by_family``, stored as
``steps_<family>``), the steps on Paper I's random HMMs (``steps_hmm``), the seeds, the families trained, those also
trained longer, the tunnels. What the stored file records of it is declared with it (``record``, in the file's order,
and the tunnel's ``design`` after it), so that :meth:`HMMTunnelSpec.to_json` is the file's ``settings``.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, Callable, Mapping, Sequence

from ...core.settings import check_positive_int
from ...ledger.results import Job, check_seeds
from ...models.registry import FAMILIES, family, family_names
from ...tasks.wind_tunnels import FORMAT_TUNNELS
from ...training.wind_tunnels import HMM_TUNNELS, HMMTraining

__all__ = ["HMMTunnelSpec", "family_seed_jobs", "runs_by_family"]


@dataclass(frozen=True)
class HMMTunnelSpec:
    """One scale of a stored HMM result (see the module).

    ``hmm_states``, ``hmm_symbols``, ``hmm_length``: the HMMs (taken from chapter 6's tunnel when ``ch6_scale`` names
    one of :data:`~attention_dynamics.training.wind_tunnels.HMM_TUNNELS`, whose held-out set then evaluates the
    runs); ``target_params``: every family's budget; ``steps`` of AdamW at ``lr`` on fresh batches of ``batch_size``;
    ``eval_sequences`` held out; ``seeds``; ``steps_by_family``: the families that train another number of steps
    (Mamba's pure-PyTorch scan costs about fifteen times a transformer step on a CPU); ``steps_hmm``: the steps on
    Paper I's random HMMs where a result trains on several tunnels (``tunnels``); ``families``: those trained (default:
    the book's five); ``longer``: those also trained several times as long on every seed (the evidence a failing or
    undecided verdict needs). ``record`` and ``design``: what the stored file's ``settings`` hold (:meth:`to_json`).
    """

    target_params: int
    steps: int
    batch_size: int
    lr: float
    eval_sequences: int
    hmm_states: int | None = None
    hmm_symbols: int | None = None
    hmm_length: int | None = None
    ch6_scale: str | None = None
    seeds: tuple[int, ...] = (0,)
    steps_by_family: Mapping[str, int] = field(default_factory=dict)
    steps_hmm: int | None = None
    families: tuple[str, ...] = FAMILIES
    longer: tuple[str, ...] = ()
    tunnels: tuple[str, ...] = ()
    record: tuple[str, ...] = ()
    design: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.ch6_scale is not None:
            if self.ch6_scale not in HMM_TUNNELS:
                raise ValueError(f"ch6_scale must be one of {', '.join(HMM_TUNNELS)}, got {self.ch6_scale!r}")
            t = HMM_TUNNELS[self.ch6_scale]
            for name, value in (("hmm_states", t.n_states), ("hmm_symbols", t.n_symbols), ("hmm_length", t.length)):
                if getattr(self, name) is None:
                    object.__setattr__(self, name, value)
        for name in ("hmm_states", "hmm_symbols", "hmm_length", "target_params", "steps", "batch_size",
                     "eval_sequences"):
            check_positive_int(name, getattr(self, name))
        if self.steps_hmm is not None:
            check_positive_int("steps_hmm", self.steps_hmm)
        for name, steps in self.steps_by_family.items():
            family(name)
            check_positive_int(f"steps_{name}", steps)
        if not self.lr > 0:
            raise ValueError(f"lr must be positive, got {self.lr}")
        check_seeds(self.seeds, (), at_least=1)
        if not self.families or set(self.families) - set(family_names()):
            raise ValueError(f"families must be among {family_names()}, got {self.families}")
        if set(self.longer) - set(self.families):
            raise ValueError(f"longer must name trained families ({self.families}), got {self.longer}")
        if set(self.tunnels) - set(FORMAT_TUNNELS):
            raise ValueError(f"tunnels must be among {FORMAT_TUNNELS}, got {self.tunnels}")
        names = {f.name for f in fields(self)}
        unknown = [r for r in self.record if r not in names and not r.startswith("steps_")]
        if unknown:
            raise ValueError(f"record names no field {unknown}")

    @property
    def tunnel(self) -> HMMTraining:
        """Return chapter 6's HMM tunnel at ``ch6_scale``."""
        if self.ch6_scale is None:
            raise ValueError("this spec names no chapter 6 tunnel (ch6_scale)")
        return HMM_TUNNELS[self.ch6_scale]

    def family_steps(self, name: str) -> int:
        """Return the training steps of family ``name``."""
        return self.steps_by_family.get(name, self.steps)

    def tunnel_steps(self, base: str) -> int:
        """Return the training steps on tunnel ``base`` (``steps_hmm`` on Paper I's random HMMs, where given)."""
        return self.steps_hmm if base == "hmm" and self.steps_hmm is not None else self.steps

    def to_json(self) -> dict[str, Any]:
        """Return the settings as the stored file records them: the ``record`` fields that are set, in order (tuples
        as lists, ``steps_<family>`` from ``steps_by_family``), then the ``design``."""
        out: dict[str, Any] = {}
        for name in self.record:
            if name in self.__dataclass_fields__:
                value = getattr(self, name)
            else:
                value = self.steps_by_family.get(name.removeprefix("steps_"))
            if value is not None:
                out[name] = list(value) if isinstance(value, tuple) else value
        return {**out, **self.design}


def family_seed_jobs(fn: Callable[..., Any], scale: str, spec: HMMTunnelSpec, seeds: Sequence[int] | None = None, *,
                     longer: Sequence[str] = (), factor: int = 4) -> list[Job]:
    """Return one job of ``fn`` per family of ``spec`` and seed (key ``<family>_seed<s>``; the spec's seeds unless
    ``seeds``), and one per family of ``longer`` and seed trained ``factor`` times as long (key
    ``<family>_seed<s>_x<factor>``). A job's cost is its steps times the family's step cost (the registry's)."""
    seeds = [int(s) for s in (spec.seeds if seeds is None else seeds)]
    jobs = [Job(f"{f}_seed{s}", fn, {"scale": scale, "family": f, "seed": s},
                cost=spec.family_steps(f) * family(f).step_cost) for f in spec.families for s in seeds]
    jobs += [Job(f"{f}_seed{s}_x{factor}", fn,
                 {"scale": scale, "family": f, "seed": s, "steps": factor * spec.family_steps(f)},
                 cost=factor * spec.family_steps(f) * family(f).step_cost) for f in longer for s in seeds]
    return jobs


def runs_by_family(outputs: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """Return jobs' outputs as ``{family: {seed: output}}``, the families in the registry's order."""
    runs: dict[str, dict[str, Any]] = {}
    for out in outputs:
        runs.setdefault(out["family"], {})[str(out["seed"])] = out
    return {f: runs[f] for f in family_names() if f in runs}
