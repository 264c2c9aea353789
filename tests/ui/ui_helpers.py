"""Helpers for the TUI tests (a module of its own: conftest files are not for importing)."""

from __future__ import annotations

from collections.abc import Callable

from textual.pilot import Pilot

from spectui.ui.apps.live import SpectuiApp
from spectui.ui.apps.replay import ReplayApp
from spectui.ui.screens.main import MainScreen
from spectui.ui.screens.replay import ReplayScreen


async def settle(pilot: Pilot[None], until: Callable[[], bool], rounds: int = 500) -> None:
    """Let the app work until ``until()`` holds; fail after ``rounds`` idle turns."""
    for _ in range(rounds):
        if until():
            await pilot.pause()
            return
        await pilot.pause()
    raise AssertionError("the app never reached the expected state")


def main_screen(app: SpectuiApp) -> MainScreen:
    screen = app.main_screen
    assert screen is not None
    return screen


def replay_screen(app: ReplayApp) -> ReplayScreen:
    screen = app.main_screen
    assert screen is not None
    return screen
