"""The decision rule on recorded run data: speed against the measured noise, memory as a price
with a budget, correctness, TTFT apart, and verdicts that read as one sentence."""

from __future__ import annotations

import pytest

from spectui.core.compare.budget import MemoryBudget, MemoryBudgetError
from spectui.core.compare.models import ComparePlan
from spectui.core.compare.records import RunRecord
from spectui.core.compare.stats import bootstrap_interval, noise_floor, rounds_to_settle
from spectui.core.compare.summary import report_rows
from spectui.core.compare.summary_row import SummaryRow

from .compare_helpers import plan, record

MiB = 2**20
GiB = 2**30
RAM = 24 * GiB
"""The machine of the issue's report."""

# Recorded on a 2-core VM with Gemma 3 270M (table-row, temperature 0): total ms per round.
BASE_MS = [3010.0, 2950.0, 3080.0]
"""The baseline `none`: ±2–4 % round to round."""
NGRAM_MOD_MS = [1350.0, 1322.0, 1381.0]
"""ngram-mod on the table prompt: ~2.23x."""
NOISY_TIE_MS = [3270.0, 2710.0, 3050.0]
"""ngram-mod on a prompt with nothing to copy: 0.92x, 1.09x, 1.01x."""


def _plan(budget: str = "10%", reps: int = 3, gpu_total: int | None = None) -> ComparePlan:
    p = plan(("none", "ngram-mod"), ("table-row",), reps=reps)
    limit = MemoryBudget.parse(budget, ram_total_bytes=RAM, gpu_total_bytes=gpu_total)
    return p.model_copy(update={"memory_budget": limit})


def _runs(
    base_ms: list[float],
    cfg_ms: list[float],
    *,
    base_rss: int = 520 * MiB,
    cfg_rss: int = 668 * MiB,
    cfg_ttft: float = 100.0,
    text: str = "same answer",
    gpu: tuple[int, int] | None = None,
) -> list[RunRecord]:
    out = []
    for round_, (b, c) in enumerate(zip(base_ms, cfg_ms, strict=True), start=1):
        base = record("none", "table-row", round_, seq=10 * round_, total_ms=b, rss=base_rss)
        cfg = record(
            "ngram-mod", "table-row", round_, seq=10 * round_ + 1, total_ms=c, rss=cfg_rss,
            text=text,
        )  # fmt: skip
        cfg = cfg.model_copy(update={"ttft_ms": cfg_ttft})
        if gpu is not None:
            base = base.model_copy(update={"peak_gpu_bytes": gpu[0]})
            cfg = cfg.model_copy(update={"peak_gpu_bytes": gpu[1]})
        out += [base, cfg]
    return out


def _row(p: ComparePlan, records: list[RunRecord]) -> SummaryRow:
    return next(r for r in report_rows(p, records) if r.config == "ngram-mod")


def test_a_2x_win_for_148_mib_is_kept_under_the_default_budget() -> None:
    row = _row(_plan(), _runs(BASE_MS, NGRAM_MOD_MS))
    assert row.verdict == "keep"
    assert row.speed_call == "faster"
    assert row.speedup_vs_baseline == pytest.approx(2.23, abs=0.01)
    assert row.speedup_low is not None and row.speedup_low > 2.1
    assert row.noise_floor == pytest.approx(0.03, abs=0.01)
    assert row.memory_extra_bytes == 148 * MiB
    assert row.memory_budget_bytes == RAM // 10
    assert row.reason == (
        "2.23x faster (2.23–2.23, 3 rounds, noise ±3%) for +148 MiB RSS (+28%), same answers"
    )


def test_the_same_win_is_dropped_under_a_tight_budget() -> None:
    row = _row(_plan("100MiB"), _runs(BASE_MS, NGRAM_MOD_MS))
    assert row.verdict == "drop"
    assert row.reason.startswith("2.23x faster")
    assert "but +148 MiB RSS (+28%) is over the memory budget of 100 MiB" in row.reason


def test_a_percentage_budget_is_of_vram_when_the_server_uses_a_gpu() -> None:
    runs = _runs(BASE_MS, NGRAM_MOD_MS, gpu=(2 * GiB, 2 * GiB + 300 * MiB))
    row = _row(_plan("1%", gpu_total=16 * GiB), runs)  # 1 % of 16 GiB: 164 MiB
    assert row.memory_kind == "VRAM"
    assert row.verdict == "drop"
    assert "+300 MiB VRAM" in row.reason
    assert _row(_plan("5%", gpu_total=16 * GiB), runs).verdict == "keep"


def test_noise_is_not_called_faster() -> None:
    row = _row(_plan(), _runs(BASE_MS, NOISY_TIE_MS, cfg_rss=520 * MiB))
    assert row.verdict == "inconclusive"
    assert row.speed_call == "tie"
    # The floor pools every config's round-to-round change: the baseline's ±3 % and this
    # config's own ±17 % give ±8 %.
    assert row.reason.startswith("a tie: 1.01x (0.92–1.09, 3 rounds, noise ±8%)")
    assert "no extra memory" in row.reason


def test_an_unclear_gain_says_how_many_rounds_would_settle_it() -> None:
    # 1.15x in the middle, but one round at 0.97x: the interval reaches below the noise.
    row = _row(_plan(), _runs(BASE_MS, [2600.0, 3040.0, 2680.0], cfg_rss=520 * MiB))
    assert row.speed_call == "unclear"
    assert row.verdict == "inconclusive"
    assert row.rounds_needed is not None and 1 <= row.rounds_needed <= 20
    assert f"needs about {row.rounds_needed} more round" in row.reason


def test_a_keep_needs_three_paired_rounds() -> None:
    row = _row(_plan(reps=2), _runs(BASE_MS[:2], NGRAM_MOD_MS[:2]))
    assert row.speed_call == "faster"
    assert row.verdict == "inconclusive"
    assert row.reason.endswith("needs 1 more round (a keep needs 3)")


def test_one_round_settles_nothing() -> None:
    row = _row(_plan(reps=1), _runs(BASE_MS[:1], NGRAM_MOD_MS[:1]))
    assert row.speed_call == "unclear"
    assert row.verdict == "inconclusive"


def test_clearly_slower_is_dropped_with_its_price() -> None:
    row = _row(_plan(), _runs(BASE_MS, [3950.0, 3900.0, 4010.0], cfg_rss=620 * MiB))
    assert row.verdict == "drop"
    assert row.speed_call == "slower"
    assert row.reason.startswith("slower: 0.76x (0.76–0.77, 3 rounds, noise ±2%), +100 MiB RSS")


def test_a_changed_answer_drops_it_whatever_the_speed() -> None:
    row = _row(_plan(), _runs(BASE_MS, NGRAM_MOD_MS, text="| a | c |"))
    assert row.verdict == "drop"
    assert row.reason.startswith("3 of 3 answers differ from the baseline")
    assert "2.23x faster" in row.reason  # the evidence is still there


def test_a_slower_first_token_is_said_even_when_it_wins() -> None:
    row = _row(_plan(), _runs(BASE_MS, NGRAM_MOD_MS, cfg_ttft=160.0))
    assert row.verdict == "keep"
    assert row.reason.endswith("but the first token comes 1.60x later (1.60–1.60)")


def test_the_summary_json_carries_interval_noise_and_memory() -> None:
    row = _row(_plan(), _runs(BASE_MS, NGRAM_MOD_MS))
    data = row.model_dump(mode="json")
    for key in (
        "verdict",
        "reason",
        "speedup_low",
        "speedup_high",
        "noise_floor",
        "memory_extra_bytes",
        "memory_extra_fraction",
        "memory_budget_bytes",
    ):
        assert data[key] is not None, key


def test_bootstrap_interval_is_deterministic_and_spans_the_data() -> None:
    values = [1.9, 2.1, 2.0, 2.3, 1.8, 2.2]
    assert bootstrap_interval(values) == bootstrap_interval(list(reversed(values)))
    low, high = bootstrap_interval(values) or (0, 0)
    assert 1.8 <= low < 2.05 < high <= 2.3
    assert bootstrap_interval([]) is None
    assert bootstrap_interval([1.5]) == (1.5, 1.5)


def test_noise_floor_is_the_baselines_round_to_round_change() -> None:
    assert noise_floor([[100.0]]) is None  # one round: unknown
    assert noise_floor([[100.0, 100.0, 100.0]]) == pytest.approx(0.02)  # never below 2 %
    assert noise_floor([[100.0, 110.0], [50.0, 45.0]]) == pytest.approx(0.1, abs=0.01)


def test_rounds_to_settle() -> None:
    assert rounds_to_settle([1.0, 1.01], (0.99, 1.02), 0.03) is None  # a tie
    assert rounds_to_settle([1.2, 1.2], (1.2, 1.2), 0.03) == 1
    more = rounds_to_settle([1.15, 1.15, 1.15], (0.97, 1.19), 0.03)
    assert more is not None and more >= 1


@pytest.mark.parametrize(
    ("text", "limit"),
    [("512MiB", 512 * MiB), ("2GiB", 2 * GiB), ("1.5 GB", 1_500_000_000), ("10%", RAM // 10)],
)
def test_memory_budget_parses(text: str, limit: int) -> None:
    assert MemoryBudget.parse(text, ram_total_bytes=RAM).limit(gpu=False) == limit


@pytest.mark.parametrize("text", ["lots", "10 parsecs", "150%", "-5MiB", ""])
def test_a_bad_memory_budget_is_one_line(text: str) -> None:
    with pytest.raises(MemoryBudgetError) as caught:
        MemoryBudget.parse(text, ram_total_bytes=RAM)
    assert "\n" not in str(caught.value)


def test_an_unknown_total_makes_a_percentage_a_price_only() -> None:
    budget = MemoryBudget.parse("10%", ram_total_bytes=None)
    assert budget.limit(gpu=False) is None
    assert "total unknown" in budget.describe(gpu=False)


def test_a_baseline_that_jumps_between_rounds_decides_nothing() -> None:
    # Recorded while two other test suites shared the 2 cores: 16 s, 14 s, then 1.7 s.
    row = _row(_plan(), _runs([16017.0, 14480.0, 1724.0], [7076.0, 841.0, 1446.0]))
    assert row.noise_floor is not None and row.noise_floor > 0.25
    assert row.speed_call == "unclear"
    assert row.verdict == "inconclusive"
    assert row.reason.startswith("too noisy to call:")
    assert "runs changed ±280% between rounds" in row.reason
