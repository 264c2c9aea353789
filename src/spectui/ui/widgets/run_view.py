"""One run's view: the answer, the metrics beside it and the charts under them.

The live, replay and follow screens each compose one `RunView` beside their `ServerPane` and bring
their own keys; the view plays what a run streams (`play`: through `bridge.pump` into its own
message handlers, which draw through `RunDisplay`) and grows full charts on a wide terminal. Which
run is current is the view's too (`next_run`, `poster`), so a superseded run's late messages are
dropped; the server pane beside it hears when a run begins and ends, and gets the CPU samples.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from functools import cached_property

from textual import on
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.css.query import NoMatches
from textual.geometry import Size
from textual.message import Message

from spectui.core.errors import SpectuiError
from spectui.core.events import ErrorEvent, EventStream, ServerState, ServerStateEvent
from spectui.ui.bridge import QUIET_FLUSH_INTERVAL_S, Post, pump
from spectui.ui.messages import (
    MemorySampled,
    MetricsUpdated,
    PromptProgressed,
    RunEnded,
    RunFailed,
    RunLeft,
    RunStarted,
    ServerStateChanged,
    TokensArrived,
)
from spectui.ui.widgets.charts import ChartsPane
from spectui.ui.widgets.metrics import MetricsPane
from spectui.ui.widgets.run_display import RunData, RunDisplay
from spectui.ui.widgets.server import ServerPane
from spectui.ui.widgets.tokens import AnswerPane

WIDE = (120, 36)
"""From this terminal size up, the layout grows full charts and a taller log."""

RUN_SCREEN = "run-screen"
"""The class of a screen that composes a `RunView` (the app's stylesheet sizes its panes)."""

UNENDED = "the stream ended without a summary"
"""Why a run whose stream stopped before its summary failed."""


def is_wide(size: Size) -> bool:
    """Whether a terminal of ``size`` gets the wide layout."""
    return size.width >= WIDE[0] and size.height >= WIDE[1]


class RunView(Vertical):
    """The answer, metrics and charts of one run at a time."""

    DEFAULT_CSS = """
    RunView { height: 1fr; }
    """

    def __init__(self, server: ServerPane, *, id: str | None = "run-view") -> None:
        super().__init__(id=id)
        self.server = server
        """The server pane beside the view: told when runs begin and end, shown the CPU."""
        self.note: Callable[[], str | None] | None = None
        """What the answer pane says while the run's stream is quiet (a follower's 'waiting…'),
        or None; put back after each batch, which may be drawn after the stream went quiet."""
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

    def start(self, opening: RunStarted) -> int:
        """Supersede the current run with the one ``opening`` opens (its panes clear after what
        the old run posted is drawn); returns the new run's id."""
        ident = self.next_run()
        self.running = True
        self.post_message(opening)
        return ident

    def poster(self, ident: int) -> Post:
        """Post to this view while run ``ident`` is current; drop messages once superseded."""

        def post(message: Message) -> bool:
            return self.run_id == ident and self.post_message(message)

        return post

    async def play(
        self,
        events: EventStream,
        ident: int,
        unended: Message | None = None,
        quiet_interval: float = QUIET_FLUSH_INTERVAL_S,
    ) -> None:
        """Draw ``events`` as run ``ident`` (call from a worker); a stream that stops before its
        summary ends the run with ``unended``, or fails it. A thin stream's batches are drawn at
        most every ``quiet_interval`` (`bridge.pump`)."""
        post = self.poster(ident)
        if not await pump(events, post, quiet_interval=quiet_interval):
            post(unended or RunFailed(ErrorEvent(message=UNENDED, kind="protocol")))

    def worker_failed(self, error: BaseException | None) -> None:
        """The worker playing the run raised: the run fails with what it raised."""
        message = str(error) if isinstance(error, SpectuiError) else repr(error)
        self.post_message(RunFailed(ErrorEvent(message=message, kind="exception")))

    def begin(self, prompt_label: str, spec_label: str) -> None:
        """A new run: the current one becomes 'previous', the panes clear."""
        self.running = True
        self.display_of_run.begin(prompt_label, spec_label)
        self.server.run_began()

    def stopped(self, status: str) -> None:
        """Stop drawing the current run now (its late messages are dropped)."""
        self.next_run()
        self.running = False
        self.display_of_run.stopped(status)
        self.server.run_over()

    def run_over(self) -> None:
        self.running = False
        self.server.run_over()

    def show_note(self) -> None:
        """Put the quiet stream's `note` on the answer pane, if it has one now."""
        note = self.note() if self.note is not None else None
        # (Deferred after a batch: by now the app may be tearing the screen down.)
        if note and self.running and self.is_attached:
            with contextlib.suppress(NoMatches):
                self.answer.finish(note)

    # -- what a run posts -------------------------------------------------------------------------

    @on(RunStarted)
    def _run_started(self, message: RunStarted) -> None:
        self.begin(message.label, message.spec_label)
        if message.detail is not None:
            self.server.show_state(
                ServerStateEvent(state=ServerState.GENERATING, detail=message.detail)
            )

    @on(TokensArrived)
    @on(MetricsUpdated)
    @on(MemorySampled)
    @on(PromptProgressed)
    def _run_data(self, message: RunData) -> None:
        self.display_of_run.show(message)
        if isinstance(message, MemorySampled):
            self.server.bar.set_cpu(message.event)
        elif isinstance(message, TokensArrived) and self.note is not None:
            self.call_later(self.show_note)

    @on(RunEnded)
    def _run_finished(self, message: RunEnded) -> None:
        self.display_of_run.finished(message.summary)
        self.run_over()

    @on(RunFailed)
    def _run_failed(self, message: RunFailed) -> None:
        self.display_of_run.failed(message.error)
        self.notify(message.error.message, title="Run failed", severity="error")
        self.run_over()

    @on(RunLeft)
    def _run_left(self, message: RunLeft) -> None:
        if self.running:
            self.display_of_run.stopped(message.status)
            self.run_over()

    @on(ServerStateChanged)
    def _server_state(self, message: ServerStateChanged) -> None:
        self.server.show_state(message.event)  # what the run's server went through
