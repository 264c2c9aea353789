"""Where the proxy's requests go: the live ones (being attributed now) and the finished ones.

Listeners (the JSON Lines writer, the Prometheus metrics, the recorder, the TUI) are told when a
request starts and when it ends, on the event loop; the TUI reads a live request's events itself,
at its own pace. A listener that fails is logged (its type only) and the others are still told.

Memory is bounded: finished records in a deque (`RECENT_REQUESTS`), events only while a request
is live (and for recording, until the recorder has written them), and the prompts and answers of
finished records only for the newest `TEXT_REQUESTS` and within `TEXT_BUDGET` characters; older
records keep their numbers (listeners were given the whole record when it finished).
"""

from __future__ import annotations

import itertools
import json
import logging
import time
from collections import deque
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Protocol

from spectui.core.content import classify, length_bucket
from spectui.core.events import RunMetrics, StepEvent, TokenEvent
from spectui.core.proxy.chunks import PreparedBody, StreamAttribution
from spectui.core.proxy.models import (
    EndpointKind,
    ProxyRecord,
    RequestInfo,
    RequestStatus,
    request_prompt,
)
from spectui.core.stream.dialects import ResponseTotals

RECENT_REQUESTS = 1000
"""Finished requests the hub remembers (the table and the aggregates read them)."""

TEXT_REQUESTS = 100
"""Finished requests whose prompt and answer text the hub keeps (the newest)."""

TEXT_BUDGET = 32 * 1024 * 1024
"""Characters of prompt and answer text the hub keeps across finished requests: 40 prompts of
4 MiB would otherwise hold ~190 MiB for a table that shows a line of each."""

log = logging.getLogger("spectui.proxy")


class ProxyListener(Protocol):
    """Told about every generation request the proxy sees."""

    def request_started(self, live: LiveRequest) -> None:
        """A request arrived (its stream has not begun)."""

    def request_finished(self, live: LiveRequest, record: ProxyRecord) -> None:
        """A request ended, however it ended."""


class LiveRequest:
    """One generation request while the proxy handles it."""

    __slots__ = ("attribution", "info", "record", "t0")

    def __init__(self, info: RequestInfo, attribution: StreamAttribution | None, t0: float) -> None:
        self.info = info
        self.attribution = attribution
        """Per-token attribution (streamed requests with timings), or None."""
        self.t0 = t0
        """Arrival on the monotonic clock."""
        self.record: ProxyRecord | None = None
        """Set when it ends."""

    @property
    def events(self) -> list[TokenEvent | StepEvent]:
        """Token and step events so far (empty unless events are kept)."""
        if self.attribution is None:
            return []
        self.attribution.settle()
        return self.attribution.events

    def snapshot(self, now: float | None = None) -> RunMetrics | None:
        """The attributed numbers so far, at ``now`` on the monotonic clock (default: as of the
        latest token, so a reader needs no clock of its own)."""
        if self.attribution is None:
            return None
        attribution = self.attribution
        attribution.settle()
        tracker = attribution.tracker
        tracker.attribution_anomalies = attribution.attributor.anomalies
        return tracker.snapshot((tracker.last_token_t or 0.0) if now is None else now - self.t0)


class ProxyHub:
    """Numbers the requests, tells the listeners, keeps the recent records."""

    def __init__(
        self,
        *,
        keep_events: bool = False,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.keep_events = keep_events
        """Keep token and step events of live requests (the TUI and recording need them)."""
        self.clock = clock
        self.wall = wall
        self.listeners: list[ProxyListener] = []
        self.live: dict[int, LiveRequest] = {}
        """Requests in flight, by id."""
        self.recent: deque[ProxyRecord] = deque(maxlen=RECENT_REQUESTS)
        """Finished requests, oldest first."""
        self.text_requests = TEXT_REQUESTS
        """How many of the newest records keep their text."""
        self.text_budget = TEXT_BUDGET
        """How many characters of text the records keep in all."""
        self.text_kept = 0
        """Characters of text the records keep now."""
        self._texted: deque[tuple[ProxyRecord, int]] = deque()
        self._ids = itertools.count(1)

    def start(
        self, endpoint: str, kind: EndpointKind, client: str, body: PreparedBody
    ) -> LiveRequest:
        """A generation request arrived."""
        per_token = body.streamed and kind is not EndpointKind.ANTHROPIC
        info = RequestInfo(
            id=next(self._ids),
            started=self.wall(),
            client=client,
            endpoint=endpoint,
            kind=kind,
            model=body.model,
            streamed=body.streamed,
            per_token=per_token,
            prompt=body.prompt,
            messages=body.messages,
            sampling=body.sampling,
            n_predict=body.n_predict,
        )
        attribution = None
        if body.streamed:
            attribution = StreamAttribution(
                kind, strip=body.strip, keep_events=self.keep_events, limit=body.n_predict
            )
        live = LiveRequest(info, attribution, self.clock())
        self.live[info.id] = live
        for listener in self.listeners:
            try:
                listener.request_started(live)
            except Exception as error:  # (one listener's bug must not lose the request)
                log.warning("a proxy listener failed (%s)", type(error).__name__)
        return live

    def finish(
        self,
        live: LiveRequest,
        *,
        status: RequestStatus,
        http_status: int,
        error: str | None = None,
        totals: ResponseTotals | None = None,
    ) -> ProxyRecord:
        """A request ended: build its record, tell the listeners, forget its events."""
        now = self.clock()
        record = _record(live, status, http_status, error, totals, now)
        live.record = record
        self.live.pop(live.info.id, None)
        self.recent.append(record)
        self._keep_text(record)
        for listener in self.listeners:
            try:
                listener.request_finished(live, record)
            except Exception as error:  # (the next listeners still get the record)
                log.warning("a proxy listener failed (%s)", type(error).__name__)
        return record

    def _keep_text(self, record: ProxyRecord) -> None:
        """Count ``record``'s text; drop the text of the oldest records beyond the bounds."""
        size = text_size(record)
        if not size:
            return
        self._texted.append((record, size))
        self.text_kept += size
        while self._texted and (
            len(self._texted) > self.text_requests or self.text_kept > self.text_budget
        ):
            old, old_size = self._texted.popleft()
            self.text_kept -= old_size
            for i, kept in enumerate(self.recent):  # (the oldest: found near the start)
                if kept is old:
                    self.recent[i] = numbers_only(old)
                    break


def _record(
    live: LiveRequest,
    status: RequestStatus,
    http_status: int,
    error: str | None,
    totals: ResponseTotals | None,
    now: float,
) -> ProxyRecord:
    record = _finished(live, status, http_status, error, totals, now)
    content = classify(request_prompt(record.info) or "", record.text)
    return record.model_copy(
        update={"content": content, "prompt_length": length_bucket(record.prompt_tokens)}
    )


def _finished(
    live: LiveRequest,
    status: RequestStatus,
    http_status: int,
    error: str | None,
    totals: ResponseTotals | None,
    now: float,
) -> ProxyRecord:
    info = live.info
    attribution = live.attribution
    common = {
        "status": status,
        "http_status": http_status,
        "duration_ms": (now - live.t0) * 1000,
    }
    if attribution is not None:
        attribution.settle()
        error = error or attribution.error
        model = attribution.model or info.model
        timings = attribution.last_timings or {}
        server_timings = {k: float(v) for k, v in timings.items() if isinstance(v, int | float)}
        if attribution.saw_timings:
            metrics = live.snapshot(now)
            assert metrics is not None
            metrics = metrics.model_copy(update={"total_ms": _last_token_ms(attribution)})
            return ProxyRecord(
                info=info.model_copy(update={"model": model}),
                metrics=metrics,
                tokens=metrics.tokens,
                prompt_tokens=metrics.prompt_tokens,
                drafted=metrics.drafted,
                accepted=metrics.accepted,
                stop_reason=_stop(status, attribution.stop_reason),
                server_timings=server_timings,
                error=error,
                text=attribution.text,
                **common,
            )
        # A stream without timings (/v1/messages): what its usage said, no per-token detail.
        return ProxyRecord(
            info=info.model_copy(update={"model": model, "per_token": False}),
            tokens=attribution.anthropic_tokens,
            stop_reason=_stop(status, attribution.stop_reason),
            error=error,
            text=attribution.text,
            **common,
        )
    totals = totals or ResponseTotals()
    return ProxyRecord(
        info=info.model_copy(update={"model": totals.model or info.model}),
        tokens=totals.tokens,
        prompt_tokens=totals.prompt_tokens,
        drafted=totals.drafted,
        accepted=totals.accepted,
        stop_reason=_stop(status, totals.stop_reason),
        server_timings=totals.timings,
        error=error or totals.error,
        text=totals.text,
        **common,
    )


def _last_token_ms(attribution: StreamAttribution) -> float | None:
    last = attribution.tracker.last_token_t
    return None if last is None else last * 1000


def _stop(status: RequestStatus, reason: str) -> str:
    if status is RequestStatus.CANCELLED:
        return "cancelled"
    if status is RequestStatus.ERROR:
        return "error"
    return reason


def text_size(record: ProxyRecord) -> int:
    """Characters of prompt and answer text ``record`` holds."""
    info = record.info
    size = len(record.text) + len(info.prompt or "")
    if info.messages:
        size += len(json.dumps(info.messages, ensure_ascii=False))
    return size


def numbers_only(record: ProxyRecord) -> ProxyRecord:
    """``record`` without its prompt and answer text."""
    info = record.info.model_copy(update={"prompt": None, "messages": None})
    return record.model_copy(update={"info": info, "text": ""})
