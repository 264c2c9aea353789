"""A lane's wrapped answer (`LaneLines`) holds the lines `WrappedLines` (Rich's `Text.wrap`) holds,
drawn cell for cell the same, for any tokens appended in any batches: words, spaces, newlines,
words longer than the lane, wide characters, tabs (Rich's path); and `wrap_open` leaves to Rich
what it cannot cut in order (overlapping spans)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console
from rich.style import Style
from rich.text import Span, Text

from spectui.ui.widgets.lane_lines import LaneLines, wrap_open
from spectui.ui.widgets.tokens import WrappedLines

LOOKS: list[Style | str] = [
    Style(color="red"),
    Style(underline=True),
    Style(bgcolor="blue"),
    Style.null(),
]

PIECES = st.sampled_from(
    [" ", "  ", "\n", "\n\n", "a", "word", "longerword", "x" * 30, "日本", "語 ", "\t", "é", "-"]
)


@st.composite
def tokens(draw: st.DrawFn) -> tuple[str, Style | str]:
    text = "".join(draw(st.lists(PIECES, min_size=1, max_size=3)))
    look = draw(st.sampled_from([*LOOKS, "italic"]))
    return text, look


def drawn(lines: WrappedLines, console: Console) -> list[list[object]]:
    every = [*lines.lines, lines.open]
    return [[line.plain, *line.render(console)] for line in every]


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.lists(tokens(), min_size=1, max_size=12), min_size=1, max_size=12),
    st.integers(1, 60),
    st.sampled_from(["", "italic"]),
)
def test_a_lane_wraps_as_rich_does(
    batches: list[list[tuple[str, Style | str]]], width: int, own: str
) -> None:
    console = Console(width=80)
    rich_lines, lane_lines = WrappedLines(console, width), LaneLines(console, width)
    for batch in batches:
        for lines in (rich_lines, lane_lines):
            text = Text(style=own)
            for piece, look in batch:
                text.append(piece, look)
            lines.append(text)
        assert drawn(lane_lines, console) == drawn(rich_lines, console)


def test_overlapping_spans_are_left_to_rich() -> None:
    line = Text("alpha beta gamma", spans=[Span(0, 8, "bold"), Span(4, 12, "red")])
    assert wrap_open(line, 8) is None
