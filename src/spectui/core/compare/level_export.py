"""The concurrency table of a comparison (`levels`): a column per level, one row per metric of
each config, shared by the CLI, the TUI, the Markdown report and the levels CSV."""

from __future__ import annotations

import csv
import io

from spectui.core.compare.export import cell, fmt_number, fmt_range, fmt_speedup
from spectui.core.compare.levels import LevelRow, level_name
from spectui.core.compare.store import CompareDocument

LEVEL_METRICS = (
    "aggregate tok/s",
    "request tok/s",
    "TTFT p50/p95 ms",
    "latency p50/p95 ms",
    "acceptance",
    "waited for a slot",
    "speedup",
    "verdict",
)
"""The rows of each config in the concurrency table (one column per level)."""


def _level_cells(row: LevelRow) -> list[str]:
    """`LEVEL_METRICS`' cells for one config at one level."""
    p50_p95 = "{} / {}".format
    return [
        fmt_range(row.aggregate_tokens_per_second, row.aggregate_min, row.aggregate_max),
        fmt_number(row.request_tokens_per_second),
        p50_p95(fmt_number(row.ttft_p50_ms, 0), fmt_number(row.ttft_p95_ms, 0)),
        p50_p95(fmt_number(row.latency_p50_ms, 0), fmt_number(row.latency_p95_ms, 0)),
        "–" if row.acceptance is None else f"{row.acceptance:.0%}",
        f"{row.waited}/{row.requests}",
        fmt_speedup(row),
        row.verdict,
    ]


def level_table(document: CompareDocument) -> tuple[list[str], list[list[str]]]:
    """The concurrency table: headers (config, metric, one column per level) and rows (per
    config, one per `LEVEL_METRICS`); no rows when the plan runs level 1 only."""
    levels = document.plan.concurrency
    names = [level_name(level) for level in levels]
    if document.plan.arrivals is not None:  # one level: the recorded traffic, replayed
        names = [f"recorded {document.plan.speed:g}x ({levels[0]} slots)"]
    headers = ["config", "metric", *names]
    cells = {(r.config, r.level): _level_cells(r) for r in document.levels}
    rows: list[list[str]] = []
    if not document.levels:
        return headers, rows
    for config in document.plan.configs:
        for index, metric in enumerate(LEVEL_METRICS):
            if config.is_baseline and metric == "speedup":
                continue
            values = [
                cells[(config.name, lv)][index] if (config.name, lv) in cells else "–"
                for lv in levels
            ]
            rows.append([config.label if index == 0 else "", metric, *values])
    return headers, rows


def levels_csv(document: CompareDocument) -> str:
    """The concurrency table as CSV (a column per level; the config named on every row)."""
    headers, rows = level_table(document)
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(headers)
    config = ""
    for row in rows:
        config = row[0] or config
        writer.writerow([config, *row[1:]])
    return out.getvalue()


def levels_markdown(document: CompareDocument) -> list[str]:
    """The concurrency section: a column per level, then each config's one-sentence verdict."""
    headers, rows = level_table(document)
    if not rows:
        return []
    levels = ", ".join(str(level) for level in document.plan.concurrency)
    lines = [
        "",
        f"## Concurrency ({levels} streams at once)",
        "",
        "Aggregate tok/s: the tokens the server generated (its own timings) over the time at "
        "least one request of the block was in flight; the speedup pairs it with the "
        "baseline's at the same level in the same round, against that level's own noise "
        "floor. TTFT and latency percentiles are over every request of the level (nearest "
        "rank); 'waited for a slot': requests sent while every server slot was busy.",
        "",
        "| " + " | ".join(headers) + " |",
        "|" + "---|" * len(headers),
    ]
    lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows]
    labels = {c.name: c.label for c in document.plan.configs}
    lines += [""] + [
        f"- **{labels.get(v.config, v.config)}**: {v.sentence}" for v in document.level_verdicts
    ]
    return lines
