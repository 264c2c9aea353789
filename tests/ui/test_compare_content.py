"""The Compare screen's verdicts by content class (#30 item 4): a comparison whose prompts are
code and prose says, per config, where speculation pays ('keep for code — 2.00x; drop for prose
— 0.90x'), the summary's own sentence (`CompareDocument.content_verdicts`), under the table;
an SVG snapshot of it."""

from __future__ import annotations

from collections.abc import Callable

from textual.pilot import Pilot
from textual.widgets import Static

from helpers.engines import FakeEngine
from spectui.config import Settings
from spectui.core.compare.models import CompareJob, ComparePlan, ComparePrompt
from spectui.core.compare.records import RunRecord
from spectui.core.compare.store import BinaryInfo, CompareDocument, ModelInfo, ServerOptions
from spectui.ui.apps.compare import CompareApp
from spectui.ui.screens.compare import CompareScreen

from .fake_compare import ANSWER, FakeCompareRunner, _config
from .ui_helpers import settle

SnapCompare = Callable[..., bool]

CODE = "```python\ndef area(w, h):\n    return w * h\n```\nAdd a docstring to this function."
PROSE = "Write two calm sentences about a small harbour town waking up at dawn."


class ByContentRunner(FakeCompareRunner):
    """none vs ngram-simple on a code prompt and a prose prompt, three rounds: ngram-simple twice
    as fast on the code, a tenth slower on the prose; every answer the baseline's."""

    def __init__(self) -> None:
        super().__init__()
        plan = ComparePlan(
            configs=(_config("none"), _config("ngram-simple")),
            prompts=(
                ComparePrompt(key="code", text=CODE, n_predict=8),
                ComparePrompt(key="prose", text=PROSE, n_predict=8),
            ),
            reps=3,
        )
        self.document = CompareDocument.new(
            plan,
            binary=BinaryInfo(path="/opt/llama-server", version="b1"),
            model=ModelInfo(path="/models/m.gguf", size_bytes=1),
            server=ServerOptions(ctx_size=4096),
        ).updated([], [], [])
        self.jobs = plan.jobs()

    def _record(self, job: CompareJob) -> RunRecord:
        record = super()._record(job)
        if record.config != "ngram-simple":
            return record
        speed = 2.0 if record.prompt == "code" else 0.9
        tokens = ANSWER.split(" ")
        return record.model_copy(
            update={
                "text": ANSWER,
                "token_ends": [
                    sum(len(t) + 1 for t in tokens[: i + 1]) for i in range(len(tokens))
                ],
                "tokens_per_second": 10.0 * speed,
                "total_ms": 1000.0 / speed,
            }
        )


async def _finished(pilot: Pilot[None]) -> None:
    screen = pilot.app.screen
    assert isinstance(screen, CompareScreen)
    await settle(pilot, lambda: screen.finished, "the comparison's end")


async def test_the_verdicts_by_content_class_are_under_the_table() -> None:
    app = CompareApp(FakeEngine(), Settings(), ByContentRunner())
    async with app.run_test(size=(120, 30)) as pilot:
        await _finished(pilot)
        screen = app.screen
        assert isinstance(screen, CompareScreen)
        [verdict] = screen.document.content_verdicts
        assert verdict.sentence.startswith("keep for code — 2.00x")
        assert "drop for prose — 0.90x" in verdict.sentence
        shown = screen.query_one("#compare-content", Static)
        assert shown.display
        assert str(shown.render()) == f"ngram-simple by content: {verdict.sentence}"


def test_compare_content_snapshot(snap_compare: SnapCompare) -> None:
    app = CompareApp(FakeEngine(), Settings(), ByContentRunner())
    assert snap_compare(app, terminal_size=(120, 30), run_before=_finished)
