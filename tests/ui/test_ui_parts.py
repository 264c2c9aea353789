"""Unit tests of the TUI's parts that need no running app: batching, the token model, themes,
formatting, remembered state, and the lifecycle's guarantees."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

import pytest
from textual.color import Color
from textual.strip import Strip

from helpers.engines import FakeEngine
from spectui.config import Settings
from spectui.core.events import (
    EventStream,
    MemoryEvent,
    MetricsEvent,
    RunMetrics,
    ServerState,
    ServerStateEvent,
    SummaryEvent,
    TokenEvent,
    TokenOrigin,
)
from spectui.ui import format as fmt
from spectui.ui.apps.live import SpectuiApp
from spectui.ui.bridge import BUSY_BATCH, EventBatcher, pump
from spectui.ui.messages import (
    MemorySampled,
    MetricsUpdated,
    RunEnded,
    ServerStateChanged,
    TokensArrived,
)
from spectui.ui.state import UiState
from spectui.ui.themes import (
    SHIPPED_THEMES,
    SPEC_VARIABLES,
    ThemeError,
    discover_themes,
    load_theme,
    shipped_theme_dir,
)
from spectui.ui.widgets.metrics import MetricsPane, RunColumn
from spectui.ui.widgets.token_model import TokenLog


def token(index: int, origin: TokenOrigin = TokenOrigin.TARGET, rejected: int = 0) -> TokenEvent:
    return TokenEvent(index=index, text=f"t{index} ", origin=origin, rejected_before=rejected)


# -- batching -----------------------------------------------------------------------------------


def test_batcher_batches_tokens_and_coalesces_snapshots() -> None:
    batcher = EventBatcher()
    for i in range(5):
        assert batcher.add(token(i)) == []
        assert batcher.add(MetricsEvent(t=i, snapshot=RunMetrics(tokens=i + 1))) == []
    batcher.add(MemoryEvent(rss_bytes=1, rss_minus_shared_bytes=1))
    out = batcher.flush()
    assert [type(m) for m in out] == [TokensArrived, MetricsUpdated, MemorySampled]
    assert isinstance(out[0], TokensArrived)
    assert [t.index for t in out[0].tokens] == [0, 1, 2, 3, 4]
    assert isinstance(out[1], MetricsUpdated)
    assert out[1].event.snapshot.tokens == 5  # only the newest snapshot survives
    assert batcher.flush() == []


def test_lifecycle_events_flush_first() -> None:
    batcher = EventBatcher()
    batcher.add(token(0))
    out = batcher.add(ServerStateEvent(state=ServerState.READY))
    assert [type(m) for m in out] == [TokensArrived, ServerStateChanged]
    batcher.add(token(1))
    out = batcher.add(SummaryEvent(metrics=RunMetrics(tokens=2)))
    assert [type(m) for m in out] == [TokensArrived, RunEnded]
    assert batcher.terminal_seen


async def test_pump_delivers_everything_in_order() -> None:
    async def events() -> EventStream:
        for i in range(300):
            yield token(i)
            if i % 7 == 0:
                await asyncio.sleep(0)
        yield SummaryEvent(metrics=RunMetrics(tokens=300))

    posted: list[object] = []
    assert await pump(events(), posted.append)
    tokens = [t.index for m in posted if isinstance(m, TokensArrived) for t in m.tokens]
    assert tokens == list(range(300))
    assert isinstance(posted[-1], RunEnded)


async def test_pump_flushes_when_the_stream_goes_quiet() -> None:
    """The last tokens of a burst are shown while the stream waits, not after its next event."""
    release = asyncio.Event()
    first_post = asyncio.Event()
    posted: list[object] = []

    def post(message: object) -> None:
        posted.append(message)
        first_post.set()

    async def events() -> EventStream:
        yield token(0)
        await release.wait()
        yield token(1)

    task = asyncio.create_task(pump(events(), post, interval=0.001, quiet_interval=0.001))
    await first_post.wait()  # would hang (pytest-timeout) if the quiet stream never flushed
    assert isinstance(posted[0], TokensArrived)
    assert [t.index for t in posted[0].tokens] == [0]
    release.set()
    assert not await task  # no summary: the caller reports a protocol error


async def test_a_busy_read_is_flushed_whole() -> None:
    """The tokens of one read (queued together, taken without waiting) go out in one batch: a
    flush on the first busy token left the rest of the read for the next one."""
    release = asyncio.Event()
    posted: list[object] = []

    def post(message: object) -> None:
        posted.append(message)
        release.set()

    async def events() -> EventStream:
        for i in range(3 * BUSY_BATCH):
            yield token(i)
        await release.wait()

    assert not await pump(events(), post, interval=0.0, quiet_interval=3600.0)
    assert isinstance(posted[0], TokensArrived)
    assert [t.index for t in posted[0].tokens] == list(range(3 * BUSY_BATCH))


async def test_the_rest_of_a_busy_stream_goes_at_the_fast_interval() -> None:
    """After a busy batch, a few tokens more wait the fast interval, not the quiet one (which
    here is an hour: the test would hang)."""
    posts = asyncio.Queue[object]()

    async def events() -> EventStream:
        for i in range(BUSY_BATCH):
            yield token(i)
        await posts.get()  # the busy batch is out
        yield token(BUSY_BATCH)
        await asyncio.Event().wait()  # the stream goes on, slowly

    task = asyncio.create_task(pump(events(), posts.put_nowait, interval=0.0, quiet_interval=3600))
    second = await asyncio.wait_for(posts.get(), 60)
    assert isinstance(second, TokensArrived)
    assert [t.index for t in second.tokens] == [BUSY_BATCH]
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_cancelling_pump_closes_the_stream() -> None:
    waiting, closed = asyncio.Event(), asyncio.Event()

    async def events() -> EventStream:
        try:
            yield token(0)
            waiting.set()
            await asyncio.Event().wait()  # a server that never answers
        finally:
            closed.set()

    task = asyncio.create_task(pump(events(), lambda message: None))
    await asyncio.wait_for(waiting.wait(), 60)  # (the pump is inside the stream)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert closed.is_set()


# -- the token model ----------------------------------------------------------------------------


def test_token_log_is_bounded_but_counts_everything() -> None:
    log = TokenLog(max_tokens=100)
    for start in range(0, 1000, 10):
        log.extend(token(i, TokenOrigin.DRAFT if i % 3 else TokenOrigin.TARGET, i % 5 == 0)
                   for i in range(start, start + 10))  # fmt: skip
    assert len(log.tokens) <= 100
    assert log.dropped + len(log.tokens) == 1000
    assert log.tokens[-1].text == "t999 "
    assert log.draft_count + log.target_count == 1000
    assert log.rejection_marks == 200


# -- themes -------------------------------------------------------------------------------------


def test_shipped_themes_load_with_token_colours() -> None:
    themes, problems = discover_themes(shipped_theme_dir())
    assert problems == []
    assert sorted(t.name for t in themes) == sorted(SHIPPED_THEMES)
    for theme in themes:
        assert set(SPEC_VARIABLES) <= set(theme.variables), theme.name


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        ("name = 'x'\nprimary = 'not-a-colour'", "primary"),
        ("name = 'x'", "primary"),
        ("name = 'x'\nprimary = '#fff'\n[variables]\nspec-accepted = 'nope'", "variables"),
        ("name = 'x'\nprimary = '#fff'\ncolour = 'red'", "colour"),
        ("this is not toml", "cannot read"),
    ],
)
def test_broken_theme_files_are_explained(tmp_path: Path, content: str, problem: str) -> None:
    path = tmp_path / "broken.toml"
    path.write_text(content)
    with pytest.raises(ThemeError, match=problem):
        load_theme(path)


async def test_broken_user_theme_falls_back_to_the_default(tmp_path: Path) -> None:
    themes = Path(os.environ["XDG_CONFIG_HOME"]) / "spectui" / "themes"
    themes.mkdir(parents=True)
    (themes / "mine.toml").write_text("name = 'mine'\nprimary = 'purpleish'\n")
    (themes / "good.json").write_text('{"name": "good", "primary": "#ff00ff"}')
    app = SpectuiApp(FakeEngine(), Settings(theme="mine"))
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        assert app.theme == "spectui-dark"
        messages = [str(n.message) for n in app._notifications]
        assert any("mine.toml" in m and "primary" in m for m in messages)
        assert any("unknown theme 'mine'" in m for m in messages)
        assert "good" in app.available_themes
        # A theme without spectui's variables still styles tokens (derived colours).
        app.theme = "good"
        await pilot.pause()
        assert app.theme_variables["spec-accepted"]


# -- the metrics pane ---------------------------------------------------------------------------


async def test_metrics_pane_warns_only_when_attribution_did_not_fit() -> None:
    app = SpectuiApp(FakeEngine(), Settings())
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        pane = app.screen.query_one(MetricsPane)

        def drawn() -> list[Strip]:
            return [pane.render_line(y) for y in range(pane.size.height)]

        pane.begin(RunColumn("ngram-simple", "table-row", RunMetrics(tokens=40)))
        await pilot.pause()
        clean = drawn()
        assert not any("anomal" in strip.text for strip in clean)

        pane.begin(
            RunColumn("ngram-map-k", "table-row", RunMetrics(tokens=40, attribution_anomalies=3))
        )
        await pilot.pause()
        lines = drawn()
        assert len(lines) > len(clean)
        text = " ".join(strip.text.strip() for strip in lines)
        assert "⚠ 3 attribution anomalies in this run: draft/target counts may be off" in text
        assert "previous run" not in text
        warning = next(strip for strip in lines if "⚠" in strip.text)
        style = next(seg.style for seg in warning if "⚠" in seg.text)
        assert style is not None and style.color is not None
        assert style.color.triplet == Color.parse(app.theme_variables["warning"]).rich_color.triplet

        # The next run: the warning now concerns the previous run.
        pane.begin(RunColumn("ngram-simple", "table-row", RunMetrics(tokens=40)))
        await pilot.pause()
        text = " ".join(pane.render_line(y).text.strip() for y in range(pane.size.height))
        assert "⚠ 3 attribution anomalies in the previous run" in text
        assert "in this run" not in text


# -- formatting and remembered state ------------------------------------------------------------


def test_formatting() -> None:
    assert fmt.ms(None) == fmt.DASH
    assert fmt.ms(412.4) == "412 ms"
    assert fmt.ms(12_345) == "12.3 s"
    assert fmt.rate(8.421) == "8.42 t/s"
    assert fmt.rate(842.1) == "842 t/s"
    assert fmt.pct(0.625) == "62.5%"
    assert fmt.size(512 * 2**20) == "512 MiB"
    assert fmt.size(int(1.25 * 2**30)) == "1.25 GiB"
    assert fmt.superscript(12) == "¹²"
    assert fmt.speed_ratio(60.0, 40.0) == "1.50× ▲"
    assert fmt.speed_ratio(30.0, 40.0) == "0.75× ▼"
    assert fmt.speed_ratio(None, 40.0) == fmt.DASH


def test_ui_state_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    assert UiState.load(path) == UiState()
    assert UiState(last_draft_model=Path("/m/draft.gguf")).save(path) is None
    assert UiState.load(path).last_draft_model == Path("/m/draft.gguf")
    path.write_text("{broken")
    assert UiState.load(path) == UiState()


# -- SpectuiApp.run_until_quit (spectui.lifecycle): the engine is closed on every exit ----------


class ExplodingEngine(FakeEngine):
    """The app itself fails while drawing (a bug in the UI, say)."""

    @property
    def info(self):
        raise RuntimeError("boom")


async def test_engine_closed_when_the_app_crashes() -> None:
    engine = ExplodingEngine()
    code = await SpectuiApp(engine, Settings()).run_until_quit(headless=True)
    assert code != 0
    assert engine.close_calls == 1


class HangupEngine(FakeEngine):
    """Sends this process SIGHUP once the server is up, like a dropped SSH connection."""

    async def start(self) -> EventStream:
        async for event in super().start():
            yield event
        os.kill(os.getpid(), signal.SIGHUP)


async def test_sighup_exits_cleanly_and_closes_the_engine() -> None:
    seen: list[int] = []
    before = signal.signal(signal.SIGHUP, lambda signum, frame: seen.append(signum))
    try:
        engine = HangupEngine()
        code = await SpectuiApp(engine, Settings()).run_until_quit(headless=True)
        assert code == 129
        assert engine.close_calls == 1
        assert seen == []  # the app handled it, not the handler that was there before...
        assert signal.getsignal(signal.SIGHUP) is not signal.SIG_DFL  # ...which is back now
    finally:
        signal.signal(signal.SIGHUP, before)


class HangingEngine(HangupEngine):
    """Its shutdown never finishes (a stand-in for a terminal that blocks Textual's exit)."""

    def __init__(self) -> None:
        super().__init__()
        self.release = asyncio.Event()

    async def aclose(self) -> None:
        await super().aclose()
        await self.release.wait()


async def test_hung_shutdown_after_a_signal_ends_the_process(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import spectui.lifecycle as lifecycle

    engine = HangingEngine()
    loop = asyncio.get_running_loop()
    hard_exits: list[int] = []

    def fake_hard_exit(code: int) -> None:  # the real one stops servers and calls os._exit
        hard_exits.append(code)
        loop.call_soon_threadsafe(engine.release.set)

    monkeypatch.setattr(lifecycle, "EXIT_GRACE_S", 0.01)
    monkeypatch.setattr(lifecycle, "hard_exit", fake_hard_exit)
    before = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        code = await SpectuiApp(engine, Settings()).run_until_quit(headless=True)
    finally:
        signal.signal(signal.SIGHUP, before)
    assert code == 129
    assert hard_exits == [129]


def test_initial_prompt_of_a_builtin() -> None:
    from spectui.core.prompts import builtin_prompt
    from spectui.ui.apps.live import initial_prompt

    settings = Settings()
    assert initial_prompt(settings, None).key == "table-row"
    two_lines = builtin_prompt("two-lines")
    choice = initial_prompt(settings, two_lines)  # what `--builtin two-lines` passes
    assert (choice.key, choice.request.n_predict) == ("two-lines", two_lines.n_predict)
    explicit = initial_prompt(Settings(n_predict=3000), two_lines)
    assert (explicit.key, explicit.request.n_predict) == ("two-lines", 3000)
    assert initial_prompt(settings, "Hello").key == "custom"


async def test_a_new_run_lays_the_screen_out_only_when_the_table_changes_height() -> None:
    # A layout repaints the whole screen: as a run starts, only when the metrics table grows.
    app = SpectuiApp(FakeEngine(), Settings())
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        pane = app.screen.query_one(MetricsPane)
        pane.begin(RunColumn("ngram-simple", "table-row", RunMetrics(tokens=40)))
        await pilot.pause()
        pane.begin(RunColumn("none", "table-row", RunMetrics(tokens=40)))  # 'previous' appears
        await pilot.pause()
        pane.begin(RunColumn("ngram-simple", "table-row", RunMetrics(tokens=40)))
        assert not pane._layout_required
        await pilot.pause()
        assert "ngram-simple" in pane.render_line(0).text  # (and it is drawn)


async def test_metrics_pane_says_what_chunks_of_several_steps_left_undecided() -> None:
    app = SpectuiApp(FakeEngine(), Settings())
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        pane = app.screen.query_one(MetricsPane)
        metrics = RunMetrics(
            tokens=40, steps=37, steps_maybe_fewer=1, steps_maybe_more=2, steps_unsplit=4,
            accepted=3, accepted_unplaced=3, origin_unknown_tokens=5,
        )  # fmt: skip
        pane.begin(RunColumn("draft-mtp", "custom", metrics))
        await pilot.pause()
        text = " ".join(pane.render_line(y).text.strip() for y in range(pane.size.height))
        assert "? steps 36–39 in this run" in text
        assert "? 4 steps' positions unknown in this run" in text
        assert "? 5 tokens' origin unknown in this run" in text
