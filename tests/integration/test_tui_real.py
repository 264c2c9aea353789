"""The live TUI on the real llama-server (Pilot): colours attributed, a spec switch that leaves
exactly one server, a server killed mid-run shown as failed, quit leaves no server."""

from __future__ import annotations

import os
import signal
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import psutil
import pytest
from textual.message import Message
from textual.pilot import Pilot
from textual.widgets import OptionList

from helpers.wait import await_until
from spectui.app_setup import build_engine
from spectui.config import Settings
from spectui.core.events import ServerState, TokenOrigin
from spectui.core.prompts import builtin_prompt
from spectui.ui.apps.live import SpectuiApp
from spectui.ui.messages import RunEnded, TokensArrived
from spectui.ui.screens.main import MainScreen
from spectui.ui.screens.spec_picker import SpecPickerScreen
from spectui.ui.widgets.tokens import TokenView

from .outside import launched_servers

pytestmark = pytest.mark.server

SIZE = (120, 40)


def my_servers() -> list[psutil.Process]:
    """llama-server processes started by this test process (not other users' servers)."""
    return launched_servers()


async def until(
    pilot: Pilot[None],
    condition: Callable[[], bool],
    *,
    seconds: float = 600,  # a hang guard (a loaded machine can take minutes), not a speed limit
    watch: Callable[[], None] | None = None,
) -> None:
    """Let the app work until ``condition()`` holds (real server: wall-clock bound, no timing
    assertion), calling ``watch`` on every turn."""

    def check() -> bool:
        if watch is not None:
            watch()
        return condition()

    await await_until(
        check,
        "the app reached the expected state",
        give_up_s=seconds,
        pause=lambda: pilot.pause(0.05),
    )


def app_for(gemma_model: Path, spec_type: str, prompt_key: str = "code-edit") -> SpectuiApp:
    settings = Settings(model=gemma_model, spec_type=spec_type, n_predict=96)
    prompt = builtin_prompt(prompt_key)
    return SpectuiApp(build_engine(settings), settings, prompt=prompt.text, autorun=True)


@asynccontextmanager
async def closing(app: SpectuiApp) -> AsyncIterator[None]:
    """Close the engine even when an assertion fails inside the app (no server may leak)."""
    try:
        yield
    finally:
        assert app.engine is not None
        await app.engine.aclose()


def screen_of(app: SpectuiApp) -> MainScreen:
    assert app.main_screen is not None
    return app.main_screen


def idle(app: SpectuiApp, runs: int) -> Callable[[], bool]:
    def check() -> bool:
        screen = app.main_screen
        return (
            screen is not None
            and screen.state is ServerState.READY
            and not screen.running
            and screen.operation is None
            and sum(isinstance(m, RunEnded) for m in posted_by[id(app)]) >= runs
        )

    return check


posted_by: dict[int, list[Message]] = {}


async def test_run_colours_switch_and_quit(gemma_model: Path) -> None:
    app = app_for(gemma_model, "ngram-simple")
    posted: list[Message] = posted_by.setdefault(id(app), [])
    async with closing(app), app.run_test(size=SIZE, message_hook=posted.append) as pilot:
        await until(pilot, idle(app, 1))
        finished = [m for m in posted if isinstance(m, RunEnded)]
        summary = finished[0].summary.metrics
        arrived = [t for m in posted if isinstance(m, TokensArrived) for t in m.tokens]
        view = app.screen.query_one(TokenView)
        # Every token the engine attributed is on screen, with its origin.
        assert [(t.text, t.origin) for t in view.model.tokens] == [
            (t.text, t.origin) for t in arrived
        ]
        assert len(arrived) == summary.tokens
        assert view.model.draft_count == summary.accepted > 0
        assert {t.origin for t in arrived} == {TokenOrigin.DRAFT, TokenOrigin.TARGET}
        first_pid = app.engine.info.pid  # type: ignore[union-attr]  # built with an engine
        assert [p.pid for p in my_servers()] == [first_pid]
        assert app.engine.info.synthetic_acceptance  # type: ignore[union-attr]  # built with an engine; it lists the flag

        # Switch to `none` through the picker; never more than one server meanwhile.
        await pilot.press("t")
        await until(pilot, lambda: isinstance(app.screen, SpecPickerScreen))
        options = app.screen.query_one(OptionList)
        options.highlighted = list(app.engine.spec_types).index("none")  # type: ignore[union-attr]  # built with an engine
        await pilot.press("enter")
        counts: list[int] = []
        await until(pilot, idle(app, 2), watch=lambda: counts.append(len(my_servers())))
        assert max(counts) <= 1
        new_pid = app.engine.info.pid  # type: ignore[union-attr]  # built with an engine
        assert new_pid != first_pid
        assert [p.pid for p in my_servers()] == [new_pid]
        assert app.engine.info.spec.types == ("none",)  # type: ignore[union-attr]  # built with an engine
        rerun = [m for m in posted if isinstance(m, RunEnded)][1].summary.metrics
        assert rerun.drafted == 0 and rerun.tokens == summary.tokens
        # The previous run's numbers stay next to the current ones.
        assert screen_of(app).metrics.previous is not None

        await pilot.press("q")
    assert my_servers() == []


async def test_server_killed_mid_run_shows_failed(gemma_model: Path) -> None:
    settings = Settings(model=gemma_model, spec_type="none", n_predict=4000)
    app = SpectuiApp(build_engine(settings), settings, prompt="Count: 1, 2, 3,", autorun=True)
    posted: list[Message] = []
    async with closing(app), app.run_test(size=SIZE, message_hook=posted.append) as pilot:
        await until(pilot, lambda: any(isinstance(m, TokensArrived) for m in posted))
        pid = app.engine.info.pid  # type: ignore[union-attr]  # built with an engine
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        screen = screen_of(app)
        await until(pilot, lambda: screen.state is ServerState.FAILED and not screen.running)
        assert "failed" in str(screen.server.bar.render())
        await pilot.press("q")
    assert my_servers() == []
