"""Replay screens: one session in the full main screen, or two side by side on one clock.

`ReplayScreen` composes the live screen's `RunView` over a `ReplayEngine`: the same widgets draw
the same events, with keys to pause, step token by token and change speed; the live keys to
switch and restart say why there is nothing to switch. `ReplayPairScreen` plays two sessions on
a shared clock, so the faster run visibly finishes first (a baseline against a spec run, for
talks).
"""

from __future__ import annotations

from functools import cached_property
from typing import ClassVar

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.events import Resize
from textual.message import Message
from textual.screen import Screen
from textual.widgets import Footer, Static
from textual.worker import Worker, WorkerState

from spectui.core.errors import SpectuiError
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
    ServerStateChanged,
    TokensArrived,
)
from spectui.ui.screens.dialogs import HelpScreen
from spectui.ui.screens.prompt_picker import PromptChoice
from spectui.ui.screens.slots import NO_LANES
from spectui.ui.widgets.charts import ChartsPane
from spectui.ui.widgets.metrics import MetricsPane
from spectui.ui.widgets.run_display import RunData, RunDisplay
from spectui.ui.widgets.run_view import RUN_SCREEN, RunView, app_title, log_lines
from spectui.ui.widgets.server import ServerPane
from spectui.ui.widgets.tokens import AnswerPane

SPEED_CYCLE: tuple[float | None, ...] = (0.5, 1.0, 2.0, None)
"""What ``v`` cycles through; None plays as fast as possible."""

REPLAY_BINDINGS: list[BindingType] = [
    Binding("space", "toggle_pause", "Pause"),
    Binding("n", "step", "Step"),
    Binding("v", "cycle_speed", "Speed"),
]


NO_SWITCH = "a replay shows what was recorded: switching spec types needs a live server"
NO_RESTART = "a replay has no server to restart: press r to play it again"
NO_PROMPT = "a replay plays the recorded prompt: press r to play it again"


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


class ReplayScreen(Screen[None]):
    """A recorded session in the live screen's panes (a `RunView`), with pause / step / speed.

    Its keys are its own: play again, stop, pause, step, speed, the log, help, quit. The live
    keys that make no sense here (switch, restart, pick a prompt) are bound, out of the footer,
    to say why, so a presenter used to them gets an answer rather than nothing."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("r", "run", "Replay"),
        Binding("x", "stop", "Stop"),
        Binding("t", f"explain('{NO_SWITCH}')", "Spec", show=False),
        Binding("R", f"explain('{NO_RESTART}')", "Restart", show=False),
        Binding("l", "toggle_log", "Log"),
        Binding("s", "slots", "Slots", show=False),
        Binding("p", f"explain('{NO_PROMPT}')", "Prompt", show=False),
        Binding("question_mark", "help", "Help", key_display="?"),
        Binding("q", "app.quit", "Quit"),
        *REPLAY_BINDINGS,
    ]

    def __init__(self, engine: ReplayEngine, *, autorun: bool = True) -> None:
        super().__init__(classes=RUN_SCREEN)
        use_lean_compositor(self)
        self.engine = engine
        self.prompt = replay_choice(engine)
        self.autorun = autorun
        self.state: ServerState | None = None
        """The recorded server's state as the replay has reached it."""

    def compose(self) -> ComposeResult:
        yield ServerPane(self.engine.info, id="server")
        yield RunView()
        yield Footer()

    def on_mount(self) -> None:
        if self.app.return_code is not None:
            return  # the app is closing (a SIGTERM at start-up): its widgets may be gone
        self.run_view.set_title(self.prompt.label, "press r to run the prompt")
        self.set_interval(1.0, self._refresh_log)
        self._show_state(
            ServerStateEvent(state=ServerState.READY, detail=self.engine.ready_detail())
        )
        self.server.bar.set_info(self.engine.info)
        self._show_clock()
        if self.autorun:
            self.action_run()

    def on_resize(self, event: Resize) -> None:
        self.set_class(self.run_view.fit(event.size), "-wide")

    @property
    def run_view(self) -> RunView:
        return self.query_one(RunView)

    @property
    def server(self) -> ServerPane:
        return self.query_one(ServerPane)

    @property
    def charts(self) -> ChartsPane:
        return self.run_view.charts

    @property
    def running(self) -> bool:
        """Whether a play is being drawn."""
        return self.run_view.running

    def _show_clock(self) -> None:
        self.run_view.metrics_box.border_subtitle = clock_label(self.engine.clock)

    # -- playing --------------------------------------------------------------------------------

    def action_run(self) -> None:
        """Play the recording (again) from its start."""
        if self.state is ServerState.FAILED and not self.running:
            # A recorded server failure is part of the story, not a state to recover from.
            self._show_state(ServerStateEvent(state=ServerState.READY, detail="replay"))
        if self.running:
            self.run_view.stopped("stopped for a re-run")
        ident = self.run_view.next_run()
        spec = self.engine.info.spec
        self.run_view.begin(self.prompt.label, spec.label if spec else "unknown spec")
        if self.state is ServerState.READY:
            self._show_state(ServerStateEvent(state=ServerState.GENERATING))
        self._play(ident)

    @work(exclusive=True, exit_on_error=False, group="run")
    async def _play(self, ident: int) -> None:
        post = self.run_view.poster(self, ident)
        ended = await pump(self.engine.run(self.prompt.request), post)
        if not ended:
            post(
                RunFailed(ErrorEvent(message="the stream ended without a summary", kind="protocol"))
            )

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.worker.group == "run" and event.state is WorkerState.ERROR:
            error = event.worker.error
            message = str(error) if isinstance(error, SpectuiError) else repr(error)
            self.post_message(RunFailed(ErrorEvent(message=message, kind="exception")))

    def action_stop(self) -> None:
        """Stop playing now (a recording has nothing to wind down)."""
        if not self.running:
            self.notify("nothing is generating")
            return
        self.workers.cancel_group(self, "run")
        self.run_view.stopped("stopped")
        self._run_over()

    def _run_over(self) -> None:
        self.run_view.running = False
        if self.state is ServerState.GENERATING:
            self._show_state(ServerStateEvent(state=ServerState.READY))

    def action_toggle_pause(self) -> None:
        self.engine.toggle_pause()
        self._show_clock()

    def action_step(self) -> None:
        self.engine.step()
        self._show_clock()
        if not self.running:
            self.action_run()  # stepping after the end plays the run again, one token at a time

    def action_cycle_speed(self) -> None:
        self.engine.clock.set_speed(next_speed(self.engine.clock.speed))
        self._show_clock()

    def action_explain(self, text: str) -> None:
        self.notify(text, title="Replay")

    # -- what a play posts ----------------------------------------------------------------------

    @on(TokensArrived)
    @on(MetricsUpdated)
    @on(MemorySampled)
    @on(PromptProgressed)
    def _run_data(self, message: RunData) -> None:
        self.run_view.display_of_run.show(message)
        if isinstance(message, MemorySampled):
            self.server.bar.set_cpu(message.event)

    @on(RunEnded)
    def _run_finished(self, message: RunEnded) -> None:
        self.run_view.display_of_run.finished(message.summary)
        self._run_over()

    @on(RunFailed)
    def _run_failed(self, message: RunFailed) -> None:
        self.run_view.display_of_run.failed(message.error)
        self.notify(message.error.message, title="Run failed", severity="error")
        self._run_over()

    @on(ServerStateChanged)
    def _server_state(self, message: ServerStateChanged) -> None:
        self._show_state(message.event)  # what the recorded server went through

    def _show_state(self, event: ServerStateEvent) -> None:
        self.state = event.state
        self.server.show_state(event, self.engine.info, self._log_lines)
        self.app.title = app_title(self.engine.info)

    # -- log, slots, help -----------------------------------------------------------------------

    def _log_lines(self) -> list[str]:
        return log_lines(self.engine)

    def _refresh_log(self) -> None:
        if self.server.log_visible and self.state is not ServerState.FAILED:
            self.server.show_log(self._log_lines())

    def action_toggle_log(self) -> None:
        self.server.toggle_log(self._log_lines())

    def action_slots(self) -> None:
        self.notify(NO_LANES, title="Slots")

    def action_help(self) -> None:
        self.app.push_screen(HelpScreen())


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
