"""The server pane: what runs, in which state, and (toggled with ``l``) its recent log lines.

States carry a glyph as well as a colour so they read in monochrome; a failure expands the log so
the cause is on screen without another key press. The pane owns what a run screen shows of its
source's server: the state, the log (polled while open) and the app's title.
"""

from __future__ import annotations

from time import monotonic
from typing import ClassVar

from rich.style import Style
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.strip import Strip
from textual.widgets import Log

from spectui.core.engine.base import RunSource, ServerInfo
from spectui.core.events import MemoryEvent, ServerState, ServerStateEvent
from spectui.ui.widgets.kept import KeptStrips

GLYPHS = {
    ServerState.STARTING: "◌",
    ServerState.LOADING: "◐",
    ServerState.READY: "●",
    ServerState.GENERATING: "▶",
    ServerState.RESTARTING: "↻",
    ServerState.STOPPED: "■",
    ServerState.FAILED: "✗",
}

LOG_LINES = 200
"""Log lines the pane keeps (the engine keeps its own ring buffer; this is just the view)."""

LOG_TAIL_LINES = 50
"""Server log lines fetched for the log view and failure reports."""

LOG_POLL_S = 1.0
"""How often an open log view is read again."""


def log_lines(source: RunSource) -> list[str]:
    """What the log view shows for ``source``; never raises (the log view must never take the
    app down)."""
    try:
        return source.log_tail(LOG_TAIL_LINES)
    except Exception as error:
        return [f"(could not read the server log: {error})"]


def app_title(info: ServerInfo) -> str:
    """The server's whole config as the app's title, which Textual's screenshots (the command
    palette's 'Save screenshot') put in their title bar; the metrics columns wrap it."""
    return f"spectui · {info.spec.label}" if info.spec else "spectui"


def describe(info: ServerInfo) -> str:
    """One line about the server: mode, binary, model, where."""
    parts: list[str] = [info.mode]
    binary = info.binary.name if info.binary else "llama-server"
    parts.append(f"{binary} {info.version}" if info.version else binary)
    if info.pid:
        parts.append(f"pid {info.pid}")
    if info.model:
        parts.append(info.model.rsplit("/", 1)[-1])
    parts.append(info.url)
    return " · ".join(parts)


CPU_REDRAW_S = 1.0
"""The CPU shares are redrawn at most once a second: a run's samples come about as often
(`core.stream.run.MEMORY_INTERVAL_S`), and the bar's two lines cost as much to draw as a token
frame."""


class ServerBar(KeptStrips):
    """Two lines: the state (with detail), then what the server is.

    `render` says what the bar shows; its lines are drawn once into strips and kept until it
    changes (`kept.KeptStrips`: a CPU sample redraws the first line only). Laid out by Textual,
    the two lines cost ~1.4 ms a redraw, once a second for the CPU shares: a token frame's worth.
    """

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "server--ok",
        "server--busy",
        "server--failed",
        "server--info",
        "server--spec",
        "server--hint",
    }
    DEFAULT_CSS = """
    ServerBar {
        height: 2;
        padding: 0 1;
        text-wrap: nowrap;
        text-overflow: ellipsis;
    }
    ServerBar > .server--ok { color: $success; text-style: bold; }
    ServerBar > .server--busy { color: $warning; text-style: bold; }
    ServerBar > .server--failed { color: $error; text-style: bold reverse; }
    ServerBar > .server--info { color: $text-muted; }
    ServerBar > .server--spec { color: $accent; text-style: bold; }
    ServerBar > .server--hint { color: $error; text-style: bold; }
    """

    def __init__(self, info: ServerInfo, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.info = info
        self.state: ServerState | None = None
        self.detail = "not started"
        self.cpu = ""
        """spectui's and the server's CPU from the latest sample: the observer's price."""
        self._cpu_shown = -CPU_REDRAW_S
        self.note = ""
        """A standing line about this spectui (where it broadcasts), after what the server is."""
        self._looks: dict[str, Style] | None = None
        """The component styles in the current theme, looked up once per style change."""

    def set_state(self, state: ServerState, detail: str) -> None:
        self.state, self.detail = state, detail
        self.redraw()

    def set_detail(self, detail: str) -> None:
        self.detail = detail
        self.redraw()

    def set_cpu(self, sample: MemoryEvent) -> None:
        """Show the CPU shares of a memory sample (redrawn only when the rounded text changes)."""
        if sample.client_cpu_percent is None or sample.server_cpu_percent is None:
            return
        client, server = sample.client_cpu_percent, sample.server_cpu_percent
        # A tenth of a percent for spectui's share: small is where it should be.
        cpu = f"spectui {client:.1f} % · server {server:.0f} %"
        if cpu == self.cpu:
            return
        self.cpu = cpu  # (drawn now, or with whatever redraws the bar next)
        if (now := monotonic()) - self._cpu_shown >= CPU_REDRAW_S:
            self._cpu_shown = now
            self.redraw()

    def set_note(self, note: str) -> None:
        self.note = note
        self.redraw()

    def set_info(self, info: ServerInfo) -> None:
        self.info = info
        self.redraw()

    def _look(self, name: str) -> Style:
        if self._looks is None:
            self._looks = {
                name: self.get_component_rich_style(name) for name in self.COMPONENT_CLASSES
            }
        return self._looks[name]

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._looks = None

    def data_key(self) -> object:
        return self.state, self.detail, self.cpu, self.note, self.info

    def build(self) -> list[Strip]:
        width, base = self.content_size.width, self.rich_style
        console, pad = self.app.console, Style(bgcolor=base.bgcolor)
        lines = []
        for line in self.render().split("\n", allow_blank=True):
            line.truncate(width, overflow="ellipsis")
            lines.append(Strip(line.render(console)).apply_style(base).crop_extend(0, width, pad))
        return lines

    def render(self) -> Text:
        state = self.state
        if state in (ServerState.READY, ServerState.GENERATING):
            style = self._look("server--ok")
        elif state is ServerState.FAILED:
            style = self._look("server--failed")
        else:
            style = self._look("server--busy")
        text = Text(no_wrap=True, overflow="ellipsis")
        label = f"{GLYPHS[state]} {state.value}" if state else "○ idle"
        text.append(label, style)
        spec = self.info.spec
        text.append(
            f" · spec {spec.label if spec else 'unknown'}",
            self._look("server--spec"),
        )
        if self.cpu and state is not ServerState.FAILED:
            text.append(f" · CPU {self.cpu}", self._look("server--spec"))
        if self.detail:
            text.append(f"  {self.detail}")
        if state is ServerState.FAILED:
            text.append("  R retry · l log", self._look("server--hint"))
        text.append("\n")
        if self.note:  # first: a narrow terminal cuts the end of the line, not the note
            text.append(f"⇉ {self.note} · ", self._look("server--hint"))
        text.append(describe(self.info), self._look("server--info"))
        return text


class ServerPane(Vertical):
    """The bar plus a toggleable log view."""

    DEFAULT_CSS = """
    ServerPane {
        height: auto;
        background: $panel;
    }
    ServerPane > #server-log {
        display: none;
        height: 7;
        background: $surface;
        color: $text-muted;
        border-top: solid $panel-lighten-2;
        padding: 0 1;
        overflow-x: hidden;
        scrollbar-size-vertical: 1;
    }
    ServerPane.-show-log > #server-log { display: block; }
    """

    def __init__(self, source: RunSource, *, id: str | None = "server") -> None:
        super().__init__(id=id)
        self.source = source
        """What the pane shows the server of: its info, state and log."""
        self.state: ServerState | None = None
        """The server's state as last shown (a replay's or follower's: as recorded)."""
        self._log_shown_for_failure = False
        """The log was opened by a failure (not by the user): put it away on recovery."""
        self._log_lines: list[str] = []

    def compose(self) -> ComposeResult:
        yield ServerBar(self.source.info, id="server-bar")
        yield Log(max_lines=LOG_LINES, id="server-log", auto_scroll=True)

    def on_mount(self) -> None:
        self.set_interval(LOG_POLL_S, self._poll_log)

    @property
    def bar(self) -> ServerBar:
        return self.query_one(ServerBar)

    @property
    def log_view(self) -> Log:
        return self.query_one(Log)

    @property
    def log_visible(self) -> bool:
        return self.has_class("-show-log")

    def show_state(self, event: ServerStateEvent) -> None:
        """A new server state: the bar shows it; a failure opens the log with its cause, and
        recovery puts away a log that the failure opened."""
        self.state = event.state
        info = self.source.info
        bar = self.bar
        bar.set_state(event.state, event.detail)
        bar.set_info(info)
        if event.state is ServerState.FAILED:
            self._log_shown_for_failure = not self.log_visible or self._log_shown_for_failure
            self.show_log(event.log_tail or log_lines(self.source), visible=True)
        elif event.state is ServerState.READY and self._log_shown_for_failure:
            self._log_shown_for_failure = False
            self.show_log([], visible=False)
        self.app.title = app_title(info)

    def run_began(self) -> None:
        """A run began: a ready server is generating."""
        if self.state is ServerState.READY:
            self.show_state(ServerStateEvent(state=ServerState.GENERATING))

    def run_over(self) -> None:
        """A run ended or stopped: a generating server is ready again."""
        if self.state is ServerState.GENERATING:
            self.show_state(ServerStateEvent(state=ServerState.READY))

    def _poll_log(self) -> None:
        if self.log_visible and self.state is not ServerState.FAILED:
            self.show_log(log_lines(self.source))

    def toggle_log(self) -> None:
        """The user shows or hides the log (and decides about it from now on)."""
        self._log_shown_for_failure = False
        self.show_log(log_lines(self.source), visible=not self.log_visible)

    def show_log(self, lines: list[str], *, visible: bool | None = None) -> None:
        """Replace the log view's lines; ``visible`` shows or hides it."""
        shown = lines or ["(no log lines from the server)"]
        if shown != self._log_lines:  # polled every second while open: redraw only news
            self._log_lines = shown
            log = self.log_view
            log.clear()
            log.write_lines(shown)
        if visible is not None:
            self.set_class(visible, "-show-log")
