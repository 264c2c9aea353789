"""What the slots view draws: lanes, each holding the request it shows now (`LaneFeed`), and an
aggregate line (`SlotsSource`), from three sources.

- `HubLanes`, the proxy's: a `ProxyHub` listener that gives each request that starts the first
  free lane and keeps a finished request in its lane (final numbers) until the next request needs
  it; requests beyond the lanes wait for one. The proxy cannot see which slot serves a request
  (OpenAI-style chunks do not say), so its lanes are per concurrent request, and say 'slot ?'.
- `FollowLanes`, a follower's: the followed folder's newest session files, one per lane.
- `CompareLanes`, a `--concurrency` comparison's: one lane per client of the block running now,
  from the comparison's progress events (runs carry numbers, not tokens).
- `WatchLanes`, the live TUI's: the server's own slots from /slots (numbers, not tokens).
"""

from __future__ import annotations

import asyncio
import itertools
from collections import deque
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

from spectui.core.compare.models import CompareJob
from spectui.core.compare.progress import RunFinished, RunStarting
from spectui.core.compare.records import RunRecord
from spectui.core.events import RunMetrics, StepEvent, TokenEvent
from spectui.core.proxy.hub import LiveRequest, ProxyHub
from spectui.core.proxy.models import ProxyRecord, RequestStatus
from spectui.core.proxy.watch import ServerView, ServerWatcher, SlotView
from spectui.core.sessions.lanes import LaneRun, RecentSessions
from spectui.ui import format as fmt
from spectui.ui.widgets.slots import LaneNumbers

LANES = 4
"""Lanes when the source does not say how many slots the server has."""


class LaneFeed(Protocol):
    """The request a lane shows now."""

    @property
    def key(self) -> int:
        """Which request it is: a new key clears the lane."""

    @property
    def label(self) -> str:
        """'#14 · slot ?': who is in the lane (its numbers come from `numbers`)."""

    def events(self) -> Sequence[object]:
        """Its events so far (a list that grows; only its tokens are drawn)."""

    def numbers(self) -> LaneNumbers:
        """Its numbers now."""


class SlotsSource(Protocol):
    """What the slots view draws."""

    def feeds(self) -> Sequence[LaneFeed | None]:
        """One entry per lane: the request it shows, or None (idle)."""

    def aggregate_text(self) -> str:
        """The line(s) above the lanes."""


def numbers_of(metrics: RunMetrics | None, state: str, *, live: bool) -> LaneNumbers:
    """A request's lane numbers from its attributed metrics (rolling rate while live)."""
    if metrics is None:
        return LaneNumbers(state=state)
    rate = metrics.tokens_per_second
    if live and metrics.tokens_per_second_now is not None:
        rate = metrics.tokens_per_second_now
    return LaneNumbers(
        state=state,
        tokens=metrics.tokens,
        drafted=metrics.drafted,
        accepted=metrics.accepted,
        tokens_per_second=rate,
    )


def record_numbers(record: ProxyRecord) -> LaneNumbers:
    """A finished request's numbers: attributed, else what the server's final timings said."""
    state = record.status.value
    if record.metrics is not None:
        return numbers_of(record.metrics, state, live=False)
    return LaneNumbers(
        state=state,
        tokens=record.tokens,
        drafted=record.drafted,
        accepted=record.accepted,
        tokens_per_second=record.server_timings.get("predicted_per_second"),
    )


class RequestFeed:
    """A proxied request in a lane."""

    __slots__ = ("index", "live")

    def __init__(self, live: LiveRequest, index: int) -> None:
        self.live = live
        self.index = index

    @property
    def key(self) -> int:
        return self.live.info.id

    @property
    def label(self) -> str:
        return f"#{self.live.info.id} · slot ?"

    def events(self) -> Sequence[TokenEvent | StepEvent]:
        return self.live.events

    def numbers(self) -> LaneNumbers:
        record = self.live.record
        if record is not None:
            return record_numbers(record)
        return numbers_of(self.live.snapshot(), RequestStatus.STREAMING.value, live=True)


class HubLanes:
    """The proxy's requests in lanes: a `ProxyListener` on ``hub`` from its creation (the
    requests in flight then take lanes at once, in arrival order)."""

    def __init__(self, hub: ProxyHub, lanes: int = LANES) -> None:
        self.hub = hub
        self.lanes: list[RequestFeed | None] = [None] * lanes
        """What each lane shows."""
        self.waiting: deque[LiveRequest] = deque()
        """Requests in flight with no lane free (more requests than lanes)."""
        for live in sorted(hub.live.values(), key=lambda r: r.info.id):
            self.request_started(live)
        hub.listeners.append(self)

    def request_started(self, live: LiveRequest) -> None:
        """The first lane that is idle or shows a finished request takes it."""
        for index, feed in enumerate(self.lanes):
            if feed is None or feed.live.record is not None:
                self.lanes[index] = RequestFeed(live, index)
                return
        self.waiting.append(live)

    def request_finished(self, live: LiveRequest, record: ProxyRecord) -> None:
        """Its lane keeps it (final numbers) until a waiting request needs the lane."""
        if live in self.waiting:  # (ended before a lane came free: it is in the table)
            self.waiting.remove(live)
            return
        if not self.waiting:
            return
        for index, feed in enumerate(self.lanes):
            if feed is not None and feed.live is live:
                self.lanes[index] = RequestFeed(self.waiting.popleft(), index)
                return

    def feeds(self) -> Sequence[RequestFeed | None]:
        return self.lanes

    def aggregate_text(self) -> str:
        streaming = [f for f in self.lanes if f is not None and f.live.record is None]
        shown = [f.numbers() for f in self.lanes if f is not None]
        total = sum(n.tokens_per_second or 0.0 for n in shown if n.state == "streaming")
        drafted = sum(n.drafted or 0 for n in shown)
        accepted = sum(n.accepted or 0 for n in shown)
        acceptance = fmt.DASH if not drafted else f"{accepted / drafted:.0%}"
        waiting = f" · {len(self.waiting)} waiting for a lane" if self.waiting else ""
        return (
            f"{len(self.hub.live)} streaming{waiting} · "
            f"{fmt.rate(total if streaming else None)} total · "
            f"acceptance {acceptance} ({accepted}/{drafted})\n"
            f"{len(self.lanes)} lanes, one per concurrent request · slot ?: the proxy cannot "
            "tell which"
        )


class SessionFeed:
    """A followed session file in a lane."""

    __slots__ = ("run",)

    def __init__(self, run: LaneRun) -> None:
        self.run = run

    @property
    def key(self) -> int:
        return self.run.key

    @property
    def label(self) -> str:
        return f"{self.run.label} · slot ?"

    def events(self) -> Sequence[object]:
        return self.run.events

    def numbers(self) -> LaneNumbers:
        run = self.run
        state = "done" if run.ended else RequestStatus.STREAMING.value
        return numbers_of(run.metrics, state, live=not run.ended)


class FollowLanes:
    """A follower's lanes: the newest session files of the followed folder, one per lane,
    read-only. A proxy's `--record` writes each request when it ends (its lane fills at once);
    a presenter's `--broadcast` run grows in its lane."""

    def __init__(self, folder: Path, lanes: int = LANES) -> None:
        self.folder = folder
        self.sessions = RecentSessions(folder, lanes)

    def feeds(self) -> Sequence[SessionFeed | None]:
        return [None if run is None else SessionFeed(run) for run in self.sessions.poll()]

    def aggregate_text(self) -> str:
        runs = [run for run in self.sessions.lanes if run is not None]
        shown = [SessionFeed(run).numbers() for run in runs]
        streaming = [n for n in shown if n.state == RequestStatus.STREAMING.value]
        total = sum(n.tokens_per_second or 0.0 for n in streaming)
        drafted = sum(n.drafted or 0 for n in shown)
        accepted = sum(n.accepted or 0 for n in shown)
        acceptance = fmt.DASH if not drafted else f"{accepted / drafted:.0%}"
        return (
            f"{len(streaming)} streaming · {fmt.rate(total if streaming else None)} total · "
            f"acceptance {acceptance} ({accepted}/{drafted})\n"
            f"following {self.folder.name}/: its newest {len(self.sessions.lanes)} runs, a lane "
            "each (read-only)"
        )


class RunFeed:
    """A comparison's run in a lane: its job while it runs, its record once it ended."""

    __slots__ = ("job", "key", "record")

    def __init__(self, job: CompareJob, key: int) -> None:
        self.job = job
        self.key = key
        self.record: RunRecord | None = None

    @property
    def label(self) -> str:
        job = self.job
        return f"{job.config} · {job.prompt} · client {job.client + 1}/{job.level}"

    def events(self) -> Sequence[object]:
        return ()  # (a comparison reports runs, not their tokens)

    def numbers(self) -> LaneNumbers:
        record = self.record
        if record is None:
            return LaneNumbers(state=RequestStatus.STREAMING.value)
        return LaneNumbers(
            state="done" if record.ok else "error",
            tokens=record.tokens,
            drafted=record.drafted,
            accepted=record.accepted,
            tokens_per_second=record.tokens_per_second,
        )


class CompareLanes:
    """A `--concurrency` comparison's clients, a lane each, from its progress events (`take`):
    a run takes its client's lane when it starts and shows its numbers when it ends."""

    def __init__(self, lanes: int) -> None:
        self.lanes: list[RunFeed | None] = [None] * lanes
        """What each lane (client) shows."""
        self.block: tuple[int, str, int] | None = None
        """(round, config, level) of the block running now."""
        self._keys = itertools.count(1)

    def take(self, event: object) -> None:
        """One of the comparison's events (the others are left to its own screen)."""
        if isinstance(event, RunStarting):
            job = event.job
            if job.block != self.block:  # a new block: its clients start on clean lanes
                self.block = job.block
                self.lanes = [None] * len(self.lanes)
            if job.client < len(self.lanes):
                self.lanes[job.client] = RunFeed(job, next(self._keys))
        elif isinstance(event, RunFinished):
            record = event.record
            for feed in self.lanes:
                if feed is not None and feed.job.seq == record.seq:
                    feed.record = record

    def feeds(self) -> Sequence[RunFeed | None]:
        return self.lanes

    def aggregate_text(self) -> str:
        shown = [feed.numbers() for feed in self.lanes if feed is not None]
        running = sum(1 for n in shown if n.state == RequestStatus.STREAMING.value)
        drafted = sum(n.drafted or 0 for n in shown)
        accepted = sum(n.accepted or 0 for n in shown)
        acceptance = fmt.DASH if not drafted else f"{accepted / drafted:.0%}"
        block = "waiting for the first run"
        if self.block is not None:
            round_, config, level = self.block
            block = f"{config} · round {round_} · {level} at once"
        return (
            f"{block} · {running} running · acceptance {acceptance} ({accepted}/{drafted}) of "
            "the runs shown\n"
            f"{len(self.lanes)} lanes, one per client; a run's numbers come when it ends"
        )


WATCH_S = 1.0
"""How often a server's /slots and /metrics are polled for its lanes."""


class SlotFeed:
    """One of a server's slots, as its /slots says (numbers, no tokens: those only pass through
    the proxy)."""

    __slots__ = ("slot",)

    def __init__(self, slot: SlotView) -> None:
        self.slot = slot

    @property
    def key(self) -> int:
        return self.slot.task if self.slot.task is not None else -1

    @property
    def label(self) -> str:
        task = "" if self.slot.task is None else f" · task {self.slot.task}"
        return f"slot {self.slot.id}{task}"

    def events(self) -> Sequence[object]:
        return ()

    def numbers(self) -> LaneNumbers:
        slot = self.slot
        if not slot.busy:  # (the server resets a slot's counts when its task ends)
            return LaneNumbers(state="idle")
        return LaneNumbers(
            state=RequestStatus.STREAMING.value,
            tokens=slot.decoded,
            tokens_per_second=slot.tokens_per_second,
        )


class WatchLanes:
    """A server's own slots, a lane each (the first ``lanes``), from `ServerWatcher` polls of
    /slots and /metrics: what the live TUI's `s` shows. `run` polls until cancelled."""

    def __init__(self, url: str, lanes: int = LANES) -> None:
        self.watcher = ServerWatcher(url)
        self.lanes = lanes
        self.view: ServerView | None = None
        """The latest poll."""

    async def run(self) -> None:
        """Poll every `WATCH_S` until cancelled (the screen's worker)."""
        try:
            while True:
                self.view = await self.watcher.poll()
                await asyncio.sleep(WATCH_S)
        finally:
            await self.watcher.aclose()

    def feeds(self) -> Sequence[SlotFeed | None]:
        slots = (self.view.slots or []) if self.view is not None else []
        feeds: list[SlotFeed | None] = [SlotFeed(slot) for slot in slots[: self.lanes]]
        return feeds + [None] * (self.lanes - len(feeds))

    def aggregate_text(self) -> str:
        view = self.view
        if view is None:
            return "reading /slots…\n"
        if view.problem:
            return f"{view.problem}\n"
        slots = view.slots or []
        busy = sum(1 for slot in slots if slot.busy)
        window = view.spec_window
        acceptance = window.acceptance_rate if window is not None else None
        shown = "" if len(slots) <= self.lanes else f" (the first {self.lanes} shown)"
        return (
            f"{busy} of {len(slots)} slots busy{shown} · "
            f"{fmt.rate(view.generation_tokens_per_second)} total · acceptance "
            f"{fmt.pct(acceptance)} (server-wide, as requests end)\n"
            + (
                view.slots_note
                or "the server's own slots: numbers only; tokens pass through `spectui proxy`"
            )
        )
