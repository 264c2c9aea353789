"""Pilot tests of `spectui follow`: the live TUI drawn from session files while they are written.

Session files are recorded from real captures through the real client code (`helpers.engines`),
then copied line by line into the followed folder as a presenter would write them, so every
state is reached by writing, and every check waits for the state it names (never a duration).
"""

from __future__ import annotations

import stat
from collections.abc import Callable
from pathlib import Path

import pytest
from textual.pilot import Pilot
from textual.widgets import Static

from helpers.engines import CaptureEngine, record_capture
from helpers.sse import FIXTURES
from helpers.wait import await_until
from spectui.app_setup import recorder
from spectui.cli import main
from spectui.commands.tui import broadcast_dir
from spectui.config import Settings, live_dir, state_dir
from spectui.core.engine.base import ServerInfo
from spectui.core.events import TokenEvent, TokenOrigin
from spectui.core.proxy.chunks import PreparedBody
from spectui.core.proxy.hub import ProxyHub
from spectui.core.proxy.models import EndpointKind, RequestStatus
from spectui.core.proxy.record import WORKLOAD, WorkloadRecorder
from spectui.core.sessions.file import read_session
from spectui.core.sessions.follow import FollowEngine
from spectui.core.sessions.tail import FollowOptions, FollowState
from spectui.ui.apps.follow import FollowApp, follow_engine
from spectui.ui.apps.live import SpectuiApp
from spectui.ui.screens.follow import FollowScreen
from spectui.ui.widgets.metrics import MetricsPane
from spectui.ui.widgets.tokens import TokenView

SIZE = (120, 36)


async def until(pilot: Pilot[None], check: Callable[[], bool], what: str) -> None:
    await await_until(check, f"the follower got there: {what}", pause=lambda: pilot.pause(0.01))
    await pilot.pause()


class Presenter:
    """Writes a recorded session into the followed folder, byte by byte as spectui would."""

    def __init__(self, source: Path, target: Path) -> None:
        self.data = source.read_bytes()
        self.lines = self.data.splitlines(keepends=True)
        self.target = target
        self.written = 0
        """Bytes of ``data`` written so far."""
        target.parent.mkdir(parents=True, exist_ok=True)
        target.touch()

    def write(self, upto: int | None = None, extra: int = 0) -> None:
        """Write on up to the start of line ``upto`` (the end when None), plus ``extra`` bytes
        of the line after it."""
        end = len(self.data) if upto is None else sum(map(len, self.lines[:upto])) + extra
        with self.target.open("ab") as file:
            file.write(self.data[self.written : end])
        self.written = max(self.written, end)

    def line_of_token(self, index: int) -> int:
        """The index of the line just after the ``index``-th token line (0-based)."""
        seen = 0
        for number, line in enumerate(self.lines):
            if b'"type":"token"' in line:
                if seen == index:
                    return number + 1
                seen += 1
        raise ValueError(index)


def tokens_of(path: Path) -> list[tuple[str, TokenOrigin]]:
    return [(e.text, e.origin) for e in read_session(path).events if isinstance(e, TokenEvent)]


def shown(view: TokenView) -> list[tuple[str, TokenOrigin]]:
    return [(t.text, t.origin) for t in view.model.tokens]


def screen_of(app: FollowApp) -> FollowScreen:
    screen = app.main_screen
    assert isinstance(screen, FollowScreen)
    return screen


def app_for(target: Path, **options: float) -> FollowApp:
    # Never 'waiting…' unless a test asks for it: a slow turn must not change what is shown.
    patience = {"waiting_after_s": 3600.0, "stopped_after_s": 3600.0, **options}
    engine = follow_engine(FollowOptions(target=target, poll_s=0.01, **patience))
    return FollowApp(engine, Settings())


async def test_follower_draws_a_run_while_it_is_written_then_moves_to_the_next(
    tmp_path: Path,
) -> None:
    first, second = tmp_path / "src-1.jsonl", tmp_path / "src-2.jsonl"
    await record_capture(first)
    await record_capture(second, capture="completion-ngram-simple-2.sse")
    live = tmp_path / "live"  # not there yet: the follower starts before the presenter
    app = app_for(live)
    async with app.run_test(size=SIZE) as pilot:
        screen = screen_of(app)
        await until(pilot, lambda: "waiting for the first run" in screen.banner.text, "idle")

        presenter = Presenter(first, live / "20260101-100000-custom-ngram-simple.jsonl")
        cut = presenter.line_of_token(9)
        # Ten tokens, then half of the next line: it must wait for its newline.
        presenter.write(cut, extra=15)
        expected = tokens_of(first)
        view = screen.query_one(TokenView)
        await until(pilot, lambda: len(view.model.tokens) >= 10, "the first ten tokens")
        assert shown(view) == expected[:10]
        assert screen.running, "the run is still being written"
        assert "run 1 · ngram-simple · ● live" in screen.banner.text
        # Coloured by origin: accepted drafts in the theme's accepted colour, as live.
        assert {origin for _, origin in expected[:10]} == {TokenOrigin.DRAFT, TokenOrigin.TARGET}
        accepted = app.theme_variables["spec-accepted"].lower()
        colours = {
            segment.style.color.get_truecolor().hex.lower()
            for segment in view.render_line(0)
            if segment.style is not None and segment.style.color is not None
        }
        assert accepted in colours

        presenter.write()
        await until(pilot, lambda: not screen.running, "the first run's end")
        assert shown(view) == expected
        assert screen.follower.state is FollowState.FINISHED
        metrics = screen.query_one(MetricsPane)
        assert metrics.current is not None
        assert metrics.current.metrics.tokens == len(expected)

        # The presenter runs again: the follower moves to the new file, previous numbers kept.
        Presenter(second, live / "20260101-100100-custom-ngram-simple.jsonl").write()
        await until(pilot, lambda: "run 2" in screen.banner.text, "the second run")
        await until(pilot, lambda: not screen.running, "the second run's end")
        assert shown(view) == tokens_of(second)
        assert metrics.previous is not None
        assert metrics.previous.metrics.tokens == len(expected)


async def test_follower_keys_cannot_start_anything(tmp_path: Path) -> None:
    source = tmp_path / "src.jsonl"
    await record_capture(source)
    folder = tmp_path / "sessions"
    Presenter(source, folder / "a.jsonl").write()
    before = {p.name: p.stat().st_size for p in folder.iterdir()}
    app = app_for(folder)
    engine = app.follow
    assert isinstance(engine, FollowEngine)
    # A follower's source has nothing to run or control with: no capability, no method.
    assert engine.server_control is None and engine.recorder is None
    assert not hasattr(engine, "run") and not hasattr(engine, "switch_spec")
    async with app.run_test(size=SIZE) as pilot:
        screen = screen_of(app)
        await until(pilot, lambda: screen.follower.state is FollowState.FINISHED, "run shown")
        await until(pilot, lambda: not screen.running, "idle")
        for key in ("r", "x", "t", "R", "p", "ctrl+r", "enter", "space"):
            await pilot.press(key)
        await pilot.pause()
        assert not screen.running
        groups = {worker.group for worker in app.workers}
        assert groups <= {"follow", "server"}, groups
        notes = [n.message for n in app._notifications]
        assert sum("a follower only watches" in n for n in notes) == 5
        assert len(app.screen_stack) == 2, "no picker opened"
        await pilot.press("question_mark")
        help_text = str(app.screen.query_one("#help-text", Static).render())
        assert "a follower only watches" in help_text and "switch spec type" not in help_text
    assert {p.name: p.stat().st_size for p in folder.iterdir()} == before


async def test_a_damaged_line_is_skipped_with_a_note(tmp_path: Path) -> None:
    source = tmp_path / "src.jsonl"
    await record_capture(source)
    presenter = Presenter(source, tmp_path / "live" / "run.jsonl")
    cut = presenter.line_of_token(4)
    presenter.write(cut)
    with presenter.target.open("ab") as file:
        file.write(b'{"type":"token","t":0.5,"text":"\n')  # a line cut mid-object
    presenter.write()
    app = app_for(tmp_path / "live")
    async with app.run_test(size=SIZE) as pilot:
        screen = screen_of(app)
        await until(
            pilot, lambda: bool(screen.notes) and not screen.running, "the note and the end"
        )
        assert screen.notes == [f"run.jsonl: skipped damaged line {cut + 1} (not valid JSON)"]
        assert shown(screen.query_one(TokenView)) == tokens_of(source)


async def test_a_file_that_stops_growing_shows_waiting_then_presenter_stopped(
    tmp_path: Path,
) -> None:
    source = tmp_path / "src.jsonl"
    await record_capture(source)
    presenter = Presenter(source, tmp_path / "live" / "run.jsonl")
    presenter.write(presenter.line_of_token(5))
    app = app_for(tmp_path / "live", waiting_after_s=0.05, stopped_after_s=0.1)
    async with app.run_test(size=SIZE) as pilot:
        screen = screen_of(app)
        banner = screen.banner
        await until(pilot, lambda: banner.state is FollowState.STOPPED, "presenter stopped")
        assert banner.text.endswith("presenter stopped")
        assert FollowState.WAITING in screen.states, "waiting… comes first"
        assert screen.answer.border_subtitle == "presenter stopped"
        # It comes back: the run goes on where it stood.
        presenter.write()
        await until(pilot, lambda: not screen.running, "the end")
        assert banner.state is FollowState.FINISHED
        assert shown(screen.query_one(TokenView)) == tokens_of(source)


async def test_a_proxy_record_folder_is_followed_request_by_request(tmp_path: Path) -> None:
    # `proxy --record DIR`'s own recorder (fed real captures through the proxy hub, as the
    # proxy feeds it): a session file per request beside workload.jsonl, a prompt file with no
    # header. The follower takes each request's session and says nothing of the other file.
    folder = tmp_path / "record"
    hub = ProxyHub(keep_events=True)
    recorder = WorkloadRecorder(folder, ServerInfo(mode="attached", url="http://127.0.0.1:8080"))
    hub.listeners.append(recorder)
    app = app_for(folder)
    async with app.run_test(size=SIZE) as pilot:
        screen = screen_of(app)
        view = screen.query_one(TokenView)
        await until(pilot, lambda: "waiting for the first run" in screen.banner.text, "idle")
        for number, capture in enumerate(
            ("completion-ngram-simple.sse", "completion-ngram-simple-2.sse"), start=1
        ):
            proxied(hub, capture)
            session = recorder.paths[-1]

            def begun(n: int = number) -> bool:
                return f"run {n}" in screen.banner.text

            await until(pilot, begun, f"run {number}")
            await until(pilot, lambda: not screen.running, "its end")
            assert shown(view) == tokens_of(session)
        assert (folder / WORKLOAD).exists()
        assert screen.notes == []


def proxied(hub: ProxyHub, capture: str) -> None:
    """One streamed /completion request through the proxy's hub, from a real capture."""
    body = PreparedBody(
        upstream=b"", streamed=True, strip=True, prompt="def add(a, b):",
        sampling={"temperature": 0}, n_predict=120,
    )  # fmt: skip
    live = hub.start("/completion", EndpointKind.NATIVE, "127.0.0.1:5000", body)
    assert live.attribution is not None
    for n, line in enumerate((FIXTURES / capture).read_bytes().splitlines(keepends=True)):
        live.attribution.line(line, 0.01 * n)
    hub.finish(live, status=RequestStatus.DONE, http_status=200)


async def test_broadcast_records_each_run_into_the_live_dir_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "run"))
    settings = Settings(broadcast=True)
    live = broadcast_dir(settings, None)
    assert live == tmp_path / "run" / "spectui" / "live"
    assert stat.S_IMODE(live.stat().st_mode) == 0o700
    assert stat.S_IMODE(live.parent.stat().st_mode) == 0o700
    presenter = SpectuiApp(recorder(CaptureEngine(), settings, sessions_dir=live), settings)
    async with presenter.run_test(size=SIZE) as pilot:
        main = presenter.main_screen
        assert main is not None
        await until(pilot, lambda: main.state is not None and not main.running, "ready")
        main.action_run()
        await until(pilot, lambda: main.running, "running")
        await until(pilot, lambda: not main.running, "run over")
        assert f"broadcasting to {live}" in main.server.bar.note
        assert f"broadcasting to {live}" in str(main.server.bar.render())
    (session,) = live.iterdir()
    assert stat.S_IMODE(session.stat().st_mode) == 0o600
    follower = app_for(live)
    async with follower.run_test(size=SIZE) as pilot:
        screen = screen_of(follower)
        await until(pilot, lambda: screen.follower.state is FollowState.FINISHED, "followed")
        await until(pilot, lambda: not screen.running, "its end")
        assert shown(screen.query_one(TokenView)) == tokens_of(session)


def test_broadcast_without_a_runtime_dir_goes_under_the_state_dir(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    assert live_dir() == state_dir() / "live"


def test_broadcast_and_record_together_is_one_clear_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--broadcast", "--record", str(tmp_path / "x.jsonl")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["spectui: --broadcast records every run to the live folder: drop --record"]


async def test_a_run_cut_short_is_left_as_stopped_when_the_next_one_begins(
    tmp_path: Path,
) -> None:
    first, second = tmp_path / "src-1.jsonl", tmp_path / "src-2.jsonl"
    await record_capture(first)
    await record_capture(second, capture="completion-ngram-simple-2.sse")
    live = tmp_path / "live"
    cut = Presenter(first, live / "20260101-100000-custom-ngram-simple.jsonl")
    cut.write(cut.line_of_token(20))  # the presenter re-ran before this one ended
    app = app_for(live)
    async with app.run_test(size=SIZE) as pilot:
        screen = screen_of(app)
        view = screen.query_one(TokenView)
        await until(pilot, lambda: len(view.model.tokens) == 21, "the cut run's tokens")
        assert screen.running
        Presenter(second, live / "20260101-100100-custom-ngram-simple.jsonl").write()
        await until(pilot, lambda: "run 2" in screen.banner.text, "the next run")
        await until(pilot, lambda: not screen.running, "its end")
        assert shown(view) == tokens_of(second)
        metrics = screen.query_one(MetricsPane)
        assert metrics.previous is not None
        assert metrics.previous.status == "stopped"


async def test_a_run_read_in_one_go_draws_its_tokens_per_second_plot(tmp_path: Path) -> None:
    # A follower joining after the run: the whole file arrives before the wide layout shows the
    # plot; the plot must still be drawn once shown.
    source = tmp_path / "src.jsonl"
    await record_capture(source)
    Presenter(source, tmp_path / "live" / "run.jsonl").write()
    app = app_for(tmp_path / "live")
    async with app.run_test(size=(140, 45)) as pilot:
        screen = screen_of(app)
        await until(pilot, lambda: screen.follower.state is FollowState.FINISHED, "the run")
        await until(pilot, lambda: not screen.running, "its end")
        plot = screen.query_one("#tps-plot")

        def drawn() -> int:
            lines = [plot.render_line(y).text for y in range(plot.size.height)]
            return sum(1 for line in lines if line.strip(" ─│┌┐└┘"))

        await until(pilot, lambda: plot.display and drawn() > 3, "the plot drawn")
