"""`spectui stream`'s summaries: the JSON record carries every metric, and the text line warns
when the numbers cannot be trusted."""

from __future__ import annotations

import json

from spectui.commands.stream import summary_line, summary_record
from spectui.core.events import RunMetrics, SummaryEvent

METRICS = RunMetrics(
    tokens=40,
    drafted=30,
    accepted=20,
    steps=10,
    accepted_per_position=[9, 7, 4],
    ttft_ms=85.0,
    total_ms=900.0,
    tokens_per_second=48.0,
    peak_rss_bytes=512 * 2**20,
    draft_tokens=20,
    attribution_anomalies=3,
)


def test_summary_record_carries_every_metric() -> None:
    summary = SummaryEvent(t=0.9, metrics=METRICS, stop_reason="limit", server_timings={"x": 1})
    record = summary_record(summary)
    assert set(RunMetrics.model_fields) <= set(record)
    assert record["draft_tokens"] == 20
    assert record["attribution_anomalies"] == 3
    # The derived numbers and the run's end stay under their names.
    assert record["type"] == "summary"
    assert (record["rejected"], record["acceptance_rate"]) == (10, 20 / 30)
    assert record["mean_acceptance_length"] == 3.0
    assert (record["stop_reason"], record["server_timings"]) == ("limit", {"x": 1})
    assert json.loads(json.dumps(record)) == record


def test_summary_line_warns_about_attribution_anomalies() -> None:
    line = summary_line(METRICS)
    assert line.endswith(" · ⚠ 3 attribution anomalies (counts may be off)")
    assert "1 attribution anomaly " in summary_line(
        METRICS.model_copy(update={"attribution_anomalies": 1})
    )
    assert "⚠" not in summary_line(METRICS.model_copy(update={"attribution_anomalies": 0}))


def test_summaries_record_what_watching_cost() -> None:
    metrics = METRICS.model_copy(update={"client_cpu_percent": 2.4, "server_cpu_percent": 187.0})
    record = summary_record(SummaryEvent(metrics=metrics))
    assert (record["client_cpu_percent"], record["server_cpu_percent"]) == (2.4, 187.0)
    assert "CPU spectui 2.4 % · server 187 %" in summary_line(metrics)
    assert "CPU" not in summary_line(METRICS)  # no samples (a remote server): nothing claimed


def test_compare_runs_record_what_measuring_cost() -> None:
    from spectui.core.compare.records import RunRecord

    assert {"client_cpu_percent", "server_cpu_percent"} <= set(RunRecord.model_fields)
