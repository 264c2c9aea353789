"""The metrics pane: the run in progress next to the previous one, so a change is obvious.

Numbers come from the engine's `RunMetrics` snapshots and memory samples; nothing is computed
from the wall clock here.

Each column is headed by its run's whole config, wrapped to the column by one rule
(`labels.wrap_label`: at the config's own seams, family prefixes shortened before anything is
cut), in at most `HEADER_LINES` lines. The server bar above names the config in full.
A run with more than one drafter (a chain) gets a row per drafter: acceptance, then accepted /
drafted, labelled with the drafter's mark in its colour (`drafters`).
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import ClassVar, Self

from rich.cells import cell_len
from rich.segment import Segment
from rich.style import Style
from textual.geometry import Region, Size
from textual.strip import Strip
from textual.widget import Widget

from spectui.core.compare.whatif import hint
from spectui.core.events import DrafterStats, MemoryEvent, RunMetrics, StepEvent, TokenEvent
from spectui.ui import format as fmt
from spectui.ui.widgets.drafters import drafter_keys
from spectui.ui.widgets.kept import row_blocks
from spectui.ui.widgets.labels import fit, shorten, wrap_label
from spectui.ui.widgets.throttle import Throttle
from spectui.ui.widgets.token_looks import TOKEN_CLASSES, TOKEN_CSS


@dataclass(frozen=True, slots=True)
class RunColumn:
    """One column of the metrics table: what the pane shows about one run (this one or the
    previous one)."""

    spec_label: str
    """Spec configuration the run used."""
    prompt_label: str
    """Which prompt it ran."""
    metrics: RunMetrics
    """Latest numbers (final once the run is over)."""
    status: str = "running"
    """'running', or how it ended: 'limit', 'eos', 'stopped', 'failed', ..."""

    def with_metrics(self, metrics: RunMetrics) -> RunColumn:
        return replace(self, metrics=metrics)

    def with_status(self, status: str) -> RunColumn:
        return replace(self, status=status)


Row = tuple[str, str, str, str | None]
"""(label, this run, previous run, the drafter a per-drafter row is about)."""


def _drafter_rows(now: RunColumn | None, before: RunColumn | None) -> list[Row]:
    """A row per drafter when either run had more than one (a chain), else none."""
    runs = [column.metrics.by_drafter if column else {} for column in (now, before)]
    if all(len(by_drafter) < 2 for by_drafter in runs):
        return []
    names = list(dict.fromkeys([*runs[0], *runs[1]]))

    def cell(by_drafter: dict[str, DrafterStats], name: str, column: RunColumn | None) -> str:
        stats = by_drafter.get(name)
        if column is None:
            return ""
        if stats is None:
            return fmt.DASH
        rate = stats.accepted / stats.drafted if stats.drafted else None
        # The rate first: a narrow column cuts the counts, not the rate.
        return f"{fmt.pct(rate)} {stats.accepted}/{stats.drafted}"

    return [(name, cell(runs[0], name, now), cell(runs[1], name, before), name) for name in names]


def _rows(now: RunColumn | None, before: RunColumn | None, memory: MemoryEvent | None) -> list[Row]:
    """(label, this run, previous run, drafter) rows; '' where a column does not apply."""
    m = now.metrics if now else RunMetrics()
    p = before.metrics if before else None

    def both(getter: str, render: fmt.Formatter) -> tuple[str, str]:
        current = render(getattr(m, getter)) if now else fmt.DASH
        return current, (render(getattr(p, getter)) if p else "")

    versus = fmt.speed_ratio(m.tokens_per_second, p.tokens_per_second) if now and p else ""
    head = [
        ("accept rate", *both("acceptance_rate", fmt.pct)),
        ("accept len", *both("mean_acceptance_length", lambda v: fmt.num(v, 2))),
        ("tok/s avg", *both("tokens_per_second", fmt.rate)),
        ("vs previous", versus, ""),
        ("tok/s now", fmt.rate(m.tokens_per_second_now) if now else fmt.DASH, ""),
        ("TTFT", *both("ttft_ms", fmt.ms)),
        ("total time", *both("total_ms", fmt.ms)),
        ("tokens", *both("tokens", fmt.num)),
        ("drafted", *both("drafted", fmt.num)),
        ("accepted", *both("accepted", fmt.num)),
        ("rejected", *both("rejected", fmt.num)),
    ]
    tail = [
        ("status", now.status if now else "no run yet", before.status if before else ""),
        ("prompt tok", *both("prompt_tokens", fmt.num)),
        ("prompt t/s", *both("prompt_tokens_per_second", fmt.rate)),
        ("RSS", fmt.size(memory.rss_bytes) if memory else fmt.DASH, ""),
        ("RSS−shared", fmt.size(memory.rss_minus_shared_bytes) if memory else fmt.DASH, ""),
        ("peak RSS", *both("peak_rss_bytes", fmt.size)),
    ]
    if (memory and memory.gpu_bytes is not None) or m.peak_gpu_bytes is not None:
        tail.append(("GPU", fmt.size(memory.gpu_bytes if memory else None), ""))
        tail.append(("peak GPU", *both("peak_gpu_bytes", fmt.size)))
    drafters = _drafter_rows(now, before)
    return [(*row, None) for row in head] + drafters + [(*row, None) for row in tail]


def _warnings(now: RunColumn | None, before: RunColumn | None) -> list[str]:
    """What the numbers cannot vouch for: runs whose attribution did not fit the counters."""
    warnings: list[str] = []
    for record, which in ((now, "this run"), (before, "the previous run")):
        if record is None:
            continue
        metrics = record.metrics
        if n := metrics.attribution_anomalies:
            noun = "anomaly" if n == 1 else "anomalies"
            warnings.append(f"⚠ {n} attribution {noun} in {which}: draft/target counts may be off")
        warnings.extend(f"? {note} in {which}" for note in _uncertain(metrics))
    return warnings


def _uncertain(m: RunMetrics) -> list[str]:
    """What chunks of several steps (held-back UTF-8) left undecided, said rather than guessed."""
    notes = []
    if m.steps_maybe_fewer or m.steps_maybe_more:
        notes.append(f"steps {m.steps - m.steps_maybe_fewer}–{m.steps + m.steps_maybe_more}")
    if m.steps_unsplit:
        notes.append(f"{m.steps_unsplit} steps' positions unknown")
    if m.origin_unknown_tokens:
        notes.append(f"{m.origin_unknown_tokens} tokens' origin unknown")
    return notes


def _warning_lines(now: RunColumn | None, before: RunColumn | None, width: int) -> list[str]:
    """The warnings wrapped to ``width`` cells (none at all in the common case)."""
    return [
        line
        for warning in _warnings(now, before)
        for line in textwrap.wrap(warning, max(width, 8), subsequent_indent="  ")
    ]


LABEL_WIDTH = 11
"""Wide enough for every label below; at 80 columns the values get 12 characters each."""

HEADER_LINES = 6
"""The most lines a run's config takes at the head of its column (`wrap_label`): a chain of three
types with its draft lengths in an 80-column terminal's 11-cell column takes five."""

REDRAW_INTERVAL_S = 0.9
"""Snapshots and memory samples redraw the table at most this often: numbers changing faster
than once a second are hard to read, and each redraw costs a few lines of a frame and ~1 ms
(with token batches every 0.25 s: every fourth batch, 1 Hz). A run's start and end redraw at
once (`throttle.Throttle`)."""


@dataclass(frozen=True, slots=True)
class _Looks:
    """The pane's styles in the current theme."""

    base: Style
    label: Style
    now: Style
    previous: Style
    heading: Style
    warning: Style


class MetricsPane(Widget):
    """A three-column table: metric, this run, previous run."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "metrics--label",
        "metrics--now",
        "metrics--previous",
        "metrics--heading",
        "metrics--warning",
        *TOKEN_CLASSES,
    }
    DEFAULT_CSS = (
        """
    MetricsPane { height: auto; }
    MetricsPane > .metrics--label { color: $text-muted; }
    MetricsPane > .metrics--now { color: $text; text-style: bold; }
    MetricsPane > .metrics--previous { color: $text-muted; }
    MetricsPane > .metrics--heading { color: $accent; text-style: bold underline; }
    MetricsPane > .metrics--warning { color: $warning; text-style: bold; }
    MetricsPane {
"""
        + TOKEN_CSS
        + """
    }
    """
    )
    """(The token styles: a per-drafter row's label looks like that drafter's tokens.)"""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.current: RunColumn | None = None
        self.previous: RunColumn | None = None
        self.memory: MemoryEvent | None = None
        self._throttle = Throttle(self, REDRAW_INTERVAL_S, self._redraw)
        self._strips: list[Strip] | None = None
        self._strips_width = 0
        self._looks_now: _Looks | None = None
        self._run_events: list[StepEvent | TokenEvent] = []
        """The run's steps and tokens, for the draft-length hint once it ends."""
        self.prediction: str | None = None
        """'n-max 4 predicted 1.3x of this run' after a run whose steps say enough, else None."""

    def add_run_events(self, tokens: Sequence[TokenEvent], steps: Sequence[StepEvent] = ()) -> None:
        """Keep a batch's steps and tokens (steps first: a step comes before its tokens)."""
        self._run_events.extend(steps)
        self._run_events.extend(tokens)

    def begin(self, record: RunColumn) -> None:
        """A new run: the current one (if any) becomes the previous one."""
        width = self.size.width
        lines_before = self._line_count(width)
        self._run_events = []
        self.prediction = None
        if self.current is not None:
            self.previous = self.current
        self.current = record
        # A layout repaints the whole screen (~15 ms, as the run starts): only when the table
        # grows or shrinks (the first runs, a warning that comes or goes), not on every run.
        self.refresh(layout=self._line_count(width) != lines_before)

    def _line_count(self, width: int) -> int:
        warnings = _warning_lines(self.current, self.previous, width)
        extra = 1 if self.prediction else 0
        rows = len(_rows(self.current, self.previous, self.memory))
        return len(self._heading(width)) + len(warnings) + rows + extra

    def _heading(self, width: int) -> list[tuple[str, str]]:
        """The heading's lines: each run's config, wrapped to its column."""
        now_width, previous_width = value_widths(width)
        current = self.current.spec_label if self.current else "this run"
        before = self.previous.spec_label if self.previous else "previous"
        current_lines = wrap_label(current, now_width, HEADER_LINES)
        before_lines = wrap_label(before, previous_width, HEADER_LINES)
        height = max(len(current_lines), len(before_lines))
        current_lines += [""] * (height - len(current_lines))
        before_lines += [""] * (height - len(before_lines))
        return list(zip(current_lines, before_lines, strict=True))

    def update_metrics(self, metrics: RunMetrics) -> None:
        if self.current is not None:
            self.current = self.current.with_metrics(metrics)
            self._throttle.soon()

    def update_memory(self, memory: MemoryEvent) -> None:
        self.memory = memory
        self._throttle.soon()

    def _redraw(self) -> None:
        old, width = self._strips, self.size.width
        if old is None or self._strips_width != width:
            self.refresh()
            return
        new = self._render_strips(width)
        if len(new) != len(old):
            self.refresh(layout=True)
            return
        # Only the lines whose numbers changed are drawn and sent to the terminal: a snapshot
        # moves a handful of the sixteen lines, and a sample with the same numbers none.
        pairs = enumerate(zip(old, new, strict=True))
        changed = row_blocks((y for y, (before, after) in pairs if before != after), width)
        self._strips = new
        if changed:
            super().refresh(*changed)

    def finish(self, status: str, metrics: RunMetrics | None = None) -> None:
        if self.current is not None:
            record = self.current.with_status(status)
            self.current = record.with_metrics(metrics) if metrics is not None else record
            events, self._run_events = self._run_events, []
            self.refresh()
            if metrics is not None and status not in ("failed", "stopped") and events:
                # After the frame that draws the run's last tokens: the what-if model takes tens
                # of ms for a run of a few hundred tokens, and the run's last batch (a fifth of a
                # fast run) waited for it on the screen.
                self.call_after_refresh(self._predict, self.current, events)

    def _predict(self, run: RunColumn, events: list[StepEvent | TokenEvent]) -> None:
        if self.current is run:  # (not when another run began meanwhile)
            self.prediction = hint(events, None, run.spec_label)
            if self.prediction is not None:
                self.refresh(layout=True)

    def refresh(
        self,
        *regions: Region,
        repaint: bool = True,
        layout: bool = False,
        recompose: bool = False,
    ) -> Self:
        self._strips = None  # whatever asks for a redraw gets the newest numbers
        return super().refresh(*regions, repaint=repaint, layout=layout, recompose=recompose)

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._strips = None  # the theme changed: the lines carry the old colours
        self._looks_now = None

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        return self._line_count(width)

    def render_line(self, y: int) -> Strip:
        # Drawn as segments in fixed columns (as a rich grid would lay them out), straight into
        # strips: a `rich.table.Table` cost ~6 ms per redraw, a `Text` still 2 ms.
        width = self.size.width
        if self._strips is None or self._strips_width != width:
            self._strips, self._strips_width = self._render_strips(width), width
        if y < len(self._strips):
            return self._strips[y]
        return Strip.blank(width, self.rich_style)

    def _looks(self) -> _Looks:
        if self._looks_now is None:
            # Looked up once per style change, not per redraw: each lookup walks the ancestors
            # (~0.1 ms), five of them a third of a redraw.
            base = self.rich_style
            self._looks_now = _Looks(
                base=base,
                label=base + self.get_component_rich_style("metrics--label"),
                now=base + self.get_component_rich_style("metrics--now"),
                previous=base + self.get_component_rich_style("metrics--previous"),
                heading=self.get_component_rich_style("metrics--heading"),
                warning=base + self.get_component_rich_style("metrics--warning"),
            )
        return self._looks_now

    def _render_strips(self, width: int) -> list[Strip]:
        looks = self._looks()
        base, label, now, previous = looks.base, looks.label, looks.now, looks.previous
        heading = looks.heading
        now_width, previous_width = value_widths(width)
        # The heading names the two runs; the space after a cell takes its column's style, as
        # in a table (and an empty cell of a taller heading is not underlined).
        lines = [
            [
                Segment(fit("", LABEL_WIDTH, right=False) + " ", label),
                Segment(fit(current, now_width, right=True), now + heading if current else now),
                Segment(" ", now),
                Segment(
                    fit(before, previous_width, right=True),
                    previous + heading if before else previous,
                ),
            ]
            for current, before in self._heading(width)
        ]
        if warnings := _warning_lines(self.current, self.previous, width):
            lines.extend([Segment(line, looks.warning)] for line in warnings)
        keys = drafter_keys(self.app)
        for name, this, then, drafter in _rows(self.current, self.previous, self.memory):
            if drafter is None:
                first = [Segment(fit(name, LABEL_WIDTH, right=False) + " ", label)]
            else:
                style = base + self.get_component_rich_style(keys.style_class(drafter))
                chip = _drafter_label(keys.mark(drafter), drafter)
                pad = " " * (LABEL_WIDTH + 1 - cell_len(chip))
                first = [Segment(chip, style), Segment(pad, label)]
            lines.append(
                [
                    *first,
                    Segment(fit(this, now_width, right=True) + " ", now),
                    Segment(fit(then, previous_width, right=True), previous),
                ]
            )
        if self.prediction:
            lines.append([Segment(fit(self.prediction, width, right=False), label)])
        return [Strip(segments).crop_extend(0, width, base) for segments in lines]


def _drafter_label(mark: str, name: str) -> str:
    """A per-drafter row's label: its mark and name, to fit the label column (shortened, then
    cut), without padding."""
    room = LABEL_WIDTH - cell_len(mark)
    if cell_len(name) > room:
        name = shorten(name)
    return mark + (name if cell_len(name) <= room else fit(name, room, right=False))


def value_widths(width: int) -> tuple[int, int]:
    """Widths of the two value columns: they share what the label column and the two
    separating spaces leave, the previous run's column taking the odd cell."""
    rest = max(0, width - LABEL_WIDTH - 2)
    return rest // 2, rest - rest // 2
