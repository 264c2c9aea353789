"""`spectui tune` on a scripted engine: the race, the budget, resume, the document, the report."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

from helpers.engines import ScriptedEngine
from spectui.core.tune.models import TuneDocument
from spectui.core.tune.runner import RoundPlanned, TuneFinished, TuneRunner
from spectui.core.tune.search import FINALISTS, extended, next_round

from .compare_helpers import TUNE_SPEEDS, plan, tune_document


async def _run(runner: TuneRunner, stop_after: int | None = None) -> list[object]:
    events: list[object] = []
    stream = runner.run()
    async for event in stream:
        events.append(event)
        if stop_after is not None and len(runner.document.compare.runs) >= stop_after:
            break
    await stream.aclose()
    return events


def _document(events: list[object]) -> TuneDocument:
    """The tune document the run ended with."""
    final = events[-1]
    assert isinstance(final, TuneFinished)
    return final.document


async def test_the_race_keeps_the_winner_and_drops_losers_early(tmp_path: Path) -> None:
    engine = ScriptedEngine(speeds=TUNE_SPEEDS)
    out = tmp_path / "t.json"
    events = await _run(TuneRunner(engine, tune_document(), outputs=[out]))
    final = events[-1]
    assert isinstance(final, TuneFinished)
    doc = final.document
    assert doc.complete and doc.stopped == "finished"
    plan = doc.compare.plan
    # Round 1: everyone; then the better half; then the finalist until the rule settles it.
    assert plan.active is not None
    assert plan.active[0] == ("ngram-simple", "ngram-mod", "ngram-cache")
    assert "ngram-mod" not in plan.active[1]
    assert [e.round for e in events if isinstance(e, RoundPlanned)] == list(range(2, plan.reps + 1))
    results = {c.config: c for c in doc.candidates}
    assert results["ngram-simple"].results["a"].verdict == "keep"
    assert results["ngram-simple"].rounds >= 3
    assert results["ngram-mod"].rounds == 1  # a clear loser ran once
    winner = doc.winners["a"]
    assert winner is not None and winner.config == "ngram-simple"
    assert winner.args == ["llama-server", "-m", "m.gguf", "--spec-type", "ngram-simple"]
    assert doc.winners["overall"] is not None
    assert engine.max_running == 1
    # The file on disk is the final document, and parses back.
    assert TuneDocument.model_validate_json(out.read_text()) == doc


async def test_a_prompt_where_nothing_wins_has_no_winner(tmp_path: Path) -> None:
    engine = ScriptedEngine(
        speeds={"ngram-simple": 1400.0, "ngram-mod": 1500.0, "ngram-cache": 1300.0}
    )
    events = await _run(TuneRunner(engine, tune_document(), outputs=[tmp_path / "t.json"]))
    doc = _document(events)
    assert doc.complete
    assert doc.winners == {"a": None, "overall": None}
    assert any(
        "net loss" in c.results["a"].verdict or c.results["a"].net_loss for c in doc.candidates
    )
    assert doc.settled == ["a: nothing beats the baseline — settled"]


async def test_the_budget_is_respected(tmp_path: Path) -> None:
    engine = ScriptedEngine(speeds=TUNE_SPEEDS)
    ticks = itertools.count()
    # Every look at the clock is a second later: runs take ~1 s, starts ~1 s.
    runner = TuneRunner(
        engine,
        tune_document(budget_s=30),
        outputs=[tmp_path / "t.json"],
        clock=lambda: float(next(ticks)),
    )
    events = await _run(runner)
    doc = _document(events)
    assert doc.stopped == "budget"
    assert not doc.complete
    assert doc.elapsed_s <= doc.budget_s + 2  # the save after the last run reads the clock too
    assert engine.closed is False  # the command closes it; the runner only stops using it
    assert doc.settled  # the report says what is settled and what is not


async def test_resume_continues_without_rerunning(tmp_path: Path) -> None:
    out = tmp_path / "t.json"
    first = ScriptedEngine(speeds=TUNE_SPEEDS)
    await _run(TuneRunner(first, tune_document(), outputs=[out]), stop_after=6)
    saved = TuneDocument.model_validate_json(out.read_text())
    assert saved.stopped == "interrupted"
    done = {r.seq for r in saved.compare.runs}
    assert len(done) == 6
    second = ScriptedEngine(speeds=TUNE_SPEEDS)
    events = await _run(TuneRunner(second, saved, outputs=[out]))
    doc = _document(events)
    assert doc.complete
    seqs = [r.seq for r in doc.compare.runs]
    assert len(seqs) == len(set(seqs))  # nothing ran twice
    ran_again = [e for e in second.log if e[0] == "run"]
    assert len(ran_again) == len(seqs) - 6
    assert second.max_running == 1


def test_the_json_has_the_documented_fields(tmp_path: Path) -> None:
    data = json.loads(tune_document().model_dump_json())
    for key in ("format", "complete", "budget_s", "elapsed_s", "skipped", "candidates", "winners"):
        assert key in data
    assert data["format"] == "spectui-tune/1"


async def test_candidate_results_carry_the_issue_fields(tmp_path: Path) -> None:
    engine = ScriptedEngine(speeds=TUNE_SPEEDS)
    events = await _run(
        TuneRunner(engine, tune_document(("a", "b")), outputs=[tmp_path / "t.json"])
    )
    data = json.loads(_document(events).model_dump_json())
    candidate = next(c for c in data["candidates"] if c["config"] == "ngram-simple")
    assert {"config", "args", "results"} <= set(candidate)
    result = candidate["results"]["a"]
    for key in (
        "speedup", "low", "high", "rounds", "verdict", "reason", "peak_rss_bytes", "acceptance",
        "mean_acceptance_length",
    ):  # fmt: skip
        assert key in result
    assert set(data["winners"]) == {"a", "b", "overall"}
    assert data["winners"]["overall"]["config"] == "ngram-simple"


def test_next_round_halves_then_settles() -> None:
    from spectui.core.compare.summary import report_rows

    from .compare_helpers import record

    names = [f"ngram-simple --spec-ngram-simple-size-n {n}" for n in (2, 3, 4, 5, 6, 7)]
    p = plan(("none", *names), ("a",), reps=1)
    records = [record("none", "a", 1, seq=0, total_ms=1000)]
    for i, name in enumerate(names):
        records.append(record(name, "a", 1, seq=i + 1, total_ms=400 + 100 * i))
    chosen = next_round(p, report_rows(p, records))
    assert chosen is not None and len(chosen) == 3  # the better half of six
    assert chosen == tuple(names[:3])
    p2 = extended(p, chosen)
    assert p2.reps == 2 and p2.active == (tuple(names), chosen)
    assert [j.config for j in p2.jobs() if j.round == 2] == ["none", *chosen]
    assert FINALISTS == 2


async def test_a_spent_budget_can_be_extended_on_resume(tmp_path: Path) -> None:
    out = tmp_path / "t.json"
    ticks = itertools.count()
    first = TuneRunner(
        ScriptedEngine(speeds=TUNE_SPEEDS),
        tune_document(budget_s=20),
        outputs=[out],
        clock=lambda: float(next(ticks)),
    )
    stopped = _document(await _run(first))
    assert stopped.stopped == "budget"
    more = stopped.model_copy(update={"budget_s": 600.0})  # what --resume --budget 10m does
    second = ScriptedEngine(speeds=TUNE_SPEEDS)
    done = _document(await _run(TuneRunner(second, more, outputs=[out])))
    assert done.complete and done.stopped == "finished"
    assert done.elapsed_s >= stopped.elapsed_s  # time adds up over sessions
    seqs = [r.seq for r in done.compare.runs]
    assert len(seqs) == len(set(seqs))
