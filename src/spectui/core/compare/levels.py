"""Concurrency levels: per config × level, what N streams at once give, judged by the one rule.

A level's block (one config, one round, N clients at once, closed loop) yields:

- **aggregate tok/s**: the tokens the server generated over the block (each response's own
  ``timings.predicted_n``) ÷ the time at least one of the block's requests was in flight (the
  union of its requests' send → last token intervals, client clock). At level 1 that is the
  sum of the runs' times, so the gaps between runs (checkers, bookkeeping) never count.
- per request: its decode rate (the server's ``predicted_per_second``), TTFT, end-to-end
  latency (send → last token), time before a slot began its prompt (`RunRecord.queue_ms`), and
  whether it waited for a slot (`RunRecord.waited_for_slot`).

The speed call pairs round with round: a config's aggregate in a round ÷ the baseline's at the
same level in the same round; its noise floor is the round-to-round change of every config's
aggregate *at that level*, so a noisy level never borrows a quiet level's floor. Each level's
rows are `SummaryRow`s (the level's name in place of a prompt), so `judge.with_verdicts` judges
them as it judges prompts: speed, memory, answers, checkers. A block whose runs are not all in
(a failure, or split across --resume sessions) gives no aggregate and no pair.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from datetime import timedelta

from pydantic import BaseModel, ConfigDict

from spectui.core.compare.judge import with_verdicts
from spectui.core.compare.models import ComparePlan
from spectui.core.compare.outcomes import SpeedCall, Verdict
from spectui.core.compare.records import RunRecord
from spectui.core.compare.stats import bootstrap_interval, noise_floor
from spectui.core.compare.summary import annotate, base_row
from spectui.core.compare.summary_row import SummaryRow


class LevelRow(SummaryRow):
    """One config at one concurrency level, over every counted round. ``prompt`` holds the
    level's name ('2 streams'); the speed fields are about the aggregate throughput."""

    level: int
    """Concurrent client streams."""
    requests: int = 0
    """Counted requests that succeeded."""
    aggregate_tokens_per_second: float | None = None
    """Median over rounds of the block's aggregate generated tokens per second."""
    aggregate_min: float | None = None
    """Lowest round's aggregate."""
    aggregate_max: float | None = None
    """Highest round's aggregate."""
    request_tokens_per_second: float | None = None
    """Median per-request decode rate (the server's own timings)."""
    ttft_p50_ms: float | None = None
    """Median time to first token over the level's requests."""
    ttft_p95_ms: float | None = None
    """95th percentile (nearest rank) of the time to first token."""
    latency_p50_ms: float | None = None
    """Median end-to-end latency (request sent -> last token)."""
    latency_p95_ms: float | None = None
    """95th percentile (nearest rank) of that latency."""
    queue_p95_ms: float | None = None
    """95th percentile of the time before a slot began the prompt."""
    waited: int = 0
    """Requests sent while every slot was busy (they queued for one)."""
    acceptance: float | None = None
    """Accepted ÷ drafted over the level's requests (pooled, not a median)."""


class LevelVerdict(BaseModel):
    """Where speculation stops paying for one config, in one sentence."""

    model_config = ConfigDict(frozen=True)

    config: str
    """Config name."""
    sentence: str
    """'keep up to 2 concurrent streams — 1.42x at 1, 1.10x at 2; drop at 4 (0.83x, …)'."""


def level_name(level: int) -> str:
    """'1 stream', '4 streams': a level's row name."""
    return f"{level} stream" + ("s" if level != 1 else "")


def percentile(values: Sequence[float], share: float) -> float | None:
    """The nearest-rank percentile (``share`` 0.95: p95) of ``values``; None when empty."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(math.ceil(share * len(ordered)) - 1, 0)]


def generated(record: RunRecord) -> int:
    """Tokens the server generated for ``record`` (its own timings; the client's count if the
    timings are missing)."""
    return int(record.server_timings.get("predicted_n", record.tokens))


def request_rate(record: RunRecord) -> float | None:
    """The request's decode rate from the server's timings (the client's if missing)."""
    rate = record.server_timings.get("predicted_per_second")
    return rate if rate else record.tokens_per_second


def busy_seconds(records: Sequence[RunRecord]) -> float | None:
    """How long at least one of ``records`` was in flight (the union of send -> last token);
    without send times (an older file), the sum of their times."""
    if any(r.total_ms is None for r in records):
        return None
    if any(r.sent_at is None for r in records):
        return sum(r.total_ms or 0.0 for r in records) / 1000
    spans = sorted(
        (r.sent_at, r.sent_at + timedelta(milliseconds=r.total_ms or 0.0))
        for r in records
        if r.sent_at is not None
    )
    total, (start, end) = 0.0, spans[0]
    for low, high in spans[1:]:
        if low > end:
            total += (end - start).total_seconds()
            start, end = low, high
        else:
            end = max(end, high)
    return total + (end - start).total_seconds()


def block_aggregate(records: Sequence[RunRecord], planned: int) -> float | None:
    """A block's aggregate generated tok/s; None unless all ``planned`` runs succeeded in one
    session (a block split by --resume has no meaningful span)."""
    if len(records) != planned or not all(r.ok for r in records):
        return None
    if len({r.session for r in records}) != 1:
        return None
    seconds = busy_seconds(records)
    if not seconds:
        return None
    return sum(generated(r) for r in records) / seconds


def level_rows(plan: ComparePlan, records: Sequence[RunRecord]) -> list[LevelRow]:
    """One judged row per config × level (levels ascending, configs in plan order)."""
    counted = [r for r in annotate(plan, records) if not r.warmup]
    rows: list[LevelRow] = []
    for level in plan.concurrency:
        at_level = [r for r in counted if r.level == level]
        per_round = {c.name: _per_round(plan, at_level, c.name, level) for c in plan.configs}
        noise = noise_floor([_series(per_round[c.name], 0) for c in plan.configs])
        ttft_noise = noise_floor([_series(per_round[c.name], 1) for c in plan.configs])
        base = per_round[plan.baseline.name]
        level_rows_: list[SummaryRow] = []
        for config in plan.configs:
            mine = [r for r in at_level if r.config == config.name]
            name = level_name(level) if plan.arrivals is None else f"recorded {plan.speed:g}x"
            row = base_row(plan, config.name, name, mine, {}, config.is_baseline)
            own = per_round[config.name]
            update = _level_fields(plan, config.name, level, mine, own)
            update.update(noise_floor=noise, ttft_noise_floor=ttft_noise)
            update["config_noise"] = noise_floor([_series(own, 0)])
            if not config.is_baseline:
                update.update(_paired(own, base))
            level_rows_.append(LevelRow(**{**row.model_dump(), **update}))
        rows += [r for r in with_verdicts(plan, level_rows_) if isinstance(r, LevelRow)]
    return rows


RoundValues = dict[int, tuple[float, float | None]]
"""Round -> (the block's aggregate tok/s, its median TTFT)."""


def _per_round(plan: ComparePlan, runs: list[RunRecord], config: str, level: int) -> RoundValues:
    planned = plan.runs_per_prompt(level) * len(plan.prompts)
    out: RoundValues = {}
    for round_ in sorted({r.round for r in runs if r.config == config}):
        block = [r for r in runs if r.config == config and r.round == round_]
        aggregate = block_aggregate(block, planned)
        if aggregate is not None:
            ttfts = [r.ttft_ms for r in block if r.ttft_ms is not None]
            out[round_] = (aggregate, statistics.median(ttfts) if ttfts else None)
    return out


def _series(values: RoundValues, index: int) -> list[float]:
    return [v for _, pair in sorted(values.items()) if (v := pair[index]) is not None]


def _level_fields(
    plan: ComparePlan, config: str, level: int, mine: list[RunRecord], own: RoundValues
) -> dict[str, object]:
    ok = [r for r in mine if r.ok]
    aggregates = [a for a, _ in own.values()]

    def values(get: Callable[[RunRecord], float | None]) -> list[float]:
        return [v for r in ok if (v := get(r)) is not None]

    drafted = sum(r.drafted for r in ok)
    rates = values(request_rate)
    return {
        "level": level,
        "planned": plan.planned_rounds(config) * plan.runs_per_prompt(level) * len(plan.prompts),
        "requests": len(ok),
        "aggregate_tokens_per_second": statistics.median(aggregates) if aggregates else None,
        "aggregate_min": min(aggregates, default=None),
        "aggregate_max": max(aggregates, default=None),
        "request_tokens_per_second": statistics.median(rates) if rates else None,
        "ttft_p50_ms": percentile(values(lambda r: r.ttft_ms), 0.5),
        "ttft_p95_ms": percentile(values(lambda r: r.ttft_ms), 0.95),
        "latency_p50_ms": percentile(values(lambda r: r.total_ms), 0.5),
        "latency_p95_ms": percentile(values(lambda r: r.total_ms), 0.95),
        "queue_p95_ms": percentile(values(lambda r: r.queue_ms), 0.95),
        "waited": sum(1 for r in ok if r.waited_for_slot),
        "acceptance": sum(r.accepted for r in ok) / drafted if drafted else None,
    }


def _paired(own: RoundValues, base: RoundValues) -> dict[str, object]:
    """The round-by-round ratios to the baseline's blocks at the same level."""
    rounds = sorted(set(own) & set(base))
    speed = [own[r][0] / base[r][0] for r in rounds if base[r][0]]
    ttft = [a / b for r in rounds if (a := own[r][1]) is not None and (b := base[r][1])]
    decode_interval = bootstrap_interval(speed)
    ttft_interval = bootstrap_interval(ttft)
    return {
        "pairs": len(speed),
        "speedup_vs_baseline": statistics.median(speed) if speed else None,
        "speedup_min": min(speed, default=None),
        "speedup_max": max(speed, default=None),
        "speedup_low": decode_interval[0] if decode_interval else None,
        "speedup_high": decode_interval[1] if decode_interval else None,
        "ttft_ratio_vs_baseline": statistics.median(ttft) if ttft else None,
        "ttft_low": ttft_interval[0] if ttft_interval else None,
        "ttft_high": ttft_interval[1] if ttft_interval else None,
        "decode_speedup_vs_baseline": None,
    }


def level_verdicts(plan: ComparePlan, rows: Sequence[LevelRow]) -> list[LevelVerdict]:
    """Per config (the baseline aside): where speculation stops paying, in one sentence."""
    out = []
    for config in plan.configs:
        if config.is_baseline:
            continue
        mine = sorted((r for r in rows if r.config == config.name), key=lambda r: r.level)
        if mine and plan.arrivals is not None:  # one level: the recorded traffic's
            sentence = f"{mine[0].verdict} on the recorded arrivals — {_evidence(mine[0])}"
            out.append(LevelVerdict(config=config.name, sentence=sentence))
        elif mine:
            out.append(LevelVerdict(config=config.name, sentence=level_sentence(mine)))
    return out


def level_sentence(rows: Sequence[LevelRow]) -> str:
    """'keep up to 2 concurrent streams — 1.42x at 1, 1.10x at 2; drop at 4 (0.83x,
    0.78–0.88)': the leading levels that keep, then every other level's verdict ('keep at 2
    streams only — …' when the lowest does not keep; 'a keep at no level — …')."""
    pending = [r for r in rows if r.verdict == Verdict.PENDING]
    if pending:
        done = sum(r.runs + r.failed for r in rows)
        return f"pending — {done} of {sum(r.planned for r in rows)} requests done"
    kept = 0
    while kept < len(rows) and rows[kept].verdict == Verdict.KEEP:
        kept += 1
    rest = "; ".join(f"{r.verdict} at {r.level} ({_evidence(r)})" for r in rows[kept:])
    if kept == len(rows):
        speeds = ", ".join(f"{_speed(r)} at {r.level}" for r in rows)
        return f"keep at every level — {speeds}"
    if kept:
        top = rows[kept - 1].level
        speeds = ", ".join(f"{_speed(r)} at {r.level}" for r in rows[:kept])
        streams = "stream" if top == 1 else "streams"
        return f"keep up to {top} concurrent {streams} — {speeds}; {rest}"
    keeps = [str(r.level) for r in rows if r.verdict == Verdict.KEEP]
    if keeps:  # a keep further up, not from one stream on
        return f"keep at {' and '.join(keeps)} streams only — {rest}"
    return f"a keep at no level — {rest}"


def _speed(row: LevelRow) -> str:
    return "–" if row.speedup_vs_baseline is None else f"{row.speedup_vs_baseline:.2f}x"


def _evidence(row: LevelRow) -> str:
    """'0.83x, 0.78–0.88', or the reason when speed is not what decided it."""
    if row.verdict == Verdict.FAILED or row.speedup_vs_baseline is None:
        return row.reason
    text = _speed(row)
    if row.pairs > 1 and row.speedup_low is not None and row.speedup_high is not None:
        text += f", {row.speedup_low:.2f}–{row.speedup_high:.2f}"
    if row.verdict == Verdict.DROP and row.speed_call != SpeedCall.SLOWER:
        text += f"; {row.reason.split(' (', 1)[0]}"  # (answers or memory, not speed)
    return text
