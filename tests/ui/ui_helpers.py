"""Helpers for the TUI tests (a module of its own: conftest files are not for importing)."""

from __future__ import annotations

from collections.abc import Callable

from textual.pilot import Pilot

from helpers.engines import FakeEngine
from helpers.wait import await_until
from spectui.core.events import ServerState
from spectui.ui.apps.live import SpectuiApp
from spectui.ui.apps.replay import ReplayApp
from spectui.ui.screens.main import MainScreen
from spectui.ui.screens.replay import ReplayScreen


async def settle(
    pilot: Pilot[None], until: Callable[[], object], what: str = "the expected state"
) -> None:
    """Let the app work until ``until()`` holds, then one more turn (`helpers.wait`: the
    deadline only guards against a hang)."""
    await await_until(until, f"the app reached {what}", pause=pilot.pause)
    await pilot.pause()


def main_screen(app: SpectuiApp) -> MainScreen:
    screen = app.main_screen
    assert screen is not None
    return screen


def replay_screen(app: ReplayApp) -> ReplayScreen:
    screen = app.main_screen
    assert screen is not None
    return screen


def idle_after(app: SpectuiApp, runs: int) -> Callable[[], bool]:
    """Whether the app on a fake engine has made ``runs`` runs and is idle: ready, nothing
    running, no server operation in flight (for `settle`)."""

    def check() -> bool:
        screen = app.main_screen
        engine = app.engine
        assert isinstance(engine, FakeEngine)
        return (
            screen is not None
            and len(engine.runs) == runs
            and not screen.running
            and screen.operation is None
            and screen.state is ServerState.READY
        )

    return check
