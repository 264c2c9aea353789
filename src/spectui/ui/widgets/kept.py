"""Widgets drawn as whole strips, built at once and kept until their data, size or styles change.

The charts (`bars`, `rate_plot`) draw their cells straight into strips: a `Text` laid out by
Textual cost ~4 ms a redraw, as much as the rest of a token frame. New data redraws only the
rows whose strips changed (a new step's column moves a few rows of the step chart, not all
thirteen of the wide layout): each row drawn costs Textual's line pipeline, ~0.1 ms. A style
change is told by `notify_style_update`, not by comparing `rich_style` on every line: that walks
the ancestors' backgrounds (~0.08 ms), a third of what drawing a kept row costs; the styles a
build uses are looked up once per style change too (`style_of`).
"""

from __future__ import annotations

from collections.abc import Iterable

from rich.style import Style
from textual.geometry import Region, Size
from textual.strip import Strip
from textual.widget import Widget


class KeptStrips(Widget):
    """Subclasses say what their strips depend on (`data_key`) and build them (`build`), each
    as wide as the content (inside any padding)."""

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self._key: tuple[object, Size] | None = None
        self._lines: list[Strip] = []
        self._styles: dict[str | None, Style] = {}

    def data_key(self) -> object:
        """What the strips show: they are built again when it changes."""
        raise NotImplementedError

    def build(self) -> list[Strip]:
        """The widget's rows, top first (fewer than its height: the rest is blank)."""
        raise NotImplementedError

    def style_of(self, component: str | None = None) -> Style:
        """The widget's style, or a component's over it, looked up once per style change."""
        if (style := self._styles.get(component)) is None:
            style = self.rich_style
            if component is not None:
                style = style + self.get_component_rich_style(component)
            self._styles[component] = style
        return style

    def redraw(self) -> None:
        """The data changed: refresh the rows whose strips differ from the ones drawn."""
        key = (self.data_key(), self.size)
        if self._key is None or self._key[1] != self.size or not self.size.area:
            self.refresh()  # (never drawn, or drawn at another size: all of it)
            return
        if key == self._key:
            return
        old, new = self._lines, self.build()
        self._key, self._lines = key, new
        rows = max(len(old), len(new))
        changed = (y for y in range(rows) if y >= len(old) or y >= len(new) or old[y] != new[y])
        if regions := row_blocks(changed, self.size.width, self.styles.gutter.top):
            self.refresh(*regions)

    def render_line(self, y: int) -> Strip:
        key = (self.data_key(), self.size)
        if key != self._key:
            self._key, self._lines = key, self.build()
        if y < len(self._lines):
            return self._lines[y]
        return Strip.blank(self.content_size.width, self.rich_style)

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._key = None  # (the theme changed: the strips carry the old colours)
        self._styles = {}


def row_blocks(rows: Iterable[int], width: int, top: int = 0) -> list[Region]:
    """The rows ``rows`` (ascending) as one region per run of consecutive rows, ``width`` wide,
    from ``top``: the compositor's work per frame grows with the regions it is given (each is
    matched against every widget), and a plot that moved changes all its rows at once."""
    blocks: list[Region] = []
    for y in rows:
        last = blocks[-1] if blocks else None
        if last is not None and last.bottom == top + y:
            blocks[-1] = Region(0, last.y, width, last.height + 1)
        else:
            blocks.append(Region(0, top + y, width, 1))
    return blocks
