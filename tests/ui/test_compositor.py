"""The lean compositor draws only what changed, and what it draws is the screen: every partial
update, played into a terminal emulator (pyte), leaves the terminal showing exactly what a full
render of the screen shows at that moment. (Textual's own compositor, under SPECTUI_STOCK=1,
must pass the same test.)"""

from __future__ import annotations

import asyncio

import pyte
import pytest
from textual._compositor import Compositor, CompositorUpdate
from textual.pilot import Pilot

from helpers.engines import FakeEngine
from helpers.wait import await_until
from spectui.config import Settings
from spectui.ui.apps.live import SpectuiApp
from spectui.ui.compositor import lean_compositor_enabled
from spectui.ui.lean_compositor import LeanCompositor

from .ui_helpers import main_screen, settle

SIZE = (100, 30)


def full_render(app: SpectuiApp) -> list[str]:
    strips = app.screen._compositor.render_strips()
    return [strip.text.ljust(SIZE[0]) for strip in strips]


async def drawn_whole(pilot: Pilot[None], terminal: pyte.Screen, when: str) -> None:
    """Wait until the terminal shows what a full render of the screen shows."""
    app = pilot.app
    assert isinstance(app, SpectuiApp)
    await await_until(
        lambda: terminal.display == full_render(app),
        f"the partial updates drew the whole screen ({when})",
        pause=pilot.pause,
        show=lambda: "\n".join(
            f"{n}: {seen!r} != {whole!r}"
            for n, (seen, whole) in enumerate(zip(terminal.display, full_render(app), strict=True))
            if seen != whole
        ),
    )


@pytest.mark.parametrize("theme", ["spectui-dark", "spectui-light"])
async def test_partial_updates_leave_the_terminal_equal_to_a_full_render(
    theme: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    terminal = pyte.Screen(*SIZE)
    stream = pyte.Stream(terminal)
    updates: list[int] = []

    def display(self: SpectuiApp, screen: object, renderable: object) -> None:
        # Headless apps skip writing; write what a terminal would get into the emulator.
        if isinstance(renderable, CompositorUpdate):
            stream.feed(renderable.render_segments(self.console))
            updates.append(1)

    monkeypatch.setattr(SpectuiApp, "_display", display)
    gate = asyncio.Event()
    engine = FakeEngine(run_gate=gate, hold_after=120)
    app = SpectuiApp(engine, Settings(theme=theme), autorun=True)
    async with app.run_test(size=SIZE) as pilot:
        screen = main_screen(app)
        # (Under SPECTUI_STOCK=1, Textual's own: what it draws must be the screen too.)
        expected = LeanCompositor if lean_compositor_enabled() else Compositor
        assert type(screen._compositor) is expected
        await settle(pilot, lambda: len(engine.emitted) >= 120)
        # Paused mid-run: once the frames still pending are out (the token flush, the charts'
        # tick), what the partial updates drew must be the whole screen. Nothing changes any
        # more, so a compositor that dropped a region never gets there (the hang guard fails).
        await drawn_whole(pilot, terminal, "mid-run")
        mid_run = len(updates)
        gate.set()
        await settle(pilot, lambda: not screen.running)
        await drawn_whole(pilot, terminal, "the run's end")
        await app.action_quit()
    assert mid_run > 3 and len(updates) > mid_run
