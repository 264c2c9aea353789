"""The tokens/s line plot of wide terminals, drawn straight into strips.

A line over quarter-cell blocks (each cell a 2×2 grid: ``▘▝▀▖▌▞▛▗▚▐▜▄▙▟█``), a y axis with the
scale's top, middle and zero, and an x axis with the run's time at its start, middle and end.
Drawn here rather than by plotext: at 50 tok/s its redraw (build, then Rich's ANSI decoder,
~13 ms for 56×13 cells) was a seventh of the TUI's whole CPU; this one costs well under a
millisecond and keeps its strips until the data, the size or the styles change
(`kept.KeptStrips`).
"""

from __future__ import annotations

from typing import ClassVar

from rich.segment import Segment
from rich.style import Style
from textual.strip import Strip

from spectui.ui.widgets.kept import KeptStrips

QUADRANTS = " ▘▝▀▖▌▞▛▗▚▐▜▄▙▟█"
"""A cell's glyph by its lit quarters: 1 top left, 2 top right, 4 bottom left, 8 bottom right."""

AXIS_ROWS = 2
"""Rows below the canvas: the x axis with its ticks, then their labels."""


def _label(value: float) -> str:
    return f"{value:,.0f}" if value >= 10 or value == 0 else f"{value:.1f}"


def _seconds(value: float, span: float) -> str:
    return f"{value:.0f}" if span >= 10 else f"{value:.1f}"


def trace(points: list[tuple[float, float]], columns: int, rows: int) -> set[tuple[int, int]]:
    """The quarter cells (x, y from the top) a line through ``points`` lights on a grid of
    ``columns`` × ``rows`` quarters; points are (x, y) already in [0, 1], y up. Consecutive
    points are joined, so a steep change reads as a line, not as two dots."""
    lit: set[tuple[int, int]] = set()
    last: tuple[int, int] | None = None
    for x, y in points:
        cell = (
            round(min(1.0, max(0.0, x)) * (columns - 1)),
            rows - 1 - round(min(1.0, max(0.0, y)) * (rows - 1)),
        )
        if last is None:
            lit.add(cell)
        else:
            steps = max(abs(cell[0] - last[0]), abs(cell[1] - last[1]), 1)
            for step in range(1, steps + 1):
                lit.add(
                    (
                        last[0] + round((cell[0] - last[0]) * step / steps),
                        last[1] + round((cell[1] - last[1]) * step / steps),
                    )
                )
        last = cell
    return lit


def glyph_rows(lit: set[tuple[int, int]], width: int, height: int) -> list[str]:
    """The ``height`` rows of ``width`` cells that draw the quarters ``lit``."""
    masks = [[0] * width for _ in range(height)]
    for x, y in lit:
        column, row = x // 2, y // 2
        if 0 <= column < width and 0 <= row < height:
            masks[row][column] |= 1 << ((x % 2) + 2 * (y % 2))
    return ["".join(QUADRANTS[mask] for mask in row) for row in masks]


class RatePlot(KeptStrips):
    """Tokens/s over the run on a scale from zero to ``top``; see `show`."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {"rate-plot--line", "rate-plot--axis"}
    DEFAULT_CSS = """
    RatePlot { height: 1fr; }
    RatePlot > .rate-plot--line { color: $primary; }
    RatePlot > .rate-plot--axis { color: $text-muted; }
    """

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.points: tuple[tuple[float, float], ...] = ()
        """(seconds since the run's first token, tokens/s), in time order."""
        self.top = 0.0
        """The scale's top; a rate above it is drawn at the top."""

    def show(self, points: list[tuple[float, float]], top: float) -> None:
        """New data; redrawn only when it changed."""
        if tuple(points) != self.points or top != self.top:
            self.points, self.top = tuple(points), top
            self.redraw()

    def data_key(self) -> object:
        return self.points, self.top

    def build(self) -> list[Strip]:
        base = self.style_of()
        width, height = self.size.width, self.size.height
        line = self.style_of("rate-plot--line")
        axis = self.style_of("rate-plot--axis")
        canvas_rows = height - AXIS_ROWS
        top = self.top if self.top > 0 else 1.0
        labels = {0: _label(top), canvas_rows // 2: _label(top / 2), canvas_rows - 1: "0"}
        gutter = max(len(text) for text in labels.values()) + 1
        canvas_width = width - gutter
        if canvas_rows < 2 or canvas_width < 4:
            return []
        rows = [" " * canvas_width] * canvas_rows
        span = self.points[-1][0] if self.points else 0.0
        if len(self.points) > 1 and span > 0:
            unit = [(t / span, rate / top) for t, rate in self.points]
            lit = trace(unit, 2 * canvas_width, 2 * canvas_rows)
            rows = glyph_rows(lit, canvas_width, canvas_rows)
        lines = []
        for index, cells in enumerate(rows):
            label = labels.get(index)
            left = f"{label}┤" if label is not None else "│"
            lines.append(_row([(left.rjust(gutter), axis), (cells, line)], width, base))
        middle = (canvas_width - 1) // 2
        marks = (0, middle, canvas_width - 1)
        ticks = "".join("┬" if x in marks else "─" for x in range(canvas_width))
        lines.append(_row([(" " * (gutter - 1) + "└", axis), (ticks, axis)], width, base))
        lines.append(_row([(_x_labels(span, canvas_width, gutter), axis)], width, base))
        return lines


def _x_labels(span: float, width: int, gutter: int) -> str:
    """The time at the axis's start, middle and end ('s' after the last), under their ticks."""
    first, mid, last = "0", _seconds(span / 2, span), f"{_seconds(span, span)} s"
    middle = (width - 1) // 2
    text = [" "] * (gutter + width)
    placed = (
        (gutter, first),
        (gutter + middle - len(mid) // 2, mid),
        (gutter + width - len(last), last),
    )
    for at, label in placed:
        for offset, char in enumerate(label):
            if 0 <= at + offset < len(text):
                text[at + offset] = char
    return "".join(text)


def _row(parts: list[tuple[str, Style]], width: int, base: Style) -> Strip:
    return Strip([Segment(text, style) for text, style in parts]).crop_extend(0, width, base)
