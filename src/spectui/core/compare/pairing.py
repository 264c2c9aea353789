"""How runs are measured and paired: a run's end-to-end throughput, where it sits in the
schedule, and the series and ratios the summaries (`summary`, `by_content`) are built from.

"Faster" is measured pair by pair: each round, a config's run of a prompt is set against the
baseline's run of that prompt in the same round (runs of one round are minutes apart, not an
hour), and the speedup is the median of those ratios, never a ratio of medians.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from spectui.core.compare.records import RunRecord


def throughput(record: RunRecord) -> float | None:
    """Tokens per second of wall time, TTFT included."""
    if not record.total_ms or not record.tokens:
        return None
    return record.tokens / (record.total_ms / 1000)


def ratio(a: float | None, b: float | None) -> float | None:
    """``a`` ÷ ``b`` (None when either is missing, or ``b`` is 0)."""
    return a / b if a is not None and b else None


def values(records: Iterable[RunRecord], get: Callable[[RunRecord], float | None]) -> list[float]:
    """``get`` of each record that has it."""
    return [v for r in records if (v := get(r)) is not None]


def slot(record: RunRecord) -> tuple[int, int]:
    """Where a run sits in the schedule: (round, client). A config's run is paired with the
    baseline's at the same place: the same round and, under load, the same client (whose
    prompts come in the same order), so both ran against the same mix of streams."""
    return record.round, record.client


def series(runs: Iterable[RunRecord], get: Callable[[RunRecord], float | None]) -> list[float]:
    """The values of one config × prompt's successful runs, in round order (what the noise
    floor's round-to-round changes are taken over)."""
    return values(sorted((r for r in runs if r.ok), key=slot), get)
