"""The token pane: the streamed answer, each token styled by who produced it.

Accepted drafts carry colour *and* underline (a background too, where the theme sets one), so
they read in 16 colours, in monochrome and for colour-blind viewers. A target token that replaced
rejected drafts is preceded by a marker with the count, e.g. ``✗²``.

Memory stays bounded: only the last ``max_tokens`` tokens are kept and drawn; older ones are
counted and summarised in one line at the top.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from typing import ClassVar

from rich.style import Style
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical, VerticalScroll
from textual.widget import Widget

from spectui.core.events import PromptProgressEvent, TokenEvent, TokenOrigin
from spectui.ui.format import superscript

MAX_TOKENS = 4000
"""Tokens kept on screen; enough for any demo, small enough to re-wrap at 20 Hz."""

REJECT_MARK = "✗"
"""Drawn before a target token that replaced rejected drafts, followed by the count."""


@dataclass(frozen=True, slots=True)
class ShownToken:
    """What the pane keeps of a token."""

    text: str
    origin: TokenOrigin
    rejected_before: int = 0


class TokenLog:
    """The pane's model: the last ``max_tokens`` tokens plus counts over the whole run."""

    def __init__(self, max_tokens: int = MAX_TOKENS) -> None:
        self.max_tokens = max_tokens
        self.tokens: deque[ShownToken] = deque()
        self.dropped = 0
        """Tokens no longer kept (the oldest ones)."""
        self.draft_count = 0
        self.target_count = 0
        self.rejection_marks = 0

    def clear(self) -> None:
        """Forget everything (a new run starts)."""
        self.tokens.clear()
        self.dropped = self.draft_count = self.target_count = self.rejection_marks = 0

    def extend(self, events: Iterable[TokenEvent]) -> bool:
        """Append tokens; True when old ones had to be dropped (the view must redraw)."""
        for event in events:
            token = ShownToken(event.text, event.origin, event.rejected_before)
            self.tokens.append(token)
            if event.origin is TokenOrigin.DRAFT:
                self.draft_count += 1
            else:
                self.target_count += 1
            if event.rejected_before:
                self.rejection_marks += 1
        overflow = len(self.tokens) - self.max_tokens
        if overflow <= 0:
            return False
        # Drop a quarter more than needed so the full redraw this forces happens rarely.
        overflow = min(len(self.tokens), overflow + self.max_tokens // 4)
        for _ in range(overflow):
            self.tokens.popleft()
        self.dropped += overflow
        return True


class TokenStyles:
    """Rich styles for the three token classes, read from the widget's component classes."""

    def __init__(self, draft: Style, target: Style, rejected: Style) -> None:
        self.draft = draft
        self.target = target
        self.rejected = rejected

    def append(self, text: Text, token: ShownToken) -> None:
        """Append one token to ``text``."""
        if token.rejected_before:
            text.append(REJECT_MARK + superscript(token.rejected_before), self.rejected)
        style = self.draft if token.origin is TokenOrigin.DRAFT else self.target
        text.append(token.text, style)


class _Styled(Widget):
    COMPONENT_CLASSES: ClassVar[set[str]] = {"token--draft", "token--target", "token--rejected"}

    def token_styles(self) -> TokenStyles:
        return TokenStyles(
            self.get_component_rich_style("token--draft"),
            self.get_component_rich_style("token--target"),
            self.get_component_rich_style("token--rejected"),
        )


class TokenLegend(_Styled):
    """One line explaining the styles, drawn with the very styles it explains."""

    def render(self) -> Text:
        styles = self.token_styles()
        text = Text(no_wrap=True, overflow="ellipsis")
        text.append("accepted draft", styles.draft)
        text.append("  target", styles.target)
        text.append("  " + REJECT_MARK + "ⁿ", styles.rejected)
        text.append(" n rejected")
        return text


class TokenView(_Styled):
    """The answer text. Appends are incremental; a full rebuild happens on drops or restyles."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.model = TokenLog()
        """What is shown: the tokens kept, and counts over the whole run."""
        self._text: Text | None = None
        self.placeholder = ""
        """Shown while there is no token yet (e.g. 'processing prompt 120/512')."""

    def clear(self) -> None:
        self.model.clear()
        self._text = None
        self.refresh(layout=True)

    def add(self, events: tuple[TokenEvent, ...]) -> None:
        """Append a batch; one layout refresh per batch, never per token."""
        start = len(self.model.tokens)
        if self.model.extend(events) or self._text is None:
            self._text = None
        else:
            styles = self.token_styles()
            for token in list(self.model.tokens)[start:]:
                styles.append(self._text, token)
        self.refresh(layout=True)

    def notify_style_update(self) -> None:
        # The theme changed: the cached text carries the old colours.
        super().notify_style_update()
        self._text = None

    def _build(self) -> Text:
        text = Text()
        if self.model.dropped:
            text.append(f"… {self.model.dropped:,} earlier tokens not shown\n", "dim italic")
        styles = self.token_styles()
        for token in self.model.tokens:
            styles.append(text, token)
        return text

    def render(self) -> Text:
        if not self.model.tokens:
            return Text(self.placeholder, style="italic")
        if self._text is None:
            self._text = self._build()
        return self._text.copy()


class AnswerPane(Vertical):
    """Legend, then the scrolling answer; the border title names the prompt and run state."""

    def compose(self) -> ComposeResult:
        yield TokenLegend(id="legend")
        with VerticalScroll(id="answer-scroll"):
            yield TokenView(id="tokens")

    @property
    def view(self) -> TokenView:
        return self.query_one(TokenView)

    @property
    def scroller(self) -> VerticalScroll:
        return self.query_one("#answer-scroll", VerticalScroll)

    def begin(self, title: str) -> None:
        """A new run: clear and title it."""
        self.border_title = title
        self.border_subtitle = "sent"
        view = self.view
        view.placeholder = "waiting for the first token…"
        view.clear()
        self.scroller.scroll_home(animate=False)

    def progress(self, event: PromptProgressEvent) -> None:
        cached = f", {event.cached} cached" if event.cached else ""
        self.border_subtitle = f"prompt {event.processed}/{event.total}{cached}"

    def add(self, events: tuple[TokenEvent, ...]) -> None:
        if not events:
            return
        self.border_subtitle = "generating"
        # Follow the end of the text unless the user scrolled up to read.
        scroller = self.scroller
        follow = scroller.scroll_y >= scroller.max_scroll_y - 1
        self.view.add(events)
        if follow:
            scroller.scroll_end(animate=False)

    def finish(self, status: str) -> None:
        self.border_subtitle = status
