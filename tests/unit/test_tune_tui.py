"""`spectui tune --tui`: the leaderboard fills in live from a real `TuneRunner` on a scripted
engine, shows the winner's verdicts, and quitting closes the engine."""

from __future__ import annotations

from pathlib import Path

from helpers.engines import ScriptedEngine
from helpers.wait import await_until
from spectui.config import Settings
from spectui.core.tune.runner import TuneRunner
from spectui.ui.apps.tune import TuneApp
from spectui.ui.screens.tune import TuneProgressed, TuneScreen

from .compare_helpers import TUNE_SPEEDS, tune_document


async def test_the_leaderboard_fills_in_and_names_the_winner(tmp_path: Path) -> None:
    engine = ScriptedEngine(speeds=TUNE_SPEEDS)
    runner = TuneRunner(engine, tune_document(), outputs=[tmp_path / "t.json"])
    posted: list[object] = []
    app = TuneApp(engine, Settings(), runner)
    async with app.run_test(size=(140, 30), message_hook=posted.append) as pilot:
        await await_until(
            lambda: isinstance(app.screen, TuneScreen) and app.screen.finished,
            "the leaderboard finished",
            pause=pilot.pause,
        )
        screen = app.screen
        assert isinstance(screen, TuneScreen) and screen.finished
        table = screen.table
        first = [getattr(c, "plain", str(c)) for c in table.get_row_at(0)]
        assert first[0] == "ngram-simple" and first[-1] == "keep"
        detail = str(screen.query_one("#tune-detail").render())
        assert "ngram-simple" in detail and "--spec-type ngram-simple" in detail
        assert any(isinstance(m, TuneProgressed) for m in posted)
        await pilot.press("q")
    assert engine.closed
    assert engine.max_running == 1
