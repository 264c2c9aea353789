"""A redraw at most every so often, in the frame of the data that makes it due.

The panes that show numbers (metrics, charts) get data with every token batch, four times a
second or more, and redraw far less often. A redraw is due once its interval has passed: the
next batch then draws it, in the frame that draws its tokens. Data that stops coming (a stalled
stream) is drawn by a timer, armed past the point where a streaming run's next batch would have
drawn it: a timer due sooner fired between batches and cost a frame of its own (at 50 tok/s,
half of the metrics pane's redraws and most of the charts' were such frames).
"""

from __future__ import annotations

from collections.abc import Callable
from time import monotonic

from textual.timer import Timer
from textual.widget import Widget

from spectui.core.stream.run import READ_GAP_S

GRACE_S = 2 * READ_GAP_S
"""How long past due a redraw waits for the next batch before its timer draws it: a streaming
run's batches come at least every `READ_GAP_S` (`ui.bridge`), so one always lands first."""


class Throttle:
    """Calls ``redraw`` at most every ``interval`` seconds; see the module."""

    def __init__(self, widget: Widget, interval: float, redraw: Callable[[], None]) -> None:
        self.widget = widget
        self.interval = interval
        self._redraw = redraw
        # (not 0: the monotonic clock counts from boot, and a machine up for less than the
        # interval would hold the first redraw back)
        self._last = float("-inf")
        self._timer: Timer | None = None

    @property
    def due(self) -> bool:
        """Whether the interval has passed since the last redraw."""
        return monotonic() - self._last >= self.interval

    def soon(self) -> None:
        """New data: redraw now if due, else with the next data or, if none comes, by timer."""
        if self.due:
            self.now()
        elif self._timer is None:
            wait = self._last + self.interval + GRACE_S - monotonic()
            self._timer = self.widget.set_timer(max(0.0, wait), self.now)

    def now(self) -> None:
        """Redraw at once (a run's start and end, a theme, a resize)."""
        if self._timer is not None:
            self._timer.stop()
            self._timer = None
        self._last = monotonic()
        self._redraw()
