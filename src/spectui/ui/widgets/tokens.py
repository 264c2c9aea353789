"""The token pane: the streamed answer, each token styled by who produced it.

Accepted drafts carry colour *and* underline (a background too, where the theme sets one), so
they read in 16 colours, in monochrome and for colour-blind viewers. A target token that replaced
rejected drafts is preceded by a marker with the count, e.g. ``✗²``. In a run with more than one
drafter (a chain), each drafter's accepted drafts have their own colour and a mark before each
step's run of them (`drafters`), and the legend names the drafters.

Memory stays bounded: only the last ``max_tokens`` tokens are kept and drawn; older ones are
counted and summarised in one line at the top (`token_model`); the styles and the legend are in
`token_looks`.
"""

from __future__ import annotations

from typing import ClassVar

from rich.cells import cell_len
from rich.console import Console
from rich.style import Style
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.geometry import Region, Size
from textual.scroll_view import ScrollView
from textual.strip import Strip

from spectui.core.events import PromptProgressEvent, TokenEvent
from spectui.ui.widgets.drafters import drafter_keys
from spectui.ui.widgets.token_looks import (
    TOKEN_CLASSES,
    TOKEN_CSS,
    TokenLegend,
    TokenStyles,
    token_styles,
)
from spectui.ui.widgets.token_model import MAX_TOKENS, TokenLog

SCROLL_STEPS = 2
"""Following a growing answer, the view scrolls by 1/SCROLL_STEPS of its height at a time: each
scroll repaints the whole pane and its scrollbar, so the view moves half a view at a time, as a
pager's half page: a quarter at a time cost ~0.4 % of a core more at 50 tok/s (bench/README.md)."""


class WrappedLines:
    """Styled text wrapped at a width, built incrementally.

    Greedy word wrapping never moves a break that already has a line after it, so appending
    text only re-wraps the *open* last line; finished lines are kept as they are. Cost per
    batch is proportional to the batch, not to the answer.
    """

    def __init__(self, console: Console, width: int) -> None:
        self.console = console
        self.width = max(1, width)
        self.lines: list[Text] = []
        """Finished lines."""
        self.open = Text()
        """The last line, still growing."""

    def __len__(self) -> int:
        return len(self.lines) + 1

    def append(self, text: Text) -> None:
        self.open.append_text(text)
        plain = self.open.plain
        width = self.width
        if "\n" not in plain and cell_len(plain) <= width:
            return
        if "\t" in plain:  # (tabs expand by where they fall: Rich wraps it all)
            wrapped = list(self.open.wrap(self.console, width, overflow="fold"))
        else:
            # `Text.wrap` splits at newlines, then looks for word breaks in every line: a line
            # that fits needs none (answers are mostly such lines: code, lists), so only the
            # others are wrapped, each as `Text.wrap` wraps it.
            wrapped = []
            for line in self.open.split("\n", allow_blank=True):
                if len(line) <= width and cell_len(line.plain) <= width:
                    wrapped.append(line)
                else:
                    wrapped.extend(line.wrap(self.console, width, overflow="fold"))
        self.lines.extend(wrapped[:-1])
        self.open = wrapped[-1] if wrapped else Text()

    def line(self, index: int) -> Text | None:
        if index < len(self.lines):
            return self.lines[index]
        return self.open if index == len(self.lines) else None


class TokenView(ScrollView, can_focus=True):
    """The answer text: a scrollable view of wrapped lines, each rendered once.

    Adding a batch appends to the open line; everything is re-wrapped only when the width or
    the theme changes, or when old tokens are dropped (rarely: a quarter of the cap at a time).
    """

    COMPONENT_CLASSES: ClassVar[set[str]] = TOKEN_CLASSES
    DEFAULT_CSS = f"""
    TokenView {{
        height: 1fr;
        scrollbar-size-vertical: 1;
        /* Lines are wrapped to the content width: keep it stable when the scrollbar appears. */
        scrollbar-gutter: stable;
        overflow-x: hidden;
        {TOKEN_CSS}
    }}
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.model = TokenLog(MAX_TOKENS)
        """What is shown: the tokens kept, and counts over the whole run."""
        self.placeholder = ""
        """Shown while there is no token yet (e.g. 'waiting for the first token…')."""
        self._wrapped: WrappedLines | None = None
        self._strips: dict[int, Strip] = {}
        self._styles: TokenStyles | None = None
        self._growing = True
        """Whether the answer is still arriving (and scrolls in steps); see `settle`."""
        self._base: Style | None = None
        """The view's own style (colours, background), looked up once per style change."""
        self._blank: Strip | None = None

    @property
    def styles_now(self) -> TokenStyles:
        """The token styles of the current theme (looked up once per theme, not per batch)."""
        if self._styles is None:
            self._styles = token_styles(self)
        return self._styles

    @property
    def wrapped(self) -> WrappedLines:
        """The wrapped answer, rebuilt from the model when it is stale."""
        if self._wrapped is None:
            self._wrapped = self._rewrap()
        return self._wrapped

    def _invalidate(self) -> None:
        self._wrapped = None
        self._strips.clear()
        self._blank = None

    def _rewrap(self) -> WrappedLines:
        self._strips.clear()
        width = self.scrollable_content_region.width or self.size.width or 80
        wrapped = WrappedLines(self.app.console, width)
        if self.model.dropped:
            wrapped.append(Text(f"… {self.model.dropped:,} earlier tokens not shown\n", "italic"))
        elif not self.model.tokens:
            wrapped.append(Text(self.placeholder, style="italic"))
        styles = self.styles_now
        styles.keys = drafter_keys(self.app) if self.model.chain else None
        text = Text()
        for token in self.model.tokens:
            styles.append(text, token)
        wrapped.append(text)
        return wrapped

    def _sync_size(self) -> bool:
        """Match the virtual size to the wrapped answer; True when that needs a layout.

        An answer taller than the view gets blank lines below it, up to a whole `SCROLL_STEPS`
        of the view: following the answer then scrolls a few lines at a time, not one. Each
        scroll redraws the whole pane and its scrollbar (at 50 tok/s in a 64-column pane, three
        times a second: a third of the app's CPU, and most of the bytes sent to the terminal).
        """
        lines = len(self.wrapped)
        view = self.scrollable_content_region.height
        if self._growing and view:
            # A growing answer that still fits is as tall as the view: a new line then changes
            # nothing about the size, where each one cost a layout of the whole screen (~15 ms;
            # five of them in a 160-token run).
            step = max(1, view // SCROLL_STEPS)
            lines = view + max(0, -(-(lines - view) // step) * step)
        size = Size(self.wrapped.width, lines)
        if size == self.virtual_size:
            return False
        view_height = self.scrollable_content_region.height
        if (
            self.show_vertical_scrollbar
            and size.width == self.virtual_size.width
            and size.height > view_height
            and self.virtual_size.height > view_height
        ):
            # The answer still scrolls, as it did: only the scrollbar's thumb changes, nothing
            # else on the screen moves, so skip the screen-wide layout that assigning
            # `virtual_size` asks for (it doubled the cost of every batch that starts a line,
            # and at thousands of tokens a second each drop of old tokens cost one). The gutter
            # is stable, so the width never depends on the scrollbar.
            self.set_reactive(TokenView.virtual_size, size)
            self.vertical_scrollbar.window_virtual_size = size.height
            if self.scroll_y > self.max_scroll_y:  # (shorter now: never scrolled past its end)
                self.scroll_y = self.max_scroll_y
            return False
        self.virtual_size = size
        return True

    def settle(self) -> None:
        """The answer is complete: drop the blank lines kept for scrolling in steps, so it
        ends at the bottom of the view (one scroll, once)."""
        follow = self.scroll_y >= self.max_scroll_y - 1
        self._growing = False
        if self._sync_size() or follow:
            self.scroll_end(animate=False, force=True)

    def clear(self) -> None:
        self._growing = True
        self.model.clear()
        self._invalidate()
        self._sync_size()
        self.scroll_home(animate=False)
        self.refresh()

    def add(self, events: tuple[TokenEvent, ...]) -> None:
        """Append a batch: one refresh per batch, never one per token."""
        if not events:
            return
        follow = self.scroll_y >= self.max_scroll_y - 1  # unless the user scrolled up to read
        was_empty = not self.model.tokens
        lines_before = len(self.wrapped.lines) if self._wrapped is not None else -1
        # (no wrapped text to append to, e.g. after a theme change: built anew from the model,
        # which then holds the batch already; appending it too showed the batch twice)
        stale = self._wrapped is None
        if self.model.extend(events) or was_empty or stale:
            self._invalidate()
            lines_before = -1  # (rewrapped: every line may have moved)
        else:
            styles = self.styles_now
            text = Text()
            tokens = self.model.tokens
            # (the batch's own tokens, from the end: copying the deque cost more than the batch)
            for index in range(len(tokens) - len(events), len(tokens)):
                styles.append(text, tokens[index])
            self.wrapped.append(text)
            self._strips.pop(len(self.wrapped.lines) - 1, None)
        laid_out = self._sync_size()
        if follow and laid_out:
            # The scrollbar may appear only with this layout: scroll once it is there, so its
            # thumb starts where the view is. (force: scrolling is not allowed until then.)
            self.refresh()
            self.scroll_end(animate=False, force=True)
        elif follow and self.max_scroll_y != self.scroll_y:
            # Scroll now, not after the next refresh: a scroll repaints the whole view, and a
            # deferred one drew every batch that started a line twice.
            self.scroll_end(animate=False, immediate=True)
        elif self._wrapped is not None and lines_before >= 0:
            # Only the open line grew, or it was finished and new ones opened below it (the
            # blank lines kept for scrolling in steps take them): repaint those lines, not the
            # whole view.
            self.refresh_lines(lines_before, len(self._wrapped.lines) - lines_before + 1)
        else:
            self.refresh()

    def refresh_lines(self, y_start: int, line_count: int = 1) -> None:
        # The content's width, not the widget's: a line that reached the scrollbar's column
        # redrew the scrollbar with every batch, though new lines never move its thumb.
        width = self.scrollable_content_region.width
        self.refresh(Region(0, y_start - self.scroll_offset.y, width, line_count))

    def notify_style_update(self) -> None:
        # The theme changed: rendered lines carry the old colours.
        super().notify_style_update()
        self._styles = None
        self._base = None
        self._invalidate()

    def on_resize(self) -> None:
        if (
            self._wrapped is not None
            and self._wrapped.width != self.scrollable_content_region.width
        ):
            self._invalidate()
            self._sync_size()

    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y = self.scroll_offset
        index = scroll_y + y
        # Lines are kept finished (styled, cut to width, offsets applied): every scroll while
        # following repaints the whole view, and redoing that work per line cost more than
        # the rest of a frame.
        if not scroll_x and (cached := self._strips.get(index)) is not None:
            return cached
        width = self.scrollable_content_region.width
        if (base := self._base) is None:
            # Looked up once per style change: it walks the ancestors for their backgrounds,
            # ~0.1 ms, and every frame draws the open line and the blank lines below it.
            base = self._base = self.rich_style
        wrapped = self.wrapped
        line = wrapped.line(index)
        if line is None:
            if self._blank is None or self._blank.cell_length != width:
                self._blank = Strip.blank(width, base)
            return self._blank
        strip = (
            Strip(line.render(self.app.console))
            .apply_style(base)
            .crop_extend(scroll_x, scroll_x + width, base)
            .apply_offsets(scroll_x, index)
        )
        if not scroll_x and index < len(wrapped.lines):  # the open line changes every batch
            self._strips[index] = strip
        return strip


class AnswerPane(Vertical):
    """Legend, then the scrolling answer; the border title names the prompt and run state."""

    DEFAULT_CSS = """
    AnswerPane {
        width: 1fr;
        border: round $primary;
        border-title-color: $text;
        border-subtitle-color: $text-muted;
        padding: 0 0 0 1;
    }
    """

    def compose(self) -> ComposeResult:
        self._view = TokenView(id="tokens")  # (kept: every batch reaches it; a query walks the DOM)
        self._legend = TokenLegend(id="legend")
        yield self._legend
        yield self._view

    @property
    def view(self) -> TokenView:
        return self._view

    def begin(self, title: str) -> None:
        """A new run: clear and title it."""
        self.border_title = title
        self.border_subtitle = "sent"
        view = self.view
        view.placeholder = "waiting for the first token…"
        view.clear()
        self._legend.show((), unknown=False)

    def progress(self, event: PromptProgressEvent) -> None:
        cached = f", {event.cached} cached" if event.cached else ""
        self.border_subtitle = f"prompt {event.processed}/{event.total}{cached}"

    def add(self, events: tuple[TokenEvent, ...]) -> None:
        if events:
            if self.border_subtitle != "generating":  # setting it repaints the whole pane
                self.border_subtitle = "generating"
            view = self.view
            view.add(events)
            model = view.model
            self._legend.show(tuple(model.drafters) if model.chain else (), model.unknown_count > 0)

    def finish(self, status: str) -> None:
        self.border_subtitle = status
        self.view.settle()
