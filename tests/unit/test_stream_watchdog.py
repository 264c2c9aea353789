"""The stall watchdog moves lazily (not per chunk): a stream that keeps trickling is never
declared stalled, however long it lasts in all, and a silent one still is."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import httpx

from helpers.sse import FIXTURES
from spectui.core.events import ErrorEvent, SummaryEvent, TokenEvent
from spectui.core.request import GenerationRequest
from spectui.core.stream.run import StreamRun

BASE = "http://127.0.0.1:9"
STALL_S = 1.5
GAP_S = 0.5
"""Each gap is a third of the stall limit; four of them add up to more than it."""


class Trickling(httpx.AsyncByteStream):
    """Sends one SSE event every ``GAP_S`` seconds."""

    def __init__(self, events: list[bytes]) -> None:
        self.events = events

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for event in self.events:
            yield event
            await asyncio.sleep(GAP_S)  # (the behaviour: a stream that trickles)


async def test_a_trickling_stream_is_not_stalled() -> None:
    capture = (FIXTURES / "completion-ngram-simple.sse").read_bytes()
    events = [chunk + b"\n\n" for chunk in capture.split(b"\n\n") if chunk.strip()]
    sent = [*events[:4], events[-1]]  # four tokens, then the final chunk

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            200, headers={"content-type": "text/event-stream"}, stream=Trickling(sent)
        )

    async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as http:
        run = StreamRun(http, BASE, GenerationRequest(prompt="p"), stall_timeout_s=STALL_S)
        got = [e async for e in run]
    assert not [e for e in got if isinstance(e, ErrorEvent)]
    assert isinstance(got[-1], SummaryEvent)
    assert sum(isinstance(e, TokenEvent) for e in got) >= 4
