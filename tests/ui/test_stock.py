"""With every override off (as under SPECTUI_STOCK=1, or on a Textual other than the tested one)
the TUI draws the very same screen through Textual's own compositor."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from rich.style import Style
from textual._compositor import Compositor

from helpers.engines import FakeEngine
from spectui.config import Settings
from spectui.core import overrides
from spectui.core.overrides import STOCK_ENV
from spectui.ui.apps.live import SpectuiApp
from spectui.ui.lean_compositor import LeanCompositor

from .ui_helpers import main_screen, settle

SIZE = (100, 30)
Cells = list[list[tuple[str, Style | None]]]


@pytest.fixture(autouse=True)
def _decide_again() -> Iterator[None]:
    """Each mode decides its gates afresh; later tests decide theirs from their own environment."""
    overrides.reset()
    yield
    overrides.reset()


async def _screen_after_a_run(stock: bool, monkeypatch: pytest.MonkeyPatch) -> Cells:
    if stock:
        monkeypatch.setenv(STOCK_ENV, "1")
    else:
        monkeypatch.delenv(STOCK_ENV, raising=False)
    overrides.reset()
    engine = FakeEngine()
    app = SpectuiApp(engine, Settings(), autorun=True)
    async with app.run_test(size=SIZE) as pilot:
        screen = main_screen(app)
        await settle(pilot, lambda: len(engine.runs) == 1 and not screen.running)
        screen.charts.replot()
        await pilot.pause()
        assert type(screen._compositor) is (Compositor if stock else LeanCompositor)
        strips = screen._compositor.render_strips()
        cells = [[(ch, seg.style) for seg in strip for ch in seg.text] for strip in strips]
        await app.action_quit()
    return cells


async def test_the_stock_paths_draw_the_same_cells(monkeypatch: pytest.MonkeyPatch) -> None:
    lean = await _screen_after_a_run(False, monkeypatch)
    stock = await _screen_after_a_run(True, monkeypatch)
    assert len(stock) == SIZE[1]
    for row, (ours, theirs) in enumerate(zip(lean, stock, strict=True)):
        assert ours == theirs, f"row {row}"
