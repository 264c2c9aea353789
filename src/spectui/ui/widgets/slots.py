"""The slots view's parts: one lane per slot — its tokens coloured by origin, a page at a time
(`LaneView`), its own acceptance and tokens/s in its title — and the server's aggregate line
above the lanes.

Lanes tile two by two where a lane still gets a useful width and height (`TILE_MIN`), and stack
one under the other below that (80×24: four lanes of a title line and four lines of tokens).
Each lane's numbers are on a header line of their own, repainted when its text changes (a
border title that changed would repaint the whole lane, every second); a tiled lane's border
names its request, a stacked lane has no border and its header names it too.
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.cells import cell_len
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Container, Vertical
from textual.events import Resize
from textual.strip import Strip
from textual.widget import Widget

from spectui.core.events import TokenEvent
from spectui.ui import format as fmt
from spectui.ui.widgets.lane_view import LaneView

TILE_MIN = (100, 30)
"""The smallest grid (columns, rows) where lanes tile 2×2; below either, they stack."""

IDLE = "idle · no request in this lane yet"
"""An empty lane's placeholder."""


@dataclass(frozen=True, slots=True)
class LaneNumbers:
    """What a lane's title says about its request."""

    state: str = "idle"
    """'streaming', 'done', 'cancelled', 'error', or 'idle'."""
    tokens: int | None = None
    """Tokens generated so far."""
    drafted: int | None = None
    """Draft tokens proposed (the response's own counters)."""
    accepted: int | None = None
    """Draft tokens accepted."""
    tokens_per_second: float | None = None
    """Its decode rate (rolling while it streams, over the whole response once done)."""

    @property
    def acceptance_rate(self) -> float | None:
        """Accepted / drafted."""
        if self.drafted and self.accepted is not None:
            return self.accepted / self.drafted
        return None

    def text(self) -> str:
        """'live · acc 63% · 48.2 t/s · 41/26 drft/acc · 120 tok' (drafted/accepted)."""
        if self.state == "idle":
            return "idle"
        # (a tiled lane is 60 columns at 120: 'streaming' would cut the token count off)
        state = "live" if self.state == "streaming" else self.state
        rate = self.acceptance_rate
        acceptance = fmt.DASH if rate is None else f"{rate:.0%}"
        pair = fmt.DASH if self.drafted is None else f"{self.drafted}/{self.accepted}"
        return (
            f"{state} · acc {acceptance} · {fmt.rate(self.tokens_per_second)} · "
            f"{pair} drft/acc · {fmt.num(self.tokens)} tok"
        )


class LineText(Widget):
    """Fixed lines of text, repainted (never laid out again) when they change: the numbers
    change every second, and a `Static`'s update asks for a layout of the whole screen.

    Each line is drawn straight into a strip, cut with an ellipsis where it is too long: a
    `Text` rendered through Textual's content pipeline cost ~0.35 ms a line, and the four lane
    headers change every second."""

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.text = ""
        """What is shown (tests read it)."""
        self._strips: dict[int, Strip] = {}
        self._base: Style | None = None

    def show(self, text: str) -> None:
        if text != self.text:  # (an unchanged line costs no frame)
            self.text = text
            self._strips.clear()
            self.refresh()

    def render_line(self, y: int) -> Strip:
        if (strip := self._strips.get(y)) is not None and strip.cell_length == self.size.width:
            return strip
        if (base := self._base) is None:  # (it walks the ancestors: once per style change)
            base = self._base = self.rich_style
        width = self.size.width
        lines = self.text.splitlines()
        line = Text(lines[y] if y < len(lines) else "", end="")
        line.truncate(width, overflow="ellipsis")
        text = line.plain
        segments = [Segment(text, base)] if text else []
        if (cells := cell_len(text)) < width:  # (padded as Textual pads a rendered line)
            segments.append(Segment(" " * (width - cells), Style(bgcolor=base.bgcolor)))
        strip = self._strips[y] = Strip(segments, width)
        return strip

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._base = None
        self._strips.clear()


class SlotLane(Vertical):
    """One lane: a header line (who is in it, and its numbers) over its token pane."""

    DEFAULT_CSS = """
    SlotLane {
        height: 1fr;
        width: 1fr;
        border: round $primary;
        border-title-color: $text;
        padding: 0 0 0 1;
    }
    SlotLane.-streaming {
        border: round $secondary;
    }
    SlotLane > .lane-header {
        height: 1;
        color: $text-muted;
    }
    """

    def __init__(self, index: int, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.index = index
        """0 for the first lane."""
        self.label = ""
        """Who is in the lane ('#14 · slot ?'), without the numbers."""
        self.numbers = LaneNumbers()
        """The numbers shown."""
        self.stacked = False
        """Stacked: no border, the header names the lane too. Tiled: the border's title does."""
        self._header = LineText(classes="lane-header")
        self._view = LaneView()

    def compose(self) -> ComposeResult:
        yield self._header
        yield self._view

    def on_mount(self) -> None:
        self._view.placeholder = IDLE
        self._retitle()

    @property
    def view(self) -> LaneView:
        return self._view

    @property
    def header(self) -> LineText:
        return self._header

    def begin(self, label: str) -> None:
        """A new request takes the lane."""
        self.label = label
        self.numbers = LaneNumbers(state="streaming")
        view = self._view
        view.placeholder = "waiting for the first token…"
        view.clear()
        self.set_class(True, "-streaming")
        self._retitle()

    def idle(self) -> None:
        """Nothing in the lane any more."""
        self.label = ""
        self.numbers = LaneNumbers()
        view = self._view
        view.placeholder = IDLE
        view.clear()
        self.set_class(False, "-streaming")
        self._retitle()

    def add(self, tokens: tuple[TokenEvent, ...]) -> None:
        """A batch of the request's tokens (one refresh of the pane per batch)."""
        self._view.add(tokens)

    def show(self, numbers: LaneNumbers) -> None:
        """The request's numbers now: only the header line is repainted, when it changed."""
        if numbers != self.numbers:
            if (numbers.state == "streaming") != (self.numbers.state == "streaming"):
                self.set_class(numbers.state == "streaming", "-streaming")
            self.numbers = numbers
            self._header.show(self._header_text())

    def finish(self, numbers: LaneNumbers) -> None:
        """The request ended: its final numbers, and the pane settles at its end."""
        self.show(numbers)
        self._view.settle()

    def set_stacked(self, stacked: bool) -> None:
        if stacked != self.stacked:
            self.stacked = stacked
            self._retitle()

    @property
    def title_text(self) -> str:
        """Who is in the lane and its numbers, as one line (tests read it)."""
        return f"{self.name_text} · {self.numbers.text()}"

    @property
    def name_text(self) -> str:
        """'lane 2 · #14 · slot ?'."""
        lane = f"lane {self.index + 1}"
        return f"{lane} · {self.label}" if self.label else lane

    def _header_text(self) -> str:
        # Stacked (80 columns) the header is the lane's only title, and must fit one line.
        if self.stacked:
            return self.title_text.removeprefix("lane ")
        return self.numbers.text()

    def _retitle(self) -> None:
        title = "" if self.stacked else self.name_text
        if self.border_title != title:  # (a new title repaints the whole lane: rarely)
            self.border_title = title
        self._header.show(self._header_text())


class SlotsAggregate(LineText):
    """The aggregate over the lanes (tokens/s, acceptance, requests streaming) and what a lane
    stands for: two lines."""

    DEFAULT_CSS = """
    SlotsAggregate {
        height: 2;
        padding: 0 1;
        background: $panel;
        color: $text;
    }
    """


class SlotsGrid(Container):
    """The lanes: tiled 2×2 where they fit (`TILE_MIN`), stacked below that."""

    DEFAULT_CSS = """
    SlotsGrid {
        height: 1fr;
        layout: vertical;
    }
    SlotsGrid.-tiled {
        layout: grid;
        grid-size: 2;
        grid-rows: 1fr;
        grid-columns: 1fr;
    }
    /* (here, not in SlotLane's own styles: those are scoped to the lane) */
    SlotsGrid.-stacked > SlotLane {
        border: none;
        padding: 0;
    }
    SlotsGrid.-stacked > SlotLane > .lane-header {
        background: $primary-muted;
        color: $text;
        padding: 0 1;
    }
    SlotsGrid.-stacked > SlotLane.-streaming > .lane-header {
        background: $secondary-muted;
    }
    SlotsGrid.-stacked > SlotLane > LaneView {
        padding: 0 1 0 1;
    }
    """

    def __init__(self, lanes: int, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.lanes = [SlotLane(index, id=f"lane-{index + 1}") for index in range(lanes)]
        """The lanes, first to last."""

    def compose(self) -> ComposeResult:
        yield from self.lanes

    def on_resize(self, event: Resize) -> None:
        self.fit(event.size.width, self.screen.size.height)

    def fit(self, width: int, height: int) -> None:
        """Tile or stack for a grid ``width`` wide on a screen ``height`` tall."""
        tiled = len(self.lanes) > 1 and width >= TILE_MIN[0] and height >= TILE_MIN[1]
        self.set_class(tiled, "-tiled")
        self.set_class(not tiled, "-stacked")
        for lane in self.lanes:
            lane.set_stacked(not tiled)
