"""A compositor that draws only what a partial update touches.

Textual's compositor, for a partial update (one token line, one metrics line), asks every widget
whose *clip* overlaps the update to render itself, in full: a widget's clip is usually its
parent's region, the whole screen, so the footer, the charts and every container re-rendered
their lines for a one-line change. Their lines come from a cache, but at 20-25 frames a second
walking ~180 cached lines per frame was most of what watching a run cost in a real terminal.

`LeanCompositor` skips the widgets whose visible region (region ∩ clip) no dirty region of the
update touches, and renders the others only over the rows of the dirty regions they overlap.
Columns are left whole, so the cuts `_render_chops` divides each line at stay where it expects
them. The terminal shows the same: tests/ui/test_compositor.py plays the partial updates into a
terminal emulator and compares the result with a full render of the screen.

Imported only by `spectui.ui.compositor`, once its gate has found the private names it needs.
"""

from __future__ import annotations

from collections.abc import Iterable

from textual._compositor import ChopsUpdate, Compositor
from textual.geometry import Region
from textual.strip import Strip


class LeanCompositor(Compositor):
    """`Compositor` with a partial update that renders only the widgets and rows it touches."""

    _update: list[Region] | None = None
    """The dirty regions of the partial update being rendered."""

    def render_partial_update(self) -> ChopsUpdate | None:
        self._update = list(self._dirty_regions)
        try:
            return super().render_partial_update()
        finally:
            self._update = None

    def _get_renders(
        self, crop: Region | None = None
    ) -> Iterable[tuple[Region, Region, list[Strip]]]:
        update = self._update
        if crop is None or not update:
            yield from super()._get_renders(crop)
            return
        drawn: list[Region] = []
        for widget, (region, clip) in self.visible_widgets.items():  # (front to back)
            visible = region.intersection(clip)
            # Not the bounding box of the update: a token line and a metrics line far apart
            # would take in every widget between them.
            touched = [dirty for dirty in update if visible.overlaps(dirty)]
            if not touched:
                continue  # none of its cells is in the update: nothing of it is drawn
            if all(_covered(visible.intersection(dirty), drawn) for dirty in touched):
                # Widgets in front already fill every cell of it the update needs (a container
                # behind a token line): the first strip drawn for a cell wins, so its own
                # strips would be thrown away.
                continue
            top = max(visible.y, min(dirty.y for dirty in touched))
            bottom = min(visible.bottom, max(dirty.bottom for dirty in touched))
            rows = Region(visible.x, top, visible.width, bottom - top)
            strips = widget.render_lines(
                Region(rows.x - region.x, rows.y - region.y, rows.width, rows.height)
            )
            drawn.append(rows)
            yield region, rows, strips


def _covered(part: Region, drawn: list[Region]) -> bool:
    """Whether the regions in ``drawn`` together cover every cell of ``part``."""
    over = [region for region in drawn if region.overlaps(part)]
    if not over:
        return False
    for y in part.line_range:
        x = part.x
        # Walk the row left to right over the spans that cover it (few: one per pane).
        for span in sorted((r.x, r.right) for r in over if r.y <= y < r.bottom):
            if span[0] > x:
                break
            x = max(x, span[1])
        if x < part.right:
            return False
    return True
