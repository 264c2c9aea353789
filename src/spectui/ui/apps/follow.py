"""The TUI that follows a presenter's runs: `spectui follow [DIR|FILE]` (and each viewer of
`spectui share`).

`FollowApp` shows a follow screen where the live app shows its main screen; themes, keys and
quitting are the base app's, as live; there is no server to close, and no command in the palette
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
from spectui.ui.screens.follow import FollowScreen


class FollowApp(SpectuiBaseApp):
    """The spectui app drawing the runs a `SessionFollower` finds."""

    def __init__(self, engine: FollowEngine, settings: Settings) -> None:
        super().__init__(engine, settings)
        self.follow = engine

    def show_first_screen(self) -> None:
        self.push_screen(FollowScreen(self.follow))

    @property
    def main_screen(self) -> FollowScreen | None:
        for screen in self.screen_stack:
            if isinstance(screen, FollowScreen):
                return screen
        return None

    def get_system_commands(self, screen: Screen[object]) -> Iterable[SystemCommand]:
        # The base app's (themes, keys, screenshot, quit), and nothing that would run, stop or
        # switch anything.
        yield from super().get_system_commands(screen)
        main = self.main_screen
        if main is not None:
            yield SystemCommand("Log", "What is being followed (l)", main.action_toggle_log)
            yield SystemCommand("Help", "Keys, legend and metrics (?)", main.action_help)

    def quitting(self) -> None:
        main = self.main_screen
        if main is not None:
            main.server.bar.set_detail("stopping…")


def follow_engine(options: FollowOptions) -> FollowEngine:
    """The engine a follower draws from (its notes and states are wired by the screen)."""
    return FollowEngine(SessionFollower.from_options(options))


def run_follow_tui(options: FollowOptions, settings: Settings) -> int:
    """Follow until the user quits (or the terminal goes away); returns the exit status."""
    app = FollowApp(follow_engine(options), settings)
    return asyncio.run(app.run_until_quit())
