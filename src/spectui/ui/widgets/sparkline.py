"""A sparkline drawn straight into strips.

Textual's `Sparkline` renders through rich: per cell of every row a colour blend and a new
`Style`, then the console's segment pipeline, ~3 ms a redraw of the accepted-per-step chart
(12×35 cells), as much as a whole token frame. This one draws the same cells (glyph and colour
for glyph and colour: the snapshots are unchanged) from one blend per column, and keeps the
strips until the data, the size or the styles change.

It reads two private names of Textual (`renderables._blend_colors.blend_colors`,
`SparklineRenderable._buckets`), so it draws only behind its gate (`STRIP_SPARKLINE`: the tested
Textual, the names there, `SPECTUI_STOCK` not set); otherwise the widget is Textual's `Sparkline`.
bench/overrides.py: a redraw of the step chart in place costs Textual's way 2.7x this one's
(3.65 against 1.36 ms; bench/results/overrides.json).
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Sequence

from rich.color import Color
from rich.segment import Segment
from rich.style import Style
from textual.renderables.sparkline import Sparkline as SparklineRenderable
from textual.strip import Strip
from textual.widgets import Sparkline

from spectui.core.overrides import Override, enabled

STRIP_SPARKLINE = Override(name="strip-sparkline", library="textual", tested_version="8.2.8")
"""`StripSparkline`'s own drawing: Textual's private colour blend and bucketing."""


def _internals_present() -> bool:
    """Whether Textual's sparkline has the private names `bars` relies on."""
    blend = importlib.import_module("textual.renderables._blend_colors").blend_colors
    buckets = SparklineRenderable._buckets
    probe = SparklineRenderable([1.0, 2.0], width=2, min_color=Color.parse("red"))
    return (
        list(inspect.signature(blend).parameters) == ["color1", "color2", "ratio"]
        and list(inspect.signature(buckets).parameters) == ["data", "num_buckets"]
        and len(SparklineRenderable.BARS) == 8  # (▁ to █)
        and all(hasattr(probe, name) for name in ("data", "min_color", "max_color"))
    )


def strip_sparkline_enabled() -> bool:
    """Whether sparklines draw their own strips in this process (decided once)."""
    return enabled(STRIP_SPARKLINE, _internals_present)


class StripSparkline(Sparkline):
    """`Sparkline` (max of each bucket), rendered by `bars` instead of rich."""

    def __init__(
        self,
        data: Sequence[float] | None = None,
        *,
        id: str | None = None,
        classes: str | None = None,
    ) -> None:
        super().__init__(data, id=id, classes=classes)
        self._key: object = None
        self._lines: list[Strip] = []

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._key = None  # the theme changed: the strips carry the old colours

    def render_line(self, y: int) -> Strip:
        if not strip_sparkline_enabled():
            return super().render_line(y)  # (Textual's own, through rich)
        width, height = self.size
        key = (tuple(self.data or ()), width, height)
        if key != self._key:
            renderable = self.render()  # (Textual's own: the colours it resolves from styles)
            if not isinstance(renderable, SparklineRenderable):
                return super().render_line(y)  # (a Textual that draws another way: its way)
            self._key, self._lines = key, self._build(renderable, width, height)
        if y < len(self._lines):
            return self._lines[y]
        return Strip.blank(width, self.visual_style.rich_style)

    def _build(
        self, renderable: SparklineRenderable[float], width: int, height: int
    ) -> list[Strip]:
        base = self.visual_style.rich_style
        rows = bars(renderable, width, height)
        return [Strip([Segment(text, base + style) for text, style in row]) for row in rows]


Cell = tuple[str, Style | None]


def bars(sparkline: SparklineRenderable[float], width: int, height: int) -> list[list[Cell]]:
    """The cells `SparklineRenderable` yields, row by row (top first), computed per column.

    Uses Textual's private names: call only where `strip_sparkline_enabled()` (or in its tests).
    """
    from textual.renderables._blend_colors import blend_colors

    data = list(sparkline.data)
    min_style, max_style = sparkline.min_color, sparkline.max_color
    if width <= 0 or height <= 0:
        return []
    # (Rich yields these two rows as one segment each, the others cell by cell: so do these.)
    if not data:
        return [[] for _ in range(height - 1)] + [[("▁" * width, min_style)]]
    if len(data) == 1:
        return [[("█" * width, max_style)] for _ in range(height)]
    levels = len(SparklineRenderable.BARS)
    top = levels * height - 1
    minimum, maximum = min(data), max(data)
    extent = maximum - minimum or 1
    min_color, max_color = min_style.color, max_style.color
    assert min_color is not None and max_color is not None
    buckets = tuple(SparklineRenderable._buckets(data, num_buckets=width))
    step = len(buckets) / width
    columns: list[tuple[int, Style]] = []
    position = 0.0
    for _ in range(width):
        ratio = (max(buckets[int(position)]) - minimum) / extent
        colour = Style.from_color(blend_colors(min_color, max_color, ratio))
        columns.append((int(ratio * top), colour))
        position += step
    rows: list[list[Cell]] = []
    for row in reversed(range(height)):
        low, high = row * levels, (row + 1) * levels
        cells: list[Cell] = []
        for index, colour in columns:
            if index < low:
                cells.append((" ", None))
            elif index >= high:
                cells.append(("█", colour))
            else:
                cells.append((SparklineRenderable.BARS[index % levels], colour))
        rows.append(cells)
    return rows
