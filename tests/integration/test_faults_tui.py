"""Faults while the live TUI runs on a real llama-server (Pilot, headless): the app keeps running
and shows what went wrong, and no llama-server is left behind.

Each test drives `SpectuiApp` on a `LiveEngine` from `build_engine`, the way `spectui` does, and
checks what the screen shows (server bar, log view, answer pane), never how fast it shows it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import threading
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import psutil
import pytest
from textual import events
from textual.pilot import Pilot

from helpers.wait import await_until
from spectui.app_setup import build_engine, recorder
from spectui.config import Settings, state_dir
from spectui.core.engine.base import Engine
from spectui.core.events import ServerState
from spectui.core.llama import procs
from spectui.core.llama.binary import Capabilities
from spectui.core.llama.specconfig import SpecConfig
from spectui.core.prompts import BuiltinPrompt
from spectui.ui.apps.live import SpectuiApp
from spectui.ui.screens.main import MainScreen
from spectui.ui.screens.spec_picker import SpecPickerScreen

from .fakes import serve
from .outside import (
    AUTH_KEY as KEY,
)
from .outside import (
    CODE_PROMPT,
    FAST,
    OUTSIDE,
    launched_servers,
    outside_server,
    wait_healthy,
)

pytestmark = pytest.mark.server

GIVE_UP_S = 240.0
"""Only a guard against a hung test: nothing here measures time."""


def settings_for(model: Path, **fields: object) -> Settings:
    base: dict[str, object] = {
        "model": model,
        "spec_type": "ngram-simple",
        "ctx_size": 1024,
        "server_args": list(FAST),
    }
    base.update(fields)
    return Settings.model_validate(base)


@contextlib.asynccontextmanager
async def live_app(
    engine: Engine,
    settings: Settings,
    *,
    prompt: str | BuiltinPrompt | None = None,
    autorun: bool = False,
) -> AsyncIterator[tuple[SpectuiApp, Pilot[None]]]:
    """The app on ``engine`` under Pilot; the engine is closed afterwards, as `run_tui` does."""
    app = SpectuiApp(engine, settings, prompt=prompt, autorun=autorun)
    try:
        async with app.run_test(size=(110, 34)) as pilot:
            yield app, pilot
            assert app.is_running  # nothing above took the app down
    finally:
        await asyncio.wait_for(engine.aclose(), 60)
    assert procs.live_pids() == []


async def wait_for(pilot: Pilot[None], until: Callable[[], bool], what: str) -> None:
    await await_until(
        until, f"the app got there: {what}", give_up_s=GIVE_UP_S, pause=lambda: pilot.pause(0.05)
    )


def screen_of(app: SpectuiApp) -> MainScreen:
    screen = app.main_screen
    assert screen is not None
    return screen


def bar_text(app: SpectuiApp) -> str:
    return screen_of(app).server.bar.render().plain


def log_lines(app: SpectuiApp) -> list[str]:
    return [str(line) for line in screen_of(app).server.log_view.lines]


def state_is(app: SpectuiApp, state: ServerState) -> Callable[[], bool]:
    def check() -> bool:
        screen = app.main_screen
        return screen is not None and screen.operation is None and screen.state is state

    return check


def failed_with_log(app: SpectuiApp) -> None:
    """The server bar says failed, and the log view is open with the server's lines."""
    screen = screen_of(app)
    assert screen.state is ServerState.FAILED
    assert "failed" in bar_text(app)
    assert screen.server.log_visible
    assert log_lines(app)


def servers_of_this_process() -> list[psutil.Process]:
    """Running llama-servers spectui launched from this process."""
    return launched_servers(exclude=OUTSIDE)


# -- the server fails ---------------------------------------------------------------------------


async def test_server_exits_during_load(gemma_model: Path, tmp_path: Path) -> None:
    truncated = tmp_path / "truncated.gguf"
    with gemma_model.open("rb") as source:
        truncated.write_bytes(source.read(1 << 20))  # a valid header, then nothing
    settings = settings_for(truncated)
    async with live_app(build_engine(settings), settings, autorun=True) as (app, pilot):
        await wait_for(pilot, state_is(app, ServerState.FAILED), "failed")
        failed_with_log(app)
        assert "while loading" in bar_text(app)
        assert any("failed to load model" in line for line in log_lines(app))
        assert procs.live_pids() == []
        await pilot.press("r")  # refused with a hint, not a crash
        await pilot.press("R")  # retried: fails the same way
        await wait_for(pilot, state_is(app, ServerState.FAILED), "failed again")
        failed_with_log(app)


async def test_server_killed_mid_stream_then_retry(gemma_model: Path) -> None:
    settings = settings_for(gemma_model, spec_type="none", n_predict=4000)
    engine = build_engine(settings)
    async with live_app(engine, settings, prompt=CODE_PROMPT, autorun=True) as (app, pilot):
        screen = screen_of(app)
        await wait_for(pilot, lambda: len(screen.answer.view.model.tokens) >= 5, "tokens")
        pid = engine.info.pid
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        await wait_for(pilot, lambda: screen.state is ServerState.FAILED, "failed")
        await wait_for(pilot, lambda: not screen.running, "run over")
        failed_with_log(app)
        assert "exited" in bar_text(app)
        assert screen.answer.border_subtitle is not None
        assert "failed" in str(screen.answer.border_subtitle)
        assert screen.metrics.current is not None
        assert screen.metrics.current.metrics.tokens >= 5  # what arrived before is kept
        # R brings a new server up and the app carries on.
        await pilot.press("R")
        await wait_for(pilot, state_is(app, ServerState.READY), "ready again")
        assert [p.pid for p in servers_of_this_process()] == [engine.info.pid]
        assert not screen.server.log_visible  # the failure's log is put away on recovery


async def test_incompatible_draft_model_on_switch(gemma_model: Path, smollm_model: Path) -> None:
    settings = settings_for(gemma_model)
    engine = build_engine(settings)
    async with live_app(engine, settings) as (app, pilot):
        await wait_for(pilot, state_is(app, ServerState.READY), "ready")
        screen = screen_of(app)
        spec = SpecConfig(types=("draft-simple",), draft_model=smollm_model)
        screen._start_operation("switch", spec, adopt=False)  # what the picker's choice does
        await wait_for(pilot, state_is(app, ServerState.FAILED), "failed")
        failed_with_log(app)
        assert "did not enable" in bar_text(app)
        assert procs.live_pids() == []  # the server that ignored its draft model was stopped


async def test_refused_switch_keeps_the_running_server(gemma_model: Path, tmp_path: Path) -> None:
    not_gguf = tmp_path / "draft.gguf"
    not_gguf.write_text("not a model")
    settings = settings_for(gemma_model)
    engine = build_engine(settings)
    async with live_app(engine, settings) as (app, pilot):
        await wait_for(pilot, state_is(app, ServerState.READY), "ready")
        pid = engine.info.pid
        screen = screen_of(app)
        spec = SpecConfig(types=("draft-simple",), draft_model=not_gguf)
        screen._start_operation("switch", spec, adopt=False)
        await wait_for(pilot, lambda: screen.operation is None, "switch over")
        assert engine.info.pid == pid  # a bad choice did not cost the working server
        assert procs.live_pids() == [pid]
        # ...and the screen says so: refused in a notification, the bar still ready.
        assert any("GGUF" in str(n.message) for n in app._notifications)
        assert screen.state is ServerState.READY
        assert "failed" not in bar_text(app) and "GGUF" not in bar_text(app)
        assert not screen.running  # a refused switch does not start a run either


# -- attached servers that misbehave -------------------------------------------------------------


async def test_url_that_is_not_a_llama_server() -> None:
    with serve("not-llama") as url:
        settings = Settings(url=url)
        async with live_app(build_engine(settings), settings, autorun=True) as (app, pilot):
            await wait_for(pilot, state_is(app, ServerState.FAILED), "failed")
            failed_with_log(app)
            assert "not a llama-server" in bar_text(app)


async def test_stalled_stream() -> None:
    with serve("stall") as url:
        settings = Settings(url=url, stall_timeout_s=1.0)
        engine = build_engine(settings)
        async with live_app(engine, settings, autorun=True) as (app, pilot):
            screen = screen_of(app)
            await wait_for(pilot, lambda: screen.metrics.current is not None, "run started")
            await wait_for(pilot, lambda: not screen.running, "run over")
            assert "stall" in str(screen.answer.border_subtitle)
            assert screen.answer.view.model.tokens  # the token before the stall is shown
            # The server itself is fine: the app is ready for another run.
            await wait_for(pilot, state_is(app, ServerState.READY), "ready")


@pytest.mark.parametrize(("key", "says"), [(None, "needs an API key"), ("wrong-3e1f", "rejected")])
async def test_401(authed_server: str, key: str | None, says: str) -> None:
    settings = Settings(url=authed_server, api_key=key)
    async with live_app(build_engine(settings), settings, autorun=True) as (app, pilot):
        await wait_for(pilot, state_is(app, ServerState.FAILED), "failed")
        failed_with_log(app)
        assert says in bar_text(app)
        if key is not None:
            assert key not in app.export_screenshot()


async def test_api_key_never_on_screen_or_in_sessions(authed_server: str, tmp_path: Path) -> None:
    sessions = tmp_path / "sessions"
    settings = Settings(url=authed_server, api_key=KEY, sessions_dir=sessions, n_predict=24)
    engine = recorder(build_engine(settings), settings, recording=False)
    prompt = f"Repeat after me: {KEY}"
    async with live_app(engine, settings, prompt=prompt) as (app, pilot):
        screen = screen_of(app)
        await wait_for(pilot, state_is(app, ServerState.READY), "ready")
        await pilot.press("ctrl+r", "r")  # record, then run
        await wait_for(pilot, lambda: screen.metrics.current is not None, "run started")
        await wait_for(pilot, lambda: not screen.running, "run over")
        assert screen.metrics.current is not None
        assert screen.metrics.current.metrics.tokens == 24  # the key was accepted
        await pilot.press("l")  # the log view too (attached: nothing of the server's)
        await pilot.pause()
        shot = app.export_screenshot()
        assert KEY not in shot
    files = list(sessions.glob("*.jsonl"))
    assert files
    for path in files:
        assert KEY.encode() not in path.read_bytes()


async def test_adopting_a_server_with_its_key_on_the_command_line(
    llama_binary: Path, gemma_model: Path, tmp_path: Path
) -> None:
    """The key sits in the outside server's argv; spectui relaunches that argv as its own."""
    sessions = tmp_path / "sessions"
    with outside_server(llama_binary, gemma_model, "--api-key", KEY) as (url, pid):
        OUTSIDE.add(pid)
        settings = Settings(url=url, api_key=KEY, sessions_dir=sessions, n_predict=8)
        engine = recorder(build_engine(settings), settings)
        await asyncio.to_thread(wait_healthy, url, GIVE_UP_S)  # loaded before spectui attaches
        async with live_app(engine, settings, prompt="Hello") as (app, pilot):
            screen = screen_of(app)
            await wait_for(pilot, state_is(app, ServerState.READY), "attached")
            assert engine.info.needs_adopt
            # What confirming the adopt question does.
            screen._start_operation("switch", SpecConfig(types=("ngram-simple",)), adopt=True)
            await wait_for(pilot, state_is(app, ServerState.READY), "adopted")
            assert engine.info.mode == "launched"
            await wait_for(pilot, lambda: not screen.running, "re-run over")
            assert screen.metrics.current is not None
            assert screen.metrics.current.metrics.tokens == 8
            await pilot.press("l")
            await pilot.pause()
            assert log_lines(app)
            assert not any(KEY in line for line in log_lines(app))
            assert KEY not in app.export_screenshot()
    OUTSIDE.discard(pid)
    written = [p for p in (state_dir() / "logs").glob("*.log")] + list(sessions.glob("*"))
    assert len(written) >= 2  # the relaunched server's log, the run's session
    for path in written:
        assert KEY.encode() not in path.read_bytes(), path


# -- the user hammers the spec-switch key --------------------------------------------------------


def pick(spec_type: str, caps: Capabilities) -> tuple[str, ...]:
    """Keys that choose ``spec_type`` in the spec picker, wherever its cursor starts."""
    return ("t", "home", *["down"] * caps.spec_types.index(spec_type), "enter")


class ServerCounter:
    """Samples this process's llama-server children in a thread; keeps the most seen at once."""

    def __init__(self) -> None:
        self.most = 0
        """The most servers seen running at once."""
        self.pids: set[int] = set()
        """Every server seen."""
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            servers = servers_of_this_process()
            self.most = max(self.most, len(servers))
            self.pids.update(p.pid for p in servers)
            self.samples += 1
            self._stop.wait(0.02)

    def __enter__(self) -> ServerCounter:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join()


def burst(app: SpectuiApp, keys: tuple[str, ...]) -> None:
    """Keys arriving in one burst, as from tmux or over SSH: none waits for the one before.

    (`Pilot.press` waits for the app to go idle after every key, which is not hammering.)
    """
    for key in keys:
        event = events.Key(key, key if len(key) == 1 else None)
        event.set_sender(app)
        app.post_message(event)


async def test_hammering_the_switch_key_never_runs_two_servers(
    gemma_model: Path, caps: Capabilities
) -> None:
    settings = settings_for(gemma_model, n_predict=8)
    engine = build_engine(settings)
    async with live_app(engine, settings, prompt=CODE_PROMPT, autorun=True) as (app, pilot):
        screen = screen_of(app)
        await wait_for(pilot, state_is(app, ServerState.READY), "ready")
        with ServerCounter() as counter:
            # t opens the picker, enter switches, R restarts, r runs. Each round starts a switch
            # (key by key, so it surely starts on a loaded machine too), then hammers while it
            # is in flight, when every new operation must be refused.
            for target, other in [("ngram-mod", "none"), ("ngram-simple", "ngram-mod")]:
                await wait_for(pilot, lambda: screen.operation is None, "no operation")
                await pilot.press(*pick(target, caps))
                burst(app, ("r", "R", *pick(other, caps), "r"))
                await pilot.pause()  # that burst handled: more keys while the switch is in flight
                burst(app, ("t", "enter", "R", "r", "t", "down", "enter"))
                await pilot.pause()  # (the burst is handled before looking at the screen)
                if isinstance(app.screen, SpecPickerScreen):
                    await pilot.press("escape")
            await wait_for(
                pilot, lambda: screen.operation is None and not screen.running, "settled"
            )
            await wait_for(pilot, state_is(app, ServerState.READY), "ready")
        assert counter.samples > 10
        assert counter.most == 1
        assert len(counter.pids) >= 3, counter.pids  # the bursts did switch and restart
        (server,) = servers_of_this_process()
        assert server.pid == engine.info.pid
        spec = engine.info.spec
        assert spec is not None
        cmdline = server.cmdline()
        shown = cmdline[cmdline.index("--spec-type") + 1] if "--spec-type" in cmdline else "none"
        assert shown == spec.label
        # Launched servers listen on loopback only, unless the user asked otherwise.
        assert cmdline[cmdline.index("--host") + 1] == "127.0.0.1"
        listening = {c.laddr.ip for c in server.net_connections() if c.status == "LISTEN"}
        assert listening == {"127.0.0.1"}
