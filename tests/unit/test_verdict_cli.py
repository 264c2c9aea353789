"""`spectui compare --memory-budget`: new comparisons take it, a resume re-judges with it, and a
bad one is one line before anything starts (scripted engines, no server)."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers.engines import FakeSetup, ScriptedEngine
from spectui.cli import main
from spectui.commands import compare as compare_command
from spectui.config import Settings
from spectui.core.compare.store import load_document
from spectui.core.llama.specconfig import SpecConfig

from .compare_helpers import compare_options


async def _compare(monkeypatch: pytest.MonkeyPatch, **args: object) -> Path:
    setup = FakeSetup()
    monkeypatch.setattr("spectui.app_setup.compare_setup", lambda settings, **_: setup)
    options = compare_options(no_chart=True, **args)
    assert await compare_command._compare(Settings(), options) == 0
    out = args.get("resume") or args["json_out"]
    assert isinstance(out, Path)
    return out


async def test_the_budget_is_in_the_plan_and_a_resume_rejudges(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("spectui.core.compare.budget.machine_memory", lambda: (16 * 2**30, None))
    out = await _compare(
        monkeypatch, configs=["ngram-simple"], prompts=None, reps=1, json_out=tmp_path / "r.json"
    )
    budget = load_document(out).plan.memory_budget
    assert (budget.text, budget.limit(gpu=False)) == ("10%", int(1.6 * 2**30))
    await _compare(monkeypatch, resume=out, memory_budget="256MiB")
    rejudged = load_document(out).plan.memory_budget
    assert rejudged.limit(gpu=False) == 256 * 2**20


def test_a_bad_memory_budget_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["compare", "--config", "ngram-simple", "--memory-budget", "plenty"])
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert err.count("\n") == 0
    assert err.startswith("spectui: --memory-budget 'plenty': give a size like 512MiB")


async def test_identical_answers_is_in_the_plan_and_a_resume_rejudges(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from spectui.core.compare.textdiff import TokenProb

    class Changing(FakeSetup):
        def engine(self, spec: SpecConfig) -> ScriptedEngine:
            engine = super().engine(spec)
            engine.answers = {"none": "it is forty two", "ngram-simple": "it is Forty two"}
            return engine

    class NearTie:
        async def top_candidates(self, request: object) -> list[TokenProb]:
            return [TokenProb(token="forty ", prob=0.41), TokenProb(token="Forty ", prob=0.40)]

    setup = Changing()
    monkeypatch.setattr("spectui.app_setup.compare_setup", lambda settings, **_: setup)
    monkeypatch.setattr(compare_command, "divergence_prober", lambda engine: NearTie())
    out = tmp_path / "r.json"
    args = compare_options(
        no_chart=True, configs=["ngram-simple"], prompts="builtin:two-lines", reps=1, json_out=out
    )
    await compare_command._compare(Settings(), args)
    doc = load_document(out)
    assert doc.plan.identical_answers is False
    row = next(r for r in doc.summary if r.config == "ngram-simple")
    assert row.near_tie_changes == 1 and "at a near-tie 0.41/0.40 — read both" in row.reason
    assert row.verdict != "drop"

    runs = len(doc.runs)
    args = compare_options(no_chart=True, resume=out, identical_answers=True)
    await compare_command._compare(Settings(), args)
    doc = load_document(out)
    assert doc.plan.identical_answers is True
    row = next(r for r in doc.summary if r.config == "ngram-simple")
    assert row.verdict == "drop" and "identical answers asked" in row.reason
    assert len(doc.runs) == runs  # re-judged, nothing re-run
