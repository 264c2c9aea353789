"""Compare report: correctness vs the baseline, medians, paired speedups, verdicts."""

from __future__ import annotations

from typing import Any

import pytest

from spectui.core.compare.records import RunRecord
from spectui.core.compare.summary import annotate, report_rows, summarise
from spectui.core.compare.summary_row import SummaryRow

from .compare_helpers import plan, record


def _rows(records: list[RunRecord]) -> dict[tuple[str, str], SummaryRow]:
    p = plan(("none", "ngram-simple"), ("a",), reps=3)
    return {(r.config, r.prompt): r for r in report_rows(p, records)}


def _pairs(base_ms: list[float], cfg_ms: list[float], **cfg: Any) -> list[RunRecord]:
    records = []
    for round_, (b, c) in enumerate(zip(base_ms, cfg_ms, strict=True), start=1):
        records.append(record("none", "a", round_, seq=10 * round_, total_ms=b))
        records.append(record("ngram-simple", "a", round_, seq=10 * round_ + 1, total_ms=c, **cfg))
    return records


def test_speedup_is_paired_within_rounds_not_a_ratio_of_medians() -> None:
    # Baseline drifts slower each round; the config is always exactly twice as fast as the
    # baseline of its own round. Ratio of medians would say 2x too here, so make them differ:
    base = [1000.0, 3000.0, 1100.0]
    cfg = [500.0, 1500.0, 2000.0]  # 2x, 2x, 0.55x
    rows = _rows(_pairs(base, cfg))
    row = rows[("ngram-simple", "a")]
    assert row.speedup_vs_baseline == pytest.approx(2.0)
    assert row.speedup_min == pytest.approx(1100 / 2000)
    assert row.speedup_max == pytest.approx(2.0)
    # ratio of medians would be 1100 / 1500
    assert row.speedup_vs_baseline != pytest.approx(1100 / 1500)
    assert row.pairs == 3
    # The baseline itself moved 3x between rounds: that noise swamps any call.
    assert row.verdict == "inconclusive"


def test_medians_and_ranges() -> None:
    rows = _rows(_pairs([1000, 1000, 1000], [500, 400, 600]))
    base = rows[("none", "a")]
    cfg = rows[("ngram-simple", "a")]
    assert base.verdict == "baseline"
    assert cfg.median_total_ms == 500
    assert (cfg.min_total_ms, cfg.max_total_ms) == (400, 600)
    assert cfg.speedup_vs_baseline == pytest.approx(2.0)
    assert cfg.verdict == "keep"
    # Its own runs swing ±37 %, yet it is faster in every round: a call, over a floor that
    # pools both configs' changes (±12 %).
    assert cfg.reason.startswith("2.00x faster (1.67–2.50, 3 rounds, noise ±12%)")


def test_slower_is_dropped_with_the_reason() -> None:
    row = _rows(_pairs([1000, 1000, 1000], [1600, 1700, 1500]))[("ngram-simple", "a")]
    assert row.verdict == "drop"
    assert row.reason.startswith("slower: 0.62x")


def test_within_noise_is_inconclusive() -> None:
    row = _rows(_pairs([1000, 1000, 1000], [990, 985, 995]))[("ngram-simple", "a")]
    assert row.verdict == "inconclusive"
    assert row.reason.startswith("a tie: 1.01x")


def test_faster_with_more_memory_shows_the_price() -> None:
    # No RAM total known in this plan: the 10 % default cannot be turned into bytes, so the
    # memory is a price shown, never a reason to drop (tests/unit/test_verdict.py has budgets).
    records = _pairs([1000] * 3, [500] * 3, rss=700 * 2**20)
    row = _rows(records)[("ngram-simple", "a")]
    assert row.verdict == "keep"
    assert "for +300 MiB RSS (+75%)" in row.reason


def test_a_little_allocator_noise_is_not_a_memory_cost() -> None:
    records = _pairs([1000] * 3, [500] * 3, rss=410 * 2**20)
    assert _rows(records)[("ngram-simple", "a")].verdict == "keep"


def test_faster_but_different_answers_is_dropped() -> None:
    records = _pairs([1000] * 3, [500] * 3, text="same answer, but then another")
    row = _rows(records)[("ngram-simple", "a")]
    assert row.verdict == "drop"
    assert "3 of 3 answers differ from the baseline" in row.reason
    assert (row.identical, row.compared) == (0, 3)


def test_more_checker_failures_than_baseline_is_dropped() -> None:
    records = _pairs([1000] * 3, [500] * 3, check_status="failed")
    records = [
        r if r.config != "none" else r.model_copy(update={"check_status": "passed"})
        for r in records
    ]
    row = _rows(records)[("ngram-simple", "a")]
    assert row.verdict == "drop"
    assert "checker failed on 3 of 3 runs (baseline: 0 of 3)" in row.reason


def test_checker_failing_equally_everywhere_costs_nothing() -> None:
    records = [
        r.model_copy(update={"check_status": "failed"}) for r in _pairs([1000] * 3, [500] * 3)
    ]
    assert _rows(records)[("ngram-simple", "a")].verdict == "keep"


def test_a_skipped_checker_is_neither_a_pass_nor_a_failure() -> None:
    records = _pairs([1000] * 3, [500] * 3, check_status="skipped")  # untrusted python checker
    row = _rows(records)[("ngram-simple", "a")]
    assert row.verdict == "keep"
    assert (row.checked, row.check_failures) == (0, 0)


def test_failures_and_pending() -> None:
    records = _pairs([1000] * 3, [500] * 3, status="failed")
    row = _rows(records)[("ngram-simple", "a")]
    assert row.verdict == "failed"
    assert row.failed == 3
    partial = _pairs([1000] * 2, [500] * 2)
    assert _rows(partial)[("ngram-simple", "a")].verdict == "pending"
    one_failed = _pairs([1000] * 3, [500] * 3)
    one_failed[-1] = one_failed[-1].model_copy(update={"status": "failed"})
    row = _rows(one_failed)[("ngram-simple", "a")]
    assert row.verdict == "drop"
    assert "1 of 3 runs failed" in row.reason


def test_warmups_are_not_counted() -> None:
    records = _pairs([1000] * 3, [500] * 3)
    records.append(record("ngram-simple", "a", 0, seq=1, total_ms=99999, warmup=True))
    row = _rows(records)[("ngram-simple", "a")]
    assert row.runs == 3
    assert row.max_total_ms == 500


def test_correctness_reference_is_the_same_rounds_baseline() -> None:
    p = plan(("none", "ngram-simple"), ("a",), reps=2)
    records = [
        record("none", "a", 0, seq=0, warmup=True, text="w"),
        record("none", "a", 1, seq=1, text="one"),
        record("ngram-simple", "a", 1, seq=4, text="one"),
        record("none", "a", 2, seq=5, text="two"),
        record("ngram-simple", "a", 2, seq=7, text="one"),
    ]
    out = {r.seq: r for r in annotate(p, records)}
    assert out[0].identical_to_baseline is None  # the very first baseline run is the reference
    assert out[1].identical_to_baseline is False  # baseline vs its own warm-up: not deterministic
    assert out[4].identical_to_baseline is True
    assert out[7].identical_to_baseline is False  # against round 2's baseline
    assert out[7].divergence is not None
    assert out[7].divergence.baseline == "two"


def test_no_identity_check_above_temperature_zero() -> None:
    p = plan(("none", "ngram-simple"), ("a",), reps=1, temperature=0.8)
    records = [record("none", "a", 1, seq=1), record("ngram-simple", "a", 1, seq=2, text="x")]
    assert [r.identical_to_baseline for r in annotate(p, records)] == [None, None]
    rows = summarise(p, records)
    assert rows[1].compared == 0


def test_synthetic_acceptance_is_never_kept() -> None:
    synth = "ngram-simple --spec-synth-len 4"
    p = plan(("none", synth), ("a",), reps=3)
    records = []
    for round_ in (1, 2, 3):
        records.append(record("none", "a", round_, seq=10 * round_, total_ms=1000))
        records.append(record(synth, "a", round_, seq=10 * round_ + 1, total_ms=500))
    row = {r.config: r for r in report_rows(p, records)}[synth]
    assert row.speedup_vs_baseline == pytest.approx(2.0)  # it was faster...
    assert row.verdict == "inconclusive"  # ...but forced acceptance is a demonstration
    assert row.reason.startswith("synthetic acceptance, not a result: 2.00x faster")
