"""Which drafter made each step of a run: a chain of spec types named step by step.

`namer_for` builds one server start's `ChainNamer` (`core.drafters.chain`) from its spec config
and the binary's ``--help`` defaults; `RunNaming` gives it one run's prompt and stamps that run's
steps and accepted draft tokens with the name (`StepEvent.drafter`, `TokenEvent.drafter`). A
single type names every step without looking; a chain with an n-gram member needs the token ids
(`/completion` with ``return_tokens``, and the prompt's from ``/tokenize``).
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Sequence

from spectui.core.drafters.chain import UNKNOWN, ChainNamer, drafting_types
from spectui.core.drafters.ngram_map import SERVER_SLOTS
from spectui.core.drafters.settings import BUILD_DEFAULTS, help_defaults, type_settings
from spectui.core.events import StepEvent, TokenEvent, TokenOrigin
from spectui.core.llama.specconfig import SpecConfig

_DRAFT_N_MAX = "--spec-draft-n-max"

# The events' own validators: a copy with the name this way costs half a `model_copy`, once
# per accepted draft token (as `stream.attribution` builds them).
_validate_token = TokenEvent.__pydantic_validator__.validate_python
_validate_step = StepEvent.__pydantic_validator__.validate_python


def namer_for(
    spec: SpecConfig | None,
    help_text: str | None = None,
    *,
    extra_args: Sequence[str] = (),
    n_slots: int = 1,
    state_known: bool = True,
) -> ChainNamer | None:
    """The namer of a server start with ``spec`` (None: no spec known, or nothing drafts).

    ``help_text``: the binary's ``--help``, whose defaults the replicas run with (this build's
    when None); ``extra_args``: the server's arguments after the spec's (their ``--spec-*``
    flags win, as on its command line); ``n_slots``: its ``--parallel``; ``state_known``:
    spectui started the server, so every request it serves goes through the namer (see
    `ChainNamer`).
    """
    if spec is None or not (types := drafting_types(spec.types)):
        return None
    defaults = help_defaults(help_text) if help_text else dict(BUILD_DEFAULTS)
    n_max = [] if spec.draft_n_max is None else [_DRAFT_N_MAX, str(spec.draft_n_max)]
    args = _split_equals([*spec.extra_args, *n_max, *extra_args])
    settings: dict[str, float] = {}
    for type_ in types:
        settings.update(type_settings(type_, defaults, args))
    # (without a number, no bound on a model drafter's draft: one check fewer)
    for flag, value in [(_DRAFT_N_MAX, defaults.get(_DRAFT_N_MAX)), *itertools.pairwise(args)]:
        if flag == _DRAFT_N_MAX and value is not None:
            with contextlib.suppress(ValueError):
                settings[_DRAFT_N_MAX] = float(value)
    return ChainNamer(spec.types, settings, n_slots=n_slots, state_known=state_known)


def _split_equals(args: Sequence[str]) -> list[str]:
    """``--flag=value`` as ``--flag value``, the way llama-server reads both."""
    out: list[str] = []
    for token in args:
        out += token.split("=", 1) if token.startswith("--") and "=" in token else [token]
    return out


def server_slots(parallel: int, extra_args: Sequence[str]) -> int:
    """The slots of a server launched with ``--parallel parallel`` and then ``extra_args``
    (whose last ``--parallel``/``-np`` wins); auto (-1) is `SERVER_SLOTS`."""
    value = str(parallel)
    for flag, arg in itertools.pairwise(extra_args):
        if flag in ("--parallel", "-np"):
            value = arg
    try:
        slots = int(value)
    except ValueError:
        return SERVER_SLOTS
    return slots if slots > 0 else SERVER_SLOTS


class RunNaming:
    """One run's naming: each step and accepted draft token gets its drafter's name."""

    __slots__ = ("_namer", "_names")

    def __init__(
        self, namer: ChainNamer, prompt: Sequence[int] | None, n_predict: int | None
    ) -> None:
        """``prompt``: the run's prompt token ids as the server reads them (None: unknown)."""
        self._namer = namer
        self._names: dict[int, str] = {}  # step index -> name, for the steps still open
        namer.begin(prompt, n_predict)

    def stamp(
        self, events: list[TokenEvent | StepEvent], output: Sequence[int]
    ) -> list[TokenEvent | StepEvent]:
        """``events`` (one chunk's, in order) with their drafter; ``output``: the run's token
        ids so far, this chunk's included."""
        out: list[TokenEvent | StepEvent] = []
        namer, names = self._namer, self._names
        for event in events:
            if isinstance(event, StepEvent):
                # Only a step the attribution places alone has a draft point to replay.
                if event.steps == 1 and event.split_known:
                    name = namer.step(event.first_token, event.drafted, event.accepted, output)
                else:
                    name = namer.merged()
                if len(names) > _OPEN_STEPS:
                    names.clear()  # (a chunk's tokens belong to its steps and the one before)
                for index in range(event.index, event.index + max(event.steps, 1)):
                    names[index] = name
                event = _validate_step({**event.__dict__, "drafter": name})
            elif event.origin is TokenOrigin.DRAFT:
                name = names.get(event.step, UNKNOWN) if event.step is not None else UNKNOWN
                event = _validate_token({**event.__dict__, "drafter": name})
            elif event.origin is TokenOrigin.UNKNOWN:
                namer.lost()  # (whether a draft point was here is not known)
            elif event.step is None:
                namer.no_draft(event.index, output)
            out.append(event)
        return out

    def cut_short(self) -> None:
        """The run ended before the server finished it (cancelled, broken): the server may
        have drafted past what was seen, so the stateful drafters' state is lost."""
        self._namer.forget()


_OPEN_STEPS = 64
"""Step names kept for the draft tokens still to come (a chunk's are its own steps' and the
step before; the rest only bounds the memory)."""
