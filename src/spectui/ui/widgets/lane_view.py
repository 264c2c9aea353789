"""A slots-view lane's tokens: its answer wrapped to the lane, shown a page at a time.

A lane is read at a glance, four at once, not scrolled through, so it is a plain widget, not a
scroll view: no scrollbar, no scrolling. The page stays put while the answer fills it and only
the lines that changed are repainted; when the open line runs off the bottom, the next page
starts with the last finished line on top for context (one repaint of the lane; a short lane
moves half its height). Following the answer by scrolling repainted the whole pane a few lines
at a time and, at four lanes of 50 tok/s each, drew most of what the view cost
(bench/README.md, "slots view"). When the request ends its answer is shown ending at the
bottom, as a finished token pane is.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from rich.cells import cell_len
from rich.console import Console
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.color import Color
from textual.geometry import Region
from textual.strip import Strip
from textual.widget import Widget

from spectui.core.events import TokenEvent
from spectui.ui.widgets.drafters import drafter_keys
from spectui.ui.widgets.token_looks import TOKEN_CLASSES, TOKEN_CSS, TokenStyles, token_styles
from spectui.ui.widgets.token_model import MAX_TOKENS, TokenLog
from spectui.ui.widgets.tokens import WrappedLines

KEEP = 1
"""Finished lines a new page starts with (context for the line that opened it)."""

SHORT = 8
"""A lane shorter than this (stacked at 80×24: four lines) moves half its height at a time: a
page of three new lines under one kept would leave it mostly blank, and following its end line
by line would repaint all four of its lines each time its open line moves down (three times a
second at 50 tok/s); by half its height, every other time (the other time, two lines)."""


def page_top(open_line: int, height: int, *, ended: bool) -> int:
    """The first wrapped line shown, for the open (last) line's index in a view ``height`` tall.

    Growing: 0 until the open line leaves the first page, then pages advance by ``height`` -
    `KEEP` (half the height, at least one line, in a `SHORT` lane), so the open line is always
    shown. Ended: the answer ends at the bottom.
    """
    if height <= 0 or open_line < height:
        return 0
    if ended:
        return open_line - height + 1
    step = height - KEEP if height >= SHORT else max(1, height // 2)
    return ((open_line - height) // step + 1) * step


def line_strip(
    line: Text, base: Style, width: int, console: Console, looks: dict[object, Style]
) -> Strip:
    """``line`` as a strip ``width`` cells wide on ``base``: the cells of `Text.render` with
    ``base`` applied, built directly from the line's spans when they do not overlap (a token
    is one span: they never do). ``looks`` caches each style combined with ``base`` and the
    line's own style, by (own, span) style (the caller clears it when ``base`` changes).

    `Text.render` sorts every span boundary and combines a stack of styles per segment; with
    `Strip.apply_style` after it, that was most of what a lane's open line cost to draw, five
    times a second per lane."""
    spans = line.spans
    if not base:  # (`Strip.apply_style` leaves a null style out: so does this)
        return _rendered(line, base, width, console)
    if not spans:  # (as `Text.render`: no spans, no style at all, not even the line's own)
        return Strip([Segment(line.plain, base)]).crop_extend(0, width, base)
    own = line.style
    if (line_look := looks.get((own, None))) is None:
        line_look = looks[own, None] = base + console.get_style(own, default=Style.null())
    text = line.plain
    segments: list[Segment] = []
    at = 0
    for span in spans:
        start, end, style = span
        if start < at or end < start or end > len(text):  # overlapping, out of order: in general
            return _rendered(line, base, width, console)
        if start > at:  # (an empty span still cuts, as in `Text.render`)
            segments.append(Segment(text[at:start], line_look))
        if start == end:
            at = start
            continue
        if (look := looks.get((own, style))) is None:
            look = line_look + console.get_style(style, default=Style.null())
            looks[own, style] = look
        segments.append(Segment(text[start:end], look))
        at = end
    if at < len(text):
        segments.append(Segment(text[at:], line_look))
    cells = cell_len(text)
    if cells > width:  # (a wrapped line never is)
        return Strip(segments).crop_extend(0, width, base)
    if cells < width:  # (as `Strip.extend_cell_length` pads)
        segments.append(Segment(" " * (width - cells), base))
    return Strip(segments, width)


def _rendered(line: Text, base: Style, width: int, console: Console) -> Strip:
    """``line`` through `Text.render`: what `line_strip` draws, for any spans."""
    return Strip(line.render(console)).apply_style(base).crop_extend(0, width, base)


def plain_box(widget: Widget) -> bool:
    """Whether ``widget``'s box is only colours and left/right padding: no border, outline,
    title, vertical padding, tint, hatch or transparency (`LaneView.render_lines` draws such a
    box itself)."""
    styles = widget.styles
    top, _right, bottom, _left = styles.padding
    return (
        not top
        and not bottom
        and not any(edge for edge, _color in styles.border)
        and not any(edge for edge, _color in styles.outline)
        and widget._border_title is None
        and widget._border_subtitle is None
        and not styles.tint.a
        and styles.text_opacity == 1.0
        and widget.opacity == 1.0
        and not (styles.has_rule("hatch") and styles.hatch != "none")
        and not widget.hover_style._link_id
    )


@dataclass(frozen=True, slots=True)
class _Box:
    """A `plain_box`: what Textual's styles cache pads a line with."""

    pad_left: int
    pad_right: int
    inner: Style
    """The padding's style (the widget's background over its parent's)."""
    background: Color
    """The widget's background (the line filters' argument)."""


class LaneView(Widget):
    """A lane's tokens (`TokenView`'s colours and marks), a page at a time; see the module."""

    COMPONENT_CLASSES: ClassVar[set[str]] = TOKEN_CLASSES
    DEFAULT_CSS = f"""
    LaneView {{
        height: 1fr;
        /* (the column a token pane keeps for its scrollbar: lanes wrap as token panes do) */
        padding-right: 1;
        {TOKEN_CSS}
    }}
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.model = TokenLog(MAX_TOKENS)
        """The tokens kept, and counts over the whole request."""
        self.placeholder = ""
        """Shown while there is no token yet."""
        self.ended = False
        """The request ended: its answer is shown ending at the bottom."""
        self.top = 0
        """The first wrapped line shown."""
        self._wrapped: WrappedLines | None = None
        self._strips: dict[int, Strip] = {}
        self._styles: TokenStyles | None = None
        self._base: Style | None = None
        self._looks: dict[object, Style] = {}
        """Span styles combined with ``_base`` (`line_strip`)."""
        self._blank: Strip | None = None
        self._padded: dict[int, Strip] = {}
        """Finished lines with the lane's padding (`render_lines`), by wrapped index."""
        self._padded_width = 0
        """The width ``_padded`` was drawn at."""
        self._box: _Box | None = None
        """The lane's padding and colours (`render_lines`)."""
        self._box_key = -1
        """The style counters ``_box`` was looked up at."""
        self._own_lines = False
        """The last frame was drawn by `render_lines` itself (Textual's styles cache is stale)."""

    @property
    def wrapped(self) -> WrappedLines:
        """The wrapped answer, rebuilt from the model when it is stale."""
        if self._wrapped is None:
            self._wrapped = self._rewrap()
        return self._wrapped

    def _styles_now(self) -> TokenStyles:
        if self._styles is None:
            self._styles = token_styles(self)
        return self._styles

    def _rewrap(self) -> WrappedLines:
        self._strips.clear()
        self._padded.clear()
        wrapped = WrappedLines(self.app.console, self.size.width or 80)
        model = self.model
        if model.dropped:
            wrapped.append(Text(f"… {model.dropped:,} earlier tokens not shown\n", "italic"))
        elif not model.tokens:
            wrapped.append(Text(self.placeholder, style="italic"))
        styles = self._styles_now()
        styles.keys = drafter_keys(self.app) if model.chain else None
        text = Text()
        for token in model.tokens:
            styles.append(text, token)
        wrapped.append(text)
        return wrapped

    def _repage(self) -> bool:
        """Move to the page the open line is on; True when that changed the page."""
        top = page_top(len(self.wrapped.lines), self.size.height, ended=self.ended)
        if top == self.top:
            return False
        self.top = top
        return True

    def _redraw(self) -> None:
        self._wrapped = None
        self._strips.clear()
        self._padded.clear()
        self._blank = None
        self._repage()
        self.refresh()

    def clear(self) -> None:
        self.model.clear()
        self.ended = False
        self.top = 0
        self._redraw()

    def settle(self) -> None:
        """The request ended: its answer ends at the bottom of the lane."""
        self.ended = True
        if self._repage():
            self.refresh()

    def add(self, events: tuple[TokenEvent, ...]) -> None:
        """Append a batch: the lines it changed are repainted, or the lane once per page."""
        if not events:
            return
        was_empty = not self.model.tokens
        # (old tokens dropped, the placeholder shown, or no wrapped text to append to: built
        # anew from the model, which then holds the batch already)
        stale = self._wrapped is None
        if self.model.extend(events) or was_empty or stale:
            self._redraw()
            return
        wrapped = self.wrapped
        before = len(wrapped.lines)
        styles = self._styles_now()
        text = Text()
        tokens = self.model.tokens
        for index in range(len(tokens) - len(events), len(tokens)):
            styles.append(text, tokens[index])
        wrapped.append(text)
        # (the page is the open line's: it can only change when that line moved down)
        if len(wrapped.lines) != before and self._repage():
            self.refresh()
        else:  # the open line, and the lines it became
            count = len(wrapped.lines) - before + 1
            self.refresh(Region(0, before - self.top, self.size.width, count))

    def notify_style_update(self) -> None:
        # The theme changed: rendered lines carry the old colours.
        super().notify_style_update()
        self._styles = None
        self._base = None
        self._looks.clear()
        self._wrapped = None
        self._strips.clear()
        self._padded.clear()
        self._blank = None

    def on_resize(self) -> None:
        if self._wrapped is not None and self._wrapped.width != self.size.width:
            self._wrapped = None
            self._strips.clear()
            self._padded.clear()
        self._blank = None
        self._repage()

    def _box_now(self) -> _Box | None:
        """The lane's box, or None where Textual must draw it (`plain_box`). Looked up again
        when a style of the lane or of one of its ancestors changed (Textual's style counters
        only grow, so their sum changes with any of them): the lookup walks the ancestors
        twice, ~10 times what their counters cost."""
        key = sum(node.styles._cache_key for node in self.ancestors_with_self)
        if key != self._box_key:
            self._box_key = key
            box = None
            if plain_box(self):
                _top, pad_right, _bottom, pad_left = self.styles.padding
                base_background, background = self.background_colors
                inner = self._styles_cache.get_inner_outer(base_background, background)[0]
                box = _Box(pad_left, pad_right, inner.rich_style, background)
            if box != self._box:  # (lines padded in the old box's colours)
                self._box = box
                self._padded.clear()
        return self._box

    def render_lines(self, crop: Region) -> list[Strip]:
        """The lines in ``crop``, padded as Textual's styles cache pads them where the box is
        that simple (`plain_box`), else by Textual.

        Textual's per-line work (reading the box's styles, padding, the closures of its
        `StylesCache.render_line`) cost three times what the lane's own lines did at four lanes
        of 50 tok/s (bench/README.md, "slots view"). A finished line's padded strip is kept, so
        the line filters (`Strip.apply_filter`, cached on the strip) run on it once."""
        box = self._box_now()
        if box is None:
            if self._own_lines:  # (lines were drawn here since: its cache holds older ones)
                self._own_lines = False
                self._styles_cache.clear()
            return super().render_lines(crop)
        self._own_lines = True
        width = self.region.width
        inner = box.inner
        pad_left, pad_right = box.pad_left, box.pad_right
        content_width = width - pad_left - pad_right
        if self._padded_width != width:
            self._padded_width = width
            self._padded.clear()
        padded = self._padded
        finished = len(self.wrapped.lines)
        filters = self.app.get_line_filters()
        strips: list[Strip] = []
        for y in crop.line_range:
            index = self.top + y
            strip = padded.get(index)
            if strip is None:
                line = self._line(index, content_width).adjust_cell_length(content_width, inner)
                segments = list(line)
                if pad_left:
                    segments.insert(0, Segment(" " * pad_left, inner))
                if pad_right:
                    segments.append(Segment(" " * pad_right, inner))
                strip = Strip(segments, width)
                if index < finished:  # (the open line changes with every batch)
                    padded[index] = strip
            for line_filter in filters:
                strip = strip.apply_filter(line_filter, box.background)
            strips.append(strip)
        if crop.column_span != (0, width):
            x1, x2 = crop.column_span
            strips = [strip.crop(x1, x2) for strip in strips]
        return strips

    def render_line(self, y: int) -> Strip:
        return self._line(self.top + y, self.size.width)

    def _line(self, index: int, width: int) -> Strip:
        """Wrapped line ``index`` (blank past the end), ``width`` cells wide."""
        if (base := self._base) is None:  # (it walks the ancestors: once per style change)
            base = self._base = self.rich_style
            self._looks.clear()
        if (cached := self._strips.get(index)) is not None:
            return cached
        wrapped = self.wrapped
        line = wrapped.line(index)
        if line is None:
            if self._blank is None or self._blank.cell_length != width:
                self._blank = Strip.blank(width, base)
            return self._blank
        # (no offsets: nothing in a lane is clicked or selected)
        strip = line_strip(line, base, width, self.app.console, self._looks)
        if index < len(wrapped.lines):  # the open line changes with every batch
            self._strips[index] = strip
        return strip
