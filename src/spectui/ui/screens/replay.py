"""Replay screens: one session in the full main screen, or two side by side on one clock.

`ReplayScreen` composes the live screen's `RunView` over a `ReplayEngine`: the same widgets draw
the same events, with keys to pause, step token by token and change speed; the live keys to
switch and restart say why there is nothing to switch. Two sessions side by side are
`spectui.ui.screens.replay_pair`'s.
"""

from __future__ import annotations

from typing import ClassVar

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.events import Resize
from textual.screen import Screen
from textual.widgets import Footer
from textual.worker import Worker, WorkerState

from spectui.core.errors import SpectuiError
from spectui.core.events import ErrorEvent, ServerState, ServerStateEvent
from spectui.core.sessions.replay import ReplayClock, ReplayEngine
from spectui.ui.bridge import pump
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
from spectui.ui.widgets.run_display import RunData
from spectui.ui.widgets.run_view import RUN_SCREEN, RunView, app_title, log_lines
from spectui.ui.widgets.server import ServerPane

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
