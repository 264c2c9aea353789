"""What `spectui tune` shows: on stderr, a live leaderboard with the budget's progress and ETA
(a line per run when stderr is not a terminal); on stdout, the final leaderboards, the winners'
command lines, the knob curves (plotext) and the hints."""

from __future__ import annotations

import os
import re
import shlex
from typing import TYPE_CHECKING

from spectui.core.compare.outcomes import Verdict
from spectui.ui.console.compare import StderrLive

if TYPE_CHECKING:
    from rich.console import RenderableType

    from spectui.core.compare.runner import CompareEvent
    from spectui.core.tune.models import TuneDocument
    from spectui.core.tune.runner import TuneEvent, TuneRunner

LIVE_ROWS = 12
"""Candidates shown in the live leaderboard (best first)."""


def leaderboard_table(
    document: TuneDocument, prompt: str | None, *, limit: int | None = None
) -> RenderableType:
    """One leaderboard (``prompt`` None: overall) as a Rich table."""
    from rich.table import Table
    from rich.text import Text

    from spectui.core.tune.export import LEADERBOARD_COLUMNS, leaderboard

    title = f"leaderboard: {prompt or 'overall'}"
    table = Table(title=title, title_justify="left")
    for name in LEADERBOARD_COLUMNS:
        table.add_column(name, justify="left" if name in ("config", "verdict") else "right")
    styles: dict[str, str] = {
        Verdict.KEEP: "bold green",
        Verdict.DROP: "red",
        Verdict.FAILED: "red",
    }
    for _, cells in leaderboard(document, prompt)[:limit]:
        verdict = cells[-1]
        style = styles.get(verdict.split(" ")[0], "")
        table.add_row(*(Text(c) for c in cells[:-1]), Text(verdict, style=style))
    return table


class TuneView(StderrLive):
    """Progress on stderr while the race runs."""

    def __init__(self, runner: TuneRunner) -> None:
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeRemainingColumn,
        )

        self.runner = runner
        self.console = Console(stderr=True)
        self.budget = Progress(
            TextColumn("{task.description}", markup=False),
            BarColumn(),
            TextColumn("{task.fields[note]}", markup=False),
            TimeRemainingColumn(),
            console=self.console,
        )
        document = runner.document
        self.budget_task = self.budget.add_task(
            "budget", total=document.budget_s, completed=int(document.elapsed_s), note=""
        )
        self.runs = Progress(
            TextColumn("{task.description}", markup=False),
            BarColumn(),
            MofNCompleteColumn(),
            console=self.console,
        )
        self.round_task = self.runs.add_task("starting", total=None)
        self.start_live(refresh_per_second=2)

    def _render(self) -> RenderableType:
        from rich.console import Group

        return Group(
            leaderboard_table(self.runner.document, None, limit=LIVE_ROWS), self.runs, self.budget
        )

    def update(self, event: CompareEvent | TuneEvent) -> None:
        from spectui.core.compare.runner import RunFinished, progress_line
        from spectui.core.tune.runner import RoundPlanned, TuneFinished
        from spectui.ui.console.compare import run_line

        document = self.runner.document
        plan = document.compare.plan
        line: str | None = None
        if isinstance(event, RoundPlanned):
            self.console.print(
                f"round {event.round}: {event.candidates} candidates go on",
                markup=False,
                highlight=False,
            )
        elif not isinstance(event, TuneFinished):
            line = progress_line(event, plan)
        jobs = plan.jobs()
        if line is not None:
            self.runs.update(self.round_task, description=line)
        self.runs.update(self.round_task, total=len(jobs), completed=len(document.compare.runs))
        left = max(self.runner.budget_left_s, 0.0)
        self.budget.update(
            self.budget_task,
            completed=min(self.runner.elapsed_s, document.budget_s),
            note=f"{left:.0f} s left",
        )
        if isinstance(event, RunFinished) and self.live is None:
            self.console.print(run_line(event), markup=False, highlight=False, soft_wrap=True)
        if self.live is not None:
            self.live.update(self._render())


_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def curves_text(document: TuneDocument, *, width: int = 80, colour: bool = True) -> str:
    """Speedup against each knob, one small plotext chart per curve."""
    import plotext as plt

    charts = []
    for curve in document.curves:
        plt.clear_figure()
        xs = [p.value for p in curve.points]
        ys = [p.speedup for p in curve.points]
        plt.plot(xs, ys, marker="dot")
        plt.hline(1.0)
        plt.title(f"{curve.type}: speedup vs {curve.knob}")
        plt.plotsize(min(width, 70), 12)
        text: str = plt.build()
        charts.append(text if colour else _ANSI.sub("", text))
    plt.clear_figure()  # plotext keeps one global figure: leave it empty for the next user
    return "\n".join(charts)


def print_final(document: TuneDocument, *, chart: bool) -> None:
    """Leaderboards, winners with their command lines, curves, hints and skipped types."""
    from rich.console import Console

    from spectui.core.tune.export import cost_line, noise_line, replica_line, status_line

    out = Console()
    if not out.is_terminal:
        out = Console(width=160)
    out.print(f"spectui tune: {status_line(document)}", markup=False, highlight=False)
    if (noise := noise_line(document)) is not None:
        out.print(f"  {noise}", markup=False, highlight=False)
    out.print(f"  {cost_line(document)}", markup=False, highlight=False)
    if (replicas := replica_line(document)) is not None:
        out.print(f"  {replicas}", markup=False, highlight=False)
    for line in document.settled:
        out.print(f"  {line}", markup=False, highlight=False)
    out.print(leaderboard_table(document, None))
    for prompt in document.compare.plan.prompts:
        out.print(leaderboard_table(document, prompt.key))
    out.print("winners:", markup=False, highlight=False)
    for key, winner in document.winners.items():
        if winner is None:
            out.print(f"  {key}: nothing beats the baseline", markup=False, highlight=False)
            continue
        out.print(
            f"  {key}: {winner.config} ({winner.speedup or 0:.2f}x)\n    {shlex.join(winner.args)}",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
    if chart and document.curves:
        colour = out.is_terminal and not os.environ.get("NO_COLOR")
        print(curves_text(document, width=min(out.width, 100), colour=colour))
    for hint in document.hints:
        out.print(f"hint: {hint}", markup=False, highlight=False)
    for skipped in document.skipped:
        out.print(f"skipped {skipped.type}: {skipped.reason}", markup=False, highlight=False)
