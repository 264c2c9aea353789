"""A sparkline drawn straight into strips.

Textual's `Sparkline` renders through rich: per cell of every row a colour blend and a new
`Style`, then the console's segment pipeline, ~3 ms a redraw of the accepted-per-step chart
(12×35 cells), as much as a whole token frame. This one draws the same cells (glyph and colour
for glyph and colour: the snapshots are unchanged) from one blend per column, and keeps the
strips until the data, the size or the styles change.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.segment import Segment
from rich.style import Style
from textual.renderables._blend_colors import blend_colors
from textual.renderables.sparkline import Sparkline as SparklineRenderable
from textual.strip import Strip
from textual.widgets import Sparkline


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
    """The cells `SparklineRenderable` yields, row by row (top first), computed per column."""
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
