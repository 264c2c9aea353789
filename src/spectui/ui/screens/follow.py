"""The follower's screen: the live main screen drawn from a session file as it is written.

`FollowScreen` composes the live screen's `RunView` and has one worker: it reads the runs a
`SessionFollower` finds, posts each run's opening, and plays its events in the `RunView` as a live
run is played, so the same panes draw them (tokens coloured by origin, metrics
with the previous run beside the current one, charts, the CPU line). Nothing here can run,
stop, switch or restart: those keys are bound, out of the footer, and explain that the
presenter does that. A banner says whom it follows and how that run stands.
"""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.events import Resize
from textual.message import Message
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import Label, Static
from textual.worker import Worker, WorkerState

from spectui.core.events import ServerState, ServerStateEvent
from spectui.core.sessions.follow import FollowEngine, short_path
from spectui.core.sessions.tail import FollowedRun, FollowState, SessionFollower
from spectui.ui.bridge import FOLLOW_FLUSH_INTERVAL_S
from spectui.ui.compositor import use_lean_compositor
from spectui.ui.messages import RunLeft, RunStarted
from spectui.ui.screens.dialogs import HELP_TEXT, HelpScreen
from spectui.ui.screens.slots import NO_LANES, slots_screen_for
from spectui.ui.widgets.charts import ChartsPane
from spectui.ui.widgets.footer import KeysFooter
from spectui.ui.widgets.run_view import RUN_SCREEN, RunView
from spectui.ui.widgets.server import ServerPane
from spectui.ui.widgets.tokens import AnswerPane

STATE_WORDS = {
    FollowState.IDLE: "waiting for the first run…",
    FollowState.LIVE: "● live",
    FollowState.WAITING: "waiting…",
    FollowState.STOPPED: "presenter stopped",
    FollowState.FINISHED: "run finished · waiting for the next one",
}
"""How the banner words each state (a glyph for live, so it reads in monochrome too)."""

QUIET = (FollowState.WAITING, FollowState.STOPPED)
"""States of a run whose file has gone quiet: the answer pane says so too."""

READ_ONLY = "a follower only watches: the presenter runs, stops and switches"

LEFT = "ended without a summary · the next run began"
"""What the panes say of a run whose file ended without its summary."""


def compact(path_text: str) -> str:
    """'~/.local/state/spectui/sessions' -> '~/…/sessions' (the folder's name is what counts)."""
    parts = path_text.split("/")
    if len(parts) > 3:
        return "/".join([parts[0], "…", parts[-1]])
    return path_text


class FollowBanner(Widget):
    """'following ~/…/sessions · run 3 · ngram-mod · ● live', docked at the top."""

    DEFAULT_CSS = """
    FollowBanner {
        dock: top;
        height: 1;
        padding: 0 1;
        background: $primary-muted;
        color: $text;
    }
    """

    def __init__(self, target: str) -> None:
        super().__init__(id="follow-banner")
        self.target = compact(target)
        self.run: FollowedRun | None = None
        self.state = FollowState.IDLE

    def show(self, run: FollowedRun | None, state: FollowState) -> None:
        if (run, state) != (self.run, self.state):
            self.run, self.state = run, state
            self.refresh()

    @property
    def text(self) -> str:
        """The banner as plain text (what tests and screen readers see)."""
        parts = [f"following {self.target}"]
        if self.run is not None:
            parts += [f"run {self.run.number}", self.run.header.server.spec_label]
        parts.append(STATE_WORDS[self.state])
        return " · ".join(parts)

    def render(self) -> Text:
        return Text(self.text, no_wrap=True, overflow="ellipsis")


class RunOpened(Message, bubble=False):
    """A session file's header arrived: the banner names the new run."""

    def __init__(self, run: FollowedRun) -> None:
        super().__init__()
        self.run = run


class StateChanged(Message, bubble=False):
    """The followed file started or stopped growing, or ended."""

    def __init__(self, state: FollowState) -> None:
        super().__init__()
        self.state = state


class Note(Message, bubble=False):
    """Something the follower left out (a damaged line, a file that is no session)."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.text = text


FOLLOW_KEYS = """\
[b]Keys (a follower only watches)[/b]
  l  what is followed (file, header, lines left out)
  ?  this help                       q  quit (nothing else stops: the presenter runs on)
  ctrl+p  command palette (also: change theme)
  r x t R p: refused here; the presenter runs, stops, switches and restarts.

[b]The banner[/b]
  following <folder> · run N (runs this follower has seen) · spec · state:
  live, waiting… (the file stopped growing), presenter stopped, run finished.
"""


class FollowHelpScreen(HelpScreen):
    """The live help with the follower's keys in place of the live ones."""

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="dialog", classes="dialog help"):
            yield Label("spectui follow help", classes="dialog-title")
            yield Static(FOLLOW_KEYS + HELP_TEXT.split("\n\n", 1)[1], id="help-text")
            yield Label("esc: close", classes="hint")


class FollowScreen(Screen[None]):
    """A followed session folder or file in the live screen's panes (a `RunView`): read-only."""

    BINDINGS: ClassVar[list[BindingType]] = [
        # The live keys that would change something are bound, out of the footer, to say that
        # the presenter does that (a presenter's audience presses them out of habit).
        Binding("r", "read_only('run')", "Run", show=False),
        Binding("x", "read_only('stop')", "Stop", show=False),
        Binding("t", "read_only('switch spec types')", "Spec", show=False),
        Binding("R", "read_only('restart')", "Restart", show=False),
        Binding("l", "toggle_log", "Log"),
        Binding("s", "slots", "Slots", show=False),
        Binding("p", "read_only('pick a prompt')", "Prompt", show=False),
        Binding("question_mark", "help", "Help", key_display="?"),
        Binding("q", "app.quit", "Quit"),
    ]

    def __init__(self, engine: FollowEngine) -> None:
        super().__init__(classes=RUN_SCREEN)
        use_lean_compositor(self)
        self.engine = engine
        self.follower: SessionFollower = engine.follower
        self.follower.on_note = lambda text: self.post_message(Note(text))
        self.follower.on_state = lambda state: self.post_message(StateChanged(state))
        self.server = ServerPane(engine)
        self.run_view = RunView(self.server)
        self.run_view.note = self._quiet_words
        self.notes: list[str] = []
        """Every note shown, oldest first (tests read them; the user sees notifications)."""
        self.states: list[FollowState] = []
        """Every state the banner showed, oldest first."""

    def compose(self) -> ComposeResult:
        yield FollowBanner(short_path(self.follower.target))
        yield self.server
        yield self.run_view
        yield KeysFooter()

    @property
    def banner(self) -> FollowBanner:
        return self.query_one(FollowBanner)

    @property
    def state(self) -> ServerState | None:
        """The followed server's state as its runs tell it."""
        return self.server.state

    @property
    def answer(self) -> AnswerPane:
        return self.run_view.answer

    @property
    def charts(self) -> ChartsPane:
        return self.run_view.charts

    @property
    def running(self) -> bool:
        """Whether a followed run is being drawn (its file has not ended)."""
        return self.run_view.running

    def on_mount(self) -> None:
        if self.app.return_code is not None:
            return  # the app is closing (a SIGTERM at start-up): its widgets may be gone
        self.run_view.set_title("waiting for a run", "waiting for the presenter's next run…")
        ready = ServerStateEvent(state=ServerState.READY, detail=self.engine.ready_detail())
        self.server.show_state(ready)
        self._follow_runs()

    def on_resize(self, event: Resize) -> None:
        self.set_class(self.run_view.fit(event.size), "-wide")
        # A run read in one go (a follower joining late) can be complete before the plot is
        # shown: the plot, shown after its data stopped changing, was never drawn. Replot once
        # it is shown.
        self.call_after_refresh(self.charts.replot)

    # -- the one worker -----------------------------------------------------------------------

    @work(exclusive=True, exit_on_error=False, group="follow")
    async def _follow_runs(self) -> None:
        async for run in self.follower.runs():
            header = run.header
            label = header.label or run.path.stem
            opening = RunStarted(header.request, label, header.server.spec_label, run.path.name)
            ident = self.run_view.start(opening)
            self.post_message(RunOpened(run))
            quiet = FOLLOW_FLUSH_INTERVAL_S
            await self.run_view.play(run.events(), ident, RunLeft(LEFT), quiet_interval=quiet)

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.worker.group == "follow" and event.state is WorkerState.ERROR:
            self.notify(f"following stopped: {event.worker.error!r}", severity="error")

    # -- what the worker posts ------------------------------------------------------------------

    @on(RunOpened)
    def _run_opened(self, message: RunOpened) -> None:
        self.banner.show(message.run, self.follower.state)

    @on(StateChanged)
    def _state_changed(self, message: StateChanged) -> None:
        self.states.append(message.state)
        self.banner.show(self.follower.current, message.state)
        self.run_view.show_note()

    def _quiet_words(self) -> str | None:
        """What the answer pane says while the followed file is quiet."""
        state = self.follower.state
        return STATE_WORDS[state] if state in QUIET else None

    @on(Note)
    def _note(self, message: Note) -> None:
        self.notes.append(message.text)
        self.notify(message.text, title="Follow", severity="warning")

    # -- keys -------------------------------------------------------------------------------------

    def action_read_only(self, what: str) -> None:
        self.notify(f"cannot {what}: {READ_ONLY}", title="Follow")

    def action_toggle_log(self) -> None:
        self.server.toggle_log()

    def action_slots(self) -> None:
        screen = slots_screen_for(self.engine)
        if screen is None:
            self.notify(NO_LANES, title="Slots")
        else:
            self.app.push_screen(screen)

    def action_help(self) -> None:
        self.app.push_screen(FollowHelpScreen())
