"""`compare --concurrency`: the level schedule, concurrent blocks on a scripted engine, the level
statistics, the one-sentence verdict, the exports, old files, and bad inputs (no server)."""

from __future__ import annotations

import asyncio
import contextlib
import csv
import gc
import io
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from helpers.engines import FakeSetup, ScriptedEngine, words
from spectui.cli import main
from spectui.commands import compare as compare_command
from spectui.config import Settings
from spectui.core.compare.export import CSV_FIELDS, to_csv, to_markdown
from spectui.core.compare.level_export import level_table, levels_csv
from spectui.core.compare.levels import (
    LevelRow,
    block_aggregate,
    busy_seconds,
    level_rows,
    level_sentence,
    percentile,
)
from spectui.core.compare.models import ComparePlan
from spectui.core.compare.outcomes import Verdict
from spectui.core.compare.records import RunRecord
from spectui.core.compare.runner import CompareRunner, ConfigFailed, RunFinished, RunStarting
from spectui.core.compare.setup import CompareSetup, CompareSetupError, declared_slots
from spectui.core.compare.store import CompareDocument, ServerOptions, load_document
from spectui.core.events import (
    EventStream,
    PromptProgressEvent,
    RunMetrics,
    ServerState,
    ServerStateEvent,
    SummaryEvent,
    TokenEvent,
    TokenOrigin,
)
from spectui.core.llama.binary import BinaryChoice
from spectui.core.request import GenerationRequest

from .compare_helpers import compare_options, document, plan

ROOT = Path(__file__).parent.parent.parent
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def levels_plan(levels: tuple[int, ...] = (1, 2), reps: int = 1, **kw: object) -> ComparePlan:
    p = plan(("none", "ngram-mod"), ("a", "b"), reps=reps)
    return ComparePlan(**{**dict(p), "concurrency": levels, "warmup": False, **kw})


# -- schedule ----------------------------------------------------------------------------------


def test_level_one_only_schedules_exactly_as_before() -> None:
    p = plan(("none", "ngram-simple"), ("a", "b"), reps=2)
    assert p.concurrency == (1,) and not p.concurrent
    jobs = p.jobs()
    assert all(j.level == 1 and j.client == 0 for j in jobs)
    assert [(j.round, j.config, j.prompt) for j in jobs if not j.warmup] == [
        (r, c, k) for r in (1, 2) for c in ("none", "ngram-simple") for k in ("a", "b")
    ]


def test_each_level_runs_every_prompt_per_client_on_one_server_start() -> None:
    p = levels_plan((1, 2), reps=2)
    jobs = p.jobs()
    block = [(j.level, j.client, j.prompt) for j in jobs if j.round == 1 and j.config == "none"]
    # Level 1: the prompts in turn; level 2: client c starts at prompt c.
    assert block == [(1, 0, "a"), (1, 0, "b"), (2, 0, "a"), (2, 0, "b"), (2, 1, "b"), (2, 1, "a")]
    assert len({j.segment for j in jobs if j.round == 1 and j.config == "none"}) == 1
    assert [j.config for j in jobs if j.level == 2 and j.client == 0 and j.prompt == "a"] == [
        "none",
        "ngram-mod",
        "none",
        "ngram-mod",
    ]  # configs still alternate round by round
    assert p.slots == 2 and p.concurrent


def test_levels_are_sorted_unique_and_positive() -> None:
    assert levels_plan((4, 1, 2, 2)).concurrency == (1, 2, 4)
    with pytest.raises(ValueError, match="1 or more"):
        levels_plan((0, 2))


# -- the runner on a scripted engine whose runs overlap ----------------------------------------


@dataclass
class OverlappingEngine(ScriptedEngine):
    """Runs that yield to the loop between tokens, so concurrent runs really interleave; each
    reports its own timings (draft counts that differ per request)."""

    in_flight: int = 0
    most_in_flight: int = 0
    started: int = 0
    gate: asyncio.Event | None = None
    """Runs wait for it before they end (None: they do not wait)."""

    async def run(self, request: GenerationRequest) -> EventStream:
        kind = self._kind(self.spec)
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        number = self.started
        self.started += 1
        try:
            yield PromptProgressEvent(t=0.002, processed=0, total=4)
            tokens = words(f"answer to {request.prompt} is forty two")
            for index, token in enumerate(tokens):
                await asyncio.sleep(0)
                yield TokenEvent(index=index, text=token, origin=TokenOrigin.TARGET, t=index / 100)
            if self.gate is not None:
                await self.gate.wait()
            drafted = 0 if kind == "none" else 4 + number % 3
            accepted = 0 if kind == "none" else 2 + number % 2
            metrics = RunMetrics(
                tokens=len(tokens),
                drafted=drafted,
                accepted=accepted,
                ttft_ms=20.0,
                total_ms=self.speeds.get(kind, 100.0),
                tokens_per_second=60.0,
            )
            timings = {
                "predicted_n": float(len(tokens)),
                "predicted_per_second": 55.0,
                "draft_n": float(drafted),
                "draft_n_accepted": float(accepted),
            }
            text = "".join(tokens)
            yield SummaryEvent(
                metrics=metrics, text=text, stop_reason="limit", server_timings=timings
            )
            yield ServerStateEvent(state=ServerState.READY)
        finally:
            self.in_flight -= 1


async def _run_all(runner: CompareRunner) -> list[object]:
    events: list[object] = []
    async with contextlib.aclosing(runner.run()) as stream:
        async for event in stream:
            events.append(event)
    return events


async def test_a_level_runs_its_clients_at_once_and_every_level_is_in_the_document(
    tmp_path: Path,
) -> None:
    engine = OverlappingEngine()

    async def two_slots() -> int:
        return 2

    out = tmp_path / "r.json"
    runner = CompareRunner(engine, document(levels_plan((1, 2), reps=3)), outputs=[out])
    runner._slot_count = two_slots
    events = await _run_all(runner)
    assert engine.most_in_flight == 2  # never more than the level, and really concurrent
    doc = load_document(out)
    assert doc.complete and len(doc.runs) == len(doc.plan.jobs())
    assert [r.seq for r in doc.runs] == sorted(r.seq for r in doc.runs)
    at_two = [r for r in doc.runs if r.level == 2]
    assert len(at_two) == 3 * 2 * 2 * 2  # rounds × configs × clients × prompts
    assert all(r.sent_at is not None and r.queue_ms == 2.0 for r in at_two)
    assert not any(r.waited_for_slot for r in doc.runs)  # a slot per stream
    # Per-request attribution is each response's own: the record's counts are its timings'.
    for r in doc.runs:
        assert r.drafted == int(r.server_timings["draft_n"])
        assert r.accepted == int(r.server_timings["draft_n_accepted"])
    starts = [e for e in events if isinstance(e, RunStarting)]
    assert len(starts) == len(doc.runs)
    finished = [e for e in events if isinstance(e, RunFinished)]
    assert [e.done for e in finished] == list(range(1, len(doc.runs) + 1))
    # Every level × config has its row and every metric.
    assert {(r.config, r.level) for r in doc.levels} == {
        (c, lv) for c in ("none", "ngram-mod") for lv in (1, 2)
    }
    for row in doc.levels:
        assert row.requests == row.planned == 3 * row.level * 2
        for name in (
            "aggregate_tokens_per_second",
            "request_tokens_per_second",
            "ttft_p50_ms",
            "ttft_p95_ms",
            "latency_p50_ms",
            "latency_p95_ms",
            "queue_p95_ms",
        ):
            assert getattr(row, name) is not None, name
        assert row.waited == 0
        assert row.verdict != "pending"
    mod = [r for r in doc.levels if r.config == "ngram-mod"]
    assert all(r.pairs == 3 and r.speedup_vs_baseline is not None for r in mod)
    assert [v.config for v in doc.level_verdicts] == ["ngram-mod"]
    # The per-prompt summary stays the one-stream table.
    assert all(r.runs == 3 for r in doc.summary)


async def test_fewer_slots_than_the_largest_level_fails_the_config_in_one_line(
    tmp_path: Path,
) -> None:
    async def one_slot() -> int:
        return 1

    engine = OverlappingEngine()
    runner = CompareRunner(engine, document(levels_plan((1, 2))), slot_count=one_slot)
    events = await _run_all(runner)
    failed = [e for e in events if isinstance(e, ConfigFailed)]
    assert failed and failed[0].detail == (
        "the server has 1 slot, fewer than the 2 concurrent streams asked"
    )
    assert "\n" not in failed[0].detail
    assert engine.started == 0  # nothing was sent to a server that cannot take it
    assert all(not r.ok for r in runner.document.runs)


async def test_cancelling_a_block_keeps_none_of_it(tmp_path: Path) -> None:
    engine = OverlappingEngine()
    out = tmp_path / "r.json"
    runner = CompareRunner(engine, document(levels_plan((2,))), outputs=[out])
    async with contextlib.aclosing(runner.run()) as stream:
        async for event in stream:
            if isinstance(event, RunStarting) and event.job.client == 1:
                break  # mid-block
    assert engine.in_flight == 0  # every stream of the block was closed
    assert load_document(out).runs == []


async def test_a_comparison_cancelled_mid_block_leaves_nothing_running(tmp_path: Path) -> None:
    reported: list[dict[str, object]] = []  # what the loop would print at exit
    asyncio.get_running_loop().set_exception_handler(lambda _, context: reported.append(context))
    engine = OverlappingEngine(gate=asyncio.Event())  # the block's runs never end by themselves
    runner = CompareRunner(engine, document(levels_plan((2,))), outputs=[tmp_path / "r.json"])
    both = asyncio.Event()

    async def consume() -> None:
        async for _ in runner.run():
            if engine.in_flight == 2:
                both.set()

    task = asyncio.create_task(consume())
    await both.wait()
    task.cancel()  # as SIGTERM cancels the command's task
    with pytest.raises(asyncio.CancelledError):
        await task
    del task
    gc.collect()  # an unretrieved future's error is reported when it is collected
    assert engine.in_flight == 0
    assert reported == []


# -- statistics --------------------------------------------------------------------------------


def _rec(
    config: str,
    round_: int,
    *,
    level: int,
    start_ms: float,
    total_ms: float = 1000.0,
    tokens: int = 10,
    seq: int = 0,
    session: int = 0,
    prompt: str = "a",
    ok: bool = True,
) -> RunRecord:
    return RunRecord(
        seq=seq,
        config=config,
        prompt=prompt,
        round=round_,
        level=level,
        session=session,
        status="ok" if ok else "failed",
        sent_at=T0 + timedelta(milliseconds=start_ms),
        total_ms=total_ms,
        ttft_ms=100.0,
        tokens=tokens,
        tokens_per_second=10.0,
        text="same",
        token_ends=[4],
        server_timings={"predicted_n": float(tokens), "predicted_per_second": 12.0},
    )


def test_busy_time_is_the_union_of_the_requests_in_flight() -> None:
    runs = [
        _rec("none", 1, level=2, start_ms=0, total_ms=1000),
        _rec("none", 1, level=2, start_ms=500, total_ms=1000),  # overlaps: 0–1.5 s
        _rec("none", 1, level=2, start_ms=2000, total_ms=500),  # after a gap: +0.5 s
    ]
    assert busy_seconds(runs) == pytest.approx(2.0)
    assert block_aggregate(runs, planned=3) == pytest.approx(30 / 2.0)
    assert block_aggregate(runs, planned=4) is None  # a run is missing
    split = [runs[0], runs[1].model_copy(update={"session": 1}), runs[2]]
    assert block_aggregate(split, planned=3) is None  # split by --resume: no span
    old = [r.model_copy(update={"sent_at": None}) for r in runs]
    assert busy_seconds(old) == pytest.approx(2.5)  # an older file: the runs' times


@given(st.lists(st.floats(min_value=0, max_value=1e6), min_size=1, max_size=50))
def test_percentiles_are_values_of_the_list_and_ordered(values: list[float]) -> None:
    p50, p95 = percentile(values, 0.5), percentile(values, 0.95)
    assert p50 in values and p95 in values
    assert p50 is not None and p95 is not None and min(values) <= p50 <= p95 <= max(values)


def test_nearest_rank_percentile() -> None:
    assert percentile(list(range(1, 21)), 0.95) == 19
    assert percentile([5.0], 0.95) == 5.0
    assert percentile([], 0.5) is None


def _round_robin(speeds: dict[tuple[str, int], list[float]]) -> list[RunRecord]:
    """Records whose blocks' aggregates are ``speeds[(config, level)][round - 1]`` tok/s (one
    prompt, ``level`` requests of 10 tokens all in flight for the same time)."""
    runs: list[RunRecord] = []
    for (config, level), per_round in speeds.items():
        for round_, aggregate in enumerate(per_round, start=1):
            total_ms = level * 10 / aggregate * 1000
            for _ in range(level):
                runs.append(
                    _rec(config, round_, level=level, start_ms=0, total_ms=total_ms, seq=len(runs))
                )
    return runs


def test_every_level_is_judged_with_its_own_noise_floor() -> None:
    p = plan(("none", "ngram-mod"), ("a",), reps=3).model_copy(
        update={"concurrency": (1, 2, 4), "warmup": False}
    )
    runs = _round_robin(
        {
            ("none", 1): [100, 101, 99],
            ("ngram-mod", 1): [142, 143, 141],
            ("none", 2): [180, 160, 200],  # a noisier level
            ("ngram-mod", 2): [182, 161, 203],
            ("none", 4): [300, 301, 299],
            ("ngram-mod", 4): [249, 250, 248],
        }
    )
    rows = {(r.config, r.level): r for r in level_rows(p, runs)}
    assert rows[("ngram-mod", 1)].verdict == "keep"
    assert rows[("ngram-mod", 2)].verdict == "inconclusive"
    assert rows[("ngram-mod", 4)].verdict == "drop"
    noisy, quiet = rows[("ngram-mod", 2)].noise_floor, rows[("ngram-mod", 1)].noise_floor
    assert noisy is not None and quiet is not None and noisy > quiet
    assert rows[("ngram-mod", 1)].aggregate_tokens_per_second == pytest.approx(142, rel=1e-3)
    assert rows[("none", 1)].verdict == "baseline"
    sentence = level_sentence([rows[("ngram-mod", lv)] for lv in (1, 2, 4)])
    assert sentence.startswith("keep up to 1 concurrent stream — 1.42x at 1; inconclusive at 2")
    assert "drop at 4 (0.83x, 0.83–0.83)" in sentence


def _level_row(level: int, verdict: Verdict, speed: float, low: float, high: float) -> LevelRow:
    return LevelRow(
        config="ngram-mod",
        prompt=f"{level} streams",
        level=level,
        runs=9,
        planned=9,
        failed=0,
        pairs=3,
        speedup_vs_baseline=speed,
        speedup_low=low,
        speedup_high=high,
        speed_call="slower" if verdict == "drop" else "faster",
        verdict=verdict,
    )


def test_the_verdict_says_where_speculation_stops_paying_in_one_sentence() -> None:
    rows = [
        _level_row(1, Verdict.KEEP, 1.42, 1.38, 1.47),
        _level_row(2, Verdict.KEEP, 1.10, 1.07, 1.12),
        _level_row(4, Verdict.DROP, 0.83, 0.78, 0.88),
    ]
    assert level_sentence(rows) == (
        "keep up to 2 concurrent streams — 1.42x at 1, 1.10x at 2; drop at 4 (0.83x, 0.78–0.88)"
    )
    assert level_sentence(rows[:2]) == "keep at every level — 1.42x at 1, 1.10x at 2"
    assert level_sentence([rows[2]]) == "a keep at no level — drop at 4 (0.83x, 0.78–0.88)"
    unclear = rows[0].model_copy(update={"verdict": "inconclusive", "pairs": 1})
    assert level_sentence([unclear, rows[1], rows[2]]) == (
        "keep at 2 streams only — inconclusive at 1 (1.42x); keep at 2 (1.10x, 1.07–1.12); "
        "drop at 4 (0.83x, 0.78–0.88)"
    )
    pending = rows[2].model_copy(update={"verdict": "pending", "runs": 3})
    assert level_sentence([rows[0], pending]) == "pending — 12 of 18 requests done"


# -- exports and old files ---------------------------------------------------------------------


def _finished_levels() -> CompareDocument:
    p = plan(("none", "ngram-mod"), ("a",), reps=3).model_copy(
        update={"concurrency": (1, 2), "warmup": False}
    )
    runs = _round_robin(
        {
            ("none", 1): [100, 101, 99],
            ("ngram-mod", 1): [142, 143, 141],
            ("none", 2): [180, 181, 179],
            ("ngram-mod", 2): [198, 199, 197],
        }
    )
    return document(p).updated(runs, [], [])


def test_exports_have_a_column_per_level() -> None:
    doc = _finished_levels()
    headers, rows = level_table(doc)
    assert headers == ["config", "metric", "1 stream", "2 streams"]
    metrics = {row[1] for row in rows}
    assert {"aggregate tok/s", "TTFT p50/p95 ms", "latency p50/p95 ms", "waited for a slot"} <= (
        metrics
    )
    table = list(csv.reader(io.StringIO(levels_csv(doc))))
    assert table[0] == headers and all(row[0] for row in table[1:])  # config on every row
    assert ["ngram-mod", "speedup", "1.42x", "1.10x"] in table
    runs = list(csv.DictReader(io.StringIO(to_csv(doc))))
    assert tuple(runs[0]) == CSV_FIELDS and {r["level"] for r in runs} == {"1", "2"}
    markdown = to_markdown(doc)
    assert "## Concurrency (1, 2 streams at once)" in markdown
    assert "| config | metric | 1 stream | 2 streams |" in markdown
    assert f"- **ngram-mod**: {doc.level_verdicts[0].sentence}" in markdown
    json_doc = CompareDocument.model_validate_json(doc.model_dump_json())
    assert json_doc.levels == doc.levels and json_doc.level_verdicts == doc.level_verdicts


@pytest.mark.parametrize(
    "path", ["tests/fixtures/compare-loaded-machine.json", "docs/recordings/compare.json"]
)
def test_old_compare_files_load_as_level_one(path: str) -> None:
    doc = load_document(ROOT / path)
    assert doc.plan.concurrency == (1,) and not doc.levels and not doc.level_verdicts
    assert all(r.level == 1 and r.client == 0 for r in doc.runs)
    again = doc.updated(doc.runs, doc.server_starts, doc.sessions)
    assert [(r.config, r.prompt, r.verdict) for r in again.summary] == [
        (r.config, r.prompt, r.verdict) for r in doc.summary
    ]
    assert "## Concurrency" not in to_markdown(again)


# -- bad inputs --------------------------------------------------------------------------------


@pytest.mark.parametrize("value", ["0", "a", "1,,2", "2,-1"])
def test_a_bad_level_is_one_line(value: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["compare", "--config", "ngram-mod", "--concurrency", value])
    err = capsys.readouterr().err.strip().splitlines()
    assert exit_.value.code != 0
    assert "--concurrency" in err[-1] and "levels are whole numbers of streams" in err[-1]


def _entries(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def _setup(extra: list[str]) -> CompareSetup:
    fake = FakeSetup()
    return CompareSetup(
        binary=BinaryChoice(path=Path("/opt/llama-server"), source="test"),
        caps=fake.caps,
        model=Path("/models/m.gguf"),
        server=ServerOptions(ctx_size=4096, extra_args=extra),
    )


def test_slots_follow_the_largest_level_and_the_context_per_slot() -> None:
    setup = _setup([]).with_slots((1, 2, 4))
    assert setup.parallel == 4
    assert declared_slots(["--parallel", "8"], setup.caps) == 8
    assert declared_slots(["-np", "3", "--parallel=5"], setup.caps) == 5
    assert _setup(["--parallel", "8"]).with_slots((1, 4)).parallel == 8
    with pytest.raises(CompareSetupError) as error:
        _setup(["-np", "2"]).with_slots((1, 4))
    assert str(error.value).startswith("--concurrency 4 needs 4 server slots")
    assert "\n" not in str(error.value)


async def test_a_level_above_the_servers_slots_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    setup = _setup(["--parallel", "2"])
    monkeypatch.setattr("spectui.app_setup.compare_setup", lambda settings, **_: setup)
    monkeypatch.setattr(compare_command, "_new_document", lambda *a: document(levels_plan((1, 4))))
    out = tmp_path / "r.json"
    args = compare_options(no_chart=True, concurrency=(1, 4), json_out=out, csv_out=None)
    with pytest.raises(CompareSetupError, match="needs 4 server slots"):
        await compare_command._compare(Settings(), args)
    assert _entries(tmp_path) == []


async def test_a_concurrent_compare_runs_end_to_end_on_scripted_engines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    class Slots(FakeSetup):
        def engine(self, spec: object) -> ScriptedEngine:
            self.engines.append(OverlappingEngine(spec=spec))  # type: ignore[arg-type]  # a SpecConfig
            return self.engines[-1]

    setup = Slots()
    monkeypatch.setattr("spectui.app_setup.compare_setup", lambda settings, **_: setup)
    out, runs_csv = tmp_path / "r.json", tmp_path / "runs.csv"
    args = compare_options(
        no_chart=True,
        configs=["ngram-mod"],
        prompts="builtin:two-lines",
        reps=1,
        concurrency=(1, 2),
        json_out=out,
        csv_out=runs_csv,
    )
    assert await compare_command._compare(Settings(), args) == 0
    doc = load_document(out)
    assert doc.plan.concurrency == (1, 2) and setup.parallel == 2
    assert {r.level for r in doc.levels} == {1, 2}
    assert (tmp_path / "runs-levels.csv").read_text().startswith("config,metric,1 stream")


# -- tune --concurrency N ----------------------------------------------------------------------


async def test_tune_races_the_candidates_under_n_streams(tmp_path: Path) -> None:
    from spectui.core.tune.runner import TuneFinished, TuneRunner, new_document

    p = plan(("none", "ngram-simple", "ngram-mod"), ("a", "b"), reps=1)
    p = ComparePlan(**{**dict(p), "concurrency": (2,)})
    tune = new_document(document(p), budget_s=600.0, launch=["llama-server"], skipped=[], space=[])
    engine = OverlappingEngine(speeds={"none": 100.0, "ngram-simple": 50.0, "ngram-mod": 150.0})

    async def two_slots() -> int:
        return 2

    runner = TuneRunner(engine, tune, outputs=[tmp_path / "t.json"], slot_count=two_slots)
    events = await _run_all(runner)  # type: ignore[arg-type]  # a TuneRunner streams alike
    final = events[-1]
    assert isinstance(final, TuneFinished) and final.document.complete
    compare = final.document.compare
    assert engine.most_in_flight == 2
    assert {r.level for r in compare.runs if not r.warmup} == {2}
    rows = {(r.config, r.prompt): r for r in compare.summary}
    # Per prompt, under two streams: each run paired with the baseline's same client and round
    # (and rounds counted as rounds, not as paired runs).
    assert rows[("ngram-simple", "a")].pairs == compare.plan.planned_rounds("ngram-simple")
    assert rows[("ngram-simple", "a")].verdict == "keep"
    assert final.document.winners["overall"] is not None
    assert final.document.winners["overall"].config == "ngram-simple"


async def test_tune_at_n_streams_measures_every_candidate(tmp_path: Path) -> None:
    from spectui.core.tune.setup import launch_line

    setup = _setup([]).with_slots((4,))
    assert launch_line(setup)[-4:] == ["--ctx-size", "16384", "--parallel", "4"]


@pytest.mark.parametrize("value", ["0", "a"])
def test_tune_refuses_a_bad_concurrency_in_one_line(
    value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["tune", "--concurrency", value])
    err = capsys.readouterr().err.strip().splitlines()
    assert exit_.value.code != 0 and err[-1].startswith(
        "spectui tune: error: argument --concurrency"
    )


def test_log_lines_name_the_level() -> None:
    from spectui.ui.console.compare import run_line

    run = _rec("ngram-mod", 2, level=4, start_ms=0, seq=9)
    assert run_line(RunFinished(record=run, done=10, total=40)).startswith(
        "[10/40] round 2 · ngram-mod · 4 streams · a: 10 tokens"
    )
