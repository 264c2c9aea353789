"""Pilot tests of replay in the full TUI (one session, two side by side) and of the recording
key in the live TUI. Sessions are recorded from the seeded fake engine."""

from __future__ import annotations

from pathlib import Path

from textual.widgets import Static

from helpers.engines import FakeEngine
from spectui.app_setup import recorder
from spectui.config import Settings
from spectui.core.events import ServerState, TokenEvent
from spectui.core.llama.specconfig import SpecConfig
from spectui.core.request import GenerationRequest
from spectui.core.sessions.file import Session, read_session
from spectui.core.sessions.recording import RecordingEngine
from spectui.core.sessions.replay import ReplayClock, ReplayEngine, recompute
from spectui.ui.apps.live import SpectuiApp
from spectui.ui.apps.replay import ReplayApp
from spectui.ui.screens.replay import ReplayScreen
from spectui.ui.screens.replay_pair import ReplayColumn, ReplayPairScreen
from spectui.ui.widgets.metrics import MetricsPane
from spectui.ui.widgets.recording import RecordingIndicator
from spectui.ui.widgets.tokens import TokenView

from .ui_helpers import main_screen, replay_screen, settle

REQUEST = GenerationRequest(prompt="Repeat the table and add a row.", n_predict=60)


async def record(path: Path, spec: str = "ngram-simple") -> Session:
    engine = RecordingEngine(
        FakeEngine(spec=SpecConfig(types=(spec,))), sessions_dir=path.parent, path=path
    )
    async for _ in engine.run(REQUEST):
        pass
    return read_session(path)


def shown(view: TokenView) -> list[tuple[str, str]]:
    return [(t.text, t.origin.value) for t in view.model.tokens]


def recorded_tokens(session: Session) -> list[tuple[str, str]]:
    return [(e.text, e.origin.value) for e in session.events if isinstance(e, TokenEvent)]


async def test_replay_shows_the_recorded_run_with_recomputed_numbers(tmp_path: Path) -> None:
    session = await record(tmp_path / "a.jsonl")
    engine = ReplayEngine(session, clock=ReplayClock(None))
    app = ReplayApp([engine], Settings())
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot, lambda: engine.finished and not replay_screen(app).running)
        screen = replay_screen(app)
        assert isinstance(screen, ReplayScreen)
        assert shown(screen.query_one(TokenView)) == recorded_tokens(session)
        current = screen.query_one(MetricsPane).current
        assert current is not None
        assert current.metrics == recompute(session).summary.metrics
        assert screen.engine.info.mode == "replay"
        assert screen.engine.server_control is None  # a replay has no server to control
        await pilot.press("t")  # no server to switch: a note says so, nothing breaks
        await pilot.pause()
        assert any(
            "switching spec types needs a live server" in n.message for n in app._notifications
        )
        assert screen.state is ServerState.READY
        assert not screen.query(RecordingIndicator)  # a replay cannot record


async def test_pause_and_step_token_by_token(tmp_path: Path) -> None:
    session = await record(tmp_path / "a.jsonl")
    engine = ReplayEngine(session, clock=ReplayClock(1.0))
    engine.clock.pause()  # paused before the first token, so every step is observable
    times = sorted({e.t for e in session.events if isinstance(e, TokenEvent)})
    app = ReplayApp([engine], Settings())
    async with app.run_test(size=(100, 30)) as pilot:
        screen = replay_screen(app)
        await settle(pilot, lambda: screen.running)
        view = screen.query_one(TokenView)
        assert not view.model.tokens
        for count in (1, 2):
            await pilot.press("n")
            due = sum(
                1 for e in session.events if isinstance(e, TokenEvent) and e.t <= times[count - 1]
            )

            def all_due(due: int = due) -> bool:
                return len(view.model.tokens) == due

            await settle(pilot, all_due)
        assert "paused" in str(screen.query_one("#metrics-scroll").border_subtitle)
        engine.clock.set_speed(None)
        await pilot.press("space")
        await settle(pilot, lambda: engine.finished and not screen.running)
        assert shown(view) == recorded_tokens(session)


async def test_two_sessions_side_by_side(tmp_path: Path) -> None:
    sessions = [
        await record(tmp_path / "base.jsonl", "none"),
        await record(tmp_path / "spec.jsonl", "ngram-simple"),
    ]
    engines = ReplayEngine.pair(sessions, speed=None)
    app = ReplayApp(engines, Settings())
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(
            pilot, lambda: isinstance(app.screen, ReplayPairScreen) and app.screen.finished
        )
        columns = list(app.screen.query(ReplayColumn))
        assert [c.engine.session.name for c in columns] == ["base.jsonl", "spec.jsonl"]
        for column, session in zip(columns, sessions, strict=True):
            assert shown(column.query_one(TokenView)) == recorded_tokens(session)
            current = column.query_one(MetricsPane).current
            assert current is not None
            assert current.metrics == recompute(session).summary.metrics
        status = str(app.screen.query_one("#pair-status", Static).render())
        assert "base.jsonl" not in status and "none" in status and "ngram-simple" in status
        await pilot.press("r")  # both play again from the start
        await settle(
            pilot, lambda: isinstance(app.screen, ReplayPairScreen) and app.screen.finished
        )


async def test_record_key_toggles_recording_and_the_banner(tmp_path: Path) -> None:
    settings = Settings(sessions_dir=tmp_path / "sessions")
    engine = recorder(FakeEngine(), settings, recording=False)
    app = SpectuiApp(engine, settings)
    async with app.run_test(size=(100, 30)) as pilot:
        screen = main_screen(app)
        await settle(pilot, lambda: screen.state is ServerState.READY and screen.operation is None)
        await settle(pilot, lambda: bool(screen.query(RecordingIndicator)))
        banner = screen.query_one(RecordingIndicator)
        assert not banner.display
        await pilot.press("ctrl+r")
        assert engine.recording and banner.display
        await pilot.press("r")
        await settle(pilot, lambda: not screen.running and screen.state is ServerState.READY)
        assert len(engine.paths) == 1
        session = read_session(engine.paths[0])
        assert session.summary is not None and session.problem is None
        await pilot.press("ctrl+r")
        assert not engine.recording and not banner.display


async def test_a_recorded_server_crash_replays_and_plays_again(tmp_path: Path) -> None:
    path = tmp_path / "crash.jsonl"
    recorder = RecordingEngine(FakeEngine(crash_after=5), sessions_dir=tmp_path, path=path)
    async for _ in recorder.run(REQUEST):
        pass
    session = read_session(path)
    engine = ReplayEngine(session, clock=ReplayClock(None))
    app = ReplayApp([engine], Settings())
    async with app.run_test(size=(100, 30)) as pilot:
        screen = replay_screen(app)
        await settle(pilot, lambda: engine.finished and not screen.running)
        assert screen.state is ServerState.FAILED  # as recorded
        await pilot.press("r")
        await settle(pilot, lambda: engine.plays == 2 and engine.finished and not screen.running)
        assert shown(screen.query_one(TokenView)) == recorded_tokens(session)
