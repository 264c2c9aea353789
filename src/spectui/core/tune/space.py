"""The search space: every spec type this binary lists that can run here, with its main knobs.

Types come from the binary's ``--help`` (`Capabilities`), narrowed by what was given: draft types
need a draft model, ``draft-mtp`` a model with MTP layers, eagle3/dflash/dspark a drafter of
their kind (`specconfig.type_problem`). Each knob's values are set around its ``--help`` default
(the default is always one of them), so a new build's new defaults move the grid with it.
Chains of an n-gram type before a model drafter are not in the first round's space: they are
made after it from its best n-gram candidates (`chain_of`, `tune.chains`), each one config
measured as a whole. What is left out is listed with the reason.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import product
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from spectui.core.drafters.ngram import REPLICATED
from spectui.core.drafters.settings import help_defaults, type_settings
from spectui.core.llama.binary import Capabilities
from spectui.core.llama.specconfig import SPEC_TYPE_INFO, type_problem


class Skipped(BaseModel):
    """A spec type the search leaves out, and why."""

    model_config = ConfigDict(frozen=True)

    type: str
    """The spec type."""
    reason: str
    """Why, in one line."""


@dataclass(frozen=True)
class Knob:
    """One ``--spec-*`` flag the search varies, and how its values follow the help's default."""

    flag: str
    """The llama-server flag."""
    values: tuple[float, ...]
    """Values to try besides the default."""
    fallback: float
    """The default when ``--help`` states none."""
    integer: bool = True
    """Whole numbers (else a probability)."""


_DRAFT = (
    Knob("--spec-draft-n-max", (2, 4, 8, 16), 3),
    Knob("--spec-draft-p-min", (0.75,), 0.0, False),
)
_NGRAM_SIZES = {
    kind: (
        Knob(f"--spec-{kind}-size-n", (4, 8), 12),
        Knob(f"--spec-{kind}-size-m", (16,), 48),
    )
    for kind in ("ngram-simple", "ngram-map-k", "ngram-map-k4v")
}
KNOBS: dict[str, tuple[Knob, ...]] = {
    "draft-simple": _DRAFT,
    "draft-eagle3": _DRAFT[:1],
    "draft-mtp": _DRAFT[:1],
    "draft-dflash": _DRAFT[:1],
    "draft-dspark": _DRAFT[:1],
    **_NGRAM_SIZES,
    "ngram-mod": (
        Knob("--spec-ngram-mod-n-match", (12,), 24),
        Knob("--spec-ngram-mod-n-max", (16, 32), 64),
    ),
    "ngram-cache": (),
}
"""The main knobs of each type (a type missing here runs with its defaults only)."""

N_MIN_FLAGS = {"--spec-ngram-mod-n-max": "--spec-ngram-mod-n-min"}
"""A maximum whose minimum must not exceed it: the minimum follows it down when it would."""


def _number(text: str | None, fallback: float, integer: bool) -> float:
    try:
        return int(text) if integer and text is not None else float(text or fallback)
    except ValueError:
        return fallback


def _fmt(value: float, integer: bool) -> str:
    return str(int(value)) if integer else f"{value:g}"


class Candidate(BaseModel):
    """One point of the space: a spec type (or a chain of them) and its knob values."""

    model_config = ConfigDict(frozen=True)

    type: str
    """The spec type; a chain's types comma-joined, as ``--spec-type`` takes them."""
    knobs: dict[str, float]
    """Knob flag -> value, every varied knob (defaults included)."""
    text: str
    """The config as `compare --config` reads it (non-default knobs only)."""
    predicted_from: str | None = None
    """The candidate (same type and knobs, the longest draft) whose runs predict this one's
    first round (`tune.predict`): it runs only if the prediction makes it a contender."""
    settings: dict[str, float] = Field(default_factory=dict)
    """Every ``--spec-<type>-*`` flag --help gives a number for, at the value this candidate
    runs with (what a drafter replica needs, `tune.drafters`)."""
    replayed: bool = False
    """Its first round is a replay of the baseline's tokens by its type's drafter replica
    (`core.drafters`), not a run: it runs only if the prediction makes it a contender."""

    @property
    def label(self) -> str:
        """'ngram-mod (n-match 12, n-max 16)': the type and the knobs moved off their default
        (a chain's: each knob named without its member's type)."""
        tokens = self.text.split()[1:]
        moved = []
        for flag, value in zip(tokens[::2], tokens[1::2], strict=False):
            name = flag.removeprefix("--spec-")
            for member in self.type.split(","):
                name = name.removeprefix(f"{member}-")
            moved.append(f"{name.removeprefix('draft-')} {value}")
        return f"{self.type} ({', '.join(moved)})" if moved else self.type


def knob_values(type_: str, caps: Capabilities, defaults: dict[str, str]) -> dict[str, list[float]]:
    """Each knob of ``type_`` that this binary lists -> its values (the default first)."""
    out: dict[str, list[float]] = {}
    for knob in KNOBS.get(type_, ()):
        if knob.flag not in caps.spec_flags:
            continue
        default = _number(defaults.get(knob.flag), knob.fallback, knob.integer)
        out[knob.flag] = [default, *sorted({v for v in knob.values if v != default})]
    return out


def candidates_of(type_: str, caps: Capabilities, defaults: dict[str, str]) -> list[Candidate]:
    """The grid of ``type_``: every combination of its knobs' values, the defaults first."""
    grid = knob_values(type_, caps, defaults)
    out = []
    for combo in product(*grid.values()):
        knobs = dict(zip(grid, combo, strict=True))
        parts = [type_]
        for (flag, value), values in zip(knobs.items(), grid.values(), strict=True):
            integer = next(k.integer for k in KNOBS[type_] if k.flag == flag)
            if value != values[0]:
                parts += [flag, _fmt(value, integer)]
            minimum = N_MIN_FLAGS.get(flag)
            floor = _number(defaults.get(minimum or ""), 0, True) if minimum else 0
            if minimum and minimum in caps.spec_flags and floor > value:
                parts += [minimum, _fmt(value, True)]  # a minimum above the maximum is refused
        text = " ".join(parts)
        settings = type_settings(type_, defaults, text.split()[1:])
        out.append(Candidate(type=type_, knobs=knobs, text=text, settings=settings))
    return out


@dataclass(frozen=True)
class ModelFacts:
    """What the GGUF headers say about what can run."""

    draft_model: Path | None = None
    """The draft model given, if any."""
    draft_architecture: str | None = None
    """Its ``general.architecture``."""
    mtp_layers: int | None = None
    """The target model's MTP layers (None: unknown)."""


def build_space(
    caps: Capabilities,
    help_text: str,
    facts: ModelFacts,
    types: Sequence[str] | None = None,
) -> tuple[list[Candidate], list[Skipped]]:
    """The candidates to race (baseline excluded) and the types left out, with reasons.

    ``types``: only these (each must be listed by the binary, else it is skipped with that
    reason).
    """
    defaults = help_defaults(help_text)
    skipped: list[Skipped] = []
    wanted = list(types) if types else [t for t in caps.spec_types if t != "none"]
    out: list[Candidate] = []
    for name in wanted:
        if name == "none":
            continue  # the baseline runs in every round anyway
        if name not in caps.spec_types:
            skipped.append(Skipped(type=name, reason="this llama-server does not list it"))
            continue
        if name not in SPEC_TYPE_INFO:
            skipped.append(Skipped(type=name, reason="spectui does not know what it needs"))
            continue
        problem = type_problem(
            name,
            draft_model=facts.draft_model,
            draft_architecture=facts.draft_architecture,
            mtp_layers=facts.mtp_layers if facts.mtp_layers is not None else 0,
        )
        if problem is not None:
            skipped.append(Skipped(type=name, reason=problem))
            continue
        out += candidates_of(name, caps, defaults)
    # Every type as --help sets it first, then one knob moved, then two: a budget that runs
    # out in round one has still measured each type's defaults.
    out.sort(key=lambda c: c.text.count(" --"))
    return out, skipped


CHAIN_MODELS = ("draft-mtp", "draft-eagle3", "draft-dflash", "draft-dspark", "draft-simple")
"""The model drafter a chain takes, the first of these the space can run (MTP when the model
has MTP layers, else the draft model's kind)."""


def is_ngram(candidate: Candidate) -> bool:
    """Whether ``candidate`` is one n-gram type (what a chain puts before its model drafter)."""
    return "," not in candidate.type and candidate.type.startswith("ngram-")


def chain_of(ngram: Candidate, model: Candidate) -> Candidate:
    """The chain ``ngram,model`` with each member's knobs (``--spec-type ngram-mod,draft-mtp
    --spec-ngram-mod-n-max 16``). A chain is one config, run and measured as a whole like any
    other (its n-gram and model steps share one server, and whichever drafts first takes the
    step): nothing is added up from its members' own results."""
    type_ = f"{ngram.type},{model.type}"
    text = " ".join([type_, *ngram.text.split()[1:], *model.text.split()[1:]])
    return Candidate(
        type=type_,
        knobs={**ngram.knobs, **model.knobs},
        text=text,
        settings={**ngram.settings, **model.settings},
    )


LENGTH_FLAGS = {
    **{t: "--spec-draft-n-max" for t in KNOBS if t.startswith("draft-")},
    "ngram-simple": "--spec-ngram-simple-size-m",
    "ngram-map-k": "--spec-ngram-map-k-size-m",
    "ngram-map-k4v": "--spec-ngram-map-k4v-size-m",
}
"""The knob that caps the draft length, per type, where a shorter draft is a truncated longer
one. (Not ngram-mod: its minimum follows its maximum down, so a shorter maximum also accepts
drafts the longer one discarded, which truncation cannot see.)"""


def draft_length(candidate: Candidate) -> float | None:
    """The candidate's draft length cap (None: its type has none that truncates)."""
    flag = LENGTH_FLAGS.get(candidate.type)
    return candidate.knobs.get(flag) if flag else None


def mark_predicted(candidates: Sequence[Candidate]) -> list[Candidate]:
    """Among candidates that differ only in draft length, all but the longest are predicted
    from the longest's runs (`Candidate.predicted_from`)."""
    longest: dict[tuple[object, ...], Candidate] = {}
    for c in candidates:
        flag = LENGTH_FLAGS.get(c.type)
        if flag is None or flag not in c.knobs:
            continue
        key = (c.type, *sorted((k, v) for k, v in c.knobs.items() if k != flag))
        if key not in longest or c.knobs[flag] > longest[key].knobs[flag]:
            longest[key] = c
    out = []
    for c in candidates:
        flag = LENGTH_FLAGS.get(c.type)
        if flag is None or flag not in c.knobs:
            out.append(c)
            continue
        key = (c.type, *sorted((k, v) for k, v in c.knobs.items() if k != flag))
        source = longest[key]
        out.append(c if source is c else c.model_copy(update={"predicted_from": source.text}))
    return out


def mark_replayed(candidates: Sequence[Candidate]) -> list[Candidate]:
    """Of each type a drafter replica covers (`core.drafters`), the first candidate (its
    defaults) runs, which is also what checks the replica; the others are replayed
    (`Candidate.replayed`) instead of run in round one."""
    seen: set[str] = set()
    out = []
    for c in candidates:
        if c.type not in REPLICATED:
            out.append(c)
        elif c.type not in seen:
            seen.add(c.type)
            out.append(c.model_copy(update={"predicted_from": None}))
        else:
            out.append(c.model_copy(update={"replayed": True, "predicted_from": None}))
    return out
