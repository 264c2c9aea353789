"""How tokens look: their styles by origin (and a chain's drafter), and the legend.

Accepted drafts carry colour *and* underline (a background too, where the theme sets one); a
chain's drafters each have their own colour and a mark (`drafters`). The styles come from the
widget's component classes, so themes set them (theme variables only: themes live in themes/).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from rich.style import Style
from rich.text import Text
from textual.widget import Widget

from spectui.core.events import TokenOrigin
from spectui.ui.format import superscript
from spectui.ui.widgets.drafters import (
    DRAFTER_CLASSES,
    DRAFTER_CSS,
    UNKNOWN_CLASS,
    DrafterKeys,
    drafter_keys,
)
from spectui.ui.widgets.token_model import REJECT_MARK, ShownToken


class TokenStyles:
    """Rich styles for the token classes, read from the widget's component classes."""

    def __init__(
        self,
        draft: Style,
        target: Style,
        rejected: Style,
        drafters: dict[str, Style] | None = None,
        unknown: Style | None = None,
    ) -> None:
        self.draft = draft
        self.target = target
        self.rejected = rejected
        self.unknown = target if unknown is None else unknown
        """Tokens whose origin the stream cannot tell (neither draft nor target)."""
        self.drafters = drafters or {}
        """A chain's drafter styles by component class (`drafters.DRAFTER_CLASSES`)."""
        self.keys: DrafterKeys | None = None
        """Set while a chain's drafters are told apart (colour and mark); None: one look."""

    def drafter_style(self, name: str, keys: DrafterKeys) -> Style:
        """The style of drafter ``name``'s accepted drafts."""
        return self.drafters.get(keys.style_class(name), self.draft)

    def append(self, text: Text, token: ShownToken) -> None:
        """Append one token to ``text``."""
        if token.rejected_before:
            text.append(REJECT_MARK + superscript(token.rejected_before), self.rejected)
        if token.origin is TokenOrigin.TARGET:
            text.append(token.text, self.target)
        elif token.origin is not TokenOrigin.DRAFT:
            text.append(token.text, self.unknown)
        elif (keys := self.keys) is None or token.drafter is None:
            text.append(token.text, self.draft)
        else:
            style = self.drafter_style(token.drafter, keys)
            if token.opens_run:
                text.append(keys.mark(token.drafter), style)
            text.append(token.text, style)


ORIGIN_UNKNOWN_CLASS = "token--origin-unknown"
"""Component class of tokens whose origin the stream cannot tell."""

TOKEN_CLASSES = {
    "token--draft",
    "token--target",
    "token--rejected",
    ORIGIN_UNKNOWN_CLASS,
    *DRAFTER_CLASSES,
    UNKNOWN_CLASS,
}
"""Component classes that carry the token styles (`TOKEN_CSS`)."""

TOKEN_CSS = (
    """
    & > .token--draft {
        color: $spec-accepted;
        background: $spec-accepted-background;
        text-style: underline;
    }
    & > .token--target { color: $spec-target; }
    & > .token--rejected { color: $spec-rejected; text-style: bold; }
    & > .token--origin-unknown { color: $spec-drafter-unknown; text-style: italic; }
"""
    + DRAFTER_CSS
)
"""The token styles, nested in the view's and the legend's rules: colour plus a second cue, so
they read in monochrome and 16 colours (theme variables only: themes live in themes/)."""


def token_styles(widget: Widget) -> TokenStyles:
    """The token styles as the widget's component classes define them in the current theme."""
    return TokenStyles(
        widget.get_component_rich_style("token--draft"),
        widget.get_component_rich_style("token--target"),
        widget.get_component_rich_style("token--rejected"),
        {name: widget.get_component_rich_style(name) for name in (*DRAFTER_CLASSES, UNKNOWN_CLASS)},
        widget.get_component_rich_style(ORIGIN_UNKNOWN_CLASS),
    )


class TokenLegend(Widget):
    """One line explaining the styles, drawn with the very styles it explains."""

    COMPONENT_CLASSES: ClassVar[set[str]] = TOKEN_CLASSES
    DEFAULT_CSS = f"""
    TokenLegend {{
        height: 1;
        color: $text-muted;
        {TOKEN_CSS}
    }}
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.drafters: tuple[str, ...] = ()
        """A chain's drafters, named with their look; empty: one 'accepted draft' entry."""
        self.unknown = False
        """Whether the run has tokens whose origin is unknown (they get an entry)."""

    def show(self, drafters: tuple[str, ...], unknown: bool) -> None:
        """What the run needs explained; redrawn only when that changed."""
        if (drafters, unknown) != (self.drafters, self.unknown):
            self.drafters, self.unknown = drafters, unknown
            self.refresh()

    def render(self) -> Text:
        text = Text(no_wrap=True, overflow="ellipsis")
        keys = drafter_keys(self.app)
        return append_legend(text, token_styles(self), self.drafters, keys, unknown=self.unknown)


def append_legend(
    text: Text,
    styles: TokenStyles,
    drafters: Sequence[str],
    keys: DrafterKeys,
    *,
    unknown: bool,
    rejected: str = " n rejected",
) -> Text:
    """Append the legend to ``text`` (and return it): a chain's ``drafters`` with their marks
    (none: one 'accepted draft' entry), target, 'unknown' when the run has tokens of unknown
    origin, and the rejection mark followed by ``rejected``. The TUI and `spectui export` both
    draw it, so they agree."""
    if drafters:  # (first: a narrow pane cuts the end of the line)
        for index, name in enumerate(drafters):
            if index:
                text.append(" ")
            text.append(keys.mark(name) + name, styles.drafter_style(name, keys))
    else:
        text.append("accepted draft", styles.draft)
    text.append("  target", styles.target)
    if unknown:
        text.append("  unknown", styles.unknown)
    text.append("  " + REJECT_MARK + "ⁿ", styles.rejected)
    text.append(rejected)
    return text
