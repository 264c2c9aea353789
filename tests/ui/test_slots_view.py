"""The slots view (`s` on the proxy screen): a lane per concurrent request, each lane's numbers
those of its own request, lanes tiled at 120×36 and stacked at 80×24; the lanes' assignment as
a property (every request in flight is in one lane or waiting, first come first served); SVG
snapshots at both sizes with 4 lanes. Lanes are pulled by hand (`SlotsScreen.pull`), so nothing
here waits on the view's timer."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from textual.app import App, ComposeResult
from textual.pilot import Pilot

from helpers.engines import FakeEngine
from spectui.config import Settings
from spectui.core.compare.models import CompareJob
from spectui.core.compare.progress import RunFinished, RunStarting
from spectui.core.compare.records import RunRecord
from spectui.core.engine.base import ServerInfo
from spectui.core.events import SummaryEvent, TokenEvent
from spectui.core.proxy.hub import LiveRequest, ProxyHub
from spectui.core.proxy.models import RequestStatus
from spectui.core.proxy.record import WorkloadRecorder
from spectui.core.proxy.watch import ServerView, ServerWatcher, SlotView, SpecCounters
from spectui.core.sessions.file import read_session
from spectui.core.sessions.tail import FollowOptions
from spectui.ui.apps.follow import FollowApp, follow_engine
from spectui.ui.apps.live import SpectuiApp
from spectui.ui.apps.proxy import ProxyApp
from spectui.ui.lanes import CompareLanes, FollowLanes, HubLanes, WatchLanes
from spectui.ui.screens.proxy import ProxyScreen
from spectui.ui.screens.slots import SlotsScreen
from spectui.ui.widgets.slots import LineText, SlotsGrid

from .proxy_screen_helpers import START, FakeClocks, begin, feed, finish, make_hub
from .ui_helpers import settle

SnapCompare = Callable[..., bool]

REQUESTS = (
    ("/completion", "completion-ngram-simple-2.sse", None),
    ("/v1/chat/completions", "chat-ngram-simple.sse", 30),
    ("/v1/completions", "v1-completions-ngram-mod.sse", 20),
    ("/completion", "completion-draft-simple.sse", None),
)
"""Four concurrent requests: the first and last end, the middle two still stream."""


def four_requests(hub: ProxyHub, clocks: FakeClocks) -> list[LiveRequest]:
    lives = [begin(hub, path) for path, _capture, _upto in REQUESTS]
    for live, (_path, capture, upto) in zip(lives, REQUESTS, strict=True):
        feed(live, capture, upto=upto)
    finish(hub, clocks, lives[0])
    finish(hub, clocks, lives[3])
    return lives


async def open_slots(pilot: Pilot[None]) -> SlotsScreen:
    await pilot.press("s")
    screen = pilot.app.screen
    assert isinstance(screen, SlotsScreen)
    return screen


async def test_s_shows_a_lane_per_request_with_its_own_numbers_and_toggles_back() -> None:
    hub, clocks = make_hub()
    app = ProxyApp(None, Settings(), hub=hub)
    async with app.run_test(size=(120, 36)) as pilot:
        lives = [begin(hub, path) for path, _c, _u in REQUESTS]  # in flight when s is pressed
        screen = await open_slots(pilot)
        for live, (_path, capture, upto) in zip(lives, REQUESTS, strict=True):
            feed(live, capture, upto=upto)
        finish(hub, clocks, lives[0])
        finish(hub, clocks, lives[3])
        screen.pull(numbers=True)
        await pilot.pause()
        lanes = screen.lanes
        assert len(lanes) == 4
        for lane, live in zip(lanes, lives, strict=True):
            assert lane.label == f"#{live.info.id} · slot ?"
            record = live.record
            if record is not None:  # ended: the record's own numbers
                assert lane.numbers.state == "done"
                assert (lane.numbers.drafted, lane.numbers.accepted) == (
                    record.drafted,
                    record.accepted,
                )
                assert lane.numbers.tokens == record.tokens
            else:
                snapshot = live.snapshot()
                assert snapshot is not None and lane.numbers.state == "streaming"
                assert (lane.numbers.drafted, lane.numbers.accepted) == (
                    snapshot.drafted,
                    snapshot.accepted,
                )
            # Every token of the request is in its lane, and no other request's.
            tokens = [e for e in live.events if type(e).__name__ == "TokenEvent"]
            assert len(lane.view.model.tokens) == len(tokens)
        assert lives[0].record is not None and lanes[0].numbers.text().startswith("done · acc 30%")
        aggregate = screen.aggregate.text
        assert aggregate.startswith("2 streaming · ")
        assert "one per concurrent request" in aggregate and "slot ?" in aggregate
        assert screen.grid.has_class("-tiled")
        await pilot.press("s")
        assert isinstance(app.screen, ProxyScreen)
        await pilot.press("s")  # again: the same lanes, drawn anew
        again = app.screen
        assert isinstance(again, SlotsScreen)
        again.pull(numbers=True)
        await pilot.pause()
        assert [lane.label for lane in again.lanes] == [lane.label for lane in lanes]


async def test_the_proxy_tui_can_open_on_the_slots_view() -> None:
    hub, _clocks = make_hub()
    app = ProxyApp(None, Settings(), hub=hub, slots=True)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot, lambda: isinstance(app.screen, SlotsScreen), "the slots view up first")
        assert isinstance(app.screen, SlotsScreen)
        await pilot.press("s")
        assert isinstance(app.screen, ProxyScreen)


async def test_lanes_stack_at_80x24() -> None:
    hub, clocks = make_hub()
    app = ProxyApp(None, Settings(), hub=hub)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_slots(pilot)
        four_requests(hub, clocks)
        screen.pull(numbers=True)
        await pilot.pause()
        grid = screen.query_one(SlotsGrid)
        assert grid.has_class("-stacked") and not grid.has_class("-tiled")
        for lane in screen.lanes:
            assert lane.stacked and not lane.border_title
            assert lane.header.text == lane.title_text.removeprefix("lane ")
            assert len(lane.header.text) <= 78  # the whole header on one line of 80 columns
            assert lane.view.region.height >= 4  # under the header, four lines of tokens
        for line in screen.aggregate.text.splitlines():
            assert len(line) <= 78


async def test_more_requests_than_lanes_wait_for_one() -> None:
    hub, clocks = make_hub()
    app = ProxyApp(None, Settings(), hub=hub)
    async with app.run_test(size=(120, 36)) as pilot:
        screen = await open_slots(pilot)
        lives = [begin(hub) for _ in range(5)]
        screen.pull(numbers=True)
        await pilot.pause()
        assert "1 waiting for a lane" in screen.aggregate.text
        assert [lane.label for lane in screen.lanes] == [f"#{n} · slot ?" for n in (1, 2, 3, 4)]
        feed(lives[1], "completion-ngram-simple-2.sse")
        finish(hub, clocks, lives[1])
        screen.pull(numbers=True)
        await pilot.pause()
        assert screen.lanes[1].label == "#5 · slot ?"
        assert screen.lanes[1].numbers.state == "streaming"
        assert "waiting" not in screen.aggregate.text


async def test_a_follower_sees_the_newest_runs_in_lanes_read_only(tmp_path: Path) -> None:
    """`spectui follow DIR` on a proxy's --record folder: `s` shows its newest four runs, a
    lane each, with each run's own numbers and tokens; a new run takes a lane."""
    folder = tmp_path / "record"
    hub, clocks = make_hub()
    recorder = WorkloadRecorder(folder, ServerInfo(mode="attached", url="http://127.0.0.1:8080"))
    hub.listeners.append(recorder)

    def proxied(capture: str) -> None:
        live = begin(hub)
        feed(live, capture)
        finish(hub, clocks, live)

    for _path, capture, _upto in (*REQUESTS, REQUESTS[0]):  # five runs: the oldest is history
        proxied(capture)
    engine = follow_engine(FollowOptions(target=folder, poll_s=0.01))
    app = FollowApp(engine, Settings())
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.press("s")
        screen = app.screen
        assert isinstance(screen, SlotsScreen) and isinstance(screen.source, FollowLanes)
        assert "Back" in str(screen.BINDINGS) and not hasattr(screen, "action_run")
        screen.pull(numbers=True)
        await pilot.pause()

        def check(paths: list[Path]) -> None:
            by_label = {lane.label: lane for lane in screen.lanes}
            assert len(by_label) == 4
            for path in paths:
                session = read_session(path)
                summary = next(e for e in session.events if isinstance(e, SummaryEvent))
                lane = by_label[f"{session.header.label} · slot ?"]
                assert lane.numbers.state == "done"
                assert lane.numbers.drafted == summary.metrics.drafted
                assert lane.numbers.accepted == summary.metrics.accepted
                tokens = [e for e in session.events if isinstance(e, TokenEvent)]
                assert len(lane.view.model.tokens) == len(tokens)

        check(recorder.paths[-4:])
        assert "following record/" in screen.aggregate.text
        proxied(REQUESTS[1][1])  # a sixth run takes the lane of one that ended
        screen.pull(numbers=True)
        await pilot.pause()
        check(recorder.paths[-4:])


async def test_a_concurrency_comparison_fills_a_lane_per_client() -> None:
    """`compare --concurrency`'s progress events: each client's run in its lane, its numbers
    once it ends; the next block starts on clean lanes."""
    source = CompareLanes(4)

    def job(seq: int, client: int, level: int = 4, config: str = "ngram-mod") -> CompareJob:
        return CompareJob(
            seq=seq, round=1, config=config, prompt=f"p{client}", segment=0, level=level,
            client=client,
        )  # fmt: skip

    hub, _clocks = make_hub()
    app = ProxyApp(None, Settings(), hub=hub)
    async with app.run_test(size=(120, 36)) as pilot:
        screen = SlotsScreen(source, 4)
        await app.push_screen(screen)
        for client in range(4):
            source.take(RunStarting(job=job(client, client)))
        record = RunRecord(
            seq=2, config="ngram-mod", prompt="p2", round=1, level=4, client=2, tokens=64,
            drafted=40, accepted=30, tokens_per_second=21.5,
        )  # fmt: skip
        source.take(RunFinished(record=record, done=3, total=8))
        screen.pull(numbers=True)
        await pilot.pause()
        labels = [lane.label for lane in screen.lanes]
        assert labels == [f"ngram-mod · p{c} · client {c + 1}/4" for c in range(4)]
        done = screen.lanes[2].numbers
        assert (done.state, done.drafted, done.accepted, done.tokens) == ("done", 40, 30, 64)
        assert [lane.numbers.state for lane in screen.lanes].count("streaming") == 3
        assert screen.aggregate.text.startswith("ngram-mod · round 1 · 4 at once · 3 running")
        source.take(RunStarting(job=job(4, 0, level=2, config="none")))
        screen.pull(numbers=True)
        await pilot.pause()
        assert source.lanes[1:] == [None, None, None]
        assert [lane.numbers.state for lane in screen.lanes[1:]] == ["idle"] * 3
        assert screen.lanes[0].label == "none · p0 · client 1/2"


async def test_the_live_tui_shows_the_servers_own_slots(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`s` in the live TUI attached to a server: its slots from /slots, a lane each (busy ones
    with their task, tokens so far and rate), the server-wide numbers above."""
    slots = [
        SlotView(id=n, busy=n < 3, task=10 + n, decoded=20 * n, tokens_per_second=12.5 * n,
                 speculative=True)
        for n in range(4)
    ]  # fmt: skip
    view = ServerView(
        url="http://127.0.0.1:8080", time=START, interval_s=1.0, slots=slots,
        spec_window=SpecCounters(steps=10, drafted=40, accepted=30),
        generation_tokens_per_second=37.5,
    )  # fmt: skip

    async def poll(_self: ServerWatcher) -> ServerView:
        return view

    monkeypatch.setattr(ServerWatcher, "poll", poll)
    app = SpectuiApp(FakeEngine(), Settings())
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.press("s")
        screen = app.screen
        assert isinstance(screen, SlotsScreen) and isinstance(screen.source, WatchLanes)
        source = screen.source
        await settle(pilot, lambda: source.view is not None, "the screen's worker polled once")
        screen.pull(numbers=True)
        await pilot.pause()
        lanes = screen.lanes
        assert [lane.label for lane in lanes] == [f"slot {n} · task {10 + n}" for n in range(4)]
        assert [lane.numbers.state for lane in lanes] == ["streaming"] * 3 + ["idle"]
        assert (lanes[2].numbers.tokens, lanes[2].numbers.tokens_per_second) == (40, 25.0)
        assert screen.aggregate.text.startswith(
            "3 of 4 slots busy · 37.5 t/s total · acceptance 75.0%"
        )
        await pilot.press("s")
        assert not isinstance(app.screen, SlotsScreen)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.integers(0, 20)), max_size=60), st.integers(1, 5))
def test_lane_assignment(ops: list[tuple[bool, int]], lanes: int) -> None:
    """Starts and ends in any order: every request in flight is in exactly one lane or waiting,
    a lane holds an ended request only while nobody waits, and waiting is first come first
    served."""
    hub, _clocks = make_hub()
    source = HubLanes(hub, lanes)
    order: list[int] = []
    for start, pick in ops:
        live_now = list(hub.live.values())
        if start or not live_now:
            order.append(begin(hub).info.id)
        else:
            hub.finish(live_now[pick % len(live_now)], status=RequestStatus.DONE, http_status=200)
        in_lanes = [f.live for f in source.lanes if f is not None]
        for live in hub.live.values():
            assert (live in in_lanes) + (live in source.waiting) == 1
        if source.waiting:
            assert all(f is not None and f.live.record is None for f in source.lanes)
        waiting = [live.info.id for live in source.waiting]
        assert waiting == sorted(waiting)


async def _four_lanes(pilot: Pilot[None]) -> None:
    app = pilot.app
    assert isinstance(app, ProxyApp)
    clocks = app.hub.clock.__self__  # type: ignore[attr-defined]  # the test clock's bound method
    screen = await open_slots(pilot)
    four_requests(app.hub, clocks)
    screen.pull(numbers=True)
    await pilot.pause()


def test_slots_snapshot_120x36(snap_compare: SnapCompare) -> None:
    hub, _clocks = make_hub()
    app = ProxyApp(None, Settings(), hub=hub)
    assert snap_compare(app, terminal_size=(120, 36), run_before=_four_lanes)


def test_slots_snapshot_80x24(snap_compare: SnapCompare) -> None:
    hub, _clocks = make_hub()
    app = ProxyApp(None, Settings(), hub=hub)
    assert snap_compare(app, terminal_size=(80, 24), run_before=_four_lanes)


async def test_a_header_line_is_cut_with_an_ellipsis_and_padded() -> None:
    """`LineText` draws its lines straight into strips: each as wide as the widget, a long one
    cut with '…', a missing one blank, and a new text redrawn."""

    class One(App[None]):
        def compose(self) -> ComposeResult:
            yield LineText(id="line")

    app = One()
    async with app.run_test(size=(20, 4)) as pilot:
        line = app.query_one("#line", LineText)
        line.styles.height = 3
        line.show("a header far longer than twenty cells\nshort")
        await pilot.pause()
        rows = ["".join(s.text for s in line.render_line(y)) for y in range(3)]
        assert rows == ["a header far longer…", "short" + " " * 15, " " * 20]
        line.show("new")
        assert "".join(s.text for s in line.render_line(0)) == "new" + " " * 17
