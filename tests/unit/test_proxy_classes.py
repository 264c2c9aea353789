"""Where speculation pays, over the proxy's traffic: requests grouped by content class and prompt
length in the proxy pane's numbers and in /spectui/metrics, with bounded label sets."""

from __future__ import annotations

import re
from datetime import UTC, datetime

from spectui.core.content import ContentClass, LengthBucket
from spectui.core.events import RunMetrics
from spectui.core.proxy.aggregate import by_content, by_prompt_length
from spectui.core.proxy.models import EndpointKind, ProxyRecord, RequestInfo, RequestStatus
from spectui.core.proxy.prom import ProxyMetrics
from spectui.ui.screens.proxy import aggregate_text


def record(
    content: ContentClass, length: LengthBucket, drafted: int, accepted: int, rate: float
) -> ProxyRecord:
    info = RequestInfo(
        id=1, started=datetime(2026, 1, 1, tzinfo=UTC), client="c", endpoint="/completion",
        kind=EndpointKind.NATIVE, model="m", streamed=True, per_token=True,
    )  # fmt: skip
    metrics = RunMetrics(
        tokens=11, drafted=drafted, accepted=accepted, steps=5, tokens_per_second=rate
    )
    return ProxyRecord(
        info=info, status=RequestStatus.DONE, http_status=200, metrics=metrics, tokens=11,
        drafted=drafted, accepted=accepted, content=content, prompt_length=length,
    )  # fmt: skip


RECORDS = [
    record(ContentClass.CODE, LengthBucket.XS, 10, 8, 100.0),
    record(ContentClass.CODE, LengthBucket.S, 10, 6, 50.0),
    record(ContentClass.PROSE, LengthBucket.XS, 10, 1, 20.0),
]


def test_aggregates_split_by_class_and_by_length() -> None:
    classes = by_content(RECORDS)
    assert list(classes) == [ContentClass.CODE, ContentClass.PROSE]
    assert classes[ContentClass.CODE].acceptance_rate == 14 / 20
    assert classes[ContentClass.CODE].tokens_per_second == 20 / (10 / 100 + 10 / 50)
    lengths = by_prompt_length(RECORDS)
    assert lengths[LengthBucket.XS].requests == 2 and lengths[LengthBucket.S].requests == 1


def test_prometheus_counts_per_class_with_bounded_labels() -> None:
    metrics = ProxyMetrics()
    for _ in range(50):
        for item in RECORDS:
            metrics.request_finished(None, item)  # type: ignore[arg-type]  # unused by the counter
    text = metrics.exposition().decode()
    assert (
        'spectui_proxy_class_accepted_tokens_total{content="code",prompt_length="<128"} 400.0'
        in text
    )
    labels = set(re.findall(r'content="(\w+)",prompt_length="([^"]+)"', text))
    assert labels == {("code", "<128"), ("code", "128-511"), ("prose", "<128")}


def test_the_proxy_pane_names_each_class_and_length() -> None:
    from spectui.core.proxy.aggregate import aggregate

    text = aggregate_text(aggregate(RECORDS), aggregate(RECORDS), 0, RECORDS)
    lines = text.splitlines()
    assert lines[3].startswith("by content: code 2 req 70%")
    assert "prose 1 req 10%" in lines[3]
    assert lines[4].startswith("by length: prompt <128 2 req")
