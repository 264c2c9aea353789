"""Replay screens: one session in the full main screen, or two side by side on one clock.

`ReplayScreen` composes the live screen's `RunView` over a `ReplayEngine`: the same widgets draw
the same events, with keys to pause, step token by token and change speed; the live keys to
switch and restart say why there is nothing to switch. Two sessions side by side are
`spectui.ui.screens.replay_pair`'s.
"""

from __future__ import annotations

from typing import ClassVar

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.events import Resize
from textual.screen import Screen
from textual.worker import Worker, WorkerState

from spectui.core.events import ServerState, ServerStateEvent
from spectui.core.sessions.replay import ReplayClock, ReplayEngine
from spectui.ui.compositor import use_lean_compositor
from spectui.ui.messages import RunStarted
from spectui.ui.screens.dialogs import HelpScreen
from spectui.ui.screens.prompt_picker import PromptChoice
from spectui.ui.screens.slots import NO_LANES
from spectui.ui.widgets.charts import ChartsPane
from spectui.ui.widgets.footer import KeysFooter
from spectui.ui.widgets.run_view import RUN_SCREEN, RunView
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
        self.server = ServerPane(engine)
        self.run_view = RunView(self.server)

    def compose(self) -> ComposeResult:
        yield self.server
        yield self.run_view
        yield KeysFooter()

    def on_mount(self) -> None:
        if self.app.return_code is not None:
            return  # the app is closing (a SIGTERM at start-up): its widgets may be gone
        self.run_view.set_title(self.prompt.label, "press r to run the prompt")
        ready = ServerStateEvent(state=ServerState.READY, detail=self.engine.ready_detail())
        self.server.show_state(ready)
        self._show_clock()
        if self.autorun:
            self.action_run()

    def on_resize(self, event: Resize) -> None:
        self.set_class(self.run_view.fit(event.size), "-wide")

    @property
    def state(self) -> ServerState | None:
        """The recorded server's state as the replay has reached it."""
        return self.server.state

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
            self.server.show_state(ServerStateEvent(state=ServerState.READY, detail="replay"))
        if self.running:
            self.run_view.stopped("stopped for a re-run")
        spec = self.engine.info.spec
        spec_label = spec.label if spec else "unknown spec"
        self._play(
            self.run_view.start(RunStarted(self.prompt.request, self.prompt.label, spec_label))
        )

    @work(exclusive=True, exit_on_error=False, group="run")
    async def _play(self, ident: int) -> None:
        await self.run_view.play(self.engine.run(self.prompt.request), ident)

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.worker.group == "run" and event.state is WorkerState.ERROR:
            self.run_view.worker_failed(event.worker.error)

    def action_stop(self) -> None:
        """Stop playing now (a recording has nothing to wind down)."""
        if not self.running:
            self.notify("nothing is generating")
            return
        self.workers.cancel_group(self, "run")
        self.run_view.stopped("stopped")

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

    # -- log, slots, help -----------------------------------------------------------------------

    def action_toggle_log(self) -> None:
        self.server.toggle_log()

    def action_slots(self) -> None:
        self.notify(NO_LANES, title="Slots")

    def action_help(self) -> None:
        self.app.push_screen(HelpScreen())
