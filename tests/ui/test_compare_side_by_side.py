"""A changed answer in the drill-down: side by side with the baseline's, both marked from the
divergent token, with the baseline's odds there (issue #21 §4)."""

from __future__ import annotations

from textual.containers import Horizontal
from textual.widgets import Static

from helpers.engines import FakeEngine
from spectui.config import Settings
from spectui.core.compare.textdiff import Divergence, TokenProb
from spectui.ui.apps.compare import CompareApp
from spectui.ui.screens.compare import CompareScreen
from spectui.ui.screens.compare_responses import ResponsesScreen, evidence_line

from .fake_compare import ANSWER, OTHER, FakeCompareRunner
from .ui_helpers import settle


async def test_a_changed_answer_stands_next_to_the_baselines() -> None:
    runner = FakeCompareRunner()
    app = CompareApp(FakeEngine(), Settings(), runner)
    async with app.run_test(size=(140, 30)) as pilot:
        screen = app.screen
        assert isinstance(screen, CompareScreen)
        await settle(pilot, lambda: screen.finished)
        screen.table.focus()
        screen.table.move_cursor(row=3)  # ngram-simple × b: 'designer' for 'engineer'
        await pilot.press("enter")
        await settle(pilot, lambda: isinstance(app.screen, ResponsesScreen))
        await pilot.pause()
        pairs = list(app.screen.query(".side-by-side").results(Horizontal))
        assert len(pairs) == 1  # only the changed answer (prompt a's are identical)
        left, right = pairs[0].query(Static).results(Static)
        assert left.has_class("side-baseline") and right.has_class("response")
        cut = len("| 6 | Farah | ")
        left_body, right_body = left.render(), right.render()
        assert str(left_body) == ANSWER and str(right_body) == OTHER
        left_spans = getattr(left_body, "spans", [])
        right_spans = getattr(right_body, "spans", [])
        assert any(s.start == cut and "$warning" in str(s.style) for s in left_spans)
        assert any(s.start == cut and "$error" in str(s.style) for s in right_spans)
        assert left.region.y == right.region.y and left.region.x < right.region.x
        evidence = str(app.screen.query_one(".divergence-evidence", Static).render())
        assert evidence.startswith("token 5: baseline 'engineer ' · this 'designer '")
        assert evidence.endswith("not probed")


def test_the_evidence_line_names_the_kind_and_the_odds() -> None:
    d = Divergence(
        token=112, char=400, before="", baseline="", response="", token_start=400,
        baseline_token=" engineer", response_token=" Engineer", kind="near-tie",
        baseline_top=[TokenProb(token=" engineer", prob=0.41),
                      TokenProb(token=" Engineer", prob=0.4)],
    )  # fmt: skip
    assert str(evidence_line(d)) == (
        "token 112: baseline ' engineer' · this ' Engineer' · near-tie "
        "(baseline's odds: ' engineer' 0.41, ' Engineer' 0.40)"
    )
