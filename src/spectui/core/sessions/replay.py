"""Replaying a session: its numbers recomputed by the live code, its events on a pausable clock.

`recompute` feeds the recorded tokens, steps and memory samples to the same `MetricsTracker` the
live stream uses, at their recorded times, so the replayed numbers equal the live ones exactly
(floats survive JSON unchanged). The prompt numbers are the one input the client cannot compute:
the server reports them in each chunk's timings, which are not events. They are taken from where
the recording keeps them: each snapshot's own prompt fields, and the server timings recorded with
the summary. The attribution's anomaly count is the other: it counts chunks whose counters did not
fit, and chunks are not recorded (only the tokens attributed from them), so it cannot be
recounted; it is taken from the recorded snapshots and summary, like the prompt numbers.

`ReplayEngine` implements the `Engine` protocol over a session, so the full TUI replays a run
without a server. Its `ReplayClock` maps recording time to loop time at a speed (or as fast as
possible), and can pause, resume and step token by token; two engines may share one clock to
play side by side on the same time scale.
"""

from __future__ import annotations

import asyncio
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

from spectui.core.engine.base import ServerInfo
from spectui.core.events import (
    EngineEvent,
    ErrorEvent,
    EventStream,
    MemoryEvent,
    MetricsEvent,
    StepEvent,
    SummaryEvent,
    TokenEvent,
)
from spectui.core.llama.protocol import Timings
from spectui.core.request import GenerationRequest
from spectui.core.sessions.file import Session, SessionServer
from spectui.core.stream.metrics import MetricsTracker

SPEEDS = {"0.5": 0.5, "1": 1.0, "2": 2.0, "max": None}
"""The replay speeds the command line offers; None plays as fast as possible."""

INCOMPLETE = "incomplete"
"""Stop reason of a recomputed summary when the recording has none (it was cut short)."""


@dataclass(frozen=True, slots=True)
class Recomputed:
    """A session's events with numbers recomputed, and the summary they add up to."""

    events: list[EngineEvent]
    """The recorded events; metrics snapshots and the summary replaced by recomputed ones."""
    summary: SummaryEvent
    """The final numbers (stop reason ``incomplete`` when the recording ended early)."""


def recompute(session: Session) -> Recomputed:
    """Recompute every metrics snapshot and the summary from tokens, steps and memory."""
    recorded = session.summary
    tracker = MetricsTracker()
    text: list[str] = []
    events: list[EngineEvent] = []
    last_t = 0.0
    for event in session.events:
        last_t = max(last_t, event.t)
        if isinstance(event, TokenEvent):
            tracker.on_token(event)
            text.append(event.text)
        elif isinstance(event, StepEvent):
            tracker.on_step(event)
        elif isinstance(event, MemoryEvent):
            tracker.on_memory(event)
        elif isinstance(event, MetricsEvent):
            # Server-reported prompt numbers as they stood then (mid-prompt ones differ).
            tracker.prompt_tokens = event.snapshot.prompt_tokens
            tracker.prompt_tokens_per_second = event.snapshot.prompt_tokens_per_second
            tracker.attribution_anomalies = event.snapshot.attribution_anomalies
            event = MetricsEvent(t=event.t, snapshot=tracker.snapshot(event.t))
        elif isinstance(event, SummaryEvent):
            timings = _prompt_timings(event)
            if timings is not None:
                tracker.on_timings(timings)  # the last chunk's timings, as live saw them last
            # Not recomputable (see the module's docstring): the live count, as recorded.
            tracker.attribution_anomalies = event.metrics.attribution_anomalies
            event = _summary(event, tracker, text)
        events.append(event)
    if recorded is None:
        stub = SummaryEvent(t=last_t, stop_reason=INCOMPLETE, metrics=tracker.snapshot())
        return Recomputed(events, _summary(stub, tracker, text))
    summary = next(e for e in reversed(events) if isinstance(e, SummaryEvent))
    return Recomputed(events, summary)


def _prompt_timings(summary: SummaryEvent | None) -> Timings | None:
    if summary is None or not summary.server_timings:
        return None
    return Timings.model_validate(summary.server_timings)


def _summary(recorded: SummaryEvent, tracker: MetricsTracker, text: list[str]) -> SummaryEvent:
    return SummaryEvent(
        t=recorded.t,
        metrics=tracker.snapshot(),
        stop_reason=recorded.stop_reason,
        server_timings=dict(recorded.server_timings),
        text="".join(text),
        token_ids=list(recorded.token_ids),  # as recorded: no token event carries an id
    )


class ReplayClock:
    """Recording time, advancing with the event loop's clock times ``speed``.

    ``speed`` None plays as fast as possible. Pausing freezes recording time; `step` pauses and
    moves time to the next token any waiting engine holds. Waiters are woken on every change.
    """

    def __init__(self, speed: float | None = 1.0) -> None:
        if speed is not None and not speed > 0:
            raise ValueError(f"replay speed must be > 0, not {speed}")
        self._speed = speed
        self._base = 0.0
        self._origin: float | None = None
        self._paused = False
        self._wake = asyncio.Event()
        self._position = 0.0
        """The latest recording time any waiter was released at."""
        self._waiting: dict[int, float] = {}
        self._pending_step = False
        """A step asked for while nobody waited (before a run): the next waiter takes it."""
        self._ids = itertools.count()

    @property
    def speed(self) -> float | None:
        """Recording seconds per real second; None: as fast as possible."""
        return self._speed

    @property
    def paused(self) -> bool:
        """Whether recording time stands still."""
        return self._paused

    def _loop_time(self) -> float:
        return asyncio.get_running_loop().time()

    def now(self) -> float:
        """Current recording time (infinite while playing as fast as possible)."""
        if self._paused or self._origin is None:
            return self._base
        if self._speed is None:
            return math.inf
        return self._base + (self._loop_time() - self._origin) * self._speed

    def restart(self) -> None:
        """Recording time 0, now (a new run); a pause stays in force."""
        self._base = self._position = 0.0
        self._origin = self._loop_time()
        self._changed()

    def pause(self) -> None:
        """Freeze recording time."""
        if not self._paused:
            self._base = self._frozen_now()
            self._paused = True
            self._changed()

    def resume(self) -> None:
        """Let recording time run again from where it stood."""
        if self._paused:
            self._paused = False
            self._origin = self._loop_time()
            self._changed()

    def toggle_pause(self) -> bool:
        """Pause or resume; returns whether it is now paused."""
        if self._paused:
            self.resume()
        else:
            self.pause()
        return self._paused

    def step(self) -> None:
        """Pause, then move recording time on to the next token a waiting engine holds."""
        self.pause()
        if self._waiting:
            self._base = max(self._base, min(self._waiting.values()))
            self._changed()
        else:
            self._pending_step = True

    def set_speed(self, speed: float | None) -> None:
        """Change speed from now on; time already played stays where it is."""
        if speed is not None and not speed > 0:
            raise ValueError(f"replay speed must be > 0, not {speed}")
        self._base = self._frozen_now()
        self._origin = self._loop_time()
        self._speed = speed
        self._changed()

    def _frozen_now(self) -> float:
        now = self.now()
        if math.isinf(now):
            # As fast as possible: time stands where the last event was released.
            return self._position
        return now

    def _changed(self) -> None:
        self._wake.set()
        self._wake = asyncio.Event()

    async def wait_until(self, t: float, step_to: float) -> None:
        """Return once recording time reaches ``t``; `step` would move it to ``step_to``."""
        if self._origin is None:
            self.restart()
        ident = next(self._ids)
        self._waiting[ident] = step_to
        if self._pending_step and self._paused and self.now() < t:
            self._pending_step = False
            self._base = max(self._base, step_to)
        try:
            while (now := self.now()) < t:
                wake = self._wake
                timeout = None
                if not self._paused and self._speed is not None:
                    timeout = (t - now) / self._speed
                try:
                    await asyncio.wait_for(wake.wait(), timeout)
                except TimeoutError:
                    continue
        finally:
            del self._waiting[ident]
        self._position = max(self._position, t)
        if self._speed is None and not self._paused:
            await asyncio.sleep(0)  # as fast as possible, but let the consumer draw


class ReplayEngine:
    """A `RunSource` that runs (`Runner`) a recorded session: no server, real timing, pause and
    step."""

    def __init__(self, session: Session, *, clock: ReplayClock | None = None) -> None:
        self.session = session
        self.recomputed = recompute(session)
        self.clock = clock or ReplayClock()
        self._owns_clock = clock is None
        self.events = list(self.recomputed.events)
        """What a run yields: the recomputed events, and an end for a recording cut short."""
        if session.summary is None:
            end = self.recomputed.summary
            why = session.problem or f"{session.name}: the recording ends before the run did"
            self.events += [ErrorEvent(t=end.t, message=why, kind="incomplete"), end]
        self._times = _effective_times(self.events)
        self._step_to = _step_targets(self.events, self._times)
        self.finished = False
        """Whether the last run played every event."""
        self.plays = 0
        """How many runs have started."""

    @classmethod
    def pair(cls, sessions: Sequence[Session], speed: float | None) -> list[ReplayEngine]:
        """Engines sharing one clock, to play side by side on the same time scale."""
        clock = ReplayClock(speed)
        return [cls(session, clock=clock) for session in sessions]

    @property
    def info(self) -> ServerInfo:
        """The recorded server, marked as a replay (nothing can be switched)."""
        return recorded_server_info(
            self.session.header.server, mode="replay", url=f"replay://{self.session.name}"
        )

    @property
    def server_control(self) -> None:
        """None: a replay shows what was recorded; there is no server to start or switch."""
        return None

    @property
    def recorder(self) -> None:
        """None: a replay is a recording already."""
        return None

    @property
    def following(self) -> None:
        """None: a replay plays one finished file."""
        return None

    @property
    def request(self) -> GenerationRequest:
        """What the recorded run asked for."""
        return self.session.header.request

    def ready_detail(self) -> str:
        """What the server bar says once the replay is open (a damaged file says so)."""
        detail = f"replay of {self.session.name}"
        if self.session.problem:
            detail += f" · {self.session.problem}"
        return detail

    async def run(self, request: GenerationRequest | None = None) -> EventStream:
        """The recorded events on the clock (``request`` is ignored: the recording's ran)."""
        self.finished = False
        self.plays += 1
        if self._owns_clock:
            self.clock.restart()
        for event, t, step_to in zip(self.events, self._times, self._step_to, strict=True):
            await self.clock.wait_until(t, step_to)
            yield event
        self.finished = True

    def log_tail(self, lines: int = 50) -> list[str]:
        """What was recorded about the server, in place of its log."""
        header = self.session.header
        server = header.server
        out = [
            f"replay of {self.session.path}",
            f"recorded {header.created:%Y-%m-%d %H:%M:%S} UTC by spectui {header.spectui_version}",
            f"llama-server {server.binary_version or '(version unknown)'} · {server.mode}",
            f"model {server.model or '(unknown)'} · spec {server.spec_label}",
        ]
        if server.flags:
            out.append("flags " + " ".join(server.flags))
        if self.session.problem:
            out.append(self.session.problem)
        return out[-lines:]

    def cancel_run(self) -> None:
        """Nothing to cancel in a recording: the UI stops reading it."""

    async def aclose(self) -> None:
        """Nothing to stop."""

    # -- controls the UI calls ------------------------------------------------------------------

    def toggle_pause(self) -> bool:
        """Pause or resume the replay; returns whether it is now paused."""
        return self.clock.toggle_pause()

    def step(self) -> None:
        """Pause and play up to the next token."""
        self.clock.step()


def _effective_times(events: Sequence[EngineEvent]) -> list[float]:
    """Each event's replay time: its ``t``, never earlier than the event before it.

    State events outside the request's clock carry t=0 (the final READY, say); they happen
    right after whatever came before them.
    """
    times: list[float] = []
    last = 0.0
    for event in events:
        last = max(last, event.t)
        times.append(last)
    return times


def _step_targets(events: Sequence[EngineEvent], times: Sequence[float]) -> list[float]:
    """For each event, the time of the first token at or after it (a step plays up to it)."""
    targets = list(times)
    following: float | None = None
    for index in range(len(events) - 1, -1, -1):
        if isinstance(events[index], TokenEvent):
            following = times[index]
        targets[index] = following if following is not None else times[index]
    return targets


def recorded_server_info(server: SessionServer, *, mode: str, url: str) -> ServerInfo:
    """The server pane's view of a recorded server, shown as `mode` at `url`."""
    return ServerInfo(
        mode=mode, url=url, version=server.binary_version, model=server.model, spec=server.spec
    )
