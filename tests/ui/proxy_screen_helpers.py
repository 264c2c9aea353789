"""Feeding recorded captures through a `ProxyHub` as if clients sent them (no network)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from spectui.core.proxy.chunks import PreparedBody
from spectui.core.proxy.hub import LiveRequest, ProxyHub
from spectui.core.proxy.models import EndpointKind, RequestStatus

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
START = datetime(2026, 1, 2, 10, 0, 0, tzinfo=UTC)


class FakeClocks:
    """A monotonic clock and a wall clock that only move when told."""

    def __init__(self) -> None:
        self.t = 100.0

    def clock(self) -> float:
        return self.t

    def wall(self) -> datetime:
        return START + timedelta(seconds=self.t - 100.0)


def make_hub() -> tuple[ProxyHub, FakeClocks]:
    clocks = FakeClocks()
    return ProxyHub(keep_events=True, clock=clocks.clock, wall=clocks.wall), clocks


def begin(
    hub: ProxyHub, path: str = "/completion", *, streamed: bool = True, client: str = "10.0.0.7"
) -> LiveRequest:
    kind = {
        "/completion": EndpointKind.NATIVE,
        "/v1/chat/completions": EndpointKind.OAI_CHAT,
        "/v1/completions": EndpointKind.OAI_COMPLETION,
    }[path]
    body = PreparedBody(upstream=b"", streamed=streamed, strip=True, prompt="p", n_predict=120)
    return hub.start(path, kind, f"{client}:50000", body)


def feed(live: LiveRequest, capture: str, upto: int | None = None, step_s: float = 0.02) -> None:
    """The capture's lines (the first ``upto``), one every ``step_s`` on the request's clock."""
    assert live.attribution is not None
    lines = (FIXTURES / capture).read_bytes().splitlines(keepends=True)
    data = [line for line in lines if line.startswith(b"data:")]
    for index, line in enumerate(data[:upto]):
        live.attribution.line(line, 0.3 + index * step_s)


def finish(hub: ProxyHub, clocks: FakeClocks, live: LiveRequest, seconds: float = 3.0) -> None:
    clocks.t += seconds
    hub.finish(live, status=RequestStatus.DONE, http_status=200)
