"""Charts: tokens/s over time, accepted drafts per step, acceptance by draft position.

Data arrives at up to 20 Hz but the charts redraw at most every `REDRAW_INTERVAL_S` (and once
when a run ends): drawing a plot per token would cost more than the generation it shows. In a
small terminal the tokens/s chart is a sparkline; from 120×36 up it is a line plot
(`rate_plot`); it and the bar charts (`bars`) draw their own strips.

Both time charts span the whole run at any length (`series`): a run of 300 tokens in 0.24 s
fills the chart as a run of minutes does. Tokens/s is counted from the tokens' own timestamps,
each column over the time it measured, not sampled from metrics snapshots: snapshots coalesce
under load, tokens never do, so the chart is the same however the UI kept up (and a replayed run
draws identically). Both are drawn on a scale from zero (a steady rate reads as steady, a 70 %
run as 70 %), their titles giving the scale's top; the tokens/s title also the time it spans.
The tokens/s scale tops out at twice the run's mean rate (`scale_top`): a backlog read at once
after the client stalled would otherwise flatten the rest of the run.
"""

from __future__ import annotations

from rich.cells import cell_len
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widget import Widget
from textual.widgets import Label, Sparkline

from spectui.core.events import RunMetrics, StepEvent, TokenEvent
from spectui.ui import format as fmt
from spectui.ui.widgets.bars import PositionBars, StepBars
from spectui.ui.widgets.rate_plot import RatePlot
from spectui.ui.widgets.series import RateSeries, StepSeries
from spectui.ui.widgets.throttle import Throttle

REDRAW_INTERVAL_S = 3.0
"""Charts redraw at most every three seconds, and only what changed (`throttle`, `kept`): a trend
over seconds reads the same, and each redraw costs the strips it builds (~5 ms for the three in
the wide layout) and the rows it draws again (~0.1 ms each) (bench/README.md, performance
guard)."""

COLUMNS_BEFORE_LAYOUT = 24
"""Columns a chart is given data for before it has a size (the first redraw, in a test)."""


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
        width: 100%;
        text-wrap: nowrap;
        text-overflow: ellipsis;
    }
    ChartsPane Sparkline { height: 1fr; }
    ChartsPane Sparkline > .sparkline--min-color { color: $spec-target; }
    ChartsPane Sparkline > .sparkline--max-color { color: $spec-chart; }
    ChartsPane > Vertical > #tps-plot { display: none; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.rates = RateSeries()
        """Tokens over the run's time (each token's own timestamp)."""
        self.steps = StepSeries()
        """Accepted drafts per step over the run."""
        self.position_rates: list[float] = []
        self.unsplit_steps = 0
        """Steps whose accepted drafts cannot be placed by position (`RunMetrics.steps_unsplit`)."""
        self._throttle = Throttle(self, REDRAW_INTERVAL_S, self._draw)
        self._plotted: tuple[list[tuple[float, float]], int] | None = None
        """The tokens/s series the plot shows and its width (None: not drawn yet)."""
        self._dirty = False

    def compose(self) -> ComposeResult:
        with Vertical(id="chart-tps"):
            yield Label("tokens/s", id="tps-title", classes="chart-title")
            yield Sparkline([], id="tps-spark", classes="compact")
            yield RatePlot(id="tps-plot", classes="full")
        with Vertical(id="chart-steps"):
            yield Label("accepted per step", id="steps-title", classes="chart-title")
            yield StepBars(id="step-bars")
        with Vertical(id="chart-positions"):
            yield Label("accept by position", id="positions-title", classes="chart-title")
            yield PositionBars(id="position-bars")

    def show_plot(self, shown: bool) -> None:
        """Show the line plot (wide terminals) or not; a chart shown anew is drawn now."""
        plot = self.query_one("#tps-plot", RatePlot)
        plot.display = shown
        # Compared with what it last drew, not with whether it was hidden: a wide screen's CSS
        # can show the chart before this is called, and a run that has ended sends no more data.
        if shown and self._plotted != self._plot_data(plot):
            self.replot()

    def reset(self) -> None:
        self.rates.clear()
        self.steps.clear()
        self.position_rates = []
        self.unsplit_steps = 0
        self.replot()

    def add_steps(self, steps: tuple[StepEvent, ...]) -> None:
        for step in steps:
            self.steps.add(step.drafted, step.accepted, step.steps, step.split_known)
        self._dirty = bool(steps) or self._dirty

    def add_tokens(self, tokens: tuple[TokenEvent, ...]) -> None:
        add = self.rates.add
        for token in tokens:
            add(token.t)
        self._dirty = self._dirty or bool(tokens)

    def tps(self, columns: int = COLUMNS_BEFORE_LAYOUT) -> list[tuple[float, float]]:
        """(client time in seconds, tokens/s) over the whole run, in at most ``columns``."""
        return self.rates.rates(columns)

    def add_metrics(self, metrics: RunMetrics) -> None:
        if metrics.steps:
            # Over the steps whose split by position is known; the others are counted apart.
            self.position_rates = metrics.acceptance_by_position
        self.unsplit_steps = metrics.steps_unsplit
        self._dirty = True

    def replot_if_due(self) -> None:
        """Replot if the charts' data changed, when the last replot is old enough.

        Called as data arrives with a token batch: the charts are then drawn in the frame that
        draws the tokens, not a frame of their own (`throttle`).
        """
        if self._dirty:
            self._throttle.soon()

    def replot(self) -> None:
        """Redraw all charts from the series now (cheap enough at 1 Hz, too slow per token)."""
        self._throttle.now()

    def _draw(self) -> None:
        self._dirty = False
        with self.app.batch_update():
            # Each chart is redrawn only when its own data changed (and only where it is shown):
            # with no drafting, two of the three never change during a run.
            spark = self.query_one("#tps-spark", Sparkline)
            tps = [rate for _, rate in self.tps(_columns(spark))]
            top = scale_top(tps, self.rates.mean_rate)
            _set_data(spark, from_zero([min(rate, top) for rate in tps], _columns(spark)))
            plot = self.query_one("#tps-plot", RatePlot)
            if plot.display:
                # The title names the scale on screen: the plot's finer columns peak higher
                # than the hidden sparkline's, and its axis says its own top.
                data = self._plot_data(plot)
                top = scale_top([rate for _, rate in data[0]], self.rates.mean_rate)
                if data != self._plotted:
                    self._plotted = data
                    origin = self.rates.origin or 0.0
                    plot.show([(t - origin, rate) for t, rate in data[0]], top)
            self._set_title("#tps-title", *_tps_titles(top, self.rates.span))
            step_bars = self.query_one(StepBars)
            step_bars.show(self.steps.columns(_columns(step_bars)), self.steps.top)
            self._set_title("#steps-title", *_steps_titles(self.steps))
            bars = self.query_one(PositionBars)
            bars.rates = self.position_rates
            bars.empty = _positions_empty(self.steps, self.unsplit_steps)
            bars.redraw()  # (rates move a little with every step; the bars' rows seldom do)
            self._set_title("#positions-title", *_positions_titles(self.unsplit_steps))

    def _plot_data(self, plot: RatePlot) -> tuple[list[tuple[float, float]], int]:
        # Two points a cell: the plot draws quarter cells, two across each.
        width = _columns(plot)
        return self.tps(2 * width), width

    def _set_title(self, selector: str, text: str, short: str | None = None) -> None:
        """Title a chart with ``text``, or ``short`` where ``text`` does not fit."""
        label = self.query_one(selector, Label)
        if short is not None and cell_len(text) > label.size.width > 0:
            text = short
        if str(label.content) != text:
            # A title is one line of the chart's full width (CSS), so its size never changes:
            # no layout, which would re-render the whole screen (~25 ms at 120x40) every replot.
            label.update(text, layout=False)


def _columns(widget: Widget) -> int:
    return widget.size.width or COLUMNS_BEFORE_LAYOUT


def from_zero(values: list[float], width: int) -> list[float]:
    """A sparkline's data that draws ``values`` one per column on a scale from zero.

    Textual's sparkline scales from its lowest value to its highest (a steady 1,500 tok/s with
    ±5 % would swing from empty to full) and summarises each bucket by its largest. ``width``
    values (stretched when fewer) and a zero after them: ``width + 1`` values in ``width``
    columns put the last two in the last bucket, whose largest is the last value; the zero
    only moves the scale's floor.
    """
    if not values:
        return []
    count = len(values)
    return [*(values[column * count // width] for column in range(width)), 0.0]


def scale_top(rates: list[float], mean: float | None) -> float:
    """The top of the tokens/s scale: the highest column, but no more than twice the run's mean
    rate. A client that read late (its own process busy, a machine shared) gets a backlog of
    tokens at once: a column of five times the rate that would squash every other column to
    the floor. Columns above the top are drawn full (the plot's line leaves it)."""
    if not rates:
        return 0.0
    highest = max(rates)
    return highest if mean is None else min(highest, 2 * mean)


def _tps_titles(top: float, span: float) -> tuple[str, str]:
    """The tokens/s chart's title, long and short: its scale, and the run's time it spans."""
    if top <= 0:
        return "tokens/s", "tokens/s"
    seconds = f"{span:.2f} s" if span < 10 else f"{span:.0f} s"
    return f"tokens/s 0–{fmt.num(top)} · {seconds}", f"tokens/s 0–{fmt.num(top)}"


def _steps_titles(steps: StepSeries) -> tuple[str, str]:
    """The step chart's title, long and short: its scale, and the steps whose counts are not
    known (the '?' the chart draws for them)."""
    scale = f" 0–{steps.top}" if steps.top else ""
    if not steps.unknown:
        return f"accepted per step{scale}", f"accepted per step{scale}"
    return (
        f"accepted per step{scale} · {steps.unknown} unknown",
        f"accepted/step{scale} · {steps.unknown}?",
    )


def _positions_empty(steps: StepSeries, unsplit: int) -> str:
    """What the position chart says while it has no bars."""
    if steps.steps and unsplit >= steps.steps:
        return "split unknown"
    return "none accepted" if steps.steps else "no drafts yet"


def _positions_titles(unsplit: int) -> tuple[str, str]:
    """The position chart's title, long and short: the steps it leaves out, not knowing their
    split by position."""
    if not unsplit:
        return "accept by position", "accept by position"
    return f"accept by position · {unsplit} steps unknown", f"accept by position · {unsplit}?"


def _set_data(sparkline: Sparkline, data: list[float]) -> None:
    """Give ``sparkline`` new data only when it differs (setting it always redraws)."""
    if list(sparkline.data or []) != data:
        sparkline.data = data
