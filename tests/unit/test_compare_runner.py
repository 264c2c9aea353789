"""The compare runner on a scripted engine: schedule, restarts, failures, incremental writes,
resume, and exports that parse back."""

from __future__ import annotations

import contextlib
import csv
import io
import json
from pathlib import Path

import pytest

from helpers.engines import ScriptedEngine
from spectui.core.compare.checkers import Checker
from spectui.core.compare.export import CSV_FIELDS, to_csv, to_markdown
from spectui.core.compare.runner import (
    CompareEvent,
    CompareFinished,
    CompareRunner,
    ConfigFailed,
    RunFinished,
)
from spectui.core.compare.store import (
    BinaryInfo,
    ModelInfo,
    ResultFileError,
    check_same_setup,
    finished_seqs,
    load_document,
    write_atomic,
)

from .compare_helpers import document, plan

ISSUE_RUN_FIELDS = {
    "config",
    "prompt",
    "round",
    "warmup",
    "ttft_ms",
    "total_ms",
    "tokens",
    "tokens_per_second",
    "drafted",
    "accepted",
    "peak_rss_bytes",
    "identical_to_baseline",
    "check_passed",
}
ISSUE_SUMMARY_FIELDS = {
    "config",
    "prompt",
    "median_tokens_per_second",
    "speedup_vs_baseline",
    "verdict",
}


def _names(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


async def _collect(runner: CompareRunner, stop_after: int | None = None) -> list[CompareEvent]:
    events: list[CompareEvent] = []
    finished = 0
    async with contextlib.aclosing(runner.run()) as stream:
        async for event in stream:
            events.append(event)
            if isinstance(event, RunFinished):
                finished += 1
                if stop_after is not None and finished >= stop_after:
                    break
    return events


async def test_runs_alternate_with_one_server_at_a_time(tmp_path: Path) -> None:
    p = plan(("none", "ngram-simple", "ngram-mod"), ("a", "b"), reps=2)
    engine = ScriptedEngine(speeds={"ngram-simple": 500.0, "ngram-mod": 2000.0})
    out = tmp_path / "r.json"
    runner = CompareRunner(engine, document(p), outputs=[out])
    events = await _collect(runner)

    ran = [(kind, prompt) for how, kind, prompt in engine.log if how == "run"]
    assert ran == [
        ("none", "a"), ("none", "a"), ("none", "b"),
        ("ngram-simple", "a"), ("ngram-simple", "a"), ("ngram-simple", "b"),
        ("ngram-mod", "a"), ("ngram-mod", "a"), ("ngram-mod", "b"),
        ("none", "a"), ("none", "b"),
        ("ngram-simple", "a"), ("ngram-simple", "b"),
        ("ngram-mod", "a"), ("ngram-mod", "b"),
    ]  # fmt: skip
    launches = [(how, kind) for how, kind, _ in engine.log if how != "run"]
    assert launches == [
        ("start", "none"),
        ("switch", "ngram-simple"),
        ("switch", "ngram-mod"),
        ("switch", "none"),
        ("switch", "ngram-simple"),
        ("switch", "ngram-mod"),
    ]
    assert engine.max_running == 1

    final = events[-1]
    assert isinstance(final, CompareFinished)
    doc = final.document
    assert doc.complete
    assert [r.seq for r in doc.runs] == list(range(15))
    assert [r.warmup for r in doc.runs].count(True) == 3
    assert [s.reason for s in doc.server_starts] == [
        "first start",
        "switch from none",
        "switch from ngram-simple",
        "switch from ngram-mod",
        "switch from none",
        "switch from ngram-simple",
    ]
    assert "6 server starts" in doc.restarts
    verdicts = {(r.config, r.prompt): r.verdict for r in doc.summary}
    assert verdicts[("none", "a")] == "baseline"
    # Faster in both rounds, but a keep needs three paired rounds.
    assert verdicts[("ngram-simple", "a")] == "inconclusive"
    assert verdicts[("ngram-mod", "b")] == "drop"
    assert all(r.identical_to_baseline in (True, None) for r in doc.runs)
    assert load_document(out) == doc


async def test_results_are_written_after_every_run(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    runner = CompareRunner(ScriptedEngine(), document(plan(reps=1)), outputs=[out])
    seen = []
    async for event in runner.run():
        if isinstance(event, RunFinished):
            on_disk = load_document(out)
            seen.append(len(on_disk.runs))
            assert on_disk.runs[-1].seq == event.record.seq
    assert seen == list(range(1, len(seen) + 1))
    assert _names(tmp_path) == ["r.json"]  # no temp files left


async def test_interrupted_comparison_resumes_without_repeating_runs(tmp_path: Path) -> None:
    p = plan(("none", "ngram-simple"), ("a", "b"), reps=2)
    out = tmp_path / "r.json"
    first_engine = ScriptedEngine()
    await _collect(CompareRunner(first_engine, document(p), outputs=[out]), stop_after=4)
    partial = load_document(out)
    assert not partial.complete
    assert [r.seq for r in partial.runs] == [0, 1, 2, 3]
    assert finished_seqs(partial) == {0, 1, 2, 3}

    second_engine = ScriptedEngine()
    runner = CompareRunner(second_engine, partial, outputs=[out])
    assert [j.seq for j in runner.pending] == list(range(4, 10))
    events = await _collect(runner)
    done = load_document(out)
    assert done.complete
    assert [r.seq for r in done.runs] == list(range(10))
    # (The cost model's prediction is refitted as runs arrive: derived, not a re-run.)
    refit = {"predicted_tokens_per_second": None}
    assert [r.model_copy(update=refit) for r in done.runs[:4]] == [
        r.model_copy(update=refit) for r in partial.runs
    ]
    assert {r.session for r in done.runs[:4]} == {0}
    assert {r.session for r in done.runs[4:]} == {1}
    assert [s.first_seq for s in done.sessions] == [0, 4]
    # The second engine ran exactly the pending jobs, starting with the interrupted config.
    assert sum(1 for how, _, _ in second_engine.log if how == "run") == 6
    assert second_engine.log[0][:2] == ("switch", "ngram-simple")
    assert done.server_starts[-3].reason == "resumed"
    assert sum(isinstance(e, RunFinished) for e in events) == 6
    # Resuming a complete document runs nothing.
    idle = ScriptedEngine()
    await _collect(CompareRunner(idle, done, outputs=[out]))
    assert idle.log == []


async def test_a_failing_config_is_recorded_while_others_continue(tmp_path: Path) -> None:
    p = plan(("none", "ngram-mod", "ngram-simple"), ("a",), reps=2)
    engine = ScriptedEngine(fail_types={"ngram-mod"}, speeds={"ngram-simple": 500.0})
    events = await _collect(CompareRunner(engine, document(p), outputs=[tmp_path / "r.json"]))
    failures = [e for e in events if isinstance(e, ConfigFailed)]
    assert [(f.config, f.detail) for f in failures] == [("ngram-mod", "cannot load")]
    assert isinstance(events[-1], CompareFinished)
    doc = events[-1].document
    mod = [r for r in doc.runs if r.config == "ngram-mod"]
    assert len(mod) == 3 and not any(r.ok for r in mod)
    assert all("failed to start" in (r.error or "") for r in mod)
    assert all(r.ok for r in doc.runs if r.config != "ngram-mod")
    # Not retried in round 2: one attempt only.
    assert [k for how, k, _ in engine.log if how != "run"].count("ngram-mod") == 1
    verdicts = {r.config: r.verdict for r in doc.summary}
    assert verdicts == {"none": "baseline", "ngram-mod": "failed", "ngram-simple": "inconclusive"}
    assert [s.ok for s in doc.server_starts if s.config == "ngram-mod"] == [False]


async def test_server_dying_mid_run_fails_that_run_and_restarts(tmp_path: Path) -> None:
    p = plan(("none", "ngram-simple"), ("a", "b"), reps=1)
    engine = ScriptedEngine(die_on_runs={1})
    events = await _collect(CompareRunner(engine, document(p), outputs=[tmp_path / "r.json"]))
    assert isinstance(events[-1], CompareFinished)
    doc = events[-1].document
    assert [r.ok for r in doc.runs] == [True, False, True, True, True, True]
    assert doc.runs[1].error == "connection broke"
    assert [s.reason for s in doc.server_starts] == [
        "first start",
        "server exited during a run",
        "switch from none",
    ]
    assert engine.max_running == 1


async def test_divergent_answers_and_checks_are_recorded(tmp_path: Path) -> None:
    p = plan(("none", "ngram-simple"), ("a",), reps=1, checks={"a": Checker(regex="forty two")})
    engine = ScriptedEngine(answers={"ngram-simple": "answer to a is forty three"})
    events = await _collect(CompareRunner(engine, document(p), outputs=[tmp_path / "r.json"]))
    assert isinstance(events[-1], CompareFinished)
    doc = events[-1].document
    counted = {r.config: r for r in doc.runs if not r.warmup}
    assert counted["none"].check_passed is True
    assert counted["ngram-simple"].check_passed is False
    assert counted["ngram-simple"].identical_to_baseline is False
    divergence = counted["ngram-simple"].divergence
    assert divergence is not None and divergence.token == 5
    row = next(r for r in doc.summary if r.config == "ngram-simple")
    assert row.verdict == "drop"
    assert "answers differ" in row.reason and "checker failed" in row.reason


async def test_exports_parse_back_with_the_issue_fields(tmp_path: Path) -> None:
    p = plan(("none", "ngram-simple"), ("a", "b"), reps=2)
    out = tmp_path / "r.json"
    await _collect(CompareRunner(ScriptedEngine(), document(p), outputs=[out]))
    raw = json.loads(out.read_text())
    for key in ("spectui_version", "binary", "model", "sampling", "configs", "runs", "summary"):
        assert key in raw
    assert {"name", "args"} <= set(raw["configs"][0])
    assert all(set(run) >= ISSUE_RUN_FIELDS for run in raw["runs"])
    assert all(set(row) >= ISSUE_SUMMARY_FIELDS for row in raw["summary"])
    assert raw["runs"][0]["warmup"] is True and raw["runs"][1]["round"] == 1

    doc = load_document(out)
    rows = list(csv.DictReader(io.StringIO(to_csv(doc))))
    assert len(rows) == len(doc.runs)
    assert tuple(rows[0]) == CSV_FIELDS
    assert rows[3]["text"] == doc.runs[3].text
    assert rows[0]["warmup"] == "True"
    markdown = to_markdown(doc)
    assert "| config | prompt | runs | tok/s |" in markdown
    assert "- **ngram-simple** on `a`: " in markdown
    table = [line for line in markdown.splitlines() if line.startswith("| ngram-simple | a |")]
    assert len(table) == 1


def test_resume_refuses_another_binary_or_model() -> None:
    doc = document(plan())
    check_same_setup(doc, doc.binary, doc.model)
    with pytest.raises(ResultFileError, match="resuming would mix binaries"):
        check_same_setup(doc, BinaryInfo(path="/opt/llama-server", version="b2"), doc.model)
    with pytest.raises(ResultFileError, match="resuming would mix models"):
        check_same_setup(doc, doc.binary, ModelInfo(path="/models/m.gguf", size_bytes=999))


def test_resume_refuses_a_document_that_does_not_match_its_plan(tmp_path: Path) -> None:
    from .compare_helpers import record

    doc = document(plan())
    doc = doc.model_copy(update={"runs": [record("ngram-mod", "a", 1, seq=0)]})
    with pytest.raises(ResultFileError, match="does not match its plan"):
        finished_seqs(doc)
    bad = tmp_path / "bad.json"
    bad.write_text('{"hello": 1}')
    with pytest.raises(ResultFileError, match="not a spectui compare results file"):
        load_document(bad)
    with pytest.raises(ResultFileError, match="results file not found"):
        load_document(tmp_path / "missing.json")


def test_write_atomic_replaces_whole_files(tmp_path: Path) -> None:
    target = tmp_path / "sub" / "f.json"
    write_atomic(target, "one")
    write_atomic(target, "two")
    assert target.read_text() == "two"
    assert [p.name for p in target.parent.iterdir()] == ["f.json"]


async def test_a_second_comparison_on_the_same_file_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    first = CompareRunner(ScriptedEngine(), document(plan(reps=1)), outputs=[out])
    async with contextlib.aclosing(first.run()) as events:
        async for event in events:
            if isinstance(event, RunFinished):
                second = CompareRunner(ScriptedEngine(), load_document(out), outputs=[out])
                with pytest.raises(ResultFileError, match="being written by another"):
                    await _collect(second)
                break
    # Released once the first one stops: resuming works.
    after = await _collect(CompareRunner(ScriptedEngine(), load_document(out), outputs=[out]))
    assert isinstance(after[-1], CompareFinished)
    assert _names(tmp_path) == ["r.json"]


async def test_a_cancelled_run_is_not_recorded_and_stops_the_comparison(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    p = plan(("none", "ngram-simple"), ("a",), reps=1)
    events = await _collect(
        CompareRunner(ScriptedEngine(cancel_on_runs={2}), document(p), outputs=[out])
    )
    assert not any(isinstance(e, CompareFinished) for e in events)
    doc = load_document(out)
    assert [r.seq for r in doc.runs] == [0, 1]  # the cut-short third run is left for --resume
    assert not doc.complete
