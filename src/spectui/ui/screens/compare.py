"""The Compare screen: the config × prompt table filling in live, with a column per
concurrency level where levels run, each config's verdict by content class (code, JSON, prose)
where its prompts have them, and a drill-down into one prompt's responses
(`compare_responses.ResponsesScreen`: where each one departs from the baseline).

The worker is thin: it iterates the comparison's events (`CompareRunner` in
`spectui.core.compare.runner`, or anything with the same shape) and posts one message per event
with the document as it stands; the handlers only redraw. A failure of the comparison becomes an
error line and a notification, never a crash.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
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

from spectui.core.compare.export import SUMMARY_COLUMNS, summary_rows
from spectui.core.compare.level_export import level_table
from spectui.core.compare.outcomes import Verdict
from spectui.core.compare.progress import (
    CompareEvent,
    CompareFinished,
    ConfigFailed,
    progress_line,
)
from spectui.core.compare.store import CompareDocument
from spectui.core.compare.summary_row import SummaryRow
from spectui.core.errors import SpectuiError
from spectui.ui.lanes import CompareLanes
from spectui.ui.screens.compare_responses import ResponsesScreen
from spectui.ui.screens.slots import SlotsScreen

VERDICT_STYLES: dict[str, tuple[str, str]] = {
    Verdict.KEEP: ("bold", "success"),
    Verdict.DROP: ("bold", "error"),
    Verdict.FAILED: ("", "error"),
}
"""Verdict cell styles: (attributes, theme variable for the colour)."""


class CompareSource(Protocol):
    """What the screen drives: a `CompareRunner`, or a stand-in with its shape."""

    @property
    def document(self) -> CompareDocument:
        """The comparison as it stands."""
        ...

    def run(self) -> AsyncIterator[CompareEvent]:
        """Run what is pending, reporting as it goes."""
        ...


class CompareProgressed(Message, bubble=False):
    """The comparison reported something; ``document`` is its state right after."""

    def __init__(self, event: CompareEvent, document: CompareDocument) -> None:
        super().__init__()
        self.event = event
        self.document = document


def summary_cells(
    document: CompareDocument, verdict_styles: dict[str, str] | None = None
) -> list[tuple[tuple[str, str], list[Text]]]:
    """One row of cells per config × prompt, keyed by (config, prompt).

    Cells are Rich `Text` (what DataTable measures and never reads as markup: a label such as
    'draft-simple [model.gguf]' must show as written); ``verdict_styles`` colours the verdicts.
    """
    styles = verdict_styles or {}
    rows = []
    for row, (*cells, verdict) in summary_rows(document):
        texts = [Text(cell) for cell in cells]
        texts.append(Text(verdict, style=styles.get(verdict, "")))
        rows.append(((row.config, row.prompt), texts))
    return rows


class CompareScreen(Screen[None]):
    """The comparison as it runs: progress, the summary table, the highlighted row's verdict."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "open", "Responses"),
        Binding("s", "slots", "Slots", show=False),
        Binding("q", "app.quit", "Quit"),
    ]

    DEFAULT_CSS = """
    CompareScreen { layout: vertical; }
    CompareScreen #compare-status { height: 1; padding: 0 1; background: $panel; }
    CompareScreen #compare-status.-failed { color: $error; text-style: bold; }
    CompareScreen #compare-progress { height: 1; padding: 0 1; }
    CompareScreen #compare-table { height: 1fr; }
    CompareScreen #compare-levels { height: 1fr; border-top: solid $panel-lighten-2; }
    CompareScreen #compare-level-verdicts { height: auto; padding: 0 1; }
    CompareScreen #compare-content { height: auto; padding: 0 1;
        border-top: solid $panel-lighten-2; }
    CompareScreen #compare-content.-none { display: none; }
    CompareScreen #compare-reason { height: auto; min-height: 2; padding: 0 1;
        border-top: solid $panel-lighten-2; color: $text-muted; }
    """

    def __init__(self, source: CompareSource, results: Path | None = None) -> None:
        super().__init__()
        self.source = source
        self.results = results
        self.document = source.document
        self.finished = False
        """Every planned run is recorded."""
        self.failure: str | None = None
        """Why the comparison stopped, if it failed."""
        levels = self.document.plan.concurrency
        self.lanes = CompareLanes(max(levels)) if levels != (1,) else None
        """A `--concurrency` comparison's clients, a lane each, for the slots view (`s`)."""

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label("starting…", id="compare-status")
            yield ProgressBar(id="compare-progress", show_eta=False)
            table: DataTable[Text] = DataTable(id="compare-table", cursor_type="row")
            yield table
            if self.document.plan.concurrency != (1,):
                # A column per concurrency level, and where speculation stops paying.
                yield DataTable(id="compare-levels", cursor_type="none")
                yield Static("", id="compare-level-verdicts")
            yield Static("", id="compare-content", classes="-none")
            yield Static("", id="compare-reason")
        yield Footer()

    @property
    def table(self) -> DataTable[Text]:
        return self.query_one("#compare-table", DataTable)

    def on_mount(self) -> None:
        self.title = "spectui compare"
        self.sub_title = str(self.results) if self.results else ""
        for name in SUMMARY_COLUMNS:
            self.table.add_column(name, key=name)
        if self.document.plan.concurrency != (1,):
            levels: DataTable[Text] = self.query_one("#compare-levels", DataTable)
            for name in level_table(self.document)[0]:
                levels.add_column(name, key=name)
        self._redraw()
        self._run_comparison()

    @work(exclusive=True, exit_on_error=False, group="compare")
    async def _run_comparison(self) -> None:
        async for event in self.source.run():
            self.post_message(CompareProgressed(event, self.source.document))

    @on(Worker.StateChanged)
    def _worker_changed(self, event: Worker.StateChanged) -> None:
        if event.worker.group != "compare" or event.state is not WorkerState.ERROR:
            return
        error = event.worker.error
        title = error.title if isinstance(error, SpectuiError) else "Comparison failed"
        self.failure = str(error) if isinstance(error, SpectuiError) else repr(error)
        self.notify(self.failure, title=title, severity="error", timeout=15)
        self._status(f"stopped: {self.failure}", failed=True)

    def on_compare_progressed(self, message: CompareProgressed) -> None:
        self.document = message.document
        event = message.event
        if self.lanes is not None:
            self.lanes.take(event)
        label = self.document.plan.label
        line = progress_line(event, self.document.plan)
        if line is not None:
            self._status(line)
        elif isinstance(event, ConfigFailed):
            self._status(f"{label(event.config)} failed: {event.detail}", failed=True)
            self.notify(event.detail, title=f"{label(event.config)} failed", severity="error")
        elif isinstance(event, CompareFinished):
            self.finished = True
            self._status(f"done · {self.document.restarts}")
        self._redraw()
        if isinstance(self.app.screen, ResponsesScreen):
            self.app.screen.show(self.document)

    def action_slots(self) -> None:
        """The slots view of a `--concurrency` comparison: its clients, a lane each."""
        if self.lanes is None:
            self.notify("one stream at a time: lanes come with compare --concurrency")
            return
        self.app.push_screen(SlotsScreen(self.lanes, len(self.lanes.lanes)))

    def _verdict_styles(self) -> dict[str, str]:
        """Rich styles for verdict cells, in the current theme's colours."""
        colours = self.app.theme_variables
        return {
            verdict: f"{attributes} {colours.get(variable, '')}".strip()
            for verdict, (attributes, variable) in VERDICT_STYLES.items()
        }

    def _status(self, text: str, *, failed: bool = False) -> None:
        status = self.query_one("#compare-status", Label)
        status.update(text)
        status.set_class(failed, "-failed")

    def _redraw(self) -> None:
        done, total = len(self.document.runs), len(self.document.plan.jobs())
        self.query_one(ProgressBar).update(total=total, progress=done)
        table = self.table
        # The rows (config × prompt) are fixed by the plan: add them once, then update cells in
        # place, so the cursor stays put and columns widen to fit what arrives.
        fresh = table.row_count == 0
        for (config, prompt), cells in summary_cells(self.document, self._verdict_styles()):
            key = f"{config}\x00{prompt}"
            if fresh:
                table.add_row(*cells, key=key)
                continue
            for column, cell in zip(SUMMARY_COLUMNS, cells, strict=True):
                table.update_cell(key, column, cell, update_width=True)
        self._redraw_levels()
        self._redraw_content()
        self._show_reason()

    def _redraw_levels(self) -> None:
        """The concurrency table and each config's one-sentence verdict (when levels run)."""
        if self.document.plan.concurrency == (1,):
            return
        levels: DataTable[Text] = self.query_one("#compare-levels", DataTable)
        styles = self._verdict_styles()
        levels.clear()
        for row in level_table(self.document)[1]:
            style = styles.get(row[-1], "") if row[1] == "verdict" else ""
            levels.add_row(*(Text(c, style=style if i > 1 else "") for i, c in enumerate(row)))
        label = self.document.plan.label
        self.query_one("#compare-level-verdicts", Static).update(
            Content("\n").join(
                Content.assemble((f"{label(v.config)}: ", "bold"), v.sentence)
                for v in self.document.level_verdicts
            )
        )

    def _redraw_content(self) -> None:
        """Each config's verdicts by content class ('keep for code — 1.60x; drop for prose —
        0.93x'), the summary's own (`CompareDocument.content_verdicts`); hidden until there are
        any."""
        verdicts = self.document.content_verdicts
        box = self.query_one("#compare-content", Static)
        box.set_class(not verdicts, "-none")
        label = self.document.plan.label
        box.update(
            Content("\n").join(
                Content.assemble((f"{label(v.config)}", "bold"), " by content: ", v.sentence)
                for v in verdicts
            )
        )

    @on(DataTable.RowHighlighted)
    def _show_reason(self) -> None:
        row = self._selected()
        reason = self.query_one("#compare-reason", Static)
        if row is None:
            reason.update("")
            return
        label = self.document.plan.label(row.config)
        reason.update(
            Content.assemble(
                (f"{label} on {row.prompt}: ", "bold"), f"{row.verdict} — {row.reason}"
            )
        )

    def _selected(self) -> SummaryRow | None:
        """The highlighted row (rows are drawn in summary order)."""
        if not self.table.row_count or not self.document.summary:
            return None
        return self.document.summary[min(self.table.cursor_row, len(self.document.summary) - 1)]

    @on(DataTable.RowSelected)
    def _row_selected(self) -> None:
        self.action_open()

    def action_open(self) -> None:
        """Open the highlighted prompt's responses."""
        row = self._selected()
        if row is not None and not isinstance(self.app.screen, ResponsesScreen):
            self.app.push_screen(ResponsesScreen(self.document, row.prompt))
