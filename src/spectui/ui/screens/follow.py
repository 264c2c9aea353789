"""The follower's screen: the live main screen drawn from a session file as it is written.

`FollowScreen` is `MainScreen` with its engine workers replaced by one: it reads the runs a
`SessionFollower` finds, posts each run's opening, and pumps its events through the same
`bridge.pump` as a live run, so the same handlers draw the same panes (tokens coloured by
origin, metrics with the previous run beside the current one, charts, the CPU line). Nothing
here can run, stop, switch or restart: those keys stay bound, out of the footer, and explain
that the presenter does that. A banner says whom it follows and how that run stands.
"""

from __future__ import annotations

import contextlib
from typing import ClassVar

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.css.query import NoMatches
from textual.events import Resize
from textual.message import Message
from textual.widget import Widget
from textual.widgets import Label, Static
from textual.worker import Worker, WorkerState

from spectui.core.events import ServerState, ServerStateEvent
from spectui.core.request import GenerationRequest
from spectui.core.sessions.follow import FollowEngine, short_path
from spectui.core.sessions.tail import FollowedRun, FollowState, SessionFollower
from spectui.ui.bridge import pump
from spectui.ui.messages import TokensArrived
from spectui.ui.screens.dialogs import HELP_TEXT, HelpScreen
from spectui.ui.screens.main import MainScreen
from spectui.ui.screens.prompt_picker import PromptChoice

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
    """A session file's header arrived: a new run to draw."""

    def __init__(self, run: FollowedRun) -> None:
        super().__init__()
        self.run = run


class RunLeft(Message, bubble=False):
    """A run's file ended without a summary (the next run began, or the file was cut)."""

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


def waiting_choice() -> PromptChoice:
    """What the answer pane is titled before the first run arrives."""
    return PromptChoice("follow", "waiting for a run", GenerationRequest(prompt="(follow)"))


class FollowScreen(MainScreen):
    """The main screen over a followed session folder or file: read-only."""

    BINDINGS: ClassVar[list[BindingType]] = [
        # Bound (so the keys explain themselves) but out of the footer: nothing to run here.
        Binding("r", "run", "Run", show=False),
        Binding("x", "stop", "Stop", show=False),
        Binding("t", "switch_spec", "Spec", show=False),
        Binding("R", "restart", "Restart", show=False),
        Binding("p", "pick_prompt", "Prompt", show=False),
    ]

    def __init__(self, engine: FollowEngine) -> None:
        super().__init__(engine, waiting_choice(), autorun=False)
        self.follow = engine
        self.follower: SessionFollower = engine.follower
        self.follower.on_note = lambda text: self.post_message(Note(text))
        self.follower.on_state = lambda state: self.post_message(StateChanged(state))
        self.notes: list[str] = []
        """Every note shown, oldest first (tests read them; the user sees notifications)."""
        self.states: list[FollowState] = []
        """Every state the banner showed, oldest first."""

    def compose(self) -> ComposeResult:
        yield FollowBanner(short_path(self.follower.target))
        yield from super().compose()

    @property
    def banner(self) -> FollowBanner:
        return self.query_one(FollowBanner)

    def on_mount(self) -> None:
        # (MainScreen's on_mount runs after this one and sets the live placeholder: replace it
        # once it has.)
        self.call_later(self._placeholder)
        self._follow_runs()

    def _placeholder(self) -> None:
        if not self.running and self.is_attached:
            self.answer.view.placeholder = "waiting for the presenter's next run…"
            self.answer.view.refresh()

    # -- the one worker -----------------------------------------------------------------------

    @work(exclusive=True, exit_on_error=False, group="follow")
    async def _follow_runs(self) -> None:
        async for run in self.follower.runs():
            self._run_id += 1
            post = self._poster("run", self._run_id)
            self.post_message(RunOpened(run))
            ended = await pump(run.events(), post)
            if not ended:
                post(RunLeft(run))

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        # (MainScreen's handler runs too; it looks only at its own groups.)
        if event.worker.group == "follow" and event.state is WorkerState.ERROR:
            self.notify(f"following stopped: {event.worker.error!r}", severity="error")

    # -- what the worker posts ------------------------------------------------------------------

    @on(RunOpened)
    def _run_opened(self, message: RunOpened) -> None:
        run = message.run
        header = run.header
        label = header.label or run.path.stem
        self.prompt = PromptChoice(label, label, header.request)
        self.running = True
        self.run_display.begin(label, header.server.spec_label)
        self.server.bar.set_info(self.engine.info)
        self._show_state(ServerStateEvent(state=ServerState.GENERATING, detail=run.path.name))
        self.banner.show(run, self.follower.state)

    def on_resize(self, event: Resize) -> None:
        # (MainScreen's on_resize runs after this one and shows the plot on a wide screen.) A
        # run read in one go (a follower joining late) can be complete before that: the plot,
        # shown after its data stopped changing, was never drawn. Replot once it is shown.
        self.call_after_refresh(self.charts.replot)

    @on(RunLeft)
    def _run_left(self, message: RunLeft) -> None:
        if self.running:
            self.run_display.stopped("ended without a summary · the next run began")
            self._run_over()

    @on(StateChanged)
    def _state_changed(self, message: StateChanged) -> None:
        self.states.append(message.state)
        self.banner.show(self.follower.current, message.state)
        self._show_quiet()

    @on(TokensArrived)
    def _tokens_after_quiet(self, message: TokensArrived) -> None:
        # A batch read before the file went quiet can be drawn after the state says so (the
        # bridge flushes on its own clock); MainScreen's handler, which runs after this one,
        # titles the pane 'generating': put the quiet state back once it has.
        if self.follower.state in QUIET:
            self.call_later(self._show_quiet)

    def _show_quiet(self) -> None:
        state = self.follower.state
        # (Deferred: by now the app may be tearing the screen down.)
        if state in QUIET and self.running and self.is_attached:
            with contextlib.suppress(NoMatches):
                self.answer.finish(STATE_WORDS[state])

    @on(Note)
    def _note(self, message: Note) -> None:
        self.notes.append(message.text)
        self.notify(message.text, title="Follow", severity="warning")

    # -- keys that would change something: refused ---------------------------------------------

    def _read_only(self, what: str) -> None:
        self.notify(f"cannot {what}: {READ_ONLY}", title="Follow")

    def action_run(self) -> None:
        self._read_only("run")

    def action_stop(self) -> None:
        self._read_only("stop")

    def action_switch_spec(self) -> None:
        self._read_only("switch spec types")

    def action_restart(self) -> None:
        self._read_only("restart")

    def action_pick_prompt(self) -> None:
        self._read_only("pick a prompt")

    def action_help(self) -> None:
        self.app.push_screen(FollowHelpScreen())
