"""From run records to summary rows: correctness vs the baseline, medians, paired speedups with
their bootstrap interval and the noise floor, per config × prompt (`summarise`) or pooled over
several prompts (`pooled_rows`); the decision rule (`judge`) then gives each row its verdict.

Speedups are paired run by run with the baseline's (see `pairing`).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence

from spectui.core.compare.judge import with_verdicts
from spectui.core.compare.models import ComparePlan
from spectui.core.compare.pairing import ratio, series, slot, throughput, values
from spectui.core.compare.records import RunRecord
from spectui.core.compare.stats import bootstrap_interval, noise_floor
from spectui.core.compare.summary_row import SummaryRow
from spectui.core.compare.textdiff import first_divergence, keep_evidence


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
        divergence = first_divergence(
            ref.text, record.text, ref.token_ends, response_token_ends=record.token_ends
        )
        # A probe's result (the baseline's candidates there) stays while the place is the same.
        divergence = keep_evidence(record.divergence, divergence)
        out.append(
            record.model_copy(
                update={"identical_to_baseline": divergence is None, "divergence": divergence}
            )
        )
    return out


def reference_text(plan: ComparePlan, records: Sequence[RunRecord], record: RunRecord) -> str:
    """The baseline text ``record`` was compared with ('' when none): what a probe continues."""
    refs = [r for r in records if r.config == plan.baseline.name and r.ok]
    ref = _reference(record, refs, record.config == plan.baseline.name)
    return ref.text if ref is not None else ""


def _uncompared(record: RunRecord) -> RunRecord:
    return record.model_copy(update={"identical_to_baseline": None, "divergence": None})


def _reference(record: RunRecord, refs: list[RunRecord], is_baseline: bool) -> RunRecord | None:
    others = [r for r in refs if r.prompt == record.prompt and r.seq != record.seq]
    same_round = [r for r in others if r.round == record.round and not r.warmup]
    # At the same concurrency level first: batching other streams may change the numerics.
    same_level = [r for r in same_round if r.level == record.level]
    if same_level or same_round:
        return min(same_level or same_round, key=lambda r: r.seq)
    earliest = min(others, key=lambda r: r.seq, default=None)
    if is_baseline and earliest is not None and earliest.seq > record.seq:
        return None  # the first baseline run of a prompt is the reference itself
    return earliest


def _stats(xs: list[float]) -> tuple[float | None, float | None, float | None]:
    if not xs:
        return None, None, None
    return statistics.median(xs), min(xs), max(xs)


def _median(xs: list[float]) -> float | None:
    return statistics.median(xs) if xs else None


def summarise(plan: ComparePlan, records: Sequence[RunRecord]) -> list[SummaryRow]:
    """One row per config × prompt (configs in plan order), over the counted runs of the
    plan's lowest concurrency level (1 unless ``--concurrency`` leaves it out)."""
    annotated = annotate(plan, records)
    # One level (the lowest: one stream at a time when it ran); every level is judged as a
    # whole apart (`levels`).
    level = min(plan.concurrency)
    counted = [r for r in annotated if not r.warmup and r.level == level]
    baseline = plan.baseline.name
    noise = _noise(plan, counted, throughput)
    ttft_noise = _noise(plan, counted, lambda r: r.ttft_ms)
    rows: list[SummaryRow] = []
    for config in plan.configs:
        for prompt in plan.prompts:
            mine = [r for r in counted if r.config == config.name and r.prompt == prompt.key]
            base = {
                slot(r): r
                for r in counted
                if r.config == baseline and r.prompt == prompt.key and r.ok
            }
            row = base_row(plan, config.name, prompt.key, mine, base, config.is_baseline)
            update: dict[str, object] = {
                "noise_floor": noise,
                "ttft_noise_floor": ttft_noise,
                "config_noise": noise_floor([series(mine, throughput)]),
            }
            if not config.is_baseline:
                update.update(_intervals(mine, base))
            rows.append(row.model_copy(update=update))
    return rows


def _noise(
    plan: ComparePlan, counted: list[RunRecord], get: Callable[[RunRecord], float | None]
) -> float | None:
    """Every config against itself across rounds, pooled over configs and prompts (see
    `stats`): a noisy candidate is noise too, not only a noisy baseline."""
    return noise_floor(
        [
            series([r for r in counted if r.config == c.name and r.prompt == p.key], get)
            for c in plan.configs
            for p in plan.prompts
        ]
    )


def _intervals(mine: list[RunRecord], base: dict[tuple[int, int], RunRecord]) -> dict[str, object]:
    pairs = [(r, base[slot(r)]) for r in mine if r.ok and slot(r) in base]
    speed = bootstrap_interval(
        [s for r, b in pairs if (s := ratio(throughput(r), throughput(b))) is not None]
    )
    ttft = bootstrap_interval([s for r, b in pairs if (s := ratio(r.ttft_ms, b.ttft_ms))])
    return {
        "speedup_low": speed[0] if speed else None,
        "speedup_high": speed[1] if speed else None,
        "ttft_low": ttft[0] if ttft else None,
        "ttft_high": ttft[1] if ttft else None,
    }


def base_row(
    plan: ComparePlan,
    config: str,
    prompt: str,
    mine: list[RunRecord],
    base: dict[tuple[int, int], RunRecord],
    is_baseline: bool,
) -> SummaryRow:
    """A row's medians, ranges and answers over ``mine`` (one config's counted runs of one
    prompt, of one level), paired with ``base`` (the baseline's runs by `pairing.slot`)."""
    ok = [r for r in mine if r.ok]
    tps = _stats(values(ok, lambda r: r.tokens_per_second))
    ttft = _stats(values(ok, lambda r: r.ttft_ms))
    total = _stats(values(ok, lambda r: r.total_ms))
    pairs = [(r, base[slot(r)]) for r in ok if slot(r) in base]
    speedups = [s for r, b in pairs if (s := ratio(throughput(r), throughput(b))) is not None]
    speed = _stats(speedups)
    compared = [r for r in ok if r.identical_to_baseline is not None]
    differing = [r for r in compared if not r.identical_to_baseline]
    # Correctness of a changed answer: the prompt's checker when it passed it; else the
    # baseline's own odds at the divergent token (`divergence`).
    vouched = [r for r in differing if r.check_status == "passed"]
    unvouched = [r for r in differing if r.check_status != "passed"]
    near_ties = [r for r in unvouched if r.divergence and r.divergence.kind == "near-tie"]
    divergent = [r for r in unvouched if not (r.divergence and r.divergence.kind == "near-tie")]
    checked = [r for r in ok if r.check_status not in (None, "skipped")]  # skipped: not run
    row = SummaryRow(
        config=config,
        prompt=prompt,
        runs=len(ok),
        planned=plan.planned_rounds(config)
        * plan.runs_per_prompt(mine[0].level if mine else min(plan.concurrency)),
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
        median_acceptance=_median(values(ok, lambda r: r.acceptance)),
        median_mean_acceptance_length=_median(values(ok, lambda r: r.mean_acceptance_length)),
        drafted=sum(r.drafted for r in ok),
        accepted=sum(r.accepted for r in ok),
        median_peak_rss_bytes=_median(values(ok, lambda r: r.peak_rss_bytes)),
        median_peak_rss_minus_shared_bytes=_median(
            values(ok, lambda r: r.peak_rss_minus_shared_bytes)
        ),
        median_peak_gpu_bytes=_median(values(ok, lambda r: r.peak_gpu_bytes)),
        speedup_vs_baseline=None if is_baseline else speed[0],
        speedup_min=None if is_baseline else speed[1],
        speedup_max=None if is_baseline else speed[2],
        decode_speedup_vs_baseline=None
        if is_baseline
        else _median(
            [
                s
                for r, b in pairs
                if (s := ratio(r.tokens_per_second, b.tokens_per_second)) is not None
            ]
        ),
        ttft_ratio_vs_baseline=None
        if is_baseline
        else _median([s for r, b in pairs if (s := ratio(r.ttft_ms, b.ttft_ms)) is not None]),
        # Rounds, not runs: under load a round pairs each client's runs, one round's worth.
        pairs=0
        if is_baseline
        else len({r.round for r, b in pairs if ratio(throughput(r), throughput(b))}),
        identical=len(compared) - len(differing),
        compared=len(compared),
        first_divergence=_first(divergent or differing),
        near_tie_changes=len(near_ties),
        divergent_changes=len(divergent),
        vouched_changes=len(vouched),
        divergence_note=divergence_note(near_ties, vouched),
        check_failures=sum(1 for r in checked if r.check_status != "passed"),
        checked=len(checked),
    )
    return row


def _first(records: list[RunRecord]) -> str | None:
    d = records[0].divergence if records else None
    return d.short() if d is not None else None


def divergence_note(near_ties: list[RunRecord], vouched: list[RunRecord]) -> str | None:
    """The caveat of changed answers that do not drop: where they differ, and why they may
    stand ("answer differs from token 112, at a near-tie 0.41/0.40 — read both")."""
    parts = []
    for records, label in ((near_ties, "near-tie"), (vouched, "checked")):
        d = records[0].divergence if records else None
        if d is None:
            continue
        where = f"token {d.token}" if d.token is not None else f"char {d.char}"
        more = f" ({len(records)} runs)" if len(records) > 1 else ""
        why = f"at a near-tie{d.odds()}" if label == "near-tie" else "but passes its checker"
        parts.append(f"answer differs from {where}{more}, {why}")
    return "; ".join(parts) + " — read both" if parts else None


def pooled_rows(
    plan: ComparePlan, name: str, records: Sequence[RunRecord], prompts: Sequence[str]
) -> list[SummaryRow]:
    """One row per config (plan order), named ``name``, over the counted runs of ``prompts``
    at the plan's lowest level pooled (``records``: a document's, annotated). Each run pairs
    with the baseline's run of the same prompt at the same place (`pairing.slot`); the noise
    floor is every config's round-to-round change on those prompts, a config's own noise its
    own change on them, prompt by prompt (never one prompt against another)."""
    level = min(plan.concurrency)
    keys = set(prompts)
    counted = [r for r in records if not r.warmup and r.level == level and r.prompt in keys]
    groups: dict[tuple[str, str], list[RunRecord]] = {}
    for r in counted:  # grouped once: a recorded workload may hold hundreds of prompts
        groups.setdefault((r.config, r.prompt), []).append(r)
    noise = noise_floor([series(runs, throughput) for runs in groups.values()])
    ttft_noise = noise_floor([series(runs, lambda r: r.ttft_ms) for runs in groups.values()])
    baseline = plan.baseline.name
    base = {(r.prompt, *slot(r)): r for r in counted if r.config == baseline and r.ok}
    rows = []
    for config in plan.configs:
        mine = [r for r in counted if r.config == config.name]
        row = base_row(plan, config.name, name, mine, {}, config.is_baseline)
        own = [series(runs, throughput) for (c, _), runs in groups.items() if c == config.name]
        update: dict[str, object] = {
            "planned": plan.planned_rounds(config.name) * plan.runs_per_prompt(level) * len(keys),
            "noise_floor": noise,
            "ttft_noise_floor": ttft_noise,
            "config_noise": noise_floor(own),
        }
        if not config.is_baseline:
            pairs = [(r, b) for r in mine if r.ok and (b := base.get((r.prompt, *slot(r))))]
            update.update(_pooled_speed(pairs))
        rows.append(row.model_copy(update=update))
    return rows


def _pooled_speed(pairs: list[tuple[RunRecord, RunRecord]]) -> dict[str, object]:
    """A pooled row's speed fields, from its runs paired with the baseline's."""
    speed = [s for r, b in pairs if (s := ratio(throughput(r), throughput(b))) is not None]
    ttft = [s for r, b in pairs if (s := ratio(r.ttft_ms, b.ttft_ms)) is not None]
    decode = [s for r, b in pairs if (s := ratio(r.tokens_per_second, b.tokens_per_second))]
    low, high = bootstrap_interval(speed) or (None, None)
    ttft_low, ttft_high = bootstrap_interval(ttft) or (None, None)
    return {
        "speedup_vs_baseline": _median(speed),
        "speedup_min": min(speed, default=None),
        "speedup_max": max(speed, default=None),
        "speedup_low": low,
        "speedup_high": high,
        "decode_speedup_vs_baseline": _median(decode),
        "ttft_ratio_vs_baseline": _median(ttft),
        "ttft_low": ttft_low,
        "ttft_high": ttft_high,
        # Rounds, not runs: a round of three prompts is one round's evidence, not three.
        "pairs": len({r.round for r, b in pairs if ratio(throughput(r), throughput(b))}),
    }


def report_rows(plan: ComparePlan, records: Sequence[RunRecord]) -> list[SummaryRow]:
    """Summary rows with verdicts: what tables and exports show."""
    return with_verdicts(plan, summarise(plan, records))
