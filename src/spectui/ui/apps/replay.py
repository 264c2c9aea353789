"""The TUI over recorded sessions: `spectui replay FILE [FILE2]`, and the SVG export.

`ReplayApp` shows a replay screen where the live app shows its main screen; themes, keys and
quitting are the base app's, as live. `replay_screenshot` plays a session as fast as possible in a
headless app and returns Textual's SVG screenshot of the finished screen.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

from textual.app import SystemCommand
from textual.pilot import Pilot
from textual.screen import Screen

from spectui.config import Settings
from spectui.core.errors import SpectuiError
from spectui.core.sessions.file import Session
from spectui.core.sessions.replay import ReplayClock, ReplayEngine
from spectui.ui.apps.base import SpectuiBaseApp, headless_svg
from spectui.ui.screens.replay import ReplayScreen
from spectui.ui.screens.replay_pair import ReplayPairScreen

SCREENSHOT_SIZE = (120, 40)
"""Terminal size of an SVG export: wide enough for the full charts."""

SCREENSHOT_ROUNDS = 5000
"""Idle turns a headless replay gets to finish before the export gives up."""


class ReplayError(SpectuiError):
    """A headless replay did not get to its end."""

    title = "Replay failed"


class ReplayApp(SpectuiBaseApp):
    """The spectui app playing one session, or two side by side."""

    def __init__(self, engines: list[ReplayEngine], settings: Settings) -> None:
        super().__init__(engines[0], settings)
        self.replays = engines

    def show_first_screen(self) -> None:
        if len(self.replays) == 1:
            self.push_screen(ReplayScreen(self.replays[0]))
        else:
            self.push_screen(ReplayPairScreen(self.replays))

    @property
    def main_screen(self) -> ReplayScreen | None:
        """The one-session replay screen (None for a pair)."""
        for screen in self.screen_stack:
            if isinstance(screen, ReplayScreen):
                return screen
        return None

    def get_system_commands(self, screen: Screen[object]) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        main = self.main_screen
        if main is not None:
            yield SystemCommand("Replay", "Play the recording again (r)", main.action_run)
            yield SystemCommand("Pause", "Pause or resume (space)", main.action_toggle_pause)
            yield SystemCommand(
                "Log", "What was recorded about the server (l)", main.action_toggle_log
            )
            yield SystemCommand("Help", "Keys, legend and metrics (?)", main.action_help)

    def quitting(self) -> None:
        main = self.main_screen
        if main is not None:
            main.server.bar.set_detail("stopping…")


def replay_engines(sessions: list[Session], speed: float | None) -> list[ReplayEngine]:
    """One engine with its own clock, or engines sharing one clock for side by side."""
    if len(sessions) == 1:
        return [ReplayEngine(sessions[0], clock=ReplayClock(speed))]
    return ReplayEngine.pair(sessions, speed)


def run_replay_tui(sessions: list[Session], settings: Settings, *, speed: float | None) -> int:
    """Play ``sessions`` in the TUI until the user quits; returns the exit status."""
    app = ReplayApp(replay_engines(sessions, speed), settings)
    return asyncio.run(app.run_until_quit())


async def replay_screenshot(
    session: Session, settings: Settings, size: tuple[int, int] = SCREENSHOT_SIZE
) -> str:
    """The SVG of the full TUI once ``session`` has played to its end (headless, at max speed)."""
    engine = ReplayEngine(session, clock=ReplayClock(None))
    app = ReplayApp([engine], settings)

    async def finished(pilot: Pilot[object]) -> bool:
        screen = app.main_screen
        return screen is not None and engine.finished and not screen.running

    async def replot(pilot: Pilot[object]) -> None:
        if (screen := app.main_screen) is not None:
            screen.charts.replot()
        await pilot.pause()

    shot = await headless_svg(
        app,
        finished,
        title=session.header.title,
        size=size,
        rounds=SCREENSHOT_ROUNDS,
        before=replot,
    )
    if shot is None:
        raise ReplayError(f"{session.name}: the replay did not finish; no screenshot taken")
    return shot
