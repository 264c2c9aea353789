"""The runner explains changed answers: one untimed probe per divergence, on the baseline's
server, between rounds or once at the end; the evidence lands in the document and stays."""

from __future__ import annotations

from pathlib import Path

from helpers.engines import ScriptedEngine
from spectui.core.compare.divergence import ProbeRequest
from spectui.core.compare.runner import CompareRunner, ServerStatus
from spectui.core.compare.store import load_document

from .compare_helpers import BASELINE, CHANGED, FakeProber, document, plan


async def _run(runner: CompareRunner) -> list[object]:
    return [event async for event in runner.run()]


async def test_a_changed_answer_is_probed_on_the_baseline_server(tmp_path: Path) -> None:
    p = plan(("none", "ngram-simple"), ("a",), reps=2)
    engine = ScriptedEngine(answers={"none": BASELINE, "ngram-simple": CHANGED})
    prober = FakeProber(engine)
    out = tmp_path / "r.json"
    events = await _run(CompareRunner(engine, document(p), outputs=[out], probe=prober))

    # Round 1's change is probed before round 2 leaves the baseline; round 2's (the same
    # prompt and prefix) shares that answer, so one probe in all, and no extra restart.
    assert len(prober.seen) == 1
    request, spec = prober.seen[0]
    assert spec == "none"
    assert request == ProbeRequest(prompt="prompt a", prefix="the answer to a is ")
    assert not [
        e for e in events if isinstance(e, ServerStatus) and e.detail == "divergence probes"
    ]

    doc = load_document(out)
    changed = [r for r in doc.runs if r.config == "ngram-simple" and not r.warmup]
    assert changed and all(r.identical_to_baseline is False for r in changed)
    for r in changed:
        d = r.divergence
        assert d is not None
        assert (d.token, d.baseline_token, d.response_token) == (5, "forty ", "Forty ")
        assert d.kind == "near-tie" and d.baseline_top == prober.top
    row = next(r for r in doc.summary if r.config == "ngram-simple")
    assert row.near_tie_changes == 2 and row.divergent_changes == 0
    assert "at a near-tie 0.41/0.40 — read both" in row.reason


async def test_the_last_rounds_change_gets_the_baseline_back_once(tmp_path: Path) -> None:
    p = plan(("none", "ngram-simple"), ("a",), reps=1)
    engine = ScriptedEngine(answers={"none": BASELINE, "ngram-simple": CHANGED})
    prober = FakeProber(engine)
    out = tmp_path / "r.json"
    await _run(CompareRunner(engine, document(p), outputs=[out], probe=prober))
    assert [spec for _, spec in prober.seen] == ["none"]
    doc = load_document(out)
    assert [s.reason for s in doc.server_starts][-1] == "divergence probes"
    assert engine.max_running == 1
    assert doc.complete

    # Resumed (or re-judged): the evidence is in the file, nothing is probed again.
    again = FakeProber(engine)
    await _run(CompareRunner(engine, load_document(out), outputs=[out], probe=again))
    assert again.seen == []
    assert next(r for r in load_document(out).runs if r.config == "ngram-simple").divergence


async def test_a_failed_probe_is_said_once_and_the_change_counts_as_divergent(
    tmp_path: Path,
) -> None:
    p = plan(("none", "ngram-simple"), ("a",), reps=1)
    engine = ScriptedEngine(answers={"none": BASELINE, "ngram-simple": CHANGED})
    out = tmp_path / "r.json"
    await _run(
        CompareRunner(engine, document(p), outputs=[out], probe=FakeProber(engine, fail=True))
    )
    doc = load_document(out)
    d = next(r for r in doc.runs if r.config == "ngram-simple" and not r.warmup).divergence
    assert d is not None and d.kind is None
    assert d.probe_error == "/completion: HTTP 500"
    assert d.short().endswith("(not probed)")
    row = next(r for r in doc.summary if r.config == "ngram-simple")
    assert row.verdict == "drop" and row.divergent_changes == 1


async def test_without_a_prober_nothing_is_restarted_for_probes(tmp_path: Path) -> None:
    p = plan(("none", "ngram-simple"), ("a",), reps=1)
    engine = ScriptedEngine(answers={"none": BASELINE, "ngram-simple": CHANGED})
    out = tmp_path / "r.json"
    await _run(CompareRunner(engine, document(p), outputs=[out]))
    doc = load_document(out)
    assert "divergence probes" not in [s.reason for s in doc.server_starts]
    assert next(r for r in doc.summary if r.config == "ngram-simple").verdict == "drop"
