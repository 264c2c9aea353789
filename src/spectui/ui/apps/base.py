"""What every spectui app shares: themes, quitting, signals and the engine's end.

`SpectuiApp` (live), `ReplayApp` and `CompareApp` differ only in the first screen they show
(`show_first_screen`) and what quitting says while it stops; `run` runs any of them under
`spectui.lifecycle`, so quitting, SIGHUP and SIGTERM close the engine the same way everywhere.
"""

from __future__ import annotations

import gc
from collections.abc import Awaitable, Callable
from typing import Any, ClassVar

from textual.app import App
from textual.binding import Binding, BindingType
from textual.pilot import Pilot

from spectui.config import Settings
from spectui.core.engine.base import RunSource
from spectui.lifecycle import run_app
from spectui.ui.themes import (
    DEFAULT_THEME,
    discover_themes,
    shipped_theme_dir,
    spec_variable_defaults,
    user_theme_dir,
)


async def headless_svg(
    app: App[Any],
    ready: Callable[[Pilot[object]], Awaitable[bool]],
    *,
    title: str,
    size: tuple[int, int],
    rounds: int,
    before: Callable[[Pilot[object]], Awaitable[None]] | None = None,
) -> str | None:
    """Run ``app`` headless until ``ready`` (asked once per idle turn, ``rounds`` turns at
    most), then ``before`` and its SVG screenshot; None when it never got ready."""
    shots: list[str] = []

    async def pilot_run(pilot: Pilot[object]) -> None:
        try:
            for _ in range(rounds):
                if await ready(pilot):
                    if before is not None:
                        await before(pilot)
                    shots.append(app.export_screenshot(title=title))
                    break
                await pilot.pause()
        finally:
            app.exit()

    await app.run_async(headless=True, size=size, auto_pilot=pilot_run)
    return shots[0] if shots else None


GC_YOUNG_THRESHOLD = 10_000
"""Net allocations between two collections of the youngest generation while an app runs."""


class SpectuiBaseApp(App[None]):
    """Themes, quitting and the engine; subclasses say which screen comes first."""

    CSS_PATH = "app.tcss"
    TITLE = "spectui"
    BINDINGS: ClassVar[list[BindingType]] = [Binding("ctrl+q", "quit", "Quit", show=False)]

    def __init__(self, engine: RunSource | None, settings: Settings) -> None:
        super().__init__()
        self.engine = engine
        self.settings = settings
        self._theme_problems = self._load_themes(settings.theme)
        self._gc_threshold: tuple[int, int, int] | None = None
        """The collector's thresholds before the app tuned them (put back when it ends)."""

    def _load_themes(self, wanted: str) -> list[str]:
        """Register shipped and user themes, pick ``wanted``; return problems to show."""
        themes, problems = discover_themes(shipped_theme_dir(), user_theme_dir())
        for theme in themes:
            self.register_theme(theme)
        if wanted in self.available_themes:
            self.theme = wanted
        else:
            problems.append(f"unknown theme {wanted!r}; using {DEFAULT_THEME}")
            if DEFAULT_THEME in self.available_themes:
                self.theme = DEFAULT_THEME
        return problems

    def get_theme_variable_defaults(self) -> dict[str, str]:
        # Any theme (a built-in Textual one picked from the palette too) gets token colours.
        return spec_variable_defaults(self.current_theme)

    def on_mount(self) -> None:
        # Subclasses do not define on_mount (Textual would run each class's in turn): they say
        # what to show in `show_first_screen`.
        for problem in self._theme_problems:
            self.notify(problem, title="Theme", severity="warning", timeout=10)
        self.show_first_screen()

    def show_first_screen(self) -> None:
        """Push the app's first screen."""
        raise NotImplementedError

    def on_ready(self) -> None:
        # Start-up leaves objects that live as long as the app (Textual's DOM and styles, the
        # pydantic schemas, every module). Frozen after the first frame, a full collection no
        # longer walks them: that walk paused the screen 30-40 ms every few thousand tokens.
        gc.freeze()
        # And the youngest generation is collected every 10,000 net allocations, not 700: each
        # frame and message allocates thousands of short-lived objects, and most are freed by
        # their reference count before a later collection would walk them (the collector's
        # CPU at 50 tok/s: 3.4 -> 1.5 ms/s; a pause is still ~4 ms, far below a frame).
        self._gc_threshold = gc.get_threshold()
        gc.set_threshold(GC_YOUNG_THRESHOLD, *self._gc_threshold[1:])

    def on_unmount(self) -> None:
        gc.unfreeze()  # (an app run inside a longer-lived process, e.g. under a test runner)
        if self._gc_threshold is not None:
            gc.set_threshold(*self._gc_threshold)

    def quitting(self) -> None:
        """Say on screen that spectui is stopping (the server may take a moment)."""

    async def action_quit(self) -> None:
        """Stop what runs (a cut-short run is never recorded as a result), then the server,
        then leave."""
        self.quitting()
        self.workers.cancel_all()
        if self.engine is not None:
            await self.engine.aclose()
        self.exit()

    async def run_until_quit(self, *, headless: bool = False) -> int:
        """Run until the user quits or a signal ends it; the engine is closed on every exit."""
        return await run_app(self, self.engine, headless=headless)
