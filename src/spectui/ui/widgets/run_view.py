"""One run's view: the answer, the metrics beside it and the charts under them.

The live, replay and follow screens each compose one `RunView` under their own server bar and
bring their own keys; the view draws what a run streams (through `RunDisplay`) and grows full
charts on a wide terminal. Which run is current is the view's too (`next_run`, `poster`), so a
screen never draws a superseded run's late messages.
"""

from __future__ import annotations

from functools import cached_property

from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.geometry import Size
from textual.message import Message
from textual.message_pump import MessagePump

from spectui.core.engine.base import RunSource, ServerInfo
from spectui.ui.bridge import Post
from spectui.ui.widgets.charts import ChartsPane
from spectui.ui.widgets.metrics import MetricsPane
from spectui.ui.widgets.run_display import RunDisplay
from spectui.ui.widgets.tokens import AnswerPane

WIDE = (120, 36)
"""From this terminal size up, the layout grows full charts and a taller log."""

LOG_TAIL_LINES = 50
"""Server log lines fetched for the log view and failure reports."""

RUN_SCREEN = "run-screen"
"""The class of a screen that composes a `RunView` (the app's stylesheet sizes its panes)."""


def is_wide(size: Size) -> bool:
    """Whether a terminal of ``size`` gets the wide layout."""
    return size.width >= WIDE[0] and size.height >= WIDE[1]


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


class RunView(Vertical):
    """The answer, metrics and charts of one run at a time."""

    DEFAULT_CSS = """
    RunView { height: 1fr; }
    """

    def __init__(self, *, id: str | None = "run-view") -> None:
        super().__init__(id=id)
        self.run_id = 0
        """The current run; messages posted for an older one are dropped."""
        self.running = False
        """Whether a run is being drawn."""

    def compose(self) -> ComposeResult:
        with Horizontal(id="body"):
            yield AnswerPane(id="answer")
            with VerticalScroll(id="metrics-scroll"):
                yield MetricsPane(id="metrics")
        yield ChartsPane(id="charts")

    def on_mount(self) -> None:
        self.metrics_box.border_title = "metrics"

    @property
    def answer(self) -> AnswerPane:
        return self.query_one(AnswerPane)

    @property
    def metrics(self) -> MetricsPane:
        return self.query_one(MetricsPane)

    @property
    def metrics_box(self) -> VerticalScroll:
        """The scrolling frame round the metrics (its subtitle carries a replay's clock)."""
        return self.query_one("#metrics-scroll", VerticalScroll)

    @property
    def charts(self) -> ChartsPane:
        return self.query_one(ChartsPane)

    @cached_property
    def display_of_run(self) -> RunDisplay:
        """The panes, updated together."""
        return RunDisplay(self.answer, self.metrics, self.charts)

    def fit(self, size: Size) -> bool:
        """Full charts on a wide terminal; returns whether ``size`` is wide (the screen sets
        its class, which sizes the panes and its log)."""
        wide = is_wide(size)
        self.charts.show_plot(wide)
        return wide

    def set_title(self, label: str, placeholder: str | None = None) -> None:
        """Title the answer pane (and say what it waits for while it is empty)."""
        self.answer.border_title = label
        if placeholder is not None:
            self.answer.view.placeholder = placeholder
            self.answer.view.refresh()

    # -- which run is current -------------------------------------------------------------------

    def next_run(self) -> int:
        """Supersede the current run (its late messages are dropped); returns the new one's id."""
        self.run_id += 1
        return self.run_id

    def poster(self, target: MessagePump, ident: int) -> Post:
        """Post to ``target`` while run ``ident`` is current; drop messages once superseded."""

        def post(message: Message) -> bool:
            return self.run_id == ident and target.post_message(message)

        return post

    def begin(self, prompt_label: str, spec_label: str) -> None:
        """A new run: the current one becomes 'previous', the panes clear."""
        self.running = True
        self.display_of_run.begin(prompt_label, spec_label)

    def stopped(self, status: str) -> None:
        """Stop drawing the current run now (its late messages are dropped)."""
        self.next_run()
        self.running = False
        self.display_of_run.stopped(status)
