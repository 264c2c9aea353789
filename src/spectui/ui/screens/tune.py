"""The Tune screen: the leaderboard filling in live as the race runs, the budget, and the
highlighted candidate's verdicts per prompt.

The worker is thin: it iterates the tune's events (`TuneRunner`) and posts one message per event
with the document as it stands; the handlers only redraw. A failure becomes an error line and a
notification, never a crash.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import ClassVar, Protocol

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.content import Content
from textual.message import Message
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Label, ProgressBar, Static
from textual.worker import Worker, WorkerState

from spectui.core.compare.outcomes import Verdict
from spectui.core.compare.runner import CompareEvent, progress_line
from spectui.core.errors import SpectuiError
from spectui.core.tune.export import LEADERBOARD_COLUMNS, leaderboard, noise_line, status_line
from spectui.core.tune.models import CandidateResult, TuneDocument
from spectui.core.tune.runner import RoundPlanned, TuneEvent, TuneFinished

VERDICT_STYLES: dict[str, tuple[str, str]] = {
    Verdict.KEEP: ("bold", "success"),
    Verdict.DROP: ("bold", "error"),
    Verdict.FAILED: ("", "error"),
}
"""Verdict cell styles: (attributes, theme variable for the colour)."""


class TuneSource(Protocol):
    """What the screen drives: a `TuneRunner`, or a stand-in with its shape."""

    @property
    def document(self) -> TuneDocument:
        """The tune as it stands."""
        ...

    def run(self) -> AsyncIterator[CompareEvent | TuneEvent]:
        """Race, reporting as it goes."""
        ...


class TuneProgressed(Message, bubble=False):
    """The tune reported something; ``document`` is its state right after."""

    def __init__(self, event: CompareEvent | TuneEvent, document: TuneDocument) -> None:
        super().__init__()
        self.event = event
        self.document = document


class TuneScreen(Screen[None]):
    """The race as it runs: status, budget, the overall leaderboard, the highlighted verdicts."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("q", "app.quit", "Quit")]

    DEFAULT_CSS = """
    TuneScreen { layout: vertical; }
    TuneScreen #tune-status { height: 1; padding: 0 1; background: $panel; }
    TuneScreen #tune-status.-failed { color: $error; text-style: bold; }
    TuneScreen #tune-budget { height: 1; padding: 0 1; }
    TuneScreen #tune-table { height: 1fr; }
    TuneScreen #tune-detail { height: auto; min-height: 3; padding: 0 1;
        border-top: solid $panel-lighten-2; color: $text-muted; }
    """

    def __init__(self, source: TuneSource) -> None:
        super().__init__()
        self.source = source
        self.document = source.document
        self.ranked: list[CandidateResult] = []
        """The candidates in leaderboard order, as drawn."""
        self.finished = False
        """The tune stopped (finished, budget, or interrupted)."""

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label("starting…", id="tune-status")
            yield ProgressBar(id="tune-budget", show_eta=True)
            table: DataTable[Text] = DataTable(id="tune-table", cursor_type="row")
            yield table
            yield Static("", id="tune-detail")
        yield Footer()

    @property
    def table(self) -> DataTable[Text]:
        return self.query_one("#tune-table", DataTable)

    def on_mount(self) -> None:
        self.title = "spectui tune"
        for name in LEADERBOARD_COLUMNS:
            self.table.add_column(name, key=name)
        self._redraw()
        self._run_tune()

    @work(exclusive=True, exit_on_error=False, group="tune")
    async def _run_tune(self) -> None:
        async for event in self.source.run():
            self.post_message(TuneProgressed(event, self.source.document))

    @on(Worker.StateChanged)
    def _worker_changed(self, event: Worker.StateChanged) -> None:
        if event.worker.group != "tune" or event.state is not WorkerState.ERROR:
            return
        error = event.worker.error
        title = error.title if isinstance(error, SpectuiError) else "Tune failed"
        text = str(error) if isinstance(error, SpectuiError) else repr(error)
        self.notify(text, title=title, severity="error", timeout=15)
        self._status(f"stopped: {text}", failed=True)

    def on_tune_progressed(self, message: TuneProgressed) -> None:
        self.document = message.document
        event = message.event
        if isinstance(event, RoundPlanned):
            self._status(f"round {event.round}: {event.candidates} candidates go on")
        elif isinstance(event, TuneFinished):
            self.finished = True
            self._status(status_line(self.document))
        elif (line := progress_line(event, self.document.compare.plan)) is not None:
            self._status(line)
        self._redraw()

    def _status(self, text: str, *, failed: bool = False) -> None:
        status = self.query_one("#tune-status", Label)
        status.update(text)
        status.set_class(failed, "-failed")

    def _styles(self) -> dict[str, str]:
        colours = self.app.theme_variables
        return {
            verdict: f"{attributes} {colours.get(variable, '')}".strip()
            for verdict, (attributes, variable) in VERDICT_STYLES.items()
        }

    def _redraw(self) -> None:
        document = self.document
        self.query_one(ProgressBar).update(
            total=document.budget_s, progress=min(document.elapsed_s, document.budget_s)
        )
        # The order changes as results come in: rebuild the rows, keep the cursor's candidate.
        table = self.table
        selected = self._selected()
        rows = leaderboard(document, None)
        self.ranked = [c for c, _ in rows]
        table.clear()
        styles = self._styles()
        for candidate, cells in rows:
            texts = [Text(cell) for cell in cells[:-1]]
            texts.append(Text(cells[-1], style=styles.get(cells[-1].split(" ")[0], "")))
            table.add_row(*texts, key=candidate.config)
        if selected is not None and selected.config in {c.config for c in self.ranked}:
            table.move_cursor(row=[c.config for c in self.ranked].index(selected.config))
        self._show_detail()

    def _selected(self) -> CandidateResult | None:
        if not self.ranked or not self.table.row_count:
            return None
        return self.ranked[min(self.table.cursor_row, len(self.ranked) - 1)]

    @on(DataTable.RowHighlighted)
    def _show_detail(self) -> None:
        detail = self.query_one("#tune-detail", Static)
        candidate = self._selected()
        noise = noise_line(self.document)
        if candidate is None:
            detail.update(noise or "")
            return
        parts: list[Content | str | tuple[str, str]] = [(candidate.label, "bold")]
        parts.append(f" — overall: {candidate.overall.verdict}, {candidate.overall.reason}")
        for prompt, result in candidate.results.items():
            parts.append(f"\n{prompt}: {result.verdict} — {result.reason}")
        parts.append(f"\n{' '.join(candidate.args)}")
        if noise:
            parts.append(f"\n{noise}")
        detail.update(Content.assemble(*parts))
