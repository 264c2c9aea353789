"""The proxy's own Prometheus metrics, served at ``/spectui/metrics``: per model and endpoint.

A registry of its own (not prometheus-client's global one), so two proxies in one process — the
tests — never share counters. Model labels are capped: a client may name any model it likes, and
each name would otherwise be a new time series forever.
"""

from __future__ import annotations

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Histogram,
    disable_created_metrics,
    generate_latest,
)
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from spectui.core.proxy.hub import LiveRequest
from spectui.core.proxy.models import ProxyRecord

CONTENT_TYPE = CONTENT_TYPE_LATEST
"""Content type of the exposition."""

MAX_MODELS = 16
"""Distinct model labels before the rest are counted as 'other'."""

_LABELS = ("model", "endpoint")
_CLASS_LABELS = ("content", "prompt_length")
"""Where speculation pays: `spectui.core.content`'s fixed classes and length buckets (at most
4 x 6 series per metric, whatever the traffic)."""

# `_created` series double the exposition and say nothing a scraper needs.
disable_created_metrics()  # type: ignore[no-untyped-call]
_TTFT_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
_RATE_BUCKETS = (1.0, 5.0, 10.0, 20.0, 40.0, 60.0, 80.0, 100.0, 150.0, 200.0, 400.0)


class ProxyMetrics:
    """A `ProxyListener` that counts finished requests into Prometheus metrics."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        registry = self.registry
        prefix = "spectui_proxy_"
        self.requests = Counter(
            prefix + "requests",
            "Generation requests finished",
            [*_LABELS, "status"],
            registry=registry,
        )
        self.tokens = Counter(prefix + "tokens", "Tokens generated", _LABELS, registry=registry)
        self.drafted = Counter(
            prefix + "drafted_tokens", "Draft tokens proposed", _LABELS, registry=registry
        )
        self.accepted = Counter(
            prefix + "accepted_tokens", "Draft tokens accepted", _LABELS, registry=registry
        )
        self.steps = Counter(
            prefix + "steps",
            "Verification steps (per-token requests only)",
            _LABELS,
            registry=registry,
        )
        self.per_position = Counter(
            prefix + "accepted_per_position",
            "Steps that accepted a draft token at each position (per-token requests only)",
            [*_LABELS, "position"],
            registry=registry,
        )
        # Held-back UTF-8 can put several steps in one chunk; where their accepted drafts
        # cannot be placed by position they are counted here (`RunMetrics.steps_unsplit`): per
        # position rates divide by steps - steps_unsplit, and the accepted drafts of per-token
        # requests are accepted_per_position + accepted_unplaced.
        self.steps_unsplit = Counter(
            prefix + "steps_unsplit",
            "Verification steps whose accepted drafts could not be placed by position",
            _LABELS,
            registry=registry,
        )
        self.accepted_unplaced = Counter(
            prefix + "accepted_unplaced",
            "Accepted draft tokens of the steps that could not be placed by position",
            _LABELS,
            registry=registry,
        )
        self.ttft = Histogram(
            prefix + "ttft_seconds",
            "Time to first token, on the proxy's clock",
            _LABELS,
            buckets=_TTFT_BUCKETS,
            registry=registry,
        )
        self.rate = Histogram(
            prefix + "tokens_per_second",
            "Decode rate per request, on the proxy's clock",
            _LABELS,
            buckets=_RATE_BUCKETS,
            registry=registry,
        )
        self.class_requests = Counter(
            prefix + "class_requests",
            "Finished requests by content class and prompt length",
            _CLASS_LABELS,
            registry=registry,
        )
        self.class_drafted = Counter(
            prefix + "class_drafted_tokens",
            "Draft tokens proposed, by content class and prompt length",
            _CLASS_LABELS,
            registry=registry,
        )
        self.class_accepted = Counter(
            prefix + "class_accepted_tokens",
            "Draft tokens accepted, by content class and prompt length",
            _CLASS_LABELS,
            registry=registry,
        )
        self.class_decode_tokens = Counter(
            prefix + "class_decode_tokens",
            "Tokens after the first of attributed requests, by content class and prompt length",
            _CLASS_LABELS,
            registry=registry,
        )
        self.class_decode_seconds = Counter(
            prefix + "class_decode_seconds",
            "First-to-last-token time of attributed requests, by content class and prompt "
            "length (decode tokens / decode seconds = tokens/s)",
            _CLASS_LABELS,
            registry=registry,
        )
        self._models: set[str] = set()

    def _model(self, name: str) -> str:
        if name in self._models:
            return name
        if len(self._models) < MAX_MODELS:
            self._models.add(name)
            return name
        return "other"

    def request_started(self, live: LiveRequest) -> None:
        """Nothing to count until it ends."""

    def request_finished(self, live: LiveRequest, record: ProxyRecord) -> None:
        """Count the request."""
        labels = (self._model(record.info.model or "unknown"), record.info.endpoint)
        self.requests.labels(*labels, record.status.value).inc()
        self._count_class(record)
        if record.tokens:
            self.tokens.labels(*labels).inc(record.tokens)
        if record.drafted:
            self.drafted.labels(*labels).inc(record.drafted)
        if record.accepted:
            self.accepted.labels(*labels).inc(record.accepted)
        metrics = record.metrics
        if metrics is None:
            return
        if metrics.steps:
            self.steps.labels(*labels).inc(metrics.steps)
            # (also at 0: the dashboard adds and subtracts them, and PromQL's sum of a missing
            # series is no value, not 0)
            self.steps_unsplit.labels(*labels).inc(metrics.steps_unsplit)
            self.accepted_unplaced.labels(*labels).inc(metrics.accepted_unplaced)
        for position, count in enumerate(metrics.accepted_per_position):
            if count:
                self.per_position.labels(*labels, str(position)).inc(count)
        if metrics.ttft_ms is not None:
            self.ttft.labels(*labels).observe(metrics.ttft_ms / 1000)
        if metrics.tokens_per_second is not None:
            self.rate.labels(*labels).observe(metrics.tokens_per_second)

    def _count_class(self, record: ProxyRecord) -> None:
        labels = (record.content.value, record.prompt_length.value)
        self.class_requests.labels(*labels).inc()
        if record.drafted:
            self.class_drafted.labels(*labels).inc(record.drafted)
        if record.accepted:
            self.class_accepted.labels(*labels).inc(record.accepted)
        metrics = record.metrics
        if metrics is not None and metrics.tokens_per_second and metrics.tokens > 1:
            self.class_decode_tokens.labels(*labels).inc(metrics.tokens - 1)
            self.class_decode_seconds.labels(*labels).inc(
                (metrics.tokens - 1) / metrics.tokens_per_second
            )

    def exposition(self) -> bytes:
        """The metrics in Prometheus text format."""
        return generate_latest(self.registry)
