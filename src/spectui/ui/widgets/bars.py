"""Bar charts on a fixed scale: acceptance by draft position, accepted drafts per step.

A fixed scale matters for both: a sparkline's min–max scaling would make 90 % against 80 % look
like full against empty, and a run whose every step accepted its whole draft look empty. Both
draw their cells straight into strips, kept until the data, the size or the styles change
(`kept.KeptStrips`).
"""

from __future__ import annotations

from typing import ClassVar

from rich.segment import Segment
from rich.style import Style
from textual.strip import Strip

from spectui.ui.widgets.kept import KeptStrips
from spectui.ui.widgets.series import StepColumn

BLOCKS = " ▁▂▃▄▅▆▇█"

UNKNOWN_GLYPH = "?"
"""Drawn at the foot of a column whose steps' accepted counts are all unknown."""

ZERO_GLYPH = "_"
"""Drawn at the foot of a column whose steps accepted nothing (in the axis style): a run that
accepts nothing shows a floor, not an empty chart."""


def _strip(segments: list[Segment], width: int, base: Style) -> Strip:
    return Strip(segments).crop_extend(0, width, base)


def _column_rows(eighths: list[int], height: int, cell: int, gap: bool) -> list[list[str]]:
    """Each row's cells (top row first) for columns ``eighths`` high and ``cell`` wide, the last
    cell of each blank when ``gap`` (and the column wider than one cell)."""
    filled = cell - 1 if gap and cell > 1 else cell
    rows = []
    for row in range(height, 0, -1):
        cells = []
        for bar in eighths:
            glyph = BLOCKS[max(0, min(8, bar - (row - 1) * 8))]
            cells.append((glyph * filled).ljust(cell))
        rows.append(cells)
    return rows


class PositionBars(KeptStrips):
    """Vertical bars, one per draft position, on a fixed 0–100% scale."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {"bars--bar", "bars--axis"}
    DEFAULT_CSS = """
    PositionBars { height: 1fr; }
    PositionBars > .bars--bar { color: $spec-chart; }
    PositionBars > .bars--axis { color: $text-muted; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.rates: list[float] = []
        self.empty = "no drafts yet"
        """Said instead of bars while there are no rates."""

    def cells(self, rates: list[float]) -> list[int]:
        """The bars' heights in eighths of a cell, as drawn at the current size."""
        height = max(1, self.size.height - 1)
        return [round(rate * height * 8) for rate in rates]

    def data_key(self) -> object:
        return tuple(self.rates), self.empty

    def build(self) -> list[Strip]:
        base = self.style_of()
        bar = self.style_of("bars--bar")
        axis = self.style_of("bars--axis")
        width_all = self.size.width
        if not self.rates:
            return [_strip([Segment(self.empty, axis)], width_all, base)]
        height = max(1, self.size.height - 1)
        width = max(1, min(6, width_all // max(1, len(self.rates))))
        rates = self.rates[: max(1, width_all // width)]
        rows = _column_rows(self.cells(rates), height, width, gap=True)
        lines = [_strip([Segment("".join(cells), bar)], width_all, base) for cells in rows]
        labels = "".join(str(position)[-1].ljust(width) for position in range(1, len(rates) + 1))
        lines.append(_strip([Segment(labels, axis)], width_all, base))
        return lines


class StepBars(KeptStrips):
    """Accepted drafts per step over the whole run, from 0 to the longest draft.

    One column per step while the steps fit, else per group of consecutive steps, as high as
    their mean (`series.StepSeries`): a 70 % run reads as 70 %. A column with steps whose count
    is not known is drawn in the ``bars--unknown`` style, as high as its known steps' mean, or
    as a ``?`` when none is known: never guessed, never dropped.
    """

    COMPONENT_CLASSES: ClassVar[set[str]] = {"bars--bar", "bars--axis", "bars--unknown"}
    DEFAULT_CSS = """
    StepBars { height: 1fr; }
    StepBars > .bars--bar { color: $spec-chart; }
    StepBars > .bars--axis { color: $text-muted; }
    StepBars > .bars--unknown { color: $spec-drafter-unknown; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.columns: tuple[StepColumn, ...] = ()
        self.top = 0
        """The scale's top: the longest draft of the run."""

    def show(self, columns: list[StepColumn], top: int) -> None:
        """New data; redrawn only when it changed."""
        if tuple(columns) != self.columns or top != self.top:
            self.columns, self.top = tuple(columns), top
            self.redraw()

    def eighths(self) -> list[int]:
        """The columns' heights in eighths of a cell, as drawn at the current size."""
        height, top = max(1, self.size.height), max(1, self.top)
        return [
            0 if column.mean is None else round(column.mean / top * height * 8)
            for column in self.columns
        ]

    def data_key(self) -> object:
        return self.columns, self.top

    def build(self) -> list[Strip]:
        base = self.style_of()
        width = self.size.width
        axis = self.style_of("bars--axis")
        if not self.columns:
            return [_strip([Segment("no steps yet", axis)], width, base)]
        bar = self.style_of("bars--bar")
        unknown = self.style_of("bars--unknown")
        height = max(1, self.size.height)
        cell = max(1, width // len(self.columns))
        rows = _column_rows(self.eighths(), height, cell, gap=cell >= 3)
        looks = [unknown if column.unknown else bar for column in self.columns]
        foot = rows[-1]
        for index, (column, eighths) in enumerate(zip(self.columns, self.eighths(), strict=True)):
            if column.mean is None:  # (nothing known about these steps: say so)
                foot[index] = (UNKNOWN_GLYPH * min(cell, 2)).ljust(cell)
            elif eighths == 0:
                foot[index] = (ZERO_GLYPH * (cell - 1 if cell >= 3 else cell)).ljust(cell)
                if not column.unknown:
                    looks[index] = axis
        lines = []
        for cells in rows:
            segments = [Segment(text, look) for text, look in zip(cells, looks, strict=True)]
            lines.append(_strip(segments, width, base))
        return lines
