"""One judge (`core.compare.judge`): compare's per-prompt, pooled and per-class verdicts and tune's
results come from the same rule, with the same guards; verdicts and run statuses are enums whose
JSON is the strings it always was; files written before the judge still load."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from spectui.core.compare.by_content import content_rows
from spectui.core.compare.judge import MIN_KEEP_ROUNDS, with_verdicts
from spectui.core.compare.models import ComparePlan
from spectui.core.compare.outcomes import RunStatus, SpeedCall, Unsettled, Verdict
from spectui.core.compare.records import RunRecord
from spectui.core.compare.stats import TOO_NOISY
from spectui.core.compare.store import dump_document, load_document
from spectui.core.compare.summary import pooled_rows, report_rows
from spectui.core.compare.summary_row import SummaryRow
from spectui.core.tune.export import leaderboard, to_markdown, verdict_text
from spectui.core.tune.models import PromptResult, TuneDocument, Winner
from spectui.core.tune.report import OVERALL, overall_rows, refreshed

from .compare_helpers import document, plan, record

FIXTURES = Path(__file__).parent.parent / "fixtures"
OLD_COMPARE = FIXTURES / "compare-before-judge.json"
"""A comparison written by spectui before the judge (commit d0f7da7): none and three ngram
types on two prompts, 3 rounds; ngram-cache's runs of b all failed."""
OLD_TUNE = FIXTURES / "tune-before-judge.json"
"""A tune written by spectui before the judge (commit d0f7da7) over `TUNE_SPEEDS`, prompts a
and b: its overall verdicts came from tune's own rule (ngram-mod 'drop' after one round)."""


def _runs(
    p: ComparePlan, totals: dict[str, list[float]], prompts: tuple[str, ...] = ("a",)
) -> list[RunRecord]:
    """Config -> its total ms per round (the same on every prompt), as run records."""
    out: list[RunRecord] = []
    for round_ in range(1, max(len(v) for v in totals.values()) + 1):
        for config in (c.name for c in p.configs):
            if round_ > len(totals[config]):
                continue
            for prompt in prompts:
                total = totals[config][round_ - 1]
                out.append(record(config, prompt, round_, seq=len(out), total_ms=total))
    return out


def _judged(
    p: ComparePlan, runs: list[RunRecord]
) -> tuple[list[SummaryRow], dict[str, SummaryRow]]:
    """Compare's per-prompt rows and tune's overall rows for ``runs``."""
    rows = report_rows(p, runs)
    return rows, overall_rows(p, runs, rows)


def test_one_round_settles_nothing_per_prompt_or_pooled() -> None:
    p = plan(("none", "ngram-simple"), ("a", "b"), reps=1)
    rows, overall = _judged(p, _runs(p, {"none": [1000], "ngram-simple": [400]}, ("a", "b")))
    mine = [r for r in rows if r.config == "ngram-simple"]
    assert {r.verdict for r in mine} == {Verdict.INCONCLUSIVE}
    assert {r.unsettled for r in mine} == {Unsettled.ONE_ROUND}
    pooled = overall["ngram-simple"]
    # Six paired runs of 2.5x, yet one round: the spread is not known (tune's old rule, with a
    # floor from elsewhere, would call such a pool).
    assert pooled.verdict == Verdict.INCONCLUSIVE and pooled.unsettled == Unsettled.ONE_ROUND
    assert pooled.reason.endswith("needs about 1 more round")


def test_a_config_whose_own_runs_swing_is_too_noisy_for_tune_as_for_compare() -> None:
    # b is steady for both, so the comparison's floor is small; ngram-mod's own runs of a swing
    # ±75 % round to round: compare calls a too noisy, and so does tune's pooled result.
    p = plan(("none", "ngram-mod"), ("a", "b"), reps=4)
    runs = _runs(p, {"none": [1000] * 4, "ngram-mod": [1000] * 4}, ("b",))
    runs += [record("none", "a", r, seq=100 + r, total_ms=1000) for r in range(1, 5)] + [
        record("ngram-mod", "a", r, seq=200 + r, total_ms=t)
        for r, t in zip(range(1, 5), [1250, 714, 1250, 714], strict=True)
    ]
    rows, overall = _judged(p, runs)
    a = next(r for r in rows if r.config == "ngram-mod" and r.prompt == "a")
    assert a.noise_floor is not None and a.noise_floor <= TOO_NOISY
    assert a.verdict == Verdict.INCONCLUSIVE and a.unsettled == Unsettled.TOO_NOISY
    pooled = overall["ngram-mod"]
    assert pooled.config_noise is not None and pooled.config_noise > TOO_NOISY
    assert pooled.verdict == Verdict.INCONCLUSIVE and pooled.unsettled == Unsettled.TOO_NOISY
    assert pooled.reason.startswith("too noisy to call:")


def test_a_fault_on_any_prompt_drops_the_pool_and_a_loss_is_named() -> None:
    p = plan(("none", "ngram-simple", "ngram-mod"), ("a", "b"), reps=3)
    runs = _runs(p, {"none": [1000] * 3, "ngram-simple": [500] * 3, "ngram-mod": [500] * 3})
    runs += [record("none", "b", r, seq=50 + r, total_ms=1000) for r in (1, 2, 3)]
    runs += [record("ngram-simple", "b", r, seq=60 + r, status="failed") for r in (1, 2, 3)]
    runs += [record("ngram-mod", "b", r, seq=70 + r, total_ms=1500) for r in (1, 2, 3)]
    _, overall = _judged(p, runs)
    assert overall["ngram-simple"].verdict == Verdict.DROP
    assert overall["ngram-simple"].reason == "on b: all 3 runs failed"
    # Faster on a, slower on b: the pool is what it is, and the prompt it loses on is named.
    assert "net loss on b" in overall["ngram-mod"].reason
    assert overall["none"].verdict == Verdict.BASELINE


TOTAL_MS = st.floats(min_value=300, max_value=3000)
ROUNDS = st.lists(st.tuples(TOTAL_MS, TOTAL_MS), min_size=1, max_size=5)
"""Per round, (the baseline's total ms, the candidate's): every round complete."""


@settings(max_examples=60, deadline=None)
@given(rounds=ROUNDS)
def test_tune_and_compare_give_one_verdict_for_the_same_samples(
    rounds: list[tuple[float, float]],
) -> None:
    # One prompt: tune's overall result pools exactly compare's row of that prompt.
    base, mine = ([r[i] for r in rounds] for i in (0, 1))
    p = plan(("none", "ngram-simple"), ("a",), reps=len(rounds))
    rows, overall = _judged(p, _runs(p, {"none": base, "ngram-simple": mine}))
    row = next(r for r in rows if r.config == "ngram-simple")
    pooled = overall["ngram-simple"]
    assert (pooled.verdict, pooled.unsettled, pooled.speed_call) == (
        row.verdict,
        row.unsettled,
        row.speed_call,
    )
    assert pooled.speedup_low == row.speedup_low and pooled.pairs == row.pairs


@settings(max_examples=40, deadline=None)
@given(rounds=ROUNDS, prompts=st.integers(min_value=1, max_value=3))
def test_a_content_class_of_every_prompt_is_judged_as_tune_overall(
    rounds: list[tuple[float, float]], prompts: int
) -> None:
    keys = tuple("abc"[:prompts])
    base, mine = ([r[i] for r in rounds] for i in (0, 1))
    p = plan(("none", "ngram-mod"), keys, reps=len(rounds))
    runs = _runs(p, {"none": base, "ngram-mod": mine}, keys)
    _, overall = _judged(p, runs)
    (row,) = [r for r in content_rows(p, runs) if r.config == "ngram-mod"]  # one class
    if row.verdict is not None:  # (a class needs MIN_KEEP_ROUNDS rounds for a verdict)
        assert row.verdict == overall["ngram-mod"].verdict
        assert row.reason == overall["ngram-mod"].reason


@settings(max_examples=80, deadline=None)
@given(rounds=ROUNDS, prompts=st.integers(min_value=1, max_value=2))
def test_the_rules_guards_hold_per_prompt_and_pooled(
    rounds: list[tuple[float, float]], prompts: int
) -> None:
    keys = tuple("ab"[:prompts])
    base, mine = ([r[i] for r in rounds] for i in (0, 1))
    p = plan(("none", "ngram-mod"), keys, reps=len(rounds))
    runs = _runs(p, {"none": base, "ngram-mod": mine}, keys)
    rows, overall = _judged(p, runs)
    for row in [*rows, *overall.values()]:
        if row.config == "none":
            assert row.verdict == Verdict.BASELINE
            continue
        if row.verdict == Verdict.KEEP:
            # A keep: enough rounds, and the whole interval beyond the noise floor.
            assert row.pairs >= MIN_KEEP_ROUNDS and row.noise_floor is not None
            assert row.speedup_low is not None and row.speedup_low > 1 + row.noise_floor
        if row.pairs < 2:
            assert row.verdict == Verdict.INCONCLUSIVE and row.unsettled == Unsettled.ONE_ROUND
        if row.noise_floor is not None and row.noise_floor > TOO_NOISY:
            assert row.verdict == Verdict.INCONCLUSIVE
        if row.verdict == Verdict.INCONCLUSIVE:
            assert row.unsettled is not None
        else:
            assert row.unsettled is None


def test_pooled_rows_pair_each_prompt_with_its_own_baseline_run() -> None:
    p = plan(("none", "ngram-simple"), ("a", "b"), reps=3)
    # a is slow and b fast for both: a ratio across prompts would be nonsense, and a config's
    # own noise taken across prompts (1000 vs 250 ms) would look like ±300 %.
    runs = _runs(p, {"none": [1000] * 3, "ngram-simple": [500] * 3}, ("a",))
    runs += _runs(p, {"none": [250] * 3, "ngram-simple": [125] * 3}, ("b",))
    rows = with_verdicts(p, pooled_rows(p, OVERALL, runs, ["a", "b"]))
    mine = next(r for r in rows if r.config == "ngram-simple")
    assert mine.speedup_vs_baseline == 2.0 and mine.pairs == 3
    assert mine.config_noise is not None and mine.config_noise < 0.05
    assert mine.planned == 6 and mine.verdict == Verdict.KEEP


def test_verdicts_and_statuses_are_enums_whose_json_is_the_string() -> None:
    failed = record("none", "a", 1, status="failed")
    assert failed.status is RunStatus.FAILED and not failed.ok
    assert json.loads(failed.model_dump_json())["status"] == "failed"
    assert RunRecord.model_validate_json(failed.model_dump_json()).status is RunStatus.FAILED
    row = SummaryRow(config="c", prompt="a", runs=3, planned=3, failed=0, verdict="keep")
    assert row.verdict is Verdict.KEEP and f"{row.verdict}" == "keep"
    assert {"keep": 1}[row.verdict] == 1  # a verdict is its string, as a key too
    data = json.loads(
        row.model_copy(
            update={"speed_call": SpeedCall.TIE, "unsettled": Unsettled.TIE}
        ).model_dump_json()
    )
    assert (data["verdict"], data["speed_call"], data["unsettled"]) == ("keep", "tie", "a tie")
    result = PromptResult(verdict="inconclusive", unsettled="too noisy")
    again = PromptResult.model_validate_json(result.model_dump_json())
    assert again.verdict is Verdict.INCONCLUSIVE and again.unsettled is Unsettled.TOO_NOISY
    assert (
        json.loads(Winner(config="c", args=[], speedup=2.0, verdict="keep").model_dump_json())[
            "verdict"
        ]
        == "keep"
    )


def _without(data: Any, key: str) -> Any:
    """``data`` (parsed JSON) without ``key`` anywhere in it."""
    if isinstance(data, dict):
        return {k: _without(v, key) for k, v in data.items() if k != key}
    if isinstance(data, list):
        return [_without(v, key) for v in data]
    return data


def test_an_old_compare_file_loads_and_its_json_reads_as_before() -> None:
    old = load_document(OLD_COMPARE)
    assert {r.status for r in old.runs} == {RunStatus.OK, RunStatus.FAILED}
    assert all(type(r.verdict) is Verdict for r in old.summary)
    rejudged = old.updated(old.runs, old.server_starts, old.sessions)
    # The per-prompt rule did not change: the same verdicts, reasons and JSON (the judge adds
    # only `unsettled`).
    before = json.loads(OLD_COMPARE.read_text())
    after = json.loads(dump_document(rejudged))
    assert _without(after["summary"], "unsettled") == before["summary"]
    assert after["runs"] == before["runs"]
    verdicts = {(r.config, r.prompt): r.verdict for r in rejudged.summary}
    assert verdicts[("ngram-cache", "b")] == Verdict.FAILED
    # The class pools b, where every ngram-cache run failed: a fault on any prompt drops it.
    cache = next(r for r in rejudged.by_content if r.config == "ngram-cache")
    assert cache.verdict == Verdict.DROP and cache.reason == "on b: all 3 runs failed"
    assert load_document(FIXTURES / "compare-loaded-machine.json").summary


def test_an_old_tune_file_loads_and_is_rejudged_by_the_one_rule() -> None:
    old = TuneDocument.model_validate_json(OLD_TUNE.read_text())
    assert all(type(c.overall.verdict) is Verdict for c in old.candidates)
    before = {c.config: c for c in old.candidates}
    assert before["ngram-mod"].overall.verdict == Verdict.DROP  # tune's own rule, one round
    new = refreshed(old)
    after = {c.config: c for c in new.candidates}
    for config, candidate in after.items():
        assert candidate.results.keys() == before[config].results.keys()
        for key, result in candidate.results.items():  # compare's rows, as before
            assert result.verdict == before[config].results[key].verdict
    assert after["ngram-simple"].overall.verdict == Verdict.KEEP
    mod = after["ngram-mod"].overall
    assert mod.verdict == Verdict.INCONCLUSIVE and mod.unsettled == Unsettled.ONE_ROUND
    tie = after["ngram-cache"].overall
    assert tie.verdict == Verdict.INCONCLUSIVE and tie.unsettled == Unsettled.TIE
    winner = new.winners[OVERALL]
    assert winner is not None and winner.config == "ngram-simple"
    # The old file's leaderboard still reads (it kept 'a tie' in the reason only).
    assert leaderboard(old, None)


def test_tune_says_why_a_verdict_is_open_as_compare_does() -> None:
    assert verdict_text(PromptResult(verdict="inconclusive", unsettled="one round")) == (
        "inconclusive · one round"
    )
    assert verdict_text(PromptResult(verdict="inconclusive", unsettled="too noisy")) == (
        "inconclusive · too noisy"
    )
    assert verdict_text(PromptResult(verdict="drop", net_loss=True)) == "drop · net loss"
    new = refreshed(TuneDocument.model_validate_json(OLD_TUNE.read_text()))
    cells = {c.config: cells for c, cells in leaderboard(new, None)}
    # ngram-mod left the race after one round: the cell says both.
    assert cells["ngram-mod"][-1] == "one round · out after round 1"
    assert "too noisy to call" in to_markdown(new)


def test_a_fresh_compare_document_and_a_tune_share_the_judges_rows() -> None:
    p = plan(("none", "ngram-simple"), ("a",), reps=3)
    runs = _runs(p, {"none": [1000] * 3, "ngram-simple": [500] * 3})
    doc = document(p).updated(runs, [], [])
    (row,) = [r for r in doc.summary if r.config == "ngram-simple"]
    assert row.verdict == Verdict.KEEP and row.unsettled is None
    assert overall_rows(p, doc.runs, doc.summary)["ngram-simple"].verdict == Verdict.KEEP
