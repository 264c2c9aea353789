"""tune judges changed answers as compare does: probed on the baseline's server, a near-tie a
caveat rather than a drop, and `--identical-answers` the strict rule."""

from __future__ import annotations

from pathlib import Path

from helpers.engines import ScriptedEngine
from spectui.core.compare.checkers import Checker
from spectui.core.tune.models import TuneDocument
from spectui.core.tune.runner import TuneFinished, TuneRunner, new_document

from .compare_helpers import BASELINE, CHANGED, FakeProber, document, plan

SPEEDS = {"ngram-simple": 500.0, "ngram-mod": 1500.0}
"""ngram-simple is 2x the baseline but changes its answer at a near-tie."""


def _tune(strict: bool = False, checker: Checker | None = None) -> TuneDocument:
    checks = {"a": checker} if checker is not None else None
    p = plan(("none", "ngram-simple", "ngram-mod"), ("a",), reps=1, checks=checks)
    p = p.model_copy(update={"identical_answers": strict})
    return new_document(document(p), budget_s=600.0, launch=["llama-server"], skipped=[], space=[])


async def _final(runner: TuneRunner) -> TuneDocument:
    last = None
    async for event in runner.run():
        last = event
    assert isinstance(last, TuneFinished)
    return last.document


def _engine() -> ScriptedEngine:
    return ScriptedEngine(
        speeds=SPEEDS, answers={"none": BASELINE, "ngram-simple": CHANGED, "ngram-mod": BASELINE}
    )


async def test_a_near_tie_change_is_probed_and_kept_with_a_caveat(tmp_path: Path) -> None:
    engine = _engine()
    prober = FakeProber(engine)
    doc = await _final(TuneRunner(engine, _tune(), outputs=[tmp_path / "t.json"], probe=prober))
    assert prober.seen and {spec for _, spec in prober.seen} == {"none"}
    result = {c.config: c for c in doc.candidates}["ngram-simple"].results["a"]
    assert result.verdict == "keep"
    assert "near-tie" in result.reason


async def test_identical_answers_drops_the_same_change(tmp_path: Path) -> None:
    engine = _engine()
    doc = await _final(
        TuneRunner(engine, _tune(strict=True), outputs=[tmp_path / "t.json"], probe=None)
    )
    result = {c.config: c for c in doc.candidates}["ngram-simple"].results["a"]
    assert result.verdict != "keep"


async def test_a_change_the_checker_passes_stays_in_the_race(tmp_path: Path) -> None:
    """Unprobed, the change would be divergent; the prompt's own checker vouches for it."""
    engine = _engine()
    tune = _tune(checker=Checker(regex=r"answer to a is (?i:forty two)"))
    doc = await _final(TuneRunner(engine, tune, outputs=[tmp_path / "t.json"], probe=None))
    candidate = {c.config: c for c in doc.candidates}["ngram-simple"]
    assert candidate.out_after is None
    assert candidate.results["a"].verdict == "keep"


async def test_identical_answers_puts_a_vouched_change_out(tmp_path: Path) -> None:
    engine = _engine()
    tune = _tune(strict=True, checker=Checker(regex=r"answer to a is (?i:forty two)"))
    doc = await _final(TuneRunner(engine, tune, outputs=[tmp_path / "t.json"], probe=None))
    assert {c.config: c for c in doc.candidates}["ngram-simple"].out_after == 1
