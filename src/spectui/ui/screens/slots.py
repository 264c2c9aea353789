"""The slots view (`s`): every slot's generation at once, one lane each, and the aggregate above.

It draws a `SlotsSource`: lanes, each holding the request it shows now (`LaneFeed`), and the
aggregate line. `HubLanes` is the proxy's source: it listens to the `TrafficHub`, gives each
request that starts the first free lane, and keeps a finished request in its lane (final
numbers) until the next request needs the lane; requests beyond the lanes wait for one. The
proxy cannot see which slot serves a request (OpenAI-style chunks do not say), so its lanes are
per concurrent request, which the title says.

Redraws are batched: every `PULL_S` each lane gets the tokens that arrived since the last pull
(one refresh per lane), every `NUMBERS_EVERY` pulls the titles and the aggregate line, which
change only when their text does.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from pathlib import Path
from typing import ClassVar, Protocol, runtime_checkable

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.widgets import Footer

from spectui.core.events import RunMetrics, StepEvent, TokenEvent
from spectui.core.proxy.hub import LiveRequest, TrafficHub
from spectui.core.proxy.models import RequestStatus, TrafficRecord
from spectui.core.sessions.lanes import LaneRun, RecentSessions
from spectui.core.sessions.tail import SessionFollower
from spectui.ui import format as fmt
from spectui.ui.compositor import use_lean_compositor
from spectui.ui.widgets.slots import LaneNumbers, SlotLane, SlotsAggregate, SlotsGrid

PULL_S = 0.1
"""Tokens reach the lanes in batches, ten a second."""

NUMBERS_EVERY = 5
"""Titles and the aggregate line are looked at every this many pulls (2 Hz)."""

LANES = 4
"""Lanes when the source does not say how many slots the server has."""

HELP = (
    "One lane per slot: its tokens coloured by origin (accepted drafts underlined), its "
    "acceptance and tokens/s in its title; above, the total over the lanes. s or esc: back · "
    "q quit."
)


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


def record_numbers(record: TrafficRecord) -> LaneNumbers:
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
    """The proxy's requests in lanes: a `TrafficListener` on ``hub`` from its creation (the
    requests in flight then take lanes at once, in arrival order)."""

    def __init__(self, hub: TrafficHub, lanes: int = LANES) -> None:
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

    def request_finished(self, live: LiveRequest, record: TrafficRecord) -> None:
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


@runtime_checkable
class FollowsSessions(Protocol):
    """An engine that follows a presenter's session files (`spectui follow`)."""

    @property
    def follower(self) -> SessionFollower:
        """What it follows."""


NO_LANES = (
    "the slots view needs concurrent requests: run `spectui proxy` (its Traffic screen: s), "
    "or follow a proxy's --record folder (spectui follow DIR: s)"
)
"""What `s` says where there is nothing to draw lanes from."""


def slots_screen_for(engine: object) -> SlotsScreen | None:
    """The slots view an engine can feed (a follower's: the followed folder's runs), or None."""
    if isinstance(engine, FollowsSessions):
        source = FollowLanes(engine.follower.folder)
        return SlotsScreen(source, len(source.sessions.lanes))
    return None


class SlotsScreen(Screen[None]):
    """The lanes of a `SlotsSource`, live; `s` or escape goes back."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("s,escape", "app.pop_screen", "Back"),
        Binding("question_mark", "help", "Help", key_display="?"),
        Binding("q", "app.quit", "Quit"),
    ]

    def __init__(self, source: SlotsSource, lanes: int) -> None:
        super().__init__()
        use_lean_compositor(self)
        self.source = source
        self.grid = SlotsGrid(lanes, id="slots-grid")
        self.aggregate = SlotsAggregate(id="slots-aggregate")
        self._keys: list[int | None] = [None] * lanes
        self._cursors = [0] * lanes
        self._finished = [False] * lanes
        self._ticks = 0

    def compose(self) -> ComposeResult:
        yield self.aggregate
        yield self.grid
        yield Footer()

    def on_mount(self) -> None:
        self.pull(numbers=True)
        self.set_interval(PULL_S, self.pull, name="slots-pull")

    @property
    def lanes(self) -> list[SlotLane]:
        return self.grid.lanes

    def pull(self, *, numbers: bool = False) -> None:
        """New tokens into each lane; its numbers and the aggregate every `NUMBERS_EVERY`."""
        self._ticks += 1
        numbers = numbers or self._ticks % NUMBERS_EVERY == 0
        with self.app.batch_update():
            for index, (lane, feed) in enumerate(
                zip(self.lanes, self.source.feeds(), strict=False)
            ):
                if feed is not None:
                    self._pull_lane(index, lane, feed, numbers=numbers)
            if numbers:
                self.aggregate.show(self.source.aggregate_text())

    def _pull_lane(self, index: int, lane: SlotLane, feed: LaneFeed, *, numbers: bool) -> None:
        if feed.key != self._keys[index]:
            self._keys[index], self._cursors[index], self._finished[index] = feed.key, 0, False
            lane.begin(feed.label)
            numbers = True
        if self._finished[index]:
            return
        events = feed.events()
        # (A list that shrank was dropped by the Traffic screen's bound: nothing more comes.)
        cursor = min(self._cursors[index], len(events))
        self._cursors[index] = len(events)
        tokens = tuple(e for e in events[cursor:] if isinstance(e, TokenEvent))
        if tokens:
            lane.add(tokens)
        if numbers:
            # Its record is set only once every line was counted (the same event loop as the
            # proxy), so a request shown as ended has had all its tokens drawn above.
            shown = feed.numbers()
            if shown.state == RequestStatus.STREAMING.value:
                lane.show(shown)
            else:
                self._finished[index] = True
                lane.finish(shown)

    def action_help(self) -> None:
        self.notify(HELP, title="Slots", timeout=12)
