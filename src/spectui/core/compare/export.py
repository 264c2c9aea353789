"""Exports of a comparison document: CSV (one row per run) and Markdown (the report).

The JSON document itself is the complete record (`compare_store`); these are views of it. The
cell formatting here is shared by the CLI's live table and the TUI screen, so all three agree.
"""

from __future__ import annotations

import csv
import io

from spectui.core.compare.open_loop import replay_line
from spectui.core.compare.outcomes import Verdict
from spectui.core.compare.records import RunRecord, round_name
from spectui.core.compare.store import CompareDocument
from spectui.core.compare.summary_row import SummaryRow

CSV_FIELDS = (
    "seq",
    "session",
    "round",
    "warmup",
    "config",
    "prompt",
    "level",
    "client",
    "status",
    "error",
    "ttft_ms",
    "total_ms",
    "queue_ms",
    "waited_for_slot",
    "tokens",
    "tokens_per_second",
    "prompt_tokens",
    "prompt_tokens_per_second",
    "drafted",
    "accepted",
    "acceptance",
    "mean_acceptance_length",
    "steps",
    "accepted_per_position",
    "attribution_anomalies",
    "steps_unsplit",
    "accepted_unplaced",
    "steps_maybe_fewer",
    "steps_maybe_more",
    "origin_unknown_tokens",
    "peak_rss_bytes",
    "peak_rss_minus_shared_bytes",
    "peak_gpu_bytes",
    "stop_reason",
    "identical_to_baseline",
    "divergence",
    "check_passed",
    "check_status",
    "check_detail",
    "finished_at",
    "text",
)
"""Columns of the CSV export, in order."""


# -- cells -------------------------------------------------------------------------------------

SUMMARY_COLUMNS = (
    "config",
    "prompt",
    "runs",
    "tok/s",
    "TTFT ms",
    "speedup",
    "acceptance",
    "identical",
    "check",
    "peak RSS",
    "verdict",
)
"""Columns of the summary table, in the CLI and the TUI alike."""


def fmt_number(value: float | None, digits: int = 1) -> str:
    """'12.3', or '–' when unknown."""
    return "–" if value is None else f"{value:.{digits}f}"


def fmt_range(median: float | None, low: float | None, high: float | None, digits: int = 1) -> str:
    """'41.2 (38.0–44.1)': the median with the spread over repetitions."""
    if median is None:
        return "–"
    if low is None or high is None or low == high:
        return fmt_number(median, digits)
    return f"{median:.{digits}f} ({low:.{digits}f}–{high:.{digits}f})"


def fmt_speedup(row: SummaryRow) -> str:
    """'1.85x (1.70–2.01)', or '' for the baseline."""
    if row.speedup_vs_baseline is None:
        return ""
    text = f"{row.speedup_vs_baseline:.2f}x"
    if row.pairs > 1 and row.speedup_low is not None and row.speedup_high is not None:
        # The 95 % bootstrap interval the verdict was judged on, not the raw spread.
        low, high = f"{row.speedup_low:.2f}", f"{row.speedup_high:.2f}"
        text += f" ({low}–{high})" if low != high else ""
    return text


def fmt_memory(row: SummaryRow) -> str:
    """'372 MiB' for the baseline, '520 MiB (+99)' for a config: the peak and its price."""
    text = fmt_mib(row.median_peak_rss_bytes)
    extra = row.memory_extra_bytes
    if extra is not None and row.memory_kind == "RSS" and abs(extra) >= 2**20:
        text += f" ({'+' if extra > 0 else '−'}{abs(extra) / 2**20:.0f})"
    return text


def fmt_mib(value: float | None) -> str:
    """Bytes as '372 MiB'."""
    return "–" if value is None else f"{value / 2**20:.0f} MiB"


def fmt_identical(row: SummaryRow) -> str:
    """'3/3' runs identical to the baseline ('2/3 +1 tie' when the others changed at a
    near-tie), or '–' when nothing was compared."""
    if not row.compared:
        return "–"
    ties = f" +{row.near_tie_changes} tie" if row.near_tie_changes else ""
    return f"{row.identical}/{row.compared}{ties}"


def fmt_check(row: SummaryRow) -> str:
    """'2/3 pass', or '–' without a checker."""
    return f"{row.checked - row.check_failures}/{row.checked} pass" if row.checked else "–"


def fmt_acceptance(row: SummaryRow) -> str:
    """'72% (len 2.9)': acceptance and mean acceptance length."""
    if row.median_acceptance is None:
        return "–"
    length = row.median_mean_acceptance_length
    return f"{row.median_acceptance:.0%}" + (f" (len {length:.1f})" if length else "")


def summary_rows(document: CompareDocument) -> list[tuple[SummaryRow, list[str]]]:
    """The summary table as text: per config × prompt, the row and its cells (`SUMMARY_COLUMNS`;
    the last one is the verdict, for callers to style)."""
    rows = []
    for row in document.summary:
        runs = f"{row.runs}/{row.planned}" + (f" ✗{row.failed}" if row.failed else "")
        cells = [
            document.plan.label(row.config),
            row.prompt,
            runs,
            fmt_range(
                row.median_tokens_per_second, row.min_tokens_per_second, row.max_tokens_per_second
            ),
            fmt_range(row.median_ttft_ms, row.min_ttft_ms, row.max_ttft_ms, 0),
            fmt_speedup(row),
            fmt_acceptance(row),
            fmt_identical(row),
            fmt_check(row),
            fmt_memory(row),
            row.verdict,
        ]
        rows.append((row, cells))
    return rows


# -- CSV ---------------------------------------------------------------------------------------


def _csv_value(record: RunRecord, field: str) -> object:
    if field == "accepted_per_position":
        return " ".join(str(n) for n in record.accepted_per_position)
    if field == "divergence":
        return record.divergence.short() if record.divergence else ""
    if field == "check_passed":
        return record.check_passed
    value = getattr(record, field)
    return "" if value is None else value


def to_csv(document: CompareDocument) -> str:
    """One row per run (warm-ups included, marked), every number and the full text."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_FIELDS)
    for record in document.runs:
        writer.writerow([_csv_value(record, field) for field in CSV_FIELDS])
    return out.getvalue()


# -- Markdown ----------------------------------------------------------------------------------


def cell(text: str) -> str:
    """A Markdown table cell: pipes escaped, on one line."""
    return text.replace("|", "\\|").replace("\n", " ")


def _header(document: CompareDocument) -> list[str]:
    plan = document.plan
    s, d = plan.sampling, plan.delivery
    lengths = ", ".join(f"{p.key} {p.n_predict}" for p in plan.prompts)
    done = len(document.runs)
    total = len(plan.jobs())
    state = "complete" if document.complete else f"incomplete ({done} of {total} runs)"
    size = document.model.size_bytes
    return [
        "# spectui compare",
        "",
        f"- binary: `{document.binary.path}` ({document.binary.version or 'unknown version'})",
        f"- model: `{document.model.path}`" + (f" ({fmt_mib(size)})" if size else ""),
        f"- sampling: temperature {s.temperature:g}, seed {s.seed}, n_predict {lengths}, "
        f"{'chat' if d.chat else 'completion'} endpoint, prompt cache "
        f"{'on' if d.cache_prompt else 'off'}; ctx size {document.server.ctx_size}",
        "- fairness: the same binary, model, ctx size, sampling, seed and n_predict for every "
        "run; only the spec config differs. Rounds alternate the configs "
        f"({plan.reps} rounds, baseline first), with one uncounted warm-up per config.",
        f"- server: {document.restarts}",
        "- speedup: end to end (TTFT included), each run against the baseline's run of the "
        "same prompt in the same round; the median of those ratios, with its 95 % bootstrap "
        "interval. 'Faster' or 'slower' only when the interval clears the noise floor (every "
        "config against itself, round to round"
        + (f": ±{noise:.0%}" if (noise := _noise(document)) is not None else "")
        + "); too noisy to call when a config's own runs swing more than ±25 % and the "
        "interval does not clear it; a keep needs 3 paired rounds.",
        _answers_rule(document),
        f"- memory budget: {plan.memory_budget.describe(gpu=_uses_gpu(document))} of extra "
        "peak memory over the baseline (the price is always shown; only a config over it is "
        "dropped for memory)",
        f"- status: {state}, {len(document.sessions)} session(s)",
        "",
    ]


def _answers_rule(document: CompareDocument) -> str:
    from spectui.core.compare.divergence import NEAR_TIE_MAX_LOGIT_GAP

    if document.plan.identical_answers:
        return "- answers: identical to the baseline's at temperature 0, or the config is dropped"
    return (
        "- answers: a prompt's checker decides where it has one; a changed answer it did not "
        "pass is a caveat when the baseline's top two candidates at the divergent token were a "
        f"near-tie (within {NEAR_TIE_MAX_LOGIT_GAP:g} logit, from one untimed n_probs request "
        "to the baseline's server) and the response took the other, else it drops the config"
    )


def _noise(document: CompareDocument) -> float | None:
    return next((r.noise_floor for r in document.summary if r.noise_floor is not None), None)


def _uses_gpu(document: CompareDocument) -> bool:
    return any(r.peak_gpu_bytes is not None for r in document.runs)


def _odds(record: RunRecord) -> str:
    """ "; the baseline's candidates there: 'salary' 0.09, 'occupation' 0.07" (or nothing)."""
    top = record.divergence.baseline_top if record.divergence else None
    if not top:
        return ""
    return "; the baseline's candidates there: " + ", ".join(
        f"{t.token!r} {t.prob:.2f}" for t in top
    )


def to_markdown(document: CompareDocument) -> str:
    """The report: setup, configs, summary table, verdicts, divergences, checker failures."""
    lines = _header(document)
    if (replay := replay_line(document.plan)) is not None:
        lines += [replay, ""]
    lines += ["## Configs", "", "| config | llama-server args |", "|---|---|"]
    for config in document.plan.configs:
        lines.append(f"| {cell(config.label)} | `{cell(' '.join(config.args))}` |")
    lines += [
        "",
        "## Summary (median over rounds, min–max in brackets)",
        "",
        "| config | prompt | runs | tok/s | TTFT ms | total ms | speedup | acceptance "
        "| identical | check | peak RSS | verdict |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    labels = {c.name: c.label for c in document.plan.configs}
    for row in document.summary:
        cells = [
            labels.get(row.config, row.config),
            row.prompt,
            f"{row.runs}/{row.planned}" + (f" ({row.failed} failed)" if row.failed else ""),
            fmt_range(
                row.median_tokens_per_second, row.min_tokens_per_second, row.max_tokens_per_second
            ),
            fmt_range(row.median_ttft_ms, row.min_ttft_ms, row.max_ttft_ms, 0),
            fmt_range(row.median_total_ms, row.min_total_ms, row.max_total_ms, 0),
            fmt_speedup(row),
            fmt_acceptance(row),
            fmt_identical(row),
            fmt_check(row),
            fmt_memory(row),
            f"**{row.verdict}**",
        ]
        lines.append("| " + " | ".join(cell(c) for c in cells) + " |")
    lines += ["", "## Verdicts", ""]
    for row in document.summary:
        if row.verdict != Verdict.BASELINE:
            label = labels.get(row.config, row.config)
            lines.append(f"- **{label}** on `{row.prompt}`: {row.verdict} — {row.reason}")
    # (level_export formats its cells with this module's: imported here, not at the top.)
    from spectui.core.compare.level_export import levels_markdown

    lines += levels_markdown(document)
    if document.content_verdicts:
        lines += ["", "## By content", ""]
        for v in document.content_verdicts:
            lines.append(f"- **{labels.get(v.config, v.config)}**: {v.sentence}")
    differing = [r for r in document.runs if r.identical_to_baseline is False]
    if differing:
        lines += ["", "## Answers that differ from the baseline", ""]
        for r in differing:
            where = r.divergence.short() if r.divergence else ""
            label = labels.get(r.config, r.config)
            lines.append(f"- {label}, `{r.prompt}`, {round_name(r)}: {where}{_odds(r)}")
    unchecked = [r for r in document.runs if r.check_status not in (None, "passed", "skipped")]
    if unchecked:
        lines += ["", "## Checker failures", ""]
        for r in unchecked:
            lines.append(
                f"- {labels.get(r.config, r.config)}, `{r.prompt}`, {round_name(r)}: "
                f"{r.check_status} — {r.check_detail}"
            )
    failed = [r for r in document.runs if not r.ok]
    if failed:
        lines += ["", "## Failed runs", ""]
        for r in failed:
            label = labels.get(r.config, r.config)
            lines.append(f"- {label}, `{r.prompt}`, {round_name(r)}: {r.error}")
    return "\n".join(lines) + "\n"
