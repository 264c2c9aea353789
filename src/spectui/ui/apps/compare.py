"""`spectui compare --tui`: the Compare screen in the spectui app (themes, quit, signals).

Instead of the live screen it shows a comparison; quitting (the base app's) cancels the
comparison before the engine (and its server) is closed, so a cut-short run is never recorded
as a result.
"""

from __future__ import annotations

from pathlib import Path

from spectui.config import Settings
from spectui.core.engine.base import Engine, RunSource
from spectui.ui.apps.base import SpectuiBaseApp
from spectui.ui.screens.compare import CompareScreen, CompareSource


class CompareApp(SpectuiBaseApp):
    """The spectui app showing one comparison."""

    def __init__(
        self,
        engine: RunSource,
        settings: Settings,
        source: CompareSource,
        results: Path | None = None,
    ) -> None:
        super().__init__(engine, settings)
        self.source = source
        self.results = results

    def show_first_screen(self) -> None:
        self.push_screen(CompareScreen(self.source, self.results))


async def run_compare_tui(
    engine: Engine, settings: Settings, source: CompareSource, results: Path | None = None
) -> int:
    """Run the comparison in the TUI; the engine is closed on every way out."""
    return await CompareApp(engine, settings, source, results).run_until_quit()
