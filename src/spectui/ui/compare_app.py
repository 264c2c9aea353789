"""`spectui compare --tui`: the Compare screen in the spectui app (themes, quit, signals).

A thin subclass of `SpectuiApp`: instead of the live screen it shows a comparison, and quitting
cancels the comparison before the engine (and its server) is closed, so a cut-short run is never
recorded as a result.
"""

from __future__ import annotations

from pathlib import Path

from textual import on
from textual.events import Mount

from spectui.config import Settings
from spectui.core.engine import Engine
from spectui.ui.app import SpectuiApp, run_tui_async
from spectui.ui.screens.compare import CompareScreen, CompareSource


class CompareApp(SpectuiApp):
    """The spectui app showing one comparison."""

    def __init__(
        self,
        engine: Engine,
        settings: Settings,
        source: CompareSource,
        results: Path | None = None,
    ) -> None:
        super().__init__(engine, settings)
        self.source = source
        self.results = results

    @on(Mount)
    def _show_comparison(self, event: Mount) -> None:
        # Textual runs every class's on_mount along the MRO: stop before SpectuiApp's, which
        # would push the live screen on top.
        event.prevent_default()
        self.push_screen(CompareScreen(self.source, self.results))

    async def action_quit(self) -> None:
        """Stop the comparison, then the server, then leave."""
        self.workers.cancel_all()
        if self.engine is not None:
            await self.engine.aclose()
        self.exit()


async def run_compare_tui(
    engine: Engine, settings: Settings, source: CompareSource, results: Path | None = None
) -> int:
    """Run the comparison in the TUI; the engine is closed on every way out."""
    return await run_tui_async(CompareApp(engine, settings, source, results))
