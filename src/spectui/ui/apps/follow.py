"""The TUI that follows a presenter's runs: `spectui follow [DIR|FILE]` (and each viewer of
`spectui share`).

`FollowApp` is the live app with a follow screen in place of the main screen, so themes, keys
and quitting behave exactly as live; there is no server to close, and no command in the palette
that would run, stop or switch anything.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

from textual.app import SystemCommand
from textual.screen import Screen

from spectui.config import Settings
from spectui.core.sessions.follow import FollowEngine
from spectui.core.sessions.tail import FollowOptions, SessionFollower
from spectui.ui.apps.base import SpectuiBaseApp
from spectui.ui.apps.live import SpectuiApp
from spectui.ui.screens.follow import FollowScreen


class FollowApp(SpectuiApp):
    """The spectui app drawing the runs a `SessionFollower` finds."""

    def __init__(self, engine: FollowEngine, settings: Settings) -> None:
        super().__init__(engine, settings)
        self.follow = engine

    def show_first_screen(self) -> None:
        self.push_screen(FollowScreen(self.follow))

    def get_system_commands(self, screen: Screen[object]) -> Iterable[SystemCommand]:
        # The base app's (themes, keys, screenshot, quit), not the live app's Run / Switch / ...
        yield from SpectuiBaseApp.get_system_commands(self, screen)
        main = self.main_screen
        if main is not None:
            yield SystemCommand("Log", "What is being followed (l)", main.action_toggle_log)
            yield SystemCommand("Help", "Keys, legend and metrics (?)", main.action_help)


def follow_engine(options: FollowOptions) -> FollowEngine:
    """The engine a follower draws from (its notes and states are wired by the screen)."""
    return FollowEngine(SessionFollower.from_options(options))


def run_follow_tui(options: FollowOptions, settings: Settings) -> int:
    """Follow until the user quits (or the terminal goes away); returns the exit status."""
    app = FollowApp(follow_engine(options), settings)
    return asyncio.run(app.run_until_quit())
