"""A slots-view lane's pages (`page_top`): the open line is always shown, a tall lane's page
stays put while the answer fills it and then moves a page (less `KEEP` lines) at a time, a short
lane half its height, an ended answer ends at the bottom; a short lane repaints all its lines
at most every other time its open line moves down (counted). And a lane fed past its
first page shows its newest tokens (Pilot). And a batch after a theme change is shown once, in a
lane as in the live token pane (both build their wrapped text anew from the model, which then
holds the batch already). And a lane's line is drawn cell for cell as `Text.render` draws it
(`line_strip`, a property over any spans). And a lane styled plainly draws the very cells
Textual's stock path draws, pages moved and rows reused (`render_lines`), and any other lane is
left to the stock path."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from rich.console import Console
from rich.style import Style
from rich.text import Span, Text
from textual.app import App, ComposeResult
from textual.geometry import Region
from textual.widget import Widget

from spectui.core.events import TokenEvent, TokenOrigin
from spectui.ui.themes import spec_variable_defaults
from spectui.ui.widgets.lane_view import (
    KEEP,
    SHORT,
    LaneView,
    _rendered,
    line_strip,
    page_top,
)
from spectui.ui.widgets.tokens import TokenView


@given(st.integers(0, 500), st.integers(1, 60), st.booleans())
def test_the_open_line_is_always_on_the_page(open_line: int, height: int, ended: bool) -> None:
    top = page_top(open_line, height, ended=ended)
    assert 0 <= top <= open_line < top + height
    if ended and open_line >= height:
        assert top + height - 1 == open_line  # (the answer ends at the bottom)


@given(st.integers(0, 500), st.integers(SHORT, 60))
def test_a_tall_lane_moves_a_page_at_a_time(open_line: int, height: int) -> None:
    before = page_top(open_line, height, ended=False)
    after = page_top(open_line + 1, height, ended=False)
    assert after in (before, before + height - KEEP)


@given(st.integers(0, 500), st.integers(1, SHORT - 1))
def test_a_short_lane_moves_half_its_height_at_a_time(open_line: int, height: int) -> None:
    before = page_top(open_line, height, ended=False)
    after = page_top(open_line + 1, height, ended=False)
    assert after in (before, before + max(1, height // 2))
    assert open_line + 1 - after < height  # (the open line is shown)


LOOKS: list[str | Style] = [
    Style(color="red"),
    Style(color="green", underline=True),
    Style(bgcolor="blue", bold=True),
    Style(italic=True),
    Style.null(),
    "italic",
    "bold red on white",
]


@st.composite
def styled_lines(draw: st.DrawFn) -> Text:
    """A line as a lane holds it (runs of styled tokens), or any spans at all."""
    plain = draw(
        st.text(st.characters(codec="utf-8", exclude_categories=("Cc", "Cs")), max_size=40)
    )
    spans = []
    if draw(st.booleans()):  # tokens: consecutive spans, gaps allowed
        at = 0
        while at < len(plain):
            start = at + draw(st.integers(0, 2))
            end = min(len(plain), start + draw(st.integers(0, 6)))
            if start <= end:
                spans.append(Span(start, end, draw(st.sampled_from(LOOKS))))
            at = max(end, start + 1)
    else:  # anything: overlapping, unordered
        for _ in range(draw(st.integers(0, 5))):
            ends = (draw(st.integers(0, len(plain))), draw(st.integers(0, len(plain))))
            start, end = sorted(ends)
            spans.append(Span(start, end, draw(st.sampled_from(LOOKS))))
    owns: list[str | Style] = ["", "italic", Style(color="yellow")]
    own = draw(st.sampled_from(owns))
    return Text(plain, style=own, spans=spans)


@given(styled_lines(), st.sampled_from([Style(color="white", bgcolor="black"), Style.null()]))
def test_a_line_is_drawn_as_text_render_draws_it(line: Text, base: Style) -> None:
    console = Console(width=60)
    drawn = line_strip(line, base, 50, console, {})
    assert list(drawn) == list(_rendered(line, base, 50, console))


@given(st.lists(styled_lines(), min_size=2, max_size=4))
def test_lines_drawn_with_one_cache_are_drawn_as_alone(lines: list[Text]) -> None:
    console = Console(width=60)
    base = Style(color="white", bgcolor="black")
    looks: dict[object, Style] = {}  # (a lane keeps one for all its lines)
    for line in lines:
        assert list(line_strip(line, base, 50, console, looks)) == list(
            _rendered(line, base, 50, console)
        )


def token(index: int) -> TokenEvent:
    return TokenEvent(index=index, text=f"w{index} ", origin=TokenOrigin.TARGET, t=index * 0.02)


class OneLane(App[None]):
    def __init__(self, kind: type[LaneView | TokenView] = LaneView) -> None:
        super().__init__()
        self.kind = kind

    def get_theme_variable_defaults(self) -> dict[str, str]:
        return spec_variable_defaults(self.current_theme)

    def compose(self) -> ComposeResult:
        yield self.kind(id="lane")


async def test_a_lane_fed_past_its_page_shows_its_newest_tokens() -> None:
    app = OneLane()
    async with app.run_test(size=(30, 12)) as pilot:
        lane = app.query_one(LaneView)
        for start in range(0, 200, 10):  # batches, as the slots view pulls them
            lane.add(tuple(token(i) for i in range(start, start + 10)))
            await pilot.pause()
        shown = [lane.render_line(y).text for y in range(lane.size.height)]
        assert "w199" in "".join(shown)
        assert lane.top > 0 and len(lane.model.tokens) == 200
        lane.settle()
        await pilot.pause()
        last = max(y for y in range(lane.size.height) if lane.render_line(y).text.strip())
        assert "w199" in lane.render_line(last).text


@pytest.mark.parametrize("kind", [LaneView, TokenView])
async def test_a_batch_after_a_theme_change_is_shown_once(kind: type[LaneView | TokenView]) -> None:
    app = OneLane(kind)
    async with app.run_test(size=(30, 12)) as pilot:
        lane = app.query_one(kind)
        lane.add(tuple(token(i) for i in range(5)))
        await pilot.pause()
        lane.notify_style_update()  # (the wrapped text is dropped, to be built anew)
        lane.add(tuple(token(i) for i in range(5, 10)))
        await pilot.pause()
        shown = "".join(lane.render_line(y).text for y in range(lane.size.height))
        assert shown.count("w7 ") == 1 and shown.count("w2 ") == 1


async def test_a_short_lane_repaints_whole_at_most_every_other_line() -> None:
    app = OneLane()
    async with app.run_test(size=(30, 4)) as pilot:
        lane = app.query_one(LaneView)
        lane.add(tuple(token(i) for i in range(3)))
        await pilot.pause()
        assert lane.size.height == 4
        repaints: list[tuple[Region, ...]] = []
        refresh = lane.refresh

        def counted(*regions: Region, **options: bool) -> LaneView:
            repaints.append(regions)
            return refresh(*regions, **options)

        lane.refresh = counted  # type: ignore[method-assign]
        moves = whole = 0
        for start in range(3, 300, 3):  # (a token is 3 or 4 cells: a line every ~8 of them)
            before = len(lane.wrapped.lines)
            repaints.clear()
            lane.add(tuple(token(i) for i in range(start, start + 3)))
            await pilot.pause()
            moved = len(lane.wrapped.lines) - before
            assert moved <= 1 and repaints
            moves += moved
            whole += any(not regions for regions in repaints)
            for regions in repaints:  # (a partial repaint: the open line and the one it became)
                assert sum(region.height for region in regions) <= 2
        assert moves > 20
        assert whole <= moves // 2 + 1


class PaddedLane(App[None]):
    """A lane with side padding, as the slots view stacks it, or with what only the stock
    path draws (a border); its CSS is set per test."""

    def get_theme_variable_defaults(self) -> dict[str, str]:
        return spec_variable_defaults(self.current_theme)

    def compose(self) -> ComposeResult:
        yield LaneView(id="lane")


@pytest.mark.parametrize(
    ("css", "plain"),
    [
        ("padding: 0 1 0 0;", True),
        ("padding: 0 1 0 1; background: $primary-muted;", True),
        ("padding: 0;", True),
        ("padding: 0 1 0 1; border: round red;", False),
        ("padding: 1 1 0 0;", False),
        ("padding: 0 1 0 0; tint: red 20%;", False),
    ],
)
async def test_a_lane_draws_the_cells_the_stock_path_draws(css: str, plain: bool) -> None:
    app = type("Styled", (PaddedLane,), {"CSS": f"LaneView {{ {css} }}"})()
    async with app.run_test(size=(30, 8)) as pilot:
        lane = app.query_one(LaneView)
        assert (lane._plain_sides() is not None) is plain
        for start in range(0, 120, 40):  # (pages move: rows kept from before are reused)
            lane.add(tuple(token(i) for i in range(start, start + 40)))
            await pilot.pause()
            width, height = lane.region.size
            for crop in (Region(0, 0, width, height), Region(2, 1, width - 5, 3)):
                stock = Widget.render_lines(lane, crop)
                drawn = lane.render_lines(crop)
                assert [list(strip) for strip in drawn] == [list(strip) for strip in stock]
                assert all(strip.cell_length == crop.width for strip in drawn)
