"""``spectui doctor --try``: start the server once per spec type and see what really runs.

An option in ``--help`` does not prove that it works with a given GGUF: a type may be refused at
start (the server's own reason is in its log), accepted at start and then quietly switched off
(llama-server runs on without speculation when a drafter fails to initialise), crash on the
first decode, or hang. Each type gets its own launch through `launch_engine`, one short run and
a hang guard, and the server is stopped before the next type starts, whatever happened.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Awaitable, Callable, Sequence
from enum import StrEnum
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from spectui.core.engine.base import EngineDirs
from spectui.core.engine.live import LiveEngine, launch_engine
from spectui.core.errors import SpectuiError
from spectui.core.events import ErrorEvent, ServerState, ServerStateEvent, SummaryEvent
from spectui.core.llama.binary import Capabilities
from spectui.core.llama.gguf_meta import GgufFacts, gguf_facts
from spectui.core.llama.specconfig import SpecConfig
from spectui.core.llama.spectypes import MODEL_DRAFTERS, chain_reason, type_reason
from spectui.core.request import GenerationRequest

DEFAULT_TRY_TIMEOUT_S = 120.0
"""How long one type may take to start and generate before it counts as hung (a hang guard,
not a speed test: a healthy tiny run takes a second or two)."""


class Outcome(StrEnum):
    """What trying one type showed."""

    WORKS = "works"
    """Started and generated; drafted/accepted counted (drafting nothing can be the prompt's)."""
    REFUSED = "refused"
    """The server would not run it: exited at start, switched speculation off, or crashed."""
    NOT_APPLICABLE = "not applicable"
    """Not started: the GGUF headers (or the missing draft model) rule it out."""
    HUNG = "hung"
    """No ready server or no finished run within the time limit; stopped."""


class TypeTrial(BaseModel):
    """One spec type (or chain) tried on the real server."""

    model_config = ConfigDict(frozen=True)

    type: str
    """The spec type, or a chain 'a,b'."""
    outcome: Outcome
    """What happened."""
    reason: str | None = None
    """Why it was refused, not applicable or hung; a note on a working type that drafted
    nothing. One line (the server's own words where it said)."""
    tokens: int | None = None
    """Tokens generated."""
    drafted: int | None = None
    """Tokens drafted over the run."""
    accepted: int | None = None
    """Drafted tokens the target accepted."""
    tokens_per_second: float | None = None
    """Generation speed of the run (the server's ``predicted_per_second``, else the client's)."""
    speedup: float | None = None
    """``tokens_per_second`` over the ``none`` run's (one short run each: an indication only)."""
    wall_s: float = 0.0
    """Seconds the launch, run and stop took."""


class TrialReport(BaseModel):
    """Every type this binary lists, tried with one model (and draft model)."""

    model_config = ConfigDict(frozen=True)

    model: Path
    """The target GGUF."""
    draft_model: Path | None = None
    """The draft GGUF given, if any."""
    timeout_s: float
    """The hang guard per type."""
    trials: tuple[TypeTrial, ...]
    """One per type, ``none`` first."""


# What the server says when it will not speculate, most specific first; group 1 when present
# is the reason itself.
_REFUSALS = (
    re.compile(r"failed to initialize speculative decoding context: (.*)"),
    re.compile(r"(context type MTP requested but model doesn't contain MTP layers)"),
    re.compile(r"GGML_ASSERT\((.*)\) failed"),
    re.compile(r"((?:EAGLE3|DFlash|DSpark)\b.*)"),
    re.compile(r"(speculative decoding not supported by this context)"),
    re.compile(r"(failed to load draft model.*)"),
    re.compile(r"(failed to create MTP context)"),
)
_STAMP = re.compile(r"^\d+\.\d{2}\.\d{3}\.\d{3} [IWEDT] ")


def server_reason(lines: Sequence[str]) -> str | None:
    """The line of a server log that says why it did not speculate, without its prefix."""
    for pattern in _REFUSALS:
        for line in lines:
            text = _STAMP.sub("", line).strip()
            if (match := pattern.search(text)) is not None:
                return " ".join((match.group(1) if match.groups() else text).split())
    return None


def planned_types(
    caps: Capabilities,
    target: GgufFacts | None,
    draft: GgufFacts | None,
    draft_model: Path | None,
    chains: Sequence[str] = (),
) -> list[tuple[str, SpecConfig | None, str | None]]:
    """Each type to try, ``none`` first: (name, the config to launch, or None and the reason).

    ``chains``: comma-joined chains to try as well (each as one config, measured as a whole).
    """
    names = ["none", *(t for t in caps.spec_types if t != "none"), *chains]
    plan: list[tuple[str, SpecConfig | None, str | None]] = []
    for name in dict.fromkeys(names):
        types = tuple(name.split(","))
        reason = chain_reason(types) or next(
            (
                f"{t}: {r}" if len(types) > 1 else r
                for t in types
                if (r := type_reason(t, target=target, draft=draft, draft_model=draft_model))
            ),
            None,
        )
        if reason is not None:
            plan.append((name, None, reason))
            continue
        needs_draft = any(t in MODEL_DRAFTERS for t in types)
        spec = SpecConfig(types=types, draft_model=draft_model if needs_draft else None)
        plan.append((name, spec, None))
    return plan


class Trial:
    """Tries each type in turn on one binary and model; see `run`."""

    def __init__(
        self,
        binary: Path,
        caps: Capabilities,
        model: Path,
        request: GenerationRequest,
        *,
        draft_model: Path | None = None,
        ctx_size: int = 4096,
        extra_args: tuple[str, ...] = (),
        dirs: EngineDirs | None = None,
        timeout_s: float = DEFAULT_TRY_TIMEOUT_S,
    ) -> None:
        self.binary = binary
        self.caps = caps
        self.model = model
        self.request = request
        self.draft_model = draft_model
        self.ctx_size = ctx_size
        self.extra_args = extra_args
        self.dirs = dirs
        self.timeout_s = timeout_s

    async def run(
        self,
        chains: Sequence[str] = (),
        progress: Callable[[TypeTrial], Awaitable[None] | None] | None = None,
    ) -> TrialReport:
        """Try every type (and ``chains``); ``progress`` hears each result as it comes.

        Raises `SpectuiError` only for what stops every type (an unreadable model).
        """
        target = gguf_facts(self.model)
        draft = gguf_facts(self.draft_model) if self.draft_model is not None else None
        trials: list[TypeTrial] = []
        baseline: float | None = None
        for name, spec, reason in planned_types(self.caps, target, draft, self.draft_model, chains):
            if spec is None:
                trial = TypeTrial(type=name, outcome=Outcome.NOT_APPLICABLE, reason=reason)
            else:
                trial = await self._try(name, spec)
            if name == "none" and trial.outcome is Outcome.WORKS:
                baseline = trial.tokens_per_second
            elif baseline and trial.tokens_per_second:
                trial = trial.model_copy(update={"speedup": trial.tokens_per_second / baseline})
            trials.append(trial)
            if progress is not None and (waiting := progress(trial)) is not None:
                await waiting
        return TrialReport(
            model=self.model,
            draft_model=self.draft_model,
            timeout_s=self.timeout_s,
            trials=tuple(trials),
        )

    async def _try(self, name: str, spec: SpecConfig) -> TypeTrial:
        started = time.monotonic()
        try:
            engine = launch_engine(
                self.binary,
                self.caps,
                self.model,
                spec,
                ctx_size=self.ctx_size,
                extra_args=self.extra_args,
                dirs=self.dirs,
            )
        except SpectuiError as error:  # refused by spectui's own checks: nothing started
            return TypeTrial(type=name, outcome=Outcome.NOT_APPLICABLE, reason=str(error))
        try:
            trial = await asyncio.wait_for(self._start_and_run(name, engine), self.timeout_s)
        except TimeoutError:
            trial = TypeTrial(
                type=name,
                outcome=Outcome.HUNG,
                reason=f"no ready server and finished run within {self.timeout_s:g} s; stopped"
                + (f" (last: {why})" if (why := server_reason(engine.log_tail(80))) else ""),
            )
        finally:
            await engine.aclose()  # whatever happened, this type's server is gone now
        return trial.model_copy(update={"wall_s": round(time.monotonic() - started, 3)})

    async def _start_and_run(self, name: str, engine: LiveEngine) -> TypeTrial:
        async for event in engine.start():
            if isinstance(event, ServerStateEvent) and event.state is ServerState.FAILED:
                reason = server_reason(engine.log_tail(200)) or event.detail
                return TypeTrial(type=name, outcome=Outcome.REFUSED, reason=reason)
        summary: SummaryEvent | None = None
        error: str | None = None
        async for event in engine.run(self.request):
            if isinstance(event, SummaryEvent):
                summary = event
            elif isinstance(event, ErrorEvent):
                error = event.message
        said = server_reason(engine.log_tail(200))
        if error is not None or summary is None:
            return TypeTrial(
                type=name, outcome=Outcome.REFUSED, reason=said or error or "the run ended early"
            )
        metrics = summary.metrics
        # The server's own generation speed first: a run of a few milliseconds (a tiny model, a
        # GPU) is too short for the client's clock, and it leaves out the HTTP overhead.
        speed = summary.server_timings.get("predicted_per_second") or metrics.tokens_per_second
        trial = TypeTrial(
            type=name,
            outcome=Outcome.WORKS,
            tokens=metrics.tokens,
            drafted=metrics.drafted,
            accepted=metrics.accepted,
            tokens_per_second=round(speed, 1) if speed else None,
        )
        if name == "none" or metrics.drafted:
            return trial
        if said is not None:  # started, then switched speculation off: the server's reason
            return trial.model_copy(update={"outcome": Outcome.REFUSED, "reason": said})
        return trial.model_copy(update={"reason": "drafted nothing on this prompt"})
