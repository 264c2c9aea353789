"""StreamRun over a mock transport: replayed captures, HTTP errors, stalls and cancellation."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import httpx
import pytest

from helpers.sse import FIXTURES
from spectui.core.events import (
    EngineEvent,
    ErrorEvent,
    MetricsEvent,
    SummaryEvent,
    TokenEvent,
)
from spectui.core.request import GenerationRequest
from spectui.core.stream.run import StreamRun

BASE = "http://127.0.0.1:9"


class Stalling(httpx.AsyncByteStream):
    """Sends ``first`` then never another byte (like a hung server)."""

    def __init__(self, first: bytes) -> None:
        self.first = first

    async def __aiter__(self) -> AsyncIterator[bytes]:
        yield self.first
        await asyncio.Event().wait()


def client(handler: httpx.MockTransport) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=handler)


def sse_response(name: str) -> httpx.Response:
    return httpx.Response(
        200,
        headers={"content-type": "text/event-stream"},
        content=(FIXTURES / name).read_bytes(),
    )


async def collect(run: StreamRun) -> list[EngineEvent]:
    return [event async for event in run]


async def test_replayed_completion_stream() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return sse_response("completion-ngram-simple.sse")

    async with client(httpx.MockTransport(handler)) as http:
        events = await collect(StreamRun(http, BASE, GenerationRequest(prompt="p", n_predict=120)))
    assert seen[0].url.path == "/completion"
    body = seen[0].read().decode()
    assert '"timings_per_token":true' in body
    assert '"return_tokens":true' in body
    summary = events[-1]
    assert isinstance(summary, SummaryEvent)
    assert summary.metrics.tokens == 120
    assert summary.metrics.steps == 20
    assert summary.stop_reason == "limit"
    assert summary.server_timings["draft_n"] == 155
    assert sum(isinstance(e, TokenEvent) for e in events) == 120
    assert any(isinstance(e, MetricsEvent) for e in events)


async def test_replayed_chat_stream_uses_chat_endpoint() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        assert request.url.path == "/v1/chat/completions"
        return sse_response("chat-ngram-simple.sse")

    async with client(httpx.MockTransport(handler)) as http:
        events = await collect(
            StreamRun(http, BASE, GenerationRequest(prompt="p", chat=True, n_predict=80))
        )
    summary = events[-1]
    assert isinstance(summary, SummaryEvent)
    assert (summary.metrics.tokens, summary.metrics.accepted) == (80, 68)
    assert summary.stop_reason == "limit"


async def test_401_is_an_auth_error_without_the_key() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(401, json={"error": {"message": "Invalid API Key", "code": 401}})

    async with client(httpx.MockTransport(handler)) as http:
        events = await collect(StreamRun(http, BASE, GenerationRequest(prompt="p")))
    error = next(e for e in events if isinstance(e, ErrorEvent))
    assert error.kind == "auth"
    assert "--api-key" in error.message
    assert isinstance(events[-1], SummaryEvent)
    assert events[-1].stop_reason == "error"


async def test_server_error_body_is_reported() -> None:
    body = (FIXTURES / "error-bad-prompt.http").read_text().split("\n\n", 1)[1]

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(400, content=body, headers={"content-type": "application/json"})

    async with client(httpx.MockTransport(handler)) as http:
        events = await collect(StreamRun(http, BASE, GenerationRequest(prompt="p")))
    error = next(e for e in events if isinstance(e, ErrorEvent))
    assert "prompt" in error.message
    assert "HTTP 400" in error.message


async def test_stalled_stream_becomes_an_error_event() -> None:
    first = (FIXTURES / "completion-ngram-simple.sse").read_bytes().split(b"\n\n")[0] + b"\n\n"

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            200, headers={"content-type": "text/event-stream"}, stream=Stalling(first)
        )

    async with client(httpx.MockTransport(handler)) as http:
        run = StreamRun(http, BASE, GenerationRequest(prompt="p"), stall_timeout_s=0.3)
        events = await asyncio.wait_for(collect(run), 10)
    error = next(e for e in events if isinstance(e, ErrorEvent))
    assert error.kind == "stall"
    assert sum(isinstance(e, TokenEvent) for e in events) == 1


async def test_cancel_ends_with_a_cancelled_summary() -> None:
    first = (FIXTURES / "completion-ngram-simple.sse").read_bytes().split(b"\n\n")[0] + b"\n\n"

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            200, headers={"content-type": "text/event-stream"}, stream=Stalling(first)
        )

    async with client(httpx.MockTransport(handler)) as http:
        run = StreamRun(http, BASE, GenerationRequest(prompt="p"))
        events: list[EngineEvent] = []
        async for event in run:
            events.append(event)
            if isinstance(event, TokenEvent):
                run.cancel()
    assert isinstance(events[-1], SummaryEvent)
    assert events[-1].stop_reason == "cancelled"
    assert events[-1].metrics.tokens == 1


async def test_connection_refused() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=request)

    async with client(httpx.MockTransport(handler)) as http:
        events = await collect(StreamRun(http, BASE, GenerationRequest(prompt="p")))
    error = next(e for e in events if isinstance(e, ErrorEvent))
    assert error.kind == "connection"


@pytest.mark.parametrize("data", ["not json", '{"error": {"message": "boom", "code": 500}}'])
async def test_bad_or_error_payload_mid_stream(data: str) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            200, headers={"content-type": "text/event-stream"}, content=f"data: {data}\n\n"
        )

    async with client(httpx.MockTransport(handler)) as http:
        events = await collect(StreamRun(http, BASE, GenerationRequest(prompt="p")))
    assert any(isinstance(e, ErrorEvent) for e in events)
