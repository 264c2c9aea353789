"""The slots view (`s`): every slot's generation at once, one lane each, and the aggregate above.

It draws a `SlotsSource` (`spectui.ui.lanes`: the proxy's requests, a follower's runs, a
`--concurrency` comparison's clients). Redraws are batched: every `PULL_S` each lane gets the
tokens that arrived since the last pull, all lanes in one frame (a lane repaints the lines they
changed), every `NUMBERS_EVERY` pulls the lanes' numbers and the aggregate line, repainted only
when their text changed. Four streams are watched, not read token by token, so a lane moves three
times a second and its numbers once: at four lanes of 50 tok/s each the view's frames were most
of its cost (bench/README.md, "slots view").
"""

from __future__ import annotations

from typing import ClassVar, Protocol, runtime_checkable

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.widgets import Footer

from spectui.core.engine.base import RunSource
from spectui.core.events import TokenEvent
from spectui.core.proxy.models import RequestStatus
from spectui.core.stream.run import READ_GAP_S
from spectui.ui.compositor import use_lean_compositor
from spectui.ui.lanes import LANES, FollowLanes, LaneFeed, SlotsSource, WatchLanes
from spectui.ui.widgets.slots import SlotLane, SlotsAggregate, SlotsGrid

PULL_S = READ_GAP_S
"""Tokens reach the lanes in batches, three a second: the pace the live token pane draws a thin
stream at. Each pull costs a frame of every lane's changed lines whatever it carries; at five a
second the frames and pulls were two thirds of what the view drew."""

NUMBERS_EVERY = 3
"""Titles and the aggregate line are looked at every this many pulls (1 Hz)."""

HELP = (
    "One lane per slot: its tokens coloured by origin (accepted drafts underlined), its "
    "acceptance and tokens/s in its title; above, the total over the lanes. s or esc: back · "
    "q quit."
)


NO_LANES = (
    "no slots to show here (a replay): run `spectui proxy` (its proxy screen: s), attach to "
    "a server, or follow a proxy's --record folder (spectui follow DIR: s)"
)
"""What `s` says where there is nothing to draw lanes from."""


@runtime_checkable
class Polled(Protocol):
    """A source that polls something while it is shown (the screen runs it as a worker)."""

    async def run(self) -> None:
        """Poll until cancelled."""


def slots_screen_for(source: RunSource) -> SlotsScreen | None:
    """The slots view a run source can feed, or None: a follower's (the followed folder's runs),
    or a real server's own slots (/slots)."""
    if (follower := source.following) is not None:
        lanes = FollowLanes(follower.folder)
        return SlotsScreen(lanes, len(lanes.sessions.lanes))
    info = source.info
    if info.mode in ("launched", "attached") and info.url:
        return SlotsScreen(WatchLanes(info.url), LANES)
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
        if isinstance(self.source, Polled):  # (cancelled with the screen)
            self.run_worker(self.source.run(), group="slots-poll", exit_on_error=False)

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
                elif self._keys[index] is not None:  # the source emptied the lane
                    self._keys[index] = None
                    lane.idle()
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
        # (A list that shrank was dropped by the proxy screen's bound: nothing more comes.)
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
