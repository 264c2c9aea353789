"""Charts: tokens/s over time, accepted drafts per step, acceptance by draft position.

Data arrives at up to 20 Hz but the charts redraw at most every `REDRAW_INTERVAL_S` (and once
when a run ends): drawing a plot per token would cost more than the generation it shows. Series
live in bounded deques. In a small terminal the tokens/s chart is a sparkline; from 120×36 up it
is a plotext line plot (`plot.LeanPlotextPlot`); sparklines draw their own strips (`sparkline`).

Tokens/s over time is counted from the tokens' own timestamps in fixed buckets of client time,
not sampled from metrics snapshots: snapshots coalesce under load, tokens never do, so the chart
is the same however the UI kept up (and a replayed run draws identically).
"""

from __future__ import annotations

from collections import deque
from time import monotonic
from typing import ClassVar

from rich.segment import Segment
from rich.style import Style
from textual.app import ComposeResult
from textual.color import Color
from textual.containers import Horizontal, Vertical
from textual.strip import Strip
from textual.widget import Widget
from textual.widgets import Label, Sparkline
from textual_plotext import PlotextPlot

from spectui.core.events import RunMetrics, StepEvent, TokenEvent
from spectui.ui.widgets.plot import LeanPlotextPlot
from spectui.ui.widgets.sparkline import StripSparkline

REDRAW_INTERVAL_S = 2.0
"""Charts redraw at most every two seconds, and only when what they show changed: a frame with
the three charts cost ~25 ms in a real terminal (plotext alone ~8 ms), at 1 Hz two fifths of
what drawing a 50 tok/s run cost; a trend over tens of seconds reads the same at 0.5 Hz."""

SERIES_LENGTH = 600
"""Samples kept per series (older ones scroll off)."""

BUCKET_S = 0.25
"""Width of a tokens/s bucket, in seconds of the run's own clock."""

BLOCKS = " ▁▂▃▄▅▆▇█"


class PositionBars(Widget):
    """Vertical bars, one per draft position, on a fixed 0–100% scale.

    A fixed scale matters here: a sparkline's min–max scaling would make 90% vs 80% look like
    full vs empty.
    """

    COMPONENT_CLASSES: ClassVar[set[str]] = {"bars--bar", "bars--axis"}
    DEFAULT_CSS = """
    PositionBars { height: 1fr; }
    PositionBars > .bars--bar { color: $spec-chart; }
    PositionBars > .bars--axis { color: $text-muted; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.rates: list[float] = []
        self._key: object = None
        self._lines: list[Strip] = []

    def cells(self, rates: list[float]) -> list[int]:
        """The bars' heights in eighths of a cell, as drawn at the current size."""
        height = max(1, self.size.height - 1)
        return [round(rate * height * 8) for rate in rates]

    def render_line(self, y: int) -> Strip:
        # Strips built here, not a `Text` for Textual to lay out: that generic path made this
        # small chart cost ~4 ms a redraw, as much as the rest of a token frame.
        key = (tuple(self.rates), self.size, self.rich_style)
        if key != self._key:
            self._key, self._lines = key, self._build()
        if y < len(self._lines):
            return self._lines[y]
        return Strip.blank(self.size.width, self.rich_style)

    def _build(self) -> list[Strip]:
        base = self.rich_style
        bar = base + self.get_component_rich_style("bars--bar")
        axis = base + self.get_component_rich_style("bars--axis")
        width_all = self.size.width
        if not self.rates:
            return [_strip([Segment("no drafts yet", axis)], width_all, base)]
        height = max(1, self.size.height - 1)
        width = max(1, min(6, width_all // max(1, len(self.rates))))
        rates = self.rates[: max(1, width_all // width)]
        heights = self.cells(rates)
        lines = []
        for row in range(height, 0, -1):
            cells = []
            for bar_eighths in heights:
                cell = BLOCKS[max(0, min(8, bar_eighths - (row - 1) * 8))]
                cells.append((cell * (width - 1) or cell).ljust(width))
            lines.append(_strip([Segment("".join(cells), bar)], width_all, base))
        labels = "".join(str(position)[-1].ljust(width) for position in range(1, len(rates) + 1))
        lines.append(_strip([Segment(labels, axis)], width_all, base))
        return lines


def _strip(segments: list[Segment], width: int, base: Style) -> Strip:
    return Strip(segments).crop_extend(0, width, base)


class ChartsPane(Horizontal):
    """The three charts side by side; `replot` redraws whatever changed."""

    DEFAULT_CSS = """
    ChartsPane {
        height: 4;
        padding: 0 1;
    }
    ChartsPane > Vertical {
        width: 1fr;
        padding-right: 1;
    }
    ChartsPane .chart-title {
        color: $text-muted;
        text-style: italic;
    }
    ChartsPane Sparkline { height: 1fr; }
    ChartsPane Sparkline > .sparkline--min-color { color: $spec-target; }
    ChartsPane Sparkline > .sparkline--max-color { color: $spec-chart; }
    ChartsPane > Vertical > #tps-plot { display: none; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.buckets: deque[list[int]] = deque(maxlen=SERIES_LENGTH)
        """[bucket number, tokens whose timestamp falls in it]; gaps are filled with zeros."""
        self.accepted_per_step: deque[int] = deque(maxlen=SERIES_LENGTH)
        self.position_rates: list[float] = []
        self._last_replot = 0.0
        self._plotted: list[tuple[float, float]] | None = None
        """The tokens/s series the plot shows (None: not drawn yet)."""
        self._dirty = False

    def compose(self) -> ComposeResult:
        with Vertical(id="chart-tps"):
            yield Label("tokens/s", classes="chart-title")
            yield StripSparkline([], id="tps-spark", classes="compact")
            yield LeanPlotextPlot(id="tps-plot", classes="full")
        with Vertical(id="chart-steps"):
            yield Label("accepted per step", classes="chart-title")
            yield StripSparkline([], id="steps-spark")
        with Vertical(id="chart-positions"):
            yield Label("accept by position", classes="chart-title")
            yield PositionBars(id="position-bars")

    def on_mount(self) -> None:
        self.set_interval(REDRAW_INTERVAL_S, self._tick)

    def show_plot(self, shown: bool) -> None:
        """Show the plotext chart (wide terminals) or not; a chart shown anew is drawn now."""
        plot = self.query_one("#tps-plot", PlotextPlot)
        plot.display = shown
        # Compared with what it last drew, not with whether it was hidden: a wide screen's CSS
        # can show the chart before this is called, and a run that has ended sends no more data.
        if shown and self._plotted != self.tps:
            self.replot()

    def reset(self) -> None:
        self.buckets.clear()
        self.accepted_per_step.clear()
        self.position_rates = []
        self.replot()

    def add_steps(self, steps: tuple[StepEvent, ...]) -> None:
        self.accepted_per_step.extend(step.accepted for step in steps)
        self._dirty = bool(steps) or self._dirty

    def add_tokens(self, tokens: tuple[TokenEvent, ...]) -> None:
        for token in tokens:
            number = int(token.t / BUCKET_S)
            last = self.buckets[-1][0] if self.buckets else number
            if self.buckets and number <= last:
                self.buckets[-1][1] += 1  # same bucket (or a timestamp from the past: no reorder)
                continue
            self.buckets.extend([n, 0] for n in range(last + 1, number))  # a stall shows as zero
            self.buckets.append([number, 1])
        self._dirty = self._dirty or bool(tokens)

    @property
    def tps(self) -> list[tuple[float, float]]:
        """(bucket midpoint in seconds, tokens/s) for every complete bucket."""
        complete = list(self.buckets)[:-1]  # the newest bucket is still filling
        return [((n + 0.5) * BUCKET_S, count / BUCKET_S) for n, count in complete]

    def add_metrics(self, metrics: RunMetrics) -> None:
        if metrics.steps:
            self.position_rates = [n / metrics.steps for n in metrics.accepted_per_position]
        self._dirty = True

    def _tick(self) -> None:
        if self._dirty:
            self.replot()

    def replot_if_due(self) -> None:
        """Replot if the charts' data changed and the last replot is old enough.

        Called as data arrives with a token batch: the charts are then drawn in the frame that
        draws the tokens, not a frame of their own; the tick only catches a stream gone quiet.
        """
        if self._dirty and monotonic() - self._last_replot >= REDRAW_INTERVAL_S:
            self.replot()

    def replot(self) -> None:
        """Redraw all charts from the series (cheap enough at 1 Hz, too slow per token)."""
        self._dirty = False
        self._last_replot = monotonic()
        with self.app.batch_update():
            # Each chart is redrawn only when its own data changed (and only where it is shown):
            # with no drafting, two of the three never change during a run.
            tps = self.tps
            _set_data(self.query_one("#tps-spark", Sparkline), [rate for _, rate in tps])
            _set_data(self.query_one("#steps-spark", Sparkline), list(self.accepted_per_step))
            bars = self.query_one(PositionBars)
            if bars.cells(bars.rates) != bars.cells(self.position_rates):
                bars.refresh()  # (rates move a little with every step; the bars seldom do)
            bars.rates = self.position_rates
            plot = self.query_one("#tps-plot", PlotextPlot)
            if plot.display and tps != self._plotted:
                self._plotted = tps
                self._plot_tps(plot, tps)

    def _plot_tps(self, plot: PlotextPlot, tps: list[tuple[float, float]]) -> None:
        plt = plot.plt
        plt.clear_figure()
        plt.xlabel("s")
        if tps:
            colour = Color.parse(self.app.theme_variables.get("primary", "white")).rgb
            points = _thinned(tps, 2 * max(1, plot.size.width))
            plt.plot([t for t, _ in points], [r for _, r in points], color=colour)
            plt.ylim(0, max(r for _, r in points) * 1.1 or 1)
        plot.refresh()


def _thinned(points: list[tuple[float, float]], most: int) -> list[tuple[float, float]]:
    """At most ``most`` points, each the mean of a run of neighbours: a plot ``most`` / 2 cells
    wide shows no more, and plotext's cost grows with the points (600 of them: ~10 ms a redraw,
    120: ~4 ms)."""
    if len(points) <= most:
        return points
    size = -(-len(points) // most)
    runs = [points[i : i + size] for i in range(0, len(points), size)]
    return [(sum(t for t, _ in run) / len(run), sum(r for _, r in run) / len(run)) for run in runs]


def _set_data(sparkline: Sparkline, data: list[float]) -> None:
    """Give ``sparkline`` new data only when it differs (setting it always redraws)."""
    if list(sparkline.data or []) != data:
        sparkline.data = data
