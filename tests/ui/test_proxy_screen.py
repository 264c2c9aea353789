"""The proxy screen under Pilot: rows newest first, live numbers, Enter opens the tokens, and
bounded memory; then SVG snapshots in every shipped theme at 80×24."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from textual.pilot import Pilot
from textual.widgets import DataTable, Static
from textual.widgets.data_table import ColumnKey

from spectui.config import Settings
from spectui.core.events import RunMetrics
from spectui.core.proxy.models import RequestStatus
from spectui.core.stream.dialects import ResponseTotals
from spectui.ui.apps.proxy import ProxyApp
from spectui.ui.screens.proxy import MAX_ROWS, ProxyScreen, row_cells
from spectui.ui.screens.proxy_request import ProxyRequestScreen
from spectui.ui.themes import SHIPPED_THEMES
from spectui.ui.widgets.tokens import TokenView

from .proxy_screen_helpers import begin, feed, finish, make_hub
from .ui_helpers import settle

SnapCompare = Callable[..., bool]
STATUS = 9
"""The status column."""


@pytest.fixture(autouse=True)
def _utc(monkeypatch: pytest.MonkeyPatch) -> None:
    """Times on screen are local: the tests' local time is UTC."""
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()


def table_of(app: ProxyApp) -> DataTable[object]:
    return app.screen_proxy.query_one("#requests", DataTable)


async def test_rows_newest_first_live_then_done() -> None:
    hub, clocks = make_hub()
    app = ProxyApp(None, Settings(), hub=hub)
    async with app.run_test(size=(120, 30)) as pilot:
        first = begin(hub)
        feed(first, "completion-ngram-simple-2.sse")
        finish(hub, clocks, first)
        second = begin(hub, "/v1/chat/completions", client="10.0.0.8")
        feed(second, "chat-ngram-simple.sse", upto=20)
        table = table_of(app)
        # (live rows are refreshed once a second: wait for the first refresh, not a fixed time)
        await settle(
            pilot,
            lambda: table.row_count == 2 and table.get_row_at(0)[2] not in ("–", "0"),
            "the live row's numbers",
        )
        assert table.row_count == 2
        assert table.get_row_at(0)[0] == "2" and table.get_row_at(1)[0] == "1"
        assert table.get_row_at(0)[STATUS] == "streaming"
        assert table.get_row_at(1)[STATUS] == "done"
        assert table.get_row_at(1)[7] == "155/46"
        live_gen = table.get_row_at(0)[2]
        assert live_gen not in ("–", "0")
        feed(second, "chat-ngram-simple.sse")
        finish(hub, clocks, second)
        pane = app.screen_proxy.query_one("#proxy-aggregate", Static)
        await settle(
            pilot,
            lambda: table.get_row_at(0)[STATUS] == "done" and "2 req" in str(pane.render()),
            "the second request done in the table and the aggregate",
        )
        assert table.get_row_at(0)[STATUS] == "done"
        aggregate = str(pane.render())
        assert "last 50: 2 req" in aggregate


async def test_columns_fit_their_numbers_and_a_non_streamed_request_has_its_rate() -> None:
    # Rows are added with dashes and get their numbers later: the columns grow to them (a mean
    # length of 24.14 is not cut to '24.'), and a non-streamed request shows the tokens/s of
    # its final timings.
    hub, clocks = make_hub()
    app = ProxyApp(None, Settings(), hub=hub)
    async with app.run_test(size=(120, 30)) as pilot:
        plain = begin(hub, "/v1/completions", streamed=False)
        clocks.t += 2.0
        totals = ResponseTotals(tokens=96, timings={"predicted_per_second": 48.25})
        hub.finish(plain, status=RequestStatus.DONE, http_status=200, totals=totals)
        table = table_of(app)
        await settle(pilot, lambda: table.row_count == 1, "the request's row")
        row = table.get_row_at(0)
        assert row[1] == "v1/completions" and row[2] == "96" and row[3] == "48.2"
        screen = app.screen_proxy
        length = screen.table.columns[ColumnKey("mal")]
        record = plain.record
        assert record is not None
        metrics = RunMetrics(tokens=338, steps=14, drafted=400, accepted=324)
        shown = row_cells(plain, record.model_copy(update={"metrics": metrics}), None)
        screen._update_row(plain, shown)
        await pilot.pause()
        assert table.get_row_at(0)[5] == "24.14"
        assert length.content_width >= len("24.14")
        # Narrower values later leave the column as wide (rows do not jump).
        screen._update_row(plain, row_cells(plain, record, None))
        await pilot.pause()
        assert table.get_row_at(0)[5] == "–"
        assert length.content_width >= len("24.14")


async def test_requests_age_out_of_the_minutes_window_while_quiet() -> None:
    hub, clocks = make_hub()
    app = ProxyApp(None, Settings(), hub=hub)
    async with app.run_test(size=(120, 30)) as pilot:
        request = begin(hub)
        feed(request, "completion-ngram-simple-2.sse")
        finish(hub, clocks, request)
        pane = app.screen_proxy.query_one("#proxy-aggregate", Static)
        await settle(pilot, lambda: "last 5 min: 1 req" in str(pane.render()), "one request")
        assert "last 5 min: 1 req" in str(pane.render())
        clocks.t += 6 * 60  # six quiet minutes on the hub's clocks: nothing ends meanwhile
        await settle(pilot, lambda: "last 5 min: 0 req" in str(pane.render()), "it aged out")
        assert "last 5 min: 0 req" in str(pane.render())
        assert "last 50: 1 req" in str(pane.render())


async def test_enter_opens_the_tokens_live_and_done() -> None:
    hub, clocks = make_hub()
    app = ProxyApp(None, Settings(), hub=hub)
    async with app.run_test(size=(100, 30)) as pilot:
        live = begin(hub)
        feed(live, "completion-ngram-simple-2.sse", upto=40)
        await settle(pilot, lambda: table_of(app).row_count == 1, "the live request's row")
        await pilot.press("enter")
        await settle(
            pilot,
            lambda: (
                isinstance(app.screen, ProxyRequestScreen)
                and len(app.screen.query_one(TokenView).model.tokens) > 0
            ),
            "the request's tokens so far",
        )
        screen = app.screen
        assert isinstance(screen, ProxyRequestScreen)
        view = screen.query_one(TokenView)
        shown = len(view.model.tokens)
        assert shown > 0  # live: what has streamed so far
        feed(live, "completion-ngram-simple-2.sse")
        finish(hub, clocks, live)
        await settle(pilot, lambda: len(view.model.tokens) == 120, "every token")
        assert len(view.model.tokens) == 120 > shown
        assert view.model.draft_count == 46
        await pilot.press("escape")
        assert isinstance(app.screen, ProxyScreen)


async def test_table_and_events_stay_bounded() -> None:
    hub, clocks = make_hub()
    app = ProxyApp(None, Settings(), hub=hub)
    async with app.run_test(size=(80, 24)) as pilot:
        for _ in range(MAX_ROWS + 30):
            live = begin(hub)
            feed(live, "completion-ngram-simple-2.sse", upto=5)
            finish(hub, clocks, live, seconds=0.1)
        await settle(pilot, lambda: table_of(app).row_count == MAX_ROWS, "a full table")
        assert table_of(app).row_count == MAX_ROWS
        screen = app.screen_proxy
        kept = [live for live in screen.rows.values() if live.events]
        assert len(kept) <= 50


async def test_failed_request_and_status_line() -> None:
    hub, _clocks = make_hub()
    app = ProxyApp(None, Settings(), hub=hub)
    async with app.run_test(size=(80, 24)) as pilot:
        live = begin(hub, streamed=False)
        hub.finish(live, status=RequestStatus.ERROR, http_status=401, error="Invalid API Key")
        app.screen_proxy.post_message(ProxyScreen.StatusChanged("failed: boom", failed=True))
        status = app.screen_proxy.query_one("#proxy-status", Static)
        await settle(
            pilot,
            lambda: table_of(app).row_count == 1 and status.has_class("-failed"),
            "the failed row and status",
        )
        assert table_of(app).get_row_at(0)[STATUS] == "error 401"
        assert status.has_class("-failed")


async def _three_requests(pilot: Pilot[None]) -> None:
    app = pilot.app
    assert isinstance(app, ProxyApp)
    hub = app.hub
    clocks = hub.clock.__self__  # type: ignore[attr-defined]  # the test clock's bound method
    for path, capture in [
        ("/completion", "completion-ngram-simple-2.sse"),
        ("/v1/chat/completions", "chat-ngram-simple.sse"),
    ]:
        live = begin(hub, path)
        feed(live, capture)
        finish(hub, clocks, live)
    live = begin(hub, "/v1/completions", client="10.0.0.9")
    feed(live, "v1-completions-ngram-mod.sse", upto=20)
    app.screen_proxy.post_message(
        ProxyScreen.StatusChanged("proxy http://127.0.0.1:8081 → http://127.0.0.1:8080")
    )
    table = table_of(app)
    aggregate = app.screen_proxy.query_one("#proxy-aggregate", Static)
    status = app.screen_proxy.query_one("#proxy-status", Static)
    # (live rows refresh once a second, the aggregate twice: wait for what the picture shows,
    # not a fixed time, which a busy machine outlasts)
    await settle(
        pilot,
        lambda: (
            table.row_count == 3
            and table.get_row_at(0)[2] not in ("–", "0")
            and "2 req" in str(aggregate.render())
            and "8081" in str(status.render())
        ),
        "three rows, the live one's numbers, the aggregate and the status",
    )


@pytest.mark.parametrize("theme", SHIPPED_THEMES)
def test_proxy_snapshot(snap_compare: SnapCompare, theme: str) -> None:
    hub, _clocks = make_hub()
    app = ProxyApp(None, Settings(theme=theme), hub=hub)
    assert snap_compare(app, terminal_size=(80, 24), run_before=_three_requests)


async def _open_second(pilot: Pilot[None]) -> None:
    await _three_requests(pilot)
    await pilot.press("down", "enter")
    app = pilot.app
    await settle(
        pilot,
        lambda: (
            isinstance(app.screen, ProxyRequestScreen)
            and len(app.screen.query_one(TokenView).model.tokens) > 0
        ),
        "the second request's tokens",
    )


def test_request_screen_snapshot(snap_compare: SnapCompare) -> None:
    hub, _clocks = make_hub()
    app = ProxyApp(None, Settings(), hub=hub)
    assert snap_compare(app, terminal_size=(80, 24), run_before=_open_second)
