"""Replay screens: one session in the full main screen, or two side by side on one clock.

`ReplayScreen` is the live `MainScreen` driven by a `ReplayEngine`: the same widgets draw the
same events, plus keys to pause, step token by token and change speed; switching and restarting
are refused with a line saying why. `ReplayPairScreen` plays two sessions on a shared clock, so
the faster run visibly finishes first (a baseline against a spec run, for talks).
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

from spectui.core.events import ErrorEvent, ServerState, ServerStateEvent
from spectui.core.sessions.replay import ReplayClock, ReplayEngine
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
from spectui.ui.screens.main import MainScreen
from spectui.ui.screens.prompt_picker import PromptChoice
from spectui.ui.widgets.metrics import MetricsPane
from spectui.ui.widgets.run_display import RunData, RunDisplay
from spectui.ui.widgets.tokens import AnswerPane

SPEED_CYCLE: tuple[float | None, ...] = (0.5, 1.0, 2.0, None)
"""What ``v`` cycles through; None plays as fast as possible."""

REPLAY_BINDINGS: list[BindingType] = [
    Binding("space", "toggle_pause", "Pause"),
    Binding("n", "step", "Step"),
    Binding("v", "cycle_speed", "Speed"),
]


def speed_label(speed: float | None) -> str:
    """'1×', '0.5×', 'max'."""
    return "max" if speed is None else f"{speed:g}×"


def clock_label(clock: ReplayClock) -> str:
    """'▶ 1×' or '❚❚ paused · 1×'."""
    speed = speed_label(clock.speed)
    return f"❚❚ paused · {speed}" if clock.paused else f"▶ {speed}"


def next_speed(speed: float | None) -> float | None:
    """The speed after ``speed`` in `SPEED_CYCLE` (back to the start after 'max')."""
    index = SPEED_CYCLE.index(speed) if speed in SPEED_CYCLE else 0
    return SPEED_CYCLE[(index + 1) % len(SPEED_CYCLE)]


def replay_choice(engine: ReplayEngine) -> PromptChoice:
    """The 'prompt' a replay shows: the recorded request under the recorded label."""
    header = engine.session.header
    return PromptChoice(header.label or "custom", header.label or "session", header.request)


class ReplayScreen(MainScreen):
    """The main screen over a recorded session: same panes, plus pause / step / speed."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("r", "run", "Replay"),
        *REPLAY_BINDINGS,
        # Live-only keys stay bound (they explain themselves) but leave the footer.
        Binding("t", "switch_spec", "Spec", show=False),
        Binding("R", "restart", "Restart", show=False),
        Binding("p", "pick_prompt", "Prompt", show=False),
    ]

    def __init__(self, engine: ReplayEngine, *, autorun: bool = True) -> None:
        super().__init__(engine, replay_choice(engine), autorun=autorun)
        self.replay = engine

    def on_mount(self) -> None:
        self._show_clock()

    def _show_clock(self) -> None:
        self.query_one("#metrics-scroll").border_subtitle = clock_label(self.replay.clock)

    def action_run(self) -> None:
        if self.state is ServerState.FAILED and not self.running:
            # A recorded server failure is part of the story, not a state to recover from.
            self._show_state(ServerStateEvent(state=ServerState.READY, detail="replay"))
        super().action_run()

    def action_toggle_pause(self) -> None:
        self.replay.toggle_pause()
        self._show_clock()

    def action_step(self) -> None:
        self.replay.step()
        self._show_clock()
        if not self.running:
            self.action_run()  # stepping after the end plays the run again, one token at a time

    def action_cycle_speed(self) -> None:
        self.replay.clock.set_speed(next_speed(self.replay.clock.speed))
        self._show_clock()

    def action_switch_spec(self) -> None:
        self.notify(
            "a replay shows what was recorded: switching spec types needs a live server",
            title="Replay",
        )

    def action_restart(self) -> None:
        self.notify("a replay has no server to restart: press r to play it again", title="Replay")

    def action_pick_prompt(self) -> None:
        self.notify("a replay plays the recorded prompt: press r to play it again", title="Replay")


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
