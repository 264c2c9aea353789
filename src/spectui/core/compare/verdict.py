"""From run records to a verdict: correctness vs the baseline, medians, paired speedups.

The rule of fair trials: keep a technique only if it is faster *without* costing more memory or
more errors. "Faster" is measured pair by pair: each round, a config's run of a prompt is set
against the baseline's run of that prompt in the same round (runs of one round are minutes
apart, not an hour), and the speedup is the median of those ratios, never a ratio of medians.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict

from spectui.core.compare.models import ComparePlan, RunRecord
from spectui.core.compare.textdiff import first_divergence

Verdict = Literal["baseline", "keep", "drop", "inconclusive", "failed", "pending"]

NOISE_MARGIN = 0.03
"""A median speedup below 1 + this is within run-to-run noise: not a win."""
MEMORY_TOLERANCE = 0.05
"""Peak memory may exceed the baseline's by this fraction before it counts as a cost ..."""
MEMORY_SLACK_BYTES = 32 * 2**20
"""... and by at least this much (a few pages of allocator noise is not a cost)."""


class SummaryRow(BaseModel):
    """One config × prompt: medians and ranges over the counted runs, and the verdict."""

    model_config = ConfigDict(frozen=True)

    config: str
    """Config name."""
    prompt: str
    """Prompt key."""
    runs: int
    """Counted runs that succeeded."""
    planned: int
    """Counted runs planned."""
    failed: int
    """Counted runs that failed."""
    median_tokens_per_second: float | None = None
    """Median decode rate."""
    min_tokens_per_second: float | None = None
    """Slowest decode rate."""
    max_tokens_per_second: float | None = None
    """Fastest decode rate."""
    median_ttft_ms: float | None = None
    """Median time to first token."""
    min_ttft_ms: float | None = None
    """Shortest time to first token."""
    max_ttft_ms: float | None = None
    """Longest time to first token."""
    median_total_ms: float | None = None
    """Median time to the complete answer."""
    min_total_ms: float | None = None
    """Shortest time to the complete answer."""
    max_total_ms: float | None = None
    """Longest time to the complete answer."""
    median_acceptance: float | None = None
    """Median accepted / drafted."""
    median_mean_acceptance_length: float | None = None
    """Median tokens per verification step."""
    drafted: int = 0
    """Draft tokens proposed over the counted runs."""
    accepted: int = 0
    """Draft tokens accepted over the counted runs."""
    median_peak_rss_bytes: float | None = None
    """Median of the runs' peak RSS."""
    median_peak_rss_minus_shared_bytes: float | None = None
    """Median of the runs' peak RSS minus shared."""
    median_peak_gpu_bytes: float | None = None
    """Median of the runs' peak GPU memory (None without NVML)."""
    speedup_vs_baseline: float | None = None
    """Median over rounds of (this run's tokens per second of wall time ÷ the baseline's, same
    round): end to end, TTFT included; equals baseline time ÷ this time for equal lengths."""
    speedup_min: float | None = None
    """Smallest paired speedup."""
    speedup_max: float | None = None
    """Largest paired speedup."""
    decode_speedup_vs_baseline: float | None = None
    """Median over rounds of the paired decode-rate ratio (TTFT excluded)."""
    ttft_ratio_vs_baseline: float | None = None
    """Median over rounds of this TTFT ÷ the baseline's (above 1: slower first token)."""
    pairs: int = 0
    """Rounds where both this config and the baseline produced a run."""
    identical: int = 0
    """Runs whose text equals the baseline's."""
    compared: int = 0
    """Runs compared with the baseline."""
    first_divergence: str | None = None
    """Where the first differing run diverged, in one line."""
    check_failures: int = 0
    """Runs whose checker did not pass."""
    checked: int = 0
    """Runs a checker looked at (a skipped, untrusted Python checker did not)."""
    verdict: Verdict = "pending"
    """keep / drop / inconclusive / failed / baseline / pending (runs still to come)."""
    reason: str = ""
    """Why, in one line."""


def annotate(plan: ComparePlan, records: Sequence[RunRecord]) -> list[RunRecord]:
    """Records with ``identical_to_baseline`` and ``divergence`` filled in.

    The reference for a run is the baseline's run of the same prompt in the same round, else the
    earliest baseline run of that prompt. At temperature > 0 responses are not comparable.
    """
    if plan.sampling.temperature > 0:
        return [_uncompared(r) for r in records]
    baseline = plan.baseline.name
    refs = [r for r in records if r.config == baseline and r.ok]
    out = []
    for record in records:
        ref = _reference(record, refs, record.config == baseline)
        if not record.ok or ref is None:
            out.append(_uncompared(record))
            continue
        divergence = first_divergence(ref.text, record.text, ref.token_ends)
        out.append(
            record.model_copy(
                update={"identical_to_baseline": divergence is None, "divergence": divergence}
            )
        )
    return out


def _uncompared(record: RunRecord) -> RunRecord:
    return record.model_copy(update={"identical_to_baseline": None, "divergence": None})


def _reference(record: RunRecord, refs: list[RunRecord], is_baseline: bool) -> RunRecord | None:
    others = [r for r in refs if r.prompt == record.prompt and r.seq != record.seq]
    same_round = [r for r in others if r.round == record.round and not r.warmup]
    if same_round:
        return same_round[0]
    earliest = min(others, key=lambda r: r.seq, default=None)
    if is_baseline and earliest is not None and earliest.seq > record.seq:
        return None  # the first baseline run of a prompt is the reference itself
    return earliest


def _stats(values: list[float]) -> tuple[float | None, float | None, float | None]:
    if not values:
        return None, None, None
    return statistics.median(values), min(values), max(values)


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def _values(records: list[RunRecord], get: Callable[[RunRecord], float | None]) -> list[float]:
    return [v for r in records if (v := get(r)) is not None]


def _throughput(record: RunRecord) -> float | None:
    """Tokens per second of wall time, TTFT included."""
    if not record.total_ms or not record.tokens:
        return None
    return record.tokens / (record.total_ms / 1000)


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def summarise(plan: ComparePlan, records: Sequence[RunRecord]) -> list[SummaryRow]:
    """One row per config × prompt (configs in plan order), over counted runs only."""
    annotated = annotate(plan, records)
    counted = [r for r in annotated if not r.warmup]
    baseline = plan.baseline.name
    rows: list[SummaryRow] = []
    for config in plan.configs:
        for prompt in plan.prompts:
            mine = [r for r in counted if r.config == config.name and r.prompt == prompt.key]
            base = {
                r.round: r
                for r in counted
                if r.config == baseline and r.prompt == prompt.key and r.ok
            }
            rows.append(_row(plan, config.name, prompt.key, mine, base, config.is_baseline))
    return rows


def _row(
    plan: ComparePlan,
    config: str,
    prompt: str,
    mine: list[RunRecord],
    base: dict[int, RunRecord],
    is_baseline: bool,
) -> SummaryRow:
    ok = [r for r in mine if r.ok]
    tps = _stats(_values(ok, lambda r: r.tokens_per_second))
    ttft = _stats(_values(ok, lambda r: r.ttft_ms))
    total = _stats(_values(ok, lambda r: r.total_ms))
    pairs = [(r, base[r.round]) for r in ok if r.round in base]
    speedups = [s for r, b in pairs if (s := _ratio(_throughput(r), _throughput(b))) is not None]
    speed = _stats(speedups)
    compared = [r for r in ok if r.identical_to_baseline is not None]
    differing = [r for r in compared if not r.identical_to_baseline]
    checked = [r for r in ok if r.check_status not in (None, "skipped")]  # skipped: not run
    row = SummaryRow(
        config=config,
        prompt=prompt,
        runs=len(ok),
        planned=plan.reps,
        failed=len(mine) - len(ok),
        median_tokens_per_second=tps[0],
        min_tokens_per_second=tps[1],
        max_tokens_per_second=tps[2],
        median_ttft_ms=ttft[0],
        min_ttft_ms=ttft[1],
        max_ttft_ms=ttft[2],
        median_total_ms=total[0],
        min_total_ms=total[1],
        max_total_ms=total[2],
        median_acceptance=_median(_values(ok, lambda r: r.acceptance)),
        median_mean_acceptance_length=_median(_values(ok, lambda r: r.mean_acceptance_length)),
        drafted=sum(r.drafted for r in ok),
        accepted=sum(r.accepted for r in ok),
        median_peak_rss_bytes=_median(_values(ok, lambda r: r.peak_rss_bytes)),
        median_peak_rss_minus_shared_bytes=_median(
            _values(ok, lambda r: r.peak_rss_minus_shared_bytes)
        ),
        median_peak_gpu_bytes=_median(_values(ok, lambda r: r.peak_gpu_bytes)),
        speedup_vs_baseline=None if is_baseline else speed[0],
        speedup_min=None if is_baseline else speed[1],
        speedup_max=None if is_baseline else speed[2],
        decode_speedup_vs_baseline=None
        if is_baseline
        else _median(
            [
                s
                for r, b in pairs
                if (s := _ratio(r.tokens_per_second, b.tokens_per_second)) is not None
            ]
        ),
        ttft_ratio_vs_baseline=None
        if is_baseline
        else _median([s for r, b in pairs if (s := _ratio(r.ttft_ms, b.ttft_ms)) is not None]),
        pairs=0 if is_baseline else len(speedups),
        identical=len(compared) - len(differing),
        compared=len(compared),
        first_divergence=differing[0].divergence.short()
        if differing and differing[0].divergence
        else None,
        check_failures=sum(1 for r in checked if r.check_status != "passed"),
        checked=len(checked),
    )
    return row


def with_verdicts(plan: ComparePlan, rows: list[SummaryRow]) -> list[SummaryRow]:
    """Rows with verdict and reason, each config × prompt judged against the baseline's row."""
    baseline = plan.baseline.name
    base_rows = {r.prompt: r for r in rows if r.config == baseline}
    synthetic = {config.name for config in plan.configs if config.spec.synthetic}
    out = []
    for row in rows:
        verdict, reason = judge(row, None if row.config == baseline else base_rows[row.prompt])
        if row.config in synthetic and verdict == "keep":
            # Forced acceptance shows what acceptance would buy, not what the type does.
            verdict, reason = "inconclusive", f"synthetic acceptance, not a result: {reason}"
        out.append(row.model_copy(update={"verdict": verdict, "reason": reason}))
    return out


def judge(row: SummaryRow, base: SummaryRow | None) -> tuple[Verdict, str]:
    """The fair-trial verdict for one config × prompt (``base``: the baseline's row, None when
    ``row`` is the baseline's own)."""
    if base is None:
        return _judge_baseline(row)
    done = row.runs + row.failed >= row.planned and base.runs + base.failed >= base.planned
    if row.runs == 0 and row.failed:
        return "failed", f"all {row.failed} runs failed"
    if not done:
        return "pending", f"{row.runs + row.failed} of {row.planned} runs done"
    costs: list[str] = []
    if row.failed > base.failed:
        costs.append(f"{row.failed} of {row.planned} runs failed")
    if row.check_failures > base.check_failures:
        costs.append(
            f"checker failed on {row.check_failures} of {row.checked} runs "
            f"(baseline: {base.check_failures} of {base.checked})"
        )
    if row.compared > row.identical:
        costs.append(
            f"{row.compared - row.identical} of {row.compared} answers differ from the baseline "
            f"({row.first_divergence})"
        )
    memory = _memory_cost(row, base)
    if memory:
        costs.append(memory)
    speed = _speed(row)
    if row.speedup_vs_baseline is None:
        return ("drop" if costs else "inconclusive"), "; ".join([*costs, speed])
    if row.speedup_vs_baseline <= 1:
        return "drop", "; ".join([f"slower: {speed}", *costs])
    if costs:
        return "drop", f"faster, {speed}, but " + "; ".join(costs)
    if row.speedup_min is not None and row.speedup_min <= 1:
        faster = "only some rounds faster"
        return "inconclusive", f"{faster}: {speed}"
    if row.speedup_vs_baseline < 1 + NOISE_MARGIN:
        return "inconclusive", f"gain within noise: {speed}"
    same = "same answers" if row.compared else "answers not compared"
    return "keep", f"faster: {speed}, {same}, no extra memory or errors"


def _judge_baseline(row: SummaryRow) -> tuple[Verdict, str]:
    if row.runs == 0 and row.failed:
        return "failed", f"all {row.failed} baseline runs failed"
    if row.runs + row.failed < row.planned:
        return "pending", f"{row.runs + row.failed} of {row.planned} runs done"
    return "baseline", "the reference (no speculation)"


def _speed(row: SummaryRow) -> str:
    """'1.85x end to end (1.70–2.01, 3 rounds)'."""
    if row.speedup_vs_baseline is None:
        return "no round with both this config and the baseline"
    spread = f"{row.pairs} round" + ("s" if row.pairs != 1 else "")
    if row.speedup_min is not None and row.speedup_max is not None and row.pairs > 1:
        spread = f"{row.speedup_min:.2f}–{row.speedup_max:.2f}, {spread}"
    return f"{row.speedup_vs_baseline:.2f}x end to end ({spread})"


def _memory_cost(row: SummaryRow, base: SummaryRow) -> str | None:
    for name, mine, theirs in (
        ("peak RSS", row.median_peak_rss_bytes, base.median_peak_rss_bytes),
        ("peak GPU memory", row.median_peak_gpu_bytes, base.median_peak_gpu_bytes),
    ):
        if mine is None or theirs is None:
            continue
        extra = mine - theirs
        if extra > max(theirs * MEMORY_TOLERANCE, MEMORY_SLACK_BYTES):
            return f"{name} +{extra / 2**20:.0f} MiB ({mine / 2**20:.0f} vs {theirs / 2**20:.0f})"
    return None


def report_rows(plan: ComparePlan, records: Sequence[RunRecord]) -> list[SummaryRow]:
    """Summary rows with verdicts: what tables and exports show."""
    return with_verdicts(plan, summarise(plan, records))
