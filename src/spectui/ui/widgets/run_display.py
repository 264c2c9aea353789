"""Draws one run across the answer, metrics and chart widgets; knows nothing about the engine.

The main screen decides *when* (it owns the workers and the locks); this decides *what each
widget shows*, so the screen's message handlers stay one line each.
"""

from __future__ import annotations

from spectui.core.events import (
    ErrorEvent,
    MemoryEvent,
    MetricsEvent,
    PromptProgressEvent,
    RunMetrics,
    StepEvent,
    SummaryEvent,
    TokenEvent,
)
from spectui.ui.messages import MemorySampled, MetricsUpdated, PromptProgressed, TokensArrived
from spectui.ui.widgets.charts import ChartsPane
from spectui.ui.widgets.metrics import MetricsPane, RunColumn
from spectui.ui.widgets.tokens import AnswerPane

RunData = TokensArrived | MetricsUpdated | MemorySampled | PromptProgressed
"""The messages that carry a run's data while it streams."""

STOP_REASONS = {"cancelled": "stopped", "error": "failed"}
"""Summary stop reasons as the panes word them."""


class RunDisplay:
    """The widgets that show a run, updated together (a replay pair's columns have no charts)."""

    def __init__(
        self, answer: AnswerPane, metrics: MetricsPane, charts: ChartsPane | None = None
    ) -> None:
        self.answer = answer
        self.metrics = metrics
        self.charts = charts
        self._failure = "failed"
        """How the answer pane words the run's failure: the kind of error, once one came."""

    def begin(self, prompt_label: str, spec_label: str) -> None:
        """A new run: the current one becomes 'previous', the panes clear."""
        self._failure = "failed"
        self.metrics.begin(RunColumn(spec_label, prompt_label, metrics=RunMetrics()))
        self.answer.begin(f"{prompt_label} · {spec_label}")
        if self.charts is not None:
            self.charts.reset()

    def show(self, message: RunData) -> None:
        """What a run streams in, whichever kind it is (screens route all four here)."""
        if isinstance(message, TokensArrived):
            self.tokens(message.tokens, message.steps)
        elif isinstance(message, MetricsUpdated):
            self.snapshot(message.event)
        elif isinstance(message, MemorySampled):
            self.memory(message.event)
        else:
            self.progress(message.event)

    def tokens(self, tokens: tuple[TokenEvent, ...], steps: tuple[StepEvent, ...]) -> None:
        self.answer.add(tokens)
        self.metrics.add_run_events(tokens, steps)
        if self.charts is not None:
            self.charts.add_tokens(tokens)
            self.charts.add_steps(steps)
            self.charts.replot_if_due()

    def snapshot(self, event: MetricsEvent) -> None:
        self.metrics.update_metrics(event.snapshot)
        if self.charts is not None:
            self.charts.add_metrics(event.snapshot)
            self.charts.replot_if_due()

    def memory(self, event: MemoryEvent) -> None:
        self.metrics.update_memory(event)

    def progress(self, event: PromptProgressEvent) -> None:
        self.answer.progress(event)

    def finished(self, summary: SummaryEvent) -> None:
        """The final numbers; an 'error' summary also comes with an ErrorEvent (see `failed`)."""
        reason = STOP_REASONS.get(summary.stop_reason) or summary.stop_reason or "done"
        self.metrics.finish(reason, summary.metrics)
        ending = self._failure if reason == "failed" else f"done · {reason}"
        self.answer.finish(f"{ending} · {summary.metrics.tokens} tokens")
        if self.charts is not None:
            self.charts.add_metrics(summary.metrics)
            self.charts.replot()

    def failed(self, error: ErrorEvent) -> None:
        self._failure = f"failed · {error.kind}"  # kept when the summary follows
        self.metrics.finish("failed")
        self.answer.finish(self._failure)
        self._replot()

    def stopped(self, status: str) -> None:
        """Stopped without waiting for the engine: the numbers so far are the run's."""
        self.answer.finish(status)
        self.metrics.finish("stopped")
        self._replot()

    def _replot(self) -> None:
        if self.charts is not None:
            self.charts.replot()
