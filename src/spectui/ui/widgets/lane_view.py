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

from typing import ClassVar, Literal

from rich.cells import cell_len
from rich.console import Console
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.color import Color
from textual.geometry import Region
from textual.strip import Strip
from textual.style import Style as CellStyle
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
    `Strip.apply_style` after it, that was most of what a lane's open line cost to draw, with
    every pull."""
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
        self._rows: dict[int, tuple[Strip, Strip]] = {}
        """Rows drawn by `render_lines`, by line (-1: blank), with the content strip each was
        drawn from (a row is reused while its line's content strip is the same object)."""
        self._sides: tuple[int, int, Style, Color] | Literal[False] | None = None
        """`_plain_sides` as of the last style change (False: the stock path; None: not
        looked at since)."""
        self._look: tuple[object, ...] = ()
        """What the rows were drawn with (padding, its style, width, line filters)."""

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
        self._rows.clear()
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
        self._sides = None
        self._looks.clear()
        self._wrapped = None
        self._strips.clear()
        self._blank = None

    def on_resize(self) -> None:
        if self._wrapped is not None and self._wrapped.width != self.size.width:
            self._wrapped = None
            self._strips.clear()
        self._blank = None
        self._repage()

    def render_lines(self, crop: Region) -> list[Strip]:
        """The rows of ``crop``: each content line between its side padding, the cells Textual's
        `StylesCache` would draw for a lane styled as the slots view styles it (side padding
        only: no border, outline, tint, hatch or fade; anything else goes through the stock
        path), with the app's line filters applied as it applies them.

        The stock path re-reads a dozen style properties for every line it draws: that was twice
        what drawing the line itself cost, at ~50 lane lines a second."""
        if self._sides is None:  # (it walks the ancestors: once per style change)
            self._sides = self._plain_sides() or False
        sides = self._sides
        if not sides:
            return super().render_lines(crop)
        left, right, pad, background = sides
        width = self.region.width
        filters = self.get_line_filters()
        look = (left, right, pad, background, width, *filters)
        if look != self._look:
            self._look = look
            self._rows.clear()
        rows = self._rows
        strips = []
        for y in crop.line_range:
            content = self.render_line(y)
            # (a finished line's or a blank line's content strip is kept: so is its row, and a
            # page move repaints the lane from rows already built)
            index = y + self.top if content is not self._blank else -1
            kept = rows.get(index)
            if kept is not None and kept[0] is content:
                strips.append(kept[1])
                continue
            row = content
            if left or right:
                segments = [Segment(" " * left, pad)] if left else []
                segments.extend(content)
                if right:
                    segments.append(Segment(" " * right, pad))
                row = Strip(segments, width)
            for line_filter in filters:
                row = row.apply_filter(line_filter, background)
            rows[index] = (content, row)
            strips.append(row)
        if crop.column_span != (0, width):
            start, end = crop.column_span
            strips = [strip.crop(start, end) for strip in strips]
        return strips

    def _plain_sides(self) -> tuple[int, int, Style, Color] | None:
        """(left padding, right padding, their style, the lane's background) when the lane is
        styled plainly (see `render_lines`), else None."""
        styles = self.styles
        top, right, bottom, left = styles.padding
        if top or bottom or self.BLANK or self.opacity != 1.0:
            return None
        if any(edge for edge, _ in styles.border) or any(edge for edge, _ in styles.outline):
            return None
        if styles.tint.a or styles.text_opacity != 1.0:
            return None
        if styles.has_rule("hatch") and styles.hatch != "none":
            return None
        beneath, background = self.background_colors
        # (as `StylesCache` styles padding: the background only)
        return left, right, CellStyle(background=beneath + background).rich_style, background

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        if (base := self._base) is None:  # (it walks the ancestors: once per style change)
            base = self._base = self.rich_style
            self._looks.clear()
        index = self.top + y
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
