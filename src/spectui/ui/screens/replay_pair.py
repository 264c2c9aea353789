"""Two recorded sessions side by side on one clock: `ReplayPairScreen`.

Both play from the same start on a shared clock, so the faster run visibly finishes first (a
baseline against a spec run, for talks); the keys are the one-session replay's.
"""

from __future__ import annotations

from functools import cached_property
from typing import ClassVar

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.message import Message
from textual.screen import Screen
from textual.widgets import Footer, Static

from spectui.core.events import ErrorEvent
from spectui.core.sessions.replay import ReplayEngine
from spectui.ui.bridge import Post, pump
from spectui.ui.compositor import use_lean_compositor
from spectui.ui.messages import (
    MemorySampled,
    MetricsUpdated,
    PromptProgressed,
    RunEnded,
    RunFailed,
    TokensArrived,
)
from spectui.ui.screens.replay import REPLAY_BINDINGS, clock_label, next_speed
from spectui.ui.widgets.metrics import MetricsPane
from spectui.ui.widgets.run_display import RunData, RunDisplay
from spectui.ui.widgets.tokens import AnswerPane


class ReplayColumn(Vertical):
    """One session of a pair: its title, answer and numbers. Handles the messages its worker
    posts to it (they do not bubble), dropping those of a superseded play."""

    # The answer pane takes the id the app's stylesheet styles (border, legend, token view);
    # only what is particular to a column is styled here.
    DEFAULT_CSS = """
    ReplayColumn { width: 1fr; }
    ReplayColumn > .replay-title { height: 1; padding: 0 1; color: $accent; text-style: bold; }
    ReplayColumn > .replay-metrics {
        height: 12; border: round $secondary; scrollbar-size-vertical: 1;
    }
    ReplayColumn MetricsPane { height: auto; }
    """

    def __init__(self, engine: ReplayEngine, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.engine = engine
        self.play = 0
        """Which play the column shows; messages tagged with an older one are dropped."""
        self.done = False
        """Whether the current play has ended."""

    def compose(self) -> ComposeResult:
        yield Static(self.engine.session.name, classes="replay-title")
        yield AnswerPane(id="answer")
        with VerticalScroll(classes="replay-metrics"):
            yield MetricsPane()

    @cached_property
    def run_display(self) -> RunDisplay:
        return RunDisplay(self.query_one(AnswerPane), self.query_one(MetricsPane))

    def begin(self) -> int:
        """Clear for a new play; returns its number."""
        self.play += 1
        self.done = False
        header = self.engine.session.header
        self.run_display.begin(header.label or "session", header.server.spec_label)
        return self.play

    def poster(self, play: int) -> Post:
        """A post function that drops messages once ``play`` is superseded."""

        def post(message: Message) -> bool:
            return play == self.play and self.post_message(message)

        return post

    @on(TokensArrived)
    @on(MetricsUpdated)
    @on(MemorySampled)
    @on(PromptProgressed)
    def _run_data(self, message: RunData) -> None:
        self.run_display.show(message)

    @on(RunEnded)
    def _finished(self, message: RunEnded) -> None:
        self.run_display.finished(message.summary)
        self.done = True

    @on(RunFailed)
    def _failed(self, message: RunFailed) -> None:
        # No notification in a pair: the answer's subtitle carries the message itself.
        self.run_display.answer.finish(f"failed: {message.error.message}")
        self.run_display.metrics.finish("failed")


class ReplayPairScreen(Screen[None]):
    """Two sessions side by side, played on one clock from the same start."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("r", "play", "Replay"),
        *REPLAY_BINDINGS,
        Binding("q", "app.quit", "Quit"),
    ]

    DEFAULT_CSS = """
    ReplayPairScreen { layout: vertical; }
    ReplayPairScreen > #pair-status { height: 1; padding: 0 1; background: $panel; }
    ReplayPairScreen > Horizontal { height: 1fr; }
    """

    def __init__(self, engines: list[ReplayEngine]) -> None:
        super().__init__()
        use_lean_compositor(self)
        self.engines = engines
        self.clock = engines[0].clock

    def compose(self) -> ComposeResult:
        yield Static("", id="pair-status")
        with Horizontal():
            for index, engine in enumerate(self.engines):
                yield ReplayColumn(engine, id=f"replay-{index}")
        yield Footer()

    @property
    def columns(self) -> list[ReplayColumn]:
        return list(self.query(ReplayColumn))

    @property
    def finished(self) -> bool:
        """Whether every column's play has ended."""
        return all(column.done for column in self.columns)

    def on_mount(self) -> None:
        self.action_play()

    def _show_status(self) -> None:
        names = " vs ".join(engine.session.header.title for engine in self.engines)
        self.query_one("#pair-status", Static).update(f"{clock_label(self.clock)} · {names}")

    def action_play(self) -> None:
        """Start (again) both sessions at recording time 0 on the shared clock."""
        self.clock.restart()
        for index, column in enumerate(self.columns):
            play = column.begin()
            self.run_worker(
                self._play(column, play),
                group=f"replay-{index}",
                exclusive=True,
                exit_on_error=False,
            )
        self._show_status()

    async def _play(self, column: ReplayColumn, play: int) -> None:
        post = column.poster(play)
        ended = await pump(column.engine.run(), post)
        if not ended:
            error = ErrorEvent(message="the recording ended without a summary", kind="protocol")
            post(RunFailed(error))

    def action_toggle_pause(self) -> None:
        self.clock.toggle_pause()
        self._show_status()

    def action_step(self) -> None:
        self.clock.step()
        self._show_status()

    def action_cycle_speed(self) -> None:
        self.clock.set_speed(next_speed(self.clock.speed))
        self._show_status()
