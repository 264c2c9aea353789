"""Pilot tests of the Compare screen with a scripted runner: the table fills in live, the
drill-down shows each response against the baseline, failures are shown, quitting closes."""

from __future__ import annotations

from textual.message import Message
from textual.widgets import Label, Static

from helpers.engines import FakeEngine
from spectui.config import Settings
from spectui.ui.apps.compare import CompareApp
from spectui.ui.screens.compare import CompareProgressed, CompareScreen
from spectui.ui.screens.compare_responses import ResponsesScreen

from .fake_compare import FakeCompareRunner
from .ui_helpers import settle


def _cells(screen: CompareScreen) -> dict[tuple[str, str], list[str]]:
    table = screen.table
    rows = {}
    for index in range(table.row_count):
        cells = [getattr(c, "plain", str(c)) for c in table.get_row_at(index)]
        rows[(cells[0], cells[1])] = cells
    return rows


def _compare_screen(app: CompareApp) -> CompareScreen:
    # The comparison is the app's only screen: the live screen is never pushed over it.
    assert [type(s).__name__ for s in app.screen_stack[1:]] == ["CompareScreen"]
    assert isinstance(app.screen, CompareScreen)
    return app.screen


async def test_table_fills_in_live_then_shows_verdicts() -> None:
    runner = FakeCompareRunner(pause_after=4)
    posted: list[Message] = []
    app = CompareApp(FakeEngine(), Settings(), runner)
    async with app.run_test(size=(140, 30), message_hook=posted.append) as pilot:
        await settle(pilot, lambda: runner.paused)
        screen = _compare_screen(app)
        await settle(pilot, lambda: len(screen.document.runs) == 4)
        cells = _cells(screen)
        # Round 1 of the baseline is in (after its warm-up); ngram-simple has only its warm-up.
        assert cells[("none", "a")][2] == "1/2"
        assert cells[("none", "b")][2] == "1/2"
        assert cells[("ngram-simple", "a")][2] == "0/2"
        assert cells[("ngram-simple", "a")][-1] == "pending"
        assert "ngram-simple" in str(screen.query_one("#compare-status", Label).render())

        runner.resume.set()
        await settle(pilot, lambda: screen.finished)
        cells = _cells(screen)
        assert cells[("none", "a")][-1] == "baseline"
        assert cells[("ngram-simple", "a")][5] == "2.00x"  # equal in both rounds: no spread
        assert cells[("ngram-simple", "a")][-1] == "inconclusive"  # a keep needs 3 rounds
        assert cells[("ngram-simple", "b")][-1] == "drop"
        assert cells[("ngram-simple", "b")][7] == "0/2"  # identical to the baseline: none
        progressed = [m for m in posted if isinstance(m, CompareProgressed)]
        assert sum(1 for m in progressed if type(m.event).__name__ == "RunFinished") == len(
            runner.jobs
        )
        # The highlighted row's reason is spelled out under the table.
        screen.table.move_cursor(row=3)
        await pilot.pause()
        reason = str(screen.query_one("#compare-reason", Static).render())
        assert "drop" in reason and "differ from the baseline" in reason


async def test_drill_down_shows_responses_and_where_they_diverge() -> None:
    runner = FakeCompareRunner()
    app = CompareApp(FakeEngine(), Settings(), runner)
    async with app.run_test(size=(140, 30)) as pilot:
        screen = _compare_screen(app)
        await settle(pilot, lambda: screen.finished)
        screen.table.focus()
        screen.table.move_cursor(row=3)  # ngram-simple × b
        await pilot.press("enter")
        await settle(pilot, lambda: isinstance(app.screen, ResponsesScreen))
        responses = app.screen
        assert isinstance(responses, ResponsesScreen)
        assert (responses.prompt, responses.round) == ("b", 2)
        await pilot.pause()
        titles = [s.render() for s in responses.query(".response-title").results(Static)]
        bodies = [s.render() for s in responses.query(".response").results(Static)]
        assert len(titles) == len(bodies) == 2
        assert "baseline" in str(titles[0])
        assert "differs at token 5" in str(titles[1])
        # The baseline reads plainly; the other response is highlighted from the divergence on.
        baseline_body, other_body = bodies
        assert str(baseline_body) == "| 6 | Farah | engineer | Dublin |"
        spans = getattr(other_body, "spans", [])
        assert any(
            span.start == len("| 6 | Farah | ") and "$error" in str(span.style) for span in spans
        )
        await pilot.press("left_square_bracket")
        assert responses.round == 1
        await pilot.press("escape")
        await settle(pilot, lambda: isinstance(app.screen, CompareScreen))


async def test_a_failing_comparison_is_shown_not_raised() -> None:
    runner = FakeCompareRunner(fail_after=2)
    app = CompareApp(FakeEngine(), Settings(), runner)
    async with app.run_test(size=(140, 30)) as pilot:
        screen = _compare_screen(app)
        await settle(pilot, lambda: screen.failure is not None)
        status = screen.query_one("#compare-status", Label)
        assert "No space left on device" in str(status.render())
        assert status.has_class("-failed")
        assert app.is_running


async def test_quit_stops_the_comparison_and_closes_the_engine() -> None:
    runner = FakeCompareRunner(pause_after=3)
    engine = FakeEngine()
    app = CompareApp(engine, Settings(), runner)
    async with app.run_test(size=(140, 30)) as pilot:
        await settle(pilot, lambda: runner.paused)
        await pilot.press("q")
        await pilot.pause()
    assert engine.close_calls == 1
    assert len(runner.document.runs) == 3
