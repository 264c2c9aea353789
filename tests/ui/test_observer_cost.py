"""The monitor must not change what it measures: no frames when nothing changes, and the
observer's own CPU shown next to the server's."""

from __future__ import annotations

import asyncio
import gc
from pathlib import Path

import pytest

from helpers.engines import FakeEngine
from spectui.app_setup import recorder
from spectui.config import Settings
from spectui.core.events import MemoryEvent
from spectui.ui.apps.base import GC_YOUNG_THRESHOLD
from spectui.ui.apps.live import SpectuiApp
from spectui.ui.widgets.charts import REDRAW_INTERVAL_S
from spectui.ui.widgets.throttle import GRACE_S

from .ui_helpers import main_screen, settle


async def test_a_stream_that_stops_sending_causes_no_redraws(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    frames: list[float] = []
    original = SpectuiApp._display

    def counting(self, screen, renderable):
        if renderable is not None:
            frames.append(asyncio.get_running_loop().time())
        return original(self, screen, renderable)

    monkeypatch.setattr(SpectuiApp, "_display", counting)
    engine = FakeEngine(run_gate=asyncio.Event(), hold_after=40)
    settings = Settings(sessions_dir=tmp_path)
    # Recording, so the REC banner (which checks the engine every second) is on screen too.
    app = SpectuiApp(recorder(engine, settings), settings, autorun=True)
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot, lambda: main_screen(app).running and len(engine.emitted) >= 40)
        assert frames, "a streaming run draws frames"
        # Let what was already in flight land: the token flush (50 ms), the metrics pane's
        # throttle and the charts' (each at most its interval and `GRACE_S` after the data).
        await pilot.pause(REDRAW_INTERVAL_S + GRACE_S + 0.5)
        quiet_from = len(frames)
        await pilot.pause(2 * REDRAW_INTERVAL_S)  # two ticks of every timer the screen has
        assert frames[quiet_from:] == [], "frames were drawn while nothing changed"
        assert main_screen(app).running  # still a run in progress, only a silent one
        assert engine.run_gate is not None
        engine.run_gate.set()
        await app.action_quit()


async def test_server_bar_shows_spectui_cpu_next_to_the_server() -> None:
    engine = FakeEngine()
    app = SpectuiApp(engine, Settings())
    async with app.run_test(size=(120, 36)) as pilot:
        screen = main_screen(app)
        await settle(pilot, lambda: screen.state is not None)
        bar = screen.server.bar
        sample = MemoryEvent(
            rss_bytes=1, rss_minus_shared_bytes=1, client_cpu_percent=3.6, server_cpu_percent=191
        )
        bar.set_cpu(sample)
        await pilot.pause()
        assert "CPU spectui 3.6 % · server 191 %" in str(bar.render())
        await app.action_quit()


async def test_the_collector_is_tuned_while_the_app_runs_and_put_back_after() -> None:
    # Fewer collections of the young generation while the app runs (most of a frame's objects
    # die by reference count first); a process that goes on after the app gets its own back.
    before = gc.get_threshold()
    app = SpectuiApp(FakeEngine(), Settings())
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot, lambda: main_screen(app).state is not None)
        assert gc.get_threshold() == (GC_YOUNG_THRESHOLD, *before[1:])
    assert gc.get_threshold() == before
