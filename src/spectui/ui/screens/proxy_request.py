"""One request of the proxy screen, opened with Enter: the existing token view and metrics
pane, live while it streams (fed at 10 Hz from the proxy's attribution), as recorded when done."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, VerticalScroll
from textual.screen import Screen
from textual.timer import Timer
from textual.widgets import Footer, Static

from spectui.core.events import RunMetrics, TokenEvent
from spectui.core.proxy.hub import LiveRequest
from spectui.core.proxy.models import NO_DETAIL
from spectui.ui.compositor import use_lean_compositor
from spectui.ui.widgets.metrics import MetricsPane, RunColumn
from spectui.ui.widgets.tokens import AnswerPane

REFRESH_S = 0.1
"""Token batches while the request streams: 10 a second."""


class ProxyRequestScreen(Screen[None]):
    """Tokens and metrics of one proxied request."""

    DEFAULT_CSS = """
    ProxyRequestScreen > #proxy-request-title {
        height: 1;
        padding: 0 1;
        background: $panel;
        color: $text;
    }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,backspace", "app.pop_screen", "Back"),
        Binding("q", "app.quit", "Quit"),
    ]

    def __init__(self, live: LiveRequest) -> None:
        super().__init__()
        use_lean_compositor(self)
        self.live = live
        self._cursor = 0
        self._timer: Timer | None = None

    def compose(self) -> ComposeResult:
        # The record's copy names the model the response gave (the request may name none).
        info = self.live.record.info if self.live.record is not None else self.live.info
        yield Static(
            f" #{info.id} {info.endpoint} · {info.client} · {info.model or 'model not named'}",
            id="proxy-request-title",
        )
        with Horizontal(id="body"):
            yield AnswerPane(id="answer")
            with VerticalScroll(id="metrics-scroll"):
                yield MetricsPane(id="metrics")
        yield Footer()

    def on_mount(self) -> None:
        info = self.live.info
        answer = self.query_one(AnswerPane)
        metrics = self.query_one(MetricsPane)
        answer.begin(f"#{info.id} · {info.endpoint}")
        metrics.begin(RunColumn("proxied", f"#{info.id}", metrics=RunMetrics()))
        if self.live.attribution is None or not info.per_token:
            answer.view.placeholder = f"{NO_DETAIL} for this request"
        self._pull()
        if self.live.record is None:
            self._timer = self.set_interval(REFRESH_S, self._pull, name="proxy-request-pull")

    def _pull(self) -> None:
        """New tokens since the last pull, the numbers so far, and the end once it came."""
        live = self.live
        events = live.events
        if self._cursor < len(events):
            batch = events[self._cursor :]
            self._cursor = len(events)
            tokens = tuple(e for e in batch if isinstance(e, TokenEvent))
            if tokens:
                self.query_one(AnswerPane).add(tokens)
        metrics = self.query_one(MetricsPane)
        record = live.record
        if record is None:
            # Numbers as of the last token: the screen reads no clock of its own.
            if (snapshot := live.snapshot()) is not None:
                metrics.update_metrics(snapshot)
            return
        if record.metrics is not None:
            metrics.finish(record.stop_reason or record.status.value, record.metrics)
        else:
            metrics.finish(record.status.value)
        count = record.tokens if record.tokens is not None else "?"
        kept = "" if live.events or not record.info.per_token else " · tokens no longer kept"
        self.query_one(AnswerPane).finish(f"{record.status.value} · {count} tokens{kept}")
        if self._timer is not None:
            self._timer.stop()
            self._timer = None
