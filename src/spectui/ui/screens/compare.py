"""The Compare screen: the config × prompt table filling in live, and a drill-down into one
prompt's responses with where each one departs from the baseline: a changed answer stands
side by side with the baseline's, both marked from the divergent token, with the baseline's own
odds there (near-tie or divergent).

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
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.content import Content
from textual.message import Message
from textual.screen import Screen
from textual.widget import Widget
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
from spectui.core.compare.records import RunRecord
from spectui.core.compare.store import CompareDocument
from spectui.core.compare.summary_row import SummaryRow
from spectui.core.compare.textdiff import Divergence
from spectui.core.errors import SpectuiError
from spectui.ui.lanes import CompareLanes
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


def response_content(record: RunRecord | None, baseline: bool) -> Content:
    """One response: the text, the part after the divergence from the baseline highlighted."""
    if record is None:
        return Content.styled("(not run yet)", "$text-muted")
    if not record.ok:
        return Content.styled(f"failed: {record.error}", "$error")
    text = record.text or "(empty response)"
    if baseline or record.divergence is None:
        return Content(text)
    cut = record.divergence.char
    return Content.assemble(text[:cut], (text[cut:], "reverse $error"))


def baseline_side(text: str, divergence: Divergence) -> Content:
    """The baseline's text next to a changed answer, marked from where they part."""
    cut = divergence.char
    return Content.assemble(text[:cut], (text[cut:] or "(ends here)", "reverse $warning"))


def evidence_line(divergence: Divergence) -> Content:
    """The divergent token, both sides, and the baseline's odds there."""
    where = (
        f"token {divergence.token}" if divergence.token is not None else f"char {divergence.char}"
    )
    parts: list[str | tuple[str, str]] = [(where, "bold"), ": baseline "]
    parts.append(
        repr(
            divergence.baseline_token
            if divergence.baseline_token is not None
            else divergence.baseline
        )
    )
    parts.append(" · this ")
    parts.append(
        repr(
            divergence.response_token
            if divergence.response_token is not None
            else divergence.response
        )
    )
    if divergence.kind is not None:
        style = "$warning" if divergence.kind == "near-tie" else "$error"
        odds = ", ".join(f"{t.token!r} {t.prob:.2f}" for t in divergence.baseline_top or [])
        parts += [" · ", (divergence.kind, f"bold {style}"), f" (baseline's odds: {odds})"]
    elif divergence.probe_error is not None:
        parts.append(f" · not probed: {divergence.probe_error}")
    else:
        parts.append(" · not probed")
    return Content.assemble(*parts)


def response_title(record: RunRecord | None, label: str, baseline: bool) -> Content:
    """The line above a response: whose it is and how it compares."""
    if baseline:
        verdict = Content.styled("baseline", "$text-muted")
    elif record is None or not record.ok or record.identical_to_baseline is None:
        verdict = Content.styled("not compared", "$text-muted")
    elif record.identical_to_baseline:
        verdict = Content.styled("identical to the baseline", "$success")
    else:
        where = record.divergence.short() if record.divergence else "differs"
        verdict = Content.styled(f"differs {where}", "$error")
    check = ""
    if record is not None and record.check_status is not None:
        check = f" · check {record.check_status}" + (
            f": {record.check_detail}" if record.check_detail else ""
        )
    return Content.assemble((label, "bold"), " — ", verdict, check)


class ResponsesScreen(Screen[None]):
    """One prompt's responses in one round, each config against the baseline."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q", "close", "Back"),
        Binding("left_square_bracket", "round(-1)", "Prev round", key_display="["),
        Binding("right_square_bracket", "round(1)", "Next round", key_display="]"),
    ]

    DEFAULT_CSS = """
    ResponsesScreen #responses-title { height: 1; padding: 0 1; background: $panel; }
    ResponsesScreen .response-title { margin-top: 1; padding: 0 1; }
    ResponsesScreen .response { padding: 0 1 0 3; }
    ResponsesScreen .side-by-side { height: auto; }
    ResponsesScreen .side-by-side > Static { width: 1fr; }
    ResponsesScreen .side-baseline { padding: 0 1 0 3; border-right: vkey $panel-lighten-2; }
    ResponsesScreen .divergence-evidence { padding: 0 1 0 3; color: $text-muted; }
    """

    def __init__(self, document: CompareDocument, prompt: str) -> None:
        super().__init__()
        self.document = document
        self.prompt = prompt
        self.round = max((r.round for r in self._counted()), default=1)

    def _counted(self) -> list[RunRecord]:
        return [
            r
            for r in self.document.runs
            # One per round: the lowest level's first client (the one the table pairs first).
            if r.prompt == self.prompt
            and not r.warmup
            and r.client == 0
            and r.level == min(self.document.plan.concurrency)
        ]

    def compose(self) -> ComposeResult:
        yield Label(id="responses-title")
        yield VerticalScroll(id="responses")
        yield Footer()

    def on_mount(self) -> None:
        self.redraw()

    def show(self, document: CompareDocument) -> None:
        """Take a newer document (runs keep arriving while this screen is open)."""
        self.document = document
        self.redraw()

    def redraw(self) -> None:
        """Rebuild the title and one block per config."""
        reps = self.document.plan.reps
        self.query_one("#responses-title", Label).update(
            f"{self.prompt} · round {self.round} of {reps}"
            "  ([ ] other rounds · highlighted: where the response leaves the baseline)"
        )
        box = self.query_one("#responses", VerticalScroll)
        box.remove_children()
        runs = {r.config: r for r in self._counted() if r.round == self.round}
        base = runs.get(self.document.plan.baseline.name)
        blocks: list[Widget] = []
        for config in self.document.plan.configs:
            record = runs.get(config.name)
            blocks.append(
                Static(
                    response_title(record, config.label, config.is_baseline),
                    classes="response-title",
                )
            )
            body = Static(response_content(record, config.is_baseline), classes="response")
            d = record.divergence if record is not None and not config.is_baseline else None
            if d is None or base is None:
                blocks.append(body)
                continue
            # A changed answer: the baseline's on the left, this one on the right, and why.
            side = Static(baseline_side(base.text, d), classes="side-baseline")
            blocks.append(Horizontal(side, body, classes="side-by-side"))
            blocks.append(Static(evidence_line(d), classes="divergence-evidence"))
        box.mount_all(blocks)

    def action_round(self, step: int) -> None:
        """Show the previous or next round."""
        self.round = min(max(self.round + step, 1), self.document.plan.reps)
        self.redraw()

    def action_close(self) -> None:
        self.dismiss(None)


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
