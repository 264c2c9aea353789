"""SVG snapshots of the main screen after seeded runs, in every shipped theme, at 80×24 and 160×48.

The fake engine's runs are seeded and every time on screen comes from event data, so the pictures
are identical on every machine. Update with ``pytest tests/ui --snapshot-update`` and look at the
report before committing.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from textual.pilot import Pilot

from helpers.engines import FakeEngine
from spectui.config import Settings
from spectui.core.events import ServerState
from spectui.ui.apps.live import SpectuiApp
from spectui.ui.themes import SHIPPED_THEMES

from .ui_helpers import idle_after, main_screen, settle

SnapCompare = Callable[..., bool]
SIZES = {"80x24": (80, 24), "160x48": (160, 48)}


async def _run_then_switch(pilot: Pilot[None]) -> None:
    """A run with ngram-simple, then a switch to ngram-mod and its re-run: both columns filled."""
    app = pilot.app
    assert isinstance(app, SpectuiApp)
    await settle(pilot, idle_after(app, runs=1))
    await pilot.press("t", "down", "enter")
    await settle(pilot, idle_after(app, runs=2))
    main_screen(app).charts.replot()
    await pilot.pause()


@pytest.mark.parametrize("size", SIZES.values(), ids=SIZES.keys())
@pytest.mark.parametrize("theme", SHIPPED_THEMES)
def test_main_screen(snap_compare: SnapCompare, theme: str, size: tuple[int, int]) -> None:
    app = SpectuiApp(FakeEngine(), Settings(theme=theme), autorun=True)
    assert snap_compare(app, terminal_size=size, run_before=_run_then_switch)


def test_main_screen_no_color(snap_compare: SnapCompare, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    app = SpectuiApp(FakeEngine(), Settings(), autorun=True)
    assert snap_compare(app, terminal_size=(80, 24), run_before=_run_then_switch)


def test_failed_server(snap_compare: SnapCompare) -> None:
    app = SpectuiApp(FakeEngine(fail_starts=1), Settings())

    async def failed(pilot: Pilot[None]) -> None:
        await settle(pilot, lambda: main_screen(app).state is ServerState.FAILED)

    assert snap_compare(app, terminal_size=(80, 24), run_before=failed)


def test_no_model_screen(snap_compare: SnapCompare) -> None:
    app = SpectuiApp.no_model("the demo extra (spectui[demo]) is not installed", Settings())
    assert snap_compare(app, terminal_size=(80, 24))
