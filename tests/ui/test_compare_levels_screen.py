"""The Compare screen of a `--concurrency` comparison: a column per level, each config's
one-sentence verdict, and the per-prompt table hidden when level 1 was not run (Pilot, no
server)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime

from textual.widgets import DataTable, Static

from helpers.engines import FakeEngine
from spectui.config import Settings
from spectui.core.compare.models import CompareConfig, ComparePlan, ComparePrompt
from spectui.core.compare.records import RunRecord
from spectui.core.compare.runner import CompareEvent, CompareFinished
from spectui.core.compare.store import BinaryInfo, CompareDocument, ModelInfo, ServerOptions
from spectui.core.llama.specconfig import SpecConfig
from spectui.ui.apps.compare import CompareApp
from spectui.ui.screens.compare import CompareScreen

from .ui_helpers import settle

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _config(name: str) -> CompareConfig:
    return CompareConfig(name=name, spec=SpecConfig(types=(name,)), args=("--spec-type", name))


def _finished(levels: tuple[int, ...]) -> CompareDocument:
    """ngram-mod against none at ``levels``, three rounds: 1.42x at 1 stream, 0.83x beyond."""
    plan = ComparePlan(
        configs=(_config("none"), _config("ngram-mod")),
        prompts=(ComparePrompt(key="a", text="table", n_predict=10),),
        reps=3,
        warmup=False,
        concurrency=levels,
    )
    runs: list[RunRecord] = []
    for level in levels:
        for config, aggregate in (("none", 100.0), ("ngram-mod", 142.0 if level == 1 else 83.0)):
            for round_ in (1, 2, 3):
                for _ in range(level):
                    runs.append(
                        RunRecord(
                            seq=len(runs),
                            config=config,
                            prompt="a",
                            round=round_,
                            level=level,
                            sent_at=T0,
                            total_ms=level * 10 / aggregate * 1000,
                            ttft_ms=50.0,
                            tokens=10,
                            text="same",
                            token_ends=[4],
                            server_timings={"predicted_n": 10.0},
                        )
                    )
    return CompareDocument.new(
        plan,
        binary=BinaryInfo(path="/opt/llama-server", version="b1"),
        model=ModelInfo(path="/models/m.gguf", size_bytes=1),
        server=ServerOptions(ctx_size=4096),
    ).updated(runs, [], [])


class Finished:
    """A comparison whose runs are all in: it only reports that it finished."""

    def __init__(self, document: CompareDocument) -> None:
        self.document = document

    async def run(self) -> AsyncIterator[CompareEvent]:
        yield CompareFinished(document=self.document)


def _rows(table: DataTable[object]) -> list[list[str]]:
    return [
        [getattr(c, "plain", str(c)) for c in table.get_row_at(i)] for i in range(table.row_count)
    ]


async def test_a_column_per_level_and_where_speculation_stops_paying() -> None:
    app = CompareApp(FakeEngine(), Settings(), Finished(_finished((1, 2, 4))))
    async with app.run_test(size=(140, 40)) as pilot:
        screen = app.screen
        assert isinstance(screen, CompareScreen)
        await settle(pilot, lambda: screen.finished)
        levels: DataTable[object] = screen.query_one("#compare-levels", DataTable)
        assert [str(c.label) for c in levels.columns.values()] == [
            "config", "metric", "1 stream", "2 streams", "4 streams",
        ]  # fmt: skip
        rows = _rows(levels)
        assert ["", "speedup", "1.42x", "0.83x", "0.83x"] in rows
        assert ["", "verdict", "keep", "drop", "drop"] in rows
        sentence = str(screen.query_one("#compare-level-verdicts", Static).render())
        assert "ngram-mod: keep up to 1 concurrent stream — 1.42x at 1; drop at 2" in sentence


async def test_without_level_one_the_prompt_table_is_the_lowest_levels() -> None:
    app = CompareApp(FakeEngine(), Settings(), Finished(_finished((2, 4))))
    async with app.run_test(size=(120, 36)) as pilot:
        screen = app.screen
        assert isinstance(screen, CompareScreen)
        await settle(pilot, lambda: screen.finished)
        assert screen.query_one("#compare-levels", DataTable).row_count > 0
        rows = {r[0]: r for r in _rows(screen.table)}  # type: ignore[arg-type]  # DataTable[Text] (invariant)
        assert rows["none"][2] == "6/6"  # 2 clients × 3 rounds
        assert rows["ngram-mod"][5].startswith("0.83x")


async def test_s_shows_a_concurrency_comparisons_clients_a_lane_each() -> None:
    from spectui.ui.screens.slots import SlotsScreen

    app = CompareApp(FakeEngine(), Settings(), Finished(_finished((1, 2, 4))))
    async with app.run_test(size=(120, 36)) as pilot:
        screen = app.screen
        assert isinstance(screen, CompareScreen)
        await settle(pilot, lambda: screen.finished)
        assert screen.lanes is not None and len(screen.lanes.lanes) == 4
        await pilot.press("s")
        await settle(pilot, lambda: isinstance(app.screen, SlotsScreen))
        await pilot.press("s")
        await settle(pilot, lambda: app.screen is screen)

    single = CompareApp(FakeEngine(), Settings(), Finished(_finished((1,))))
    async with single.run_test(size=(120, 36)) as pilot:
        alone = single.screen
        assert isinstance(alone, CompareScreen)
        await settle(pilot, lambda: alone.finished)
        assert alone.lanes is None
        await pilot.press("s")
        await pilot.pause()
        assert single.screen is alone  # one stream at a time: a note, no lanes
