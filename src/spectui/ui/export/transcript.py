"""What the text exports draw: title, legend, the answer token by token, the headline numbers.

Tokens look as in the TUI's token pane, by the same code (`token_model.TokenLog` finds each
step's first accepted draft and whether the run is a chain; `token_looks.TokenStyles` draws
the token with its mark; `token_looks.append_legend` the legend). The whole run is known before
the first token is drawn, so a chain's marks are on from the start (the live pane adds them
when the second drafter comes) and the legend names every drafter.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from rich.console import Console
from rich.text import Text

from spectui.core.events import EngineEvent, RunMetrics, SummaryEvent, TokenEvent
from spectui.core.sessions.file import Session
from spectui.core.sessions.replay import recompute
from spectui.ui.export.palette import Palette
from spectui.ui.widgets.drafters import DrafterKeys
from spectui.ui.widgets.token_looks import TokenStyles, append_legend
from spectui.ui.widgets.token_model import ShownToken, TokenLog

Wording = Callable[[RunMetrics], str]
"""How the headline words a run's numbers (the command's summary line, as `spectui stream`
prints it): the command passes it in, as the UI does not import commands."""

REJECTED_LABEL = " n drafts rejected"
"""The legend's words after the rejection mark (the pane, short of room, says 'n rejected')."""


def title_line(session: Session) -> Text:
    """What ran: prompt label, spec, model and binary."""
    header = session.header
    server = header.server
    parts = [header.title]
    if server.model:
        parts.append(server.model.rsplit("/", 1)[-1])
    if server.binary_version:
        parts.append(f"llama-server {server.binary_version}")
    return Text(" · ".join(parts), style="bold")


@dataclass(frozen=True, slots=True)
class Transcript:
    """A session's replayed events and how its tokens are drawn."""

    session: Session
    """The recorded session."""
    events: list[EngineEvent]
    """The events as a replay sees them (`replay.recompute`)."""
    summary: SummaryEvent
    """The run's summary, recomputed from the events."""
    model: TokenLog
    """The token pane's model of the whole run: marks, drafters, unknown tokens."""
    styles: TokenStyles
    """The token styles, told apart per drafter when the run is a chain."""
    wording: Wording
    """How the headline words the numbers."""

    @classmethod
    def of(cls, session: Session, palette: Palette, wording: Wording) -> Transcript:
        """Replay ``session`` and prepare its tokens' looks."""
        result = recompute(session)
        tokens = [event for event in result.events if isinstance(event, TokenEvent)]
        model = TokenLog(max_tokens=max(1, len(tokens)))  # keeps every token
        model.extend(tokens)
        styles = palette.token_styles()
        if model.chain:
            styles.keys = DrafterKeys()
        return cls(session, list(result.events), result.summary, model, styles, wording)

    def legend(self) -> Text:
        """The legend line, drawn with the styles it explains."""
        drafters = tuple(self.model.drafters) if self.model.chain else ()
        return append_legend(
            Text(),
            self.styles,
            drafters,
            self.styles.keys or DrafterKeys(),
            unknown=self.model.unknown_count > 0,
            rejected=REJECTED_LABEL,
        )

    def intro(self) -> Text:
        """Title and legend, then a blank line."""
        text = Text()
        text.append_text(title_line(self.session))
        text.append("\n")
        text.append_text(self.legend())
        text.append("\n\n")
        return text

    def token(self, token: ShownToken) -> Text:
        """One token as the TUI draws it: its rejection mark, its drafter's mark, its look."""
        text = Text()
        self.styles.append(text, token)
        return text

    def timed_tokens(self) -> Iterator[tuple[float, Text]]:
        """Each token with its time in the run (later than every event before it: state
        events outside the request carry t=0)."""
        shown = iter(self.model.tokens)
        clock = 0.0
        for event in self.events:
            clock = max(clock, event.t)
            if isinstance(event, TokenEvent):
                yield clock, self.token(next(shown))

    def headline(self) -> str:
        """The headline numbers, with how the run ended."""
        reason = f" · ended: {self.summary.stop_reason}" if self.summary.stop_reason else ""
        return self.wording(self.summary.metrics) + reason

    def text(self) -> Text:
        """Title, legend, the coloured answer and the headline numbers."""
        text = self.intro()
        for token in self.model.tokens:
            self.styles.append(text, token)
        text.append("\n\n")
        text.append(self.headline(), style="bold")
        if self.session.problem:
            text.append("\n" + self.session.problem, style="italic")
        return text


def console(width: int, *, record: bool = False) -> Console:
    """A truecolor console that writes to memory (``record``: for rich's html export)."""
    return Console(
        file=io.StringIO(),
        width=width,
        record=record,
        force_terminal=True,
        color_system="truecolor",
        legacy_windows=False,
        highlight=False,
    )


def written(console: Console) -> str:
    """What ``console`` (from `console`) has written."""
    output = console.file
    assert isinstance(output, io.StringIO)
    return output.getvalue()
