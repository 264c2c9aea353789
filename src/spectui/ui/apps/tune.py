"""`spectui tune --tui`: the Tune screen in the spectui app (themes, quit, signals).

Quitting (the base app's) cancels the race before the engine (and its server) is closed, so a
cut-short run is never recorded as a result; ``--resume`` continues the file.
"""

from __future__ import annotations

from spectui.config import Settings
from spectui.core.engine.base import Engine, RunSource
from spectui.ui.apps.base import SpectuiBaseApp
from spectui.ui.screens.tune import TuneScreen, TuneSource


class TuneApp(SpectuiBaseApp):
    """The spectui app showing one tune."""

    def __init__(self, engine: RunSource, settings: Settings, source: TuneSource) -> None:
        super().__init__(engine, settings)
        self.source = source

    def show_first_screen(self) -> None:
        self.push_screen(TuneScreen(self.source))


async def run_tune_tui(engine: Engine, settings: Settings, source: TuneSource) -> int:
    """Run the tune in the TUI; the engine is closed on every way out."""
    return await TuneApp(engine, settings, source).run_until_quit()
