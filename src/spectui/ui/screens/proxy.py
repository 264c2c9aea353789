"""The proxy screen of `spectui proxy`: every request the proxy sees, newest first, live.

The proxy's listener posts typed messages (`RequestStarted`, `RequestFinished`); rows of live
requests are refreshed from their attribution once a second (`LIVE_EVERY_S`), only their cells
that changed, the aggregate pane at 2 Hz, so a busy proxy costs a few redraws a second, never
one per token. The table is bounded (`MAX_ROWS`), and token events are kept only for the newest
`KEEP_EVENTS` finished requests.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import ClassVar

from rich.cells import cell_len
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.screen import Screen
from textual.timer import Timer
from textual.widgets import DataTable, Footer, Static
from textual.widgets.data_table import ColumnKey

from spectui.core.events import RunMetrics
from spectui.core.proxy.aggregate import (
    Aggregate,
    aggregate,
    by_content,
    by_prompt_length,
    last_minutes,
    last_requests,
)
from spectui.core.proxy.hub import LiveRequest, ProxyHub
from spectui.core.proxy.models import ProxyRecord, RequestStatus
from spectui.ui import format as fmt
from spectui.ui.compositor import use_lean_compositor
from spectui.ui.lanes import HubLanes
from spectui.ui.screens.proxy_request import ProxyRequestScreen
from spectui.ui.screens.slots import SlotsScreen

MAX_ROWS = 500
"""Requests in the table; older rows are dropped."""

KEEP_EVENTS = 50
"""Finished requests whose tokens stay viewable (the rest keep their numbers only)."""

LIVE_EVERY_S = 1.0
"""Seconds between refreshes of the live rows. Any changed cell makes the table draw every row
it shows anew (its cache is per update, not per cell): at 4 Hz with 8 streams the table was most
of the TUI's CPU, and the TUI's cost grew with each stream (bench/concurrent_cpu.py)."""

WINDOW_REQUESTS = 50
"""The aggregate pane's 'last N requests'."""

WINDOW_MINUTES = 5.0
"""The aggregate pane's 'last minutes'."""

COLUMNS = (
    ("id", "#"),
    ("endpoint", "endpoint"),
    ("gen", "gen"),
    ("tps", "tok/s"),
    ("acc", "acc%"),
    ("mal", "len"),
    ("ttft", "TTFT"),
    ("drafted", "drft/acc"),
    ("prompt", "prompt"),
    ("status", "status"),
    ("client", "client"),
    ("time", "time"),
)
"""Most telling first: at 80 columns everything up to the status fits; the rest scrolls."""

SHORT_ENDPOINTS = {
    "/v1/chat/completions": "chat",
    "/chat/completions": "chat",
    "/v1/messages": "messages",
}
"""Endpoint names as the narrow table shows them (the rest as they are, without '/')."""

HELP = (
    "Every request through the proxy, newest first. Enter: its tokens and metrics (live while "
    "it streams) · s: the slots view (every request streaming now, a lane each) · ↑/↓ move · "
    "? this help · q quit. Requests without per-token timings "
    "(non-streamed, /v1/messages) show what the server said, and '–' for the rest."
)


@dataclass(frozen=True, slots=True)
class Row:
    """One table row's cells."""

    cells: tuple[str | Text, ...]


def row_cells(live: LiveRequest, record: ProxyRecord | None, metrics: RunMetrics | None) -> Row:
    """The cells of a request: finished (``record``) or live (``metrics`` so far)."""
    info = live.info
    tokens = drafted = accepted = prompt = None
    rate = ttft = length = acceptance = None
    if record is not None:
        tokens, drafted, accepted, prompt = (
            record.tokens,
            record.drafted,
            record.accepted,
            record.prompt_tokens,
        )
        acceptance = record.acceptance_rate
        metrics = record.metrics
    if metrics is not None:
        tokens, drafted, accepted = metrics.tokens, metrics.drafted, metrics.accepted
        prompt = metrics.prompt_tokens
        rate, ttft = metrics.tokens_per_second, metrics.ttft_ms
        length, acceptance = metrics.mean_acceptance_length, metrics.acceptance_rate
    elif record is not None:  # not attributed (non-streamed): the rate the server measured
        rate = record.server_timings.get("predicted_per_second")
    status = record.status.value if record is not None else RequestStatus.STREAMING.value
    if record is not None and record.http_status >= 400:
        status = f"{status} {record.http_status}"
    pair = fmt.DASH if drafted is None else f"{drafted}/{accepted}"
    endpoint = SHORT_ENDPOINTS.get(info.endpoint, info.endpoint.lstrip("/"))
    return Row(
        (
            str(info.id),
            endpoint,
            fmt.num(tokens),
            fmt.num(rate, 1),
            _pct0(acceptance),
            fmt.num(length, 2),
            fmt.ms(ttft),
            pair,
            fmt.num(prompt),
            status,
            info.client.rsplit(":", 1)[0],
            f"{info.started.astimezone():%H:%M:%S}",
        )
    )


def _pct0(value: float | None) -> str:
    return fmt.DASH if value is None else f"{value:.0%}"


def breakdown_text(groups: Mapping[str, Aggregate]) -> str:
    """One group per item: its requests, acceptance and tokens/s (where speculation pays)."""
    return " · ".join(
        f"{name} {agg.requests} req {_pct0(agg.acceptance_rate)} {fmt.rate(agg.tokens_per_second)}"
        for name, agg in groups.items()
    )


def aggregate_text(
    recent: Aggregate, minutes: Aggregate, live: int, records: Sequence[ProxyRecord] = ()
) -> str:
    """The aggregate pane's lines; with ``records`` (the last N), acceptance and tokens/s by
    content class and by prompt length."""

    def line(label: str, agg: Aggregate) -> str:
        return (
            f"{label}: {agg.requests} req · acceptance {fmt.pct(agg.acceptance_rate)} · "
            f"mean length {fmt.num(agg.mean_acceptance_length, 2)} · "
            f"{fmt.rate(agg.tokens_per_second)}"
        )

    positions = " ".join(f"{rate:.0%}" for rate in recent.position_rates[:10]) or fmt.DASH
    lines = [
        line(f"last {WINDOW_REQUESTS}", recent),
        line(f"last {WINDOW_MINUTES:g} min", minutes),
        f"per position (last {WINDOW_REQUESTS}): {positions} · {live} streaming now",
    ]
    if records:
        content = {cls.value: agg for cls, agg in by_content(records).items()}
        length = {f"prompt {b.value}": agg for b, agg in by_prompt_length(records).items()}
        lines.append(f"by content: {breakdown_text(content)}")
        lines.append(f"by length: {breakdown_text(length)}")
    return "\n".join(lines)


AGE_OUT_EVERY = timedelta(seconds=5)
"""How often the aggregate pane looks again when nothing ended (requests age out of it)."""


class ProxyScreen(Screen[None]):
    """The live table, the aggregate pane and a status line."""

    DEFAULT_CSS = """
    ProxyScreen > #proxy-status {
        height: 1;
        padding: 0 1;
        background: $panel;
        color: $text;
    }
    ProxyScreen > #proxy-status.-failed {
        color: $error;
        text-style: bold;
    }
    ProxyScreen > #requests {
        height: 1fr;
        scrollbar-size-vertical: 1;
    }
    ProxyScreen > #proxy-aggregate {
        height: auto;
        max-height: 6;
        padding: 0 1;
        border-top: solid $secondary;
        color: $text;
    }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "open", "Tokens"),
        Binding("s", "slots", "Slots"),
        Binding("question_mark", "help", "Help", key_display="?"),
        Binding("q", "app.quit", "Quit"),
    ]

    class RequestStarted(Message):
        """A request arrived at the proxy."""

        def __init__(self, live: LiveRequest) -> None:
            super().__init__()
            self.live = live

    class RequestFinished(Message):
        """A request ended."""

        def __init__(self, live: LiveRequest, record: ProxyRecord) -> None:
            super().__init__()
            self.live = live
            self.record = record

    class StatusChanged(Message):
        """The proxy's state changed (starting the server, listening, failed)."""

        def __init__(self, text: str, *, failed: bool = False) -> None:
            super().__init__()
            self.text = text
            self.failed = failed

    def __init__(self, hub: ProxyHub) -> None:
        super().__init__()
        use_lean_compositor(self)
        self.hub = hub
        self.rows: OrderedDict[int, LiveRequest] = OrderedDict()
        """Requests in the table, oldest first."""
        self._kept: list[LiveRequest] = []
        self._dirty_aggregate = True
        self._aggregated_at = datetime.min.replace(tzinfo=UTC)
        self._aggregate_shown: object = None
        self._intervals: list[Timer] = []
        self._shown: dict[int, tuple[str | Text, ...]] = {}
        """Each row's cells as last drawn (rows of ended requests leave it)."""
        self.lanes: HubLanes | None = None
        """The slots view's lanes, from the first time it is opened (they outlive the view)."""

    def compose(self) -> ComposeResult:
        yield Static("starting…", id="proxy-status")
        table: DataTable[str | Text] = DataTable(
            id="requests", cursor_type="row", zebra_stripes=True
        )
        for key, label in COLUMNS:
            table.add_column(label, key=key)
        yield table
        yield Static(aggregate_text(Aggregate(), Aggregate(), 0), id="proxy-aggregate")
        yield Footer()

    def on_mount(self) -> None:
        self._intervals = [
            self.set_interval(LIVE_EVERY_S, self._refresh_live, name="proxy-live"),
            self.set_interval(0.5, self._refresh_aggregate, name="proxy-aggregate"),
        ]

    def on_screen_suspend(self) -> None:
        # Covered (the slots view, a request's tokens): Textual composes the screen below into
        # the one on top, so each refresh of this hidden table repainted the whole screen on
        # top, six times a second (the slots view: 4 full frames a second of 4 lanes).
        for timer in self._intervals:
            timer.pause()

    def on_screen_resume(self) -> None:
        self._dirty_aggregate = True
        for timer in self._intervals:
            timer.resume()

    @property
    def table(self) -> DataTable[str | Text]:
        return self.query_one("#requests", DataTable)

    # -- messages --------------------------------------------------------------------------------

    @on(RequestStarted)
    def _started(self, message: RequestStarted) -> None:
        live = message.live
        self.rows[live.info.id] = live
        table = self.table
        row = row_cells(live, None, None)
        self._shown[live.info.id] = row.cells
        table.add_row(*row.cells, key=str(live.info.id))
        while len(self.rows) > MAX_ROWS:
            old, _ = self.rows.popitem(last=False)
            self._shown.pop(old, None)
            table.remove_row(str(old))
        table.sort("id", key=lambda cell: int(str(cell)), reverse=True)  # newest first

    @on(RequestFinished)
    def _finished(self, message: RequestFinished) -> None:
        live, record = message.live, message.record
        if live.info.id in self.rows:
            self._update_row(live, row_cells(live, record, None))
            self._shown.pop(live.info.id, None)  # (its cells change no more)
        if live.events:
            self._kept.append(live)
            if len(self._kept) > KEEP_EVENTS:
                dropped = self._kept.pop(0)
                if dropped.attribution is not None:
                    dropped.attribution.events = []
        self._dirty_aggregate = True

    @on(StatusChanged)
    def _status(self, message: StatusChanged) -> None:
        status = self.query_one("#proxy-status", Static)
        status.update(message.text)
        status.set_class(message.failed, "-failed")

    # -- refresh ---------------------------------------------------------------------------------

    def _update_row(self, live: LiveRequest, row: Row) -> None:
        table = self.table
        key = str(live.info.id)
        columns = table.columns
        shown = self._shown.get(live.info.id)
        self._shown[live.info.id] = row.cells
        for index, ((column, _label), value) in enumerate(zip(COLUMNS, row.cells, strict=True)):
            # Only the cells that changed: each update invalidates the table's rendered rows,
            # and a live row's id, endpoint, client and time never change (8 streams: 96 cell
            # updates a refresh, most of them rewriting what was there).
            if shown is not None and shown[index] == value:
                continue
            # A column grows to a value wider than it (a row is added with dashes, numbers come
            # later), never shrinks: rows do not jump, and a narrower value costs no measuring
            # of the whole column with every refresh.
            wider = cell_len(value.plain if isinstance(value, Text) else value)
            grow = wider > columns[ColumnKey(column)].content_width
            table.update_cell(key, column, value, update_width=grow)

    def _refresh_live(self) -> None:
        for live in list(self.hub.live.values()):
            if live.info.id in self.rows and live.attribution is not None:
                self._update_row(live, row_cells(live, None, live.snapshot()))

    def _refresh_aggregate(self) -> None:
        # Recomputed when a request ends, and every few seconds besides: the minutes window is
        # on the hub's wall clock, so requests age out of it while traffic is quiet.
        now = self.hub.wall()
        if not self._dirty_aggregate and now - self._aggregated_at < AGE_OUT_EVERY:
            return
        self._dirty_aggregate, self._aggregated_at = False, now
        records = list(self.hub.recent)
        recent = last_requests(records, WINDOW_REQUESTS)
        text = aggregate_text(
            aggregate(recent),
            aggregate(last_minutes(records, WINDOW_MINUTES, now)),
            len(self.hub.live),
            recent,
        )
        if text != self._aggregate_shown:  # (an unchanged pane costs no frame)
            self._aggregate_shown = text
            self.query_one("#proxy-aggregate", Static).update(text)

    # -- actions ---------------------------------------------------------------------------------

    def action_open(self) -> None:
        table = self.table
        if table.row_count == 0:
            return
        key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
        live = self.rows.get(int(key)) if key is not None else None
        if live is not None:
            self.app.push_screen(ProxyRequestScreen(live))

    @on(DataTable.RowSelected)
    def _selected(self, _event: DataTable.RowSelected) -> None:
        self.action_open()

    def action_slots(self) -> None:
        if self.lanes is None:
            self.lanes = HubLanes(self.hub)
        self.app.push_screen(SlotsScreen(self.lanes, len(self.lanes.lanes)))

    def action_help(self) -> None:
        self.notify(HELP, title="Proxy", timeout=12)
