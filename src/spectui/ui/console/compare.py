"""What `spectui compare` shows: the config × prompt table (live on stderr, final on stdout), a
log line per run when stderr is not a terminal, and the plotext chart of tokens/s and TTFT."""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING

from spectui.core.compare.outcomes import Verdict

if TYPE_CHECKING:
    from typing import Self

    from rich.console import Console, RenderableType
    from rich.live import Live
    from rich.progress import Progress, TaskID

    from spectui.core.compare.runner import CompareEvent, RunFinished
    from spectui.core.compare.store import CompareDocument

VERDICT_STYLES: dict[str, str] = {
    Verdict.KEEP: "bold green",
    Verdict.DROP: "bold red",
    Verdict.FAILED: "red",
    Verdict.BASELINE: "dim",
}
"""Rich styles of verdict cells (a cell's text is its verdict)."""


def summary_table(document: CompareDocument, title: str | None = None) -> RenderableType:
    """The config × prompt table (the live one and the final one)."""
    from rich.table import Table
    from rich.text import Text

    from spectui.core.compare.export import SUMMARY_COLUMNS, summary_rows

    table = Table(title=title, title_justify="left", expand=False)
    left = ("config", "prompt", "verdict")
    for name in SUMMARY_COLUMNS:
        table.add_column(name, justify="left" if name in left else "right")
    styles = VERDICT_STYLES
    for _, (*cells, verdict) in summary_rows(document):
        # Text, not markup: a label like 'draft-simple [model.gguf]' must print as written.
        table.add_row(*(Text(cell) for cell in cells), Text(verdict, style=styles.get(verdict, "")))
    return table


def level_table(document: CompareDocument) -> RenderableType | None:
    """The concurrency table (a column per level), or None when the plan runs level 1 only."""
    from rich.table import Table
    from rich.text import Text

    from spectui.core.compare import level_export

    headers, rows = level_export.level_table(document)
    if not rows:
        return None
    table = Table(title="concurrency", title_justify="left", expand=False)
    for name in headers:
        table.add_column(name, justify="left" if name in ("config", "metric") else "right")
    styles = VERDICT_STYLES
    for row in rows:
        style = styles.get(row[-1], "") if row[1] == "verdict" else ""
        table.add_row(*(Text(cell, style=style if i > 1 else "") for i, cell in enumerate(row)))
    return table


class StderrLive:
    """A live view on stderr while a long command runs, only on a terminal, and gone when it
    ends (the final table goes to stdout and must not stand twice). Subclasses set
    ``self.console`` and call `start_live` at the end of their ``__init__``; `_render` draws."""

    console: Console
    live: Live | None = None

    def start_live(self, refresh_per_second: float) -> None:
        from rich.live import Live

        if self.console.is_terminal:
            self.live = Live(
                self._render(),
                console=self.console,
                refresh_per_second=refresh_per_second,
                transient=True,
            )

    def _render(self) -> RenderableType:
        raise NotImplementedError

    def __enter__(self) -> Self:
        if self.live is not None:
            self.live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.live is not None:
            self.live.__exit__(None, None, None)


class LiveView(StderrLive):
    """Progress on stderr: a live table and progress bar on a terminal, else a line per run."""

    def __init__(self, document: CompareDocument) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

        self.console = Console(stderr=True)
        self.progress: Progress = Progress(
            TextColumn("{task.description}", markup=False),
            BarColumn(),
            MofNCompleteColumn(),
            console=self.console,
        )
        total = len(document.plan.jobs())
        self.task: TaskID = self.progress.add_task("starting", total=total)
        self.progress.update(self.task, completed=len(document.runs))
        self.document = document
        self.start_live(refresh_per_second=4)

    def _render(self) -> RenderableType:
        from rich.console import Group

        levels = level_table(self.document)
        return Group(summary_table(self.document), *([levels] if levels else []), self.progress)

    def update(self, event: CompareEvent, document: CompareDocument) -> None:
        from rich.markup import escape

        from spectui.core.compare.runner import ConfigFailed, RunFinished, progress_line

        self.document = document
        description = progress_line(event, document.plan)
        if isinstance(event, ConfigFailed):
            self.console.print(
                f"[red]config {escape(event.config)!r} failed:[/] {escape(event.detail)}",
                highlight=False,
            )
            description = f"round {event.round} · {document.plan.label(event.config)}: failed"
        elif isinstance(event, RunFinished):
            self.progress.update(self.task, completed=event.done)
            if self.live is None:
                self.console.print(run_line(event), highlight=False, soft_wrap=True, markup=False)
        if description is not None:
            self.progress.update(self.task, description=description)
        if self.live is not None:
            self.live.update(self._render())


def run_line(event: RunFinished) -> str:
    """One line per finished run, for logs (stderr that is not a terminal)."""
    from spectui.core.compare.export import fmt_number
    from spectui.core.compare.records import round_name

    r = event.record
    streams = f" · {r.level} streams" if r.level > 1 else ""
    head = f"[{event.done}/{event.total}] {round_name(r)} · {r.config}{streams} · {r.prompt}: "
    if not r.ok:
        return head + f"failed: {r.error}"
    parts = [
        f"{r.tokens} tokens",
        f"{fmt_number(r.tokens_per_second)} tok/s",
        f"TTFT {fmt_number(r.ttft_ms, 0)} ms",
    ]
    if r.drafted:
        parts.append(f"accepted {r.accepted}/{r.drafted}")
    if r.identical_to_baseline is not None:
        parts.append("same as baseline" if r.identical_to_baseline else "DIFFERS from baseline")
    if r.check_status is not None:
        parts.append(f"check {r.check_status}")
    return head + ", ".join(parts)


def print_final(document: CompareDocument, *, chart: bool) -> None:
    from rich.console import Console
    from rich.markup import escape

    out = Console()
    if not out.is_terminal:
        out = Console(width=160)  # a file or a pipe: do not squeeze the table into 80 columns
    out.print(summary_table(document, title="spectui compare"))
    labels = {c.name: c.label for c in document.plan.configs}
    if (levels := level_table(document)) is not None:
        out.print(levels)
        for verdict in document.level_verdicts:
            label = labels.get(verdict.config, verdict.config)
            out.print(f"[bold]{escape(label)}[/]: {escape(verdict.sentence)}", highlight=False)
    for content in document.content_verdicts:  # (by the prompts' content class)
        label = labels.get(content.config, content.config)
        out.print(
            f"[bold]{escape(label)}[/] by content: {escape(content.sentence)}", highlight=False
        )
    for row in document.summary:
        if row.verdict not in (Verdict.BASELINE, Verdict.PENDING):
            label = labels.get(row.config, row.config)
            out.print(
                f"[bold]{escape(label)}[/] on {escape(row.prompt)}: {row.verdict} — "
                f"{escape(row.reason)}",
                highlight=False,
            )
    out.print(f"server: {document.restarts}", markup=False, highlight=False)
    if chart and any(r.median_tokens_per_second for r in document.summary):
        colour = out.is_terminal and not os.environ.get("NO_COLOR")
        print(chart_text(document, width=min(out.width, 120), colour=colour))


_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def chart_text(document: CompareDocument, *, width: int = 100, colour: bool = True) -> str:
    """Horizontal bars of median tokens/s, then of median TTFT, per config and prompt."""
    import plotext as plt

    configs = document.plan.configs
    prompts = [p.key for p in document.plan.prompts]
    rows = {(r.config, r.prompt): r for r in document.summary}
    names = [c.spec.label for c in configs]
    charts = []
    for field, title in (
        ("median_tokens_per_second", "tokens/s (median; longer is better)"),
        ("median_ttft_ms", "TTFT ms (median; shorter is better)"),
    ):
        values = [
            [float(getattr(rows[(c.name, p)], field) or 0.0) for c in configs] for p in prompts
        ]
        plt.clear_figure()
        plt.multiple_bar(names, values, labels=prompts, orientation="horizontal")
        plt.title(title)
        plt.plotsize(width, 5 + (len(prompts) + 1) * len(configs))
        text: str = plt.build()
        charts.append(text if colour else _ANSI.sub("", text))
    plt.clear_figure()  # plotext keeps one global figure: leave it empty for the next user
    return "\n".join(charts)
