"""The tokens/s line plot, the kept-strips charts and the redraw throttle (#29 performance guard).

The plot: any series draws a connected line inside its canvas, in the theme's colours after a
theme change. The throttle: a pane fed faster than its interval redraws once per interval, in
the call that brings the data, and data that stops coming is still drawn (by its timer).
"""

from __future__ import annotations

from itertools import pairwise

from hypothesis import given
from hypothesis import strategies as st
from rich.segment import Segment
from textual.app import App, ComposeResult
from textual.strip import Strip
from textual.widget import Widget
from textual.widgets import Label

from helpers.wait import await_until
from spectui.core.events import TokenEvent, TokenOrigin
from spectui.ui.themes import spec_variable_defaults
from spectui.ui.widgets.charts import ChartsPane
from spectui.ui.widgets.kept import KeptStrips, row_blocks
from spectui.ui.widgets.rate_plot import AXIS_ROWS, QUADRANTS, RatePlot, glyph_rows, trace
from spectui.ui.widgets.throttle import Throttle

unit = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)


def test_quarters_make_their_glyphs() -> None:
    # Top left, top right, bottom left, bottom right of the first cell; all four of the second.
    lit = {(0, 0), (3, 0), (2, 1), (3, 1), (2, 0)}
    assert glyph_rows(lit, 2, 1) == ["▘█"]
    assert glyph_rows({(1, 1)}, 1, 1) == ["▗"]
    assert QUADRANTS[1 | 2 | 4 | 8] == "█"


@given(st.lists(st.tuples(unit, unit), min_size=1, max_size=60), st.integers(2, 40))
def test_a_line_stays_inside_its_canvas_and_never_breaks(
    points: list[tuple[float, float]], size: int
) -> None:
    columns, rows = 2 * size, size
    lit = trace(sorted(points), columns, rows)
    assert all(0 <= x < columns and 0 <= y < rows for x, y in lit)
    # Every point is on the line, and the line joins them: from each lit quarter a neighbour
    # (of the eight around it) is lit too, unless the line is one quarter long.
    if len(lit) > 1:
        assert all(
            any((x + dx, y + dy) in lit for dx in (-1, 0, 1) for dy in (-1, 0, 1) if dx or dy)
            for x, y in lit
        )


def test_a_steep_change_is_drawn_as_a_line_not_two_dots() -> None:
    lit = trace([(0.0, 0.0), (1.0, 1.0)], 4, 8)
    assert len(lit) == 8  # one quarter per row climbed
    assert sorted(y for _, y in lit) == list(range(8))
    assert all(abs(a[0] - b[0]) <= 1 for a, b in pairwise(sorted(lit, key=lambda c: -c[1])))


class PlotApp(App[None]):
    def compose(self) -> ComposeResult:
        yield RatePlot()


async def test_the_plot_draws_its_line_axes_and_theme() -> None:
    app = PlotApp()
    async with app.run_test(size=(40, 8)) as pilot:
        plot = app.query_one(RatePlot)
        plot.show([(t / 10, 50.0 + 10 * (t % 3)) for t in range(40)], 80.0)
        await pilot.pause()
        lines = [plot.render_line(y) for y in range(plot.size.height)]
        text = [line.text for line in lines]
        assert text[0].startswith("80┤") and text[-AXIS_ROWS - 1].startswith(" 0┤")
        assert "└" in text[-2] and text[-1].rstrip().endswith("3.9 s")
        assert any(set(row) & set(QUADRANTS[1:]) for row in text[:-AXIS_ROWS])
        before = {seg.style for line in lines for seg in line if seg.text.strip(" ")}
        app.theme = "textual-light" if app.theme != "textual-light" else "textual-dark"
        await pilot.pause()
        after = {seg.style for y in range(plot.size.height) for seg in plot.render_line(y)}
        assert before.isdisjoint(after), "the plot kept the old theme's colours"
        await app.action_quit()


class Counting(Widget):
    def __init__(self) -> None:
        super().__init__()
        self.redraws = 0
        self.throttle = Throttle(self, 3600.0, self.redraw)

    def redraw(self) -> None:
        self.redraws += 1


class ThrottleApp(App[None]):
    def compose(self) -> ComposeResult:
        yield Counting()


async def test_data_faster_than_the_interval_redraws_once_and_quiet_data_still_shows() -> None:
    app = ThrottleApp()
    async with app.run_test() as pilot:
        pane = app.query_one(Counting)
        for _ in range(20):
            pane.throttle.soon()
        assert pane.redraws == 1  # the first is due at once; the rest wait for the interval
        # Data that stops coming is drawn by the timer, armed past the interval: shorten it so
        # the test does not wait an hour (the rule is the same at any interval).
        pane.throttle.interval = 0.0
        pane.throttle.now()
        pane.throttle.interval = 0.05
        pane.throttle.soon()
        assert pane.redraws == 2
        await await_until(lambda: pane.redraws == 3, "the quiet data drawn by the timer")
        await pilot.pause()
        await app.action_quit()


class Rows(KeptStrips):
    def __init__(self) -> None:
        super().__init__()
        self.rows = ["a", "b", "c", "d"]
        self.drawn: list[int] = []

    def data_key(self) -> object:
        return tuple(self.rows)

    def build(self) -> list[Strip]:
        return [Strip([Segment(row)]).crop_extend(0, self.size.width, None) for row in self.rows]

    def render_line(self, y: int) -> Strip:
        self.drawn.append(y)
        return super().render_line(y)


class RowsApp(App[None]):
    def compose(self) -> ComposeResult:
        yield Rows()


async def test_new_data_redraws_only_the_rows_that_changed() -> None:
    app = RowsApp()
    async with app.run_test(size=(20, 6)) as pilot:
        widget = app.query_one(Rows)
        await await_until(lambda: 3 in widget.drawn, "the first frame")
        widget.drawn.clear()
        widget.rows = ["a", "b", "C", "d"]
        widget.redraw()
        await await_until(lambda: widget.drawn, "a frame with the change")
        await pilot.pause()
        assert set(widget.drawn) == {2}
        assert widget.render_line(2).text.startswith("C")
        await app.action_quit()


class ChartsApp(App[None]):
    CSS = "ChartsPane { height: 14; }"  # (the wide layout's)

    def get_theme_variable_defaults(self) -> dict[str, str]:
        return spec_variable_defaults(self.current_theme)  # (the charts' colours)

    def compose(self) -> ComposeResult:
        yield ChartsPane()


async def test_the_title_names_the_scale_the_plot_shows() -> None:
    # A rate that swings every ten tokens: the plot's fine columns see the peaks, a coarse
    # summary (the hidden sparkline's columns) averages them away.
    times, t = [], 0.0
    for index in range(600):
        t += 0.004 if (index // 10) % 2 else 0.006
        times.append(t)
    app = ChartsApp()
    async with app.run_test(size=(120, 16)) as pilot:
        charts = app.query_one(ChartsPane)
        charts.show_plot(True)
        tokens = tuple(
            TokenEvent(index=i, t=at, text="x", origin=TokenOrigin.TARGET)
            for i, at in enumerate(times)
        )
        charts.add_tokens(tokens)
        charts.replot()
        await pilot.pause()
        plot = app.query_one(RatePlot)
        await await_until(lambda: plot.size.height > AXIS_ROWS, "the plot laid out")
        charts.replot()
        await pilot.pause()
        top_label = plot.render_line(0).text.split("┤")[0].strip()
        title = str(app.query_one("#tps-title", Label).content)
        assert title.startswith(f"tokens/s 0–{top_label} ")
        await app.action_quit()


@given(
    st.sets(st.integers(min_value=0, max_value=40)),
    st.integers(min_value=1, max_value=80),
    st.integers(min_value=0, max_value=3),
)
def test_changed_rows_are_refreshed_as_blocks_of_consecutive_rows(
    rows: set[int], width: int, top: int
) -> None:
    blocks = row_blocks(sorted(rows), width, top)
    covered = [y - top for block in blocks for y in range(block.y, block.bottom)]
    assert covered == sorted(rows)  # every changed row, once, and no other
    assert all(block.x == 0 and block.width == width for block in blocks)
    assert all(earlier.bottom < later.y for earlier, later in pairwise(blocks))  # (maximal runs)
