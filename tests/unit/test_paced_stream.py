"""A run reads its stream paced after the first token, and stamps tokens with their arrival.

Pacing is what keeps watching cheap (one wake-up per batch instead of per token, #13); these
tests check that it loses nothing: every token and the text arrive, the first token is read at
once, tokens taken together get the times the server's clock gives them (inside what is known),
and the connection goes back to the pool unpaced.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Sequence

import httpx
import pytest

from helpers.sse import sse_payloads
from spectui.core.events import SummaryEvent, TokenEvent
from spectui.core.llama.transport import AsyncioStream, AsyncioTransport
from spectui.core.request import GenerationRequest
from spectui.core.stream.run import ChunkProcessor, StreamRun

from .socket_server import CHUNKED_HEAD, chunk, request_head, serve

CAPTURE = "completion-ngram-simple.sse"


def tokens_of(events: Sequence[object]) -> list[TokenEvent]:
    return [e for e in events if isinstance(e, TokenEvent)]


def test_tokens_read_together_get_the_server_clock_times_inside_the_read_window() -> None:
    payloads = sse_payloads(CAPTURE)
    processor = ChunkProcessor(chat=False)
    first = tokens_of(processor.feed(payloads[0], 1.0, earliest=0.5))
    assert [t.t for t in first] == [1.0]  # the first token: when it was read (TTFT is exact)
    # The next five payloads were all taken by one read at 1.5 s (the previous read at 1.0 s).
    batch = [t.t for p in payloads[1:6] for t in tokens_of(processor.feed(p, 1.5, earliest=1.0))]
    server = [json.loads(p)["timings"]["predicted_ms"] / 1000 for p in payloads[1:6]]
    expected = [min(1.5, 1.0 + s) for s in server]  # first token's offset, capped by the read
    assert batch == pytest.approx(expected)
    assert batch == sorted(batch)
    assert batch[0] >= 1.0 and batch[-1] <= 1.5


def test_the_estimate_never_leaves_the_read_window() -> None:
    # A server clock that runs far ahead of ours (or a made-up one) cannot move a token out of
    # (previous read, this read], nor before the token ahead of it.
    processor = ChunkProcessor(chat=False)

    def payload(n: int, ms: float) -> str:
        timings = {"predicted_n": n, "predicted_ms": ms}
        return json.dumps({"content": "x", "tokens_predicted": n, "timings": timings})

    t1 = tokens_of(processor.feed(payload(1, 0.001), 10.0, earliest=9.0))[0].t
    t2 = tokens_of(processor.feed(payload(2, 50_000.0), 10.1, earliest=10.0))[0].t
    t3 = tokens_of(processor.feed(payload(3, 1.0), 10.2, earliest=10.1))[0].t
    assert (t1, t2, t3) == (10.0, 10.1, 10.1)  # capped by its read; not before token 2
    assert processor.snapshot().tokens == 3


@pytest.fixture
async def paced_server() -> AsyncIterator[str]:
    """Streams the capture: the first token, then the rest one chunk every 10 ms."""
    payloads = sse_payloads(CAPTURE)

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await request_head(reader)
        writer.write(CHUNKED_HEAD)
        for payload in payloads:
            writer.write(chunk(f"data: {payload}\n\n".encode()))
            await writer.drain()
            await asyncio.sleep(0.01)  # (the behaviour: a paced stream)
        writer.write(b"0\r\n\r\n")
        await writer.drain()
        await reader.read()
        writer.close()

    async for url in serve(handler):
        yield url


async def test_a_paced_run_loses_nothing_and_reads_in_batches(
    paced_server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    reads: list[int] = []
    streams: set[AsyncioStream] = set()
    original = AsyncioStream.read

    async def counting_read(self: AsyncioStream, max_bytes: int, **kw: float | None) -> bytes:
        data = await original(self, max_bytes, **kw)
        reads.append(len(data))
        streams.add(self)
        return data

    monkeypatch.setattr(AsyncioStream, "read", counting_read)
    expected = "".join(json.loads(p).get("content", "") for p in sse_payloads(CAPTURE))
    async with httpx.AsyncClient(transport=AsyncioTransport()) as http:
        run = StreamRun(http, paced_server, GenerationRequest(prompt="x", n_predict=120),
                        read_gap_s=0.25)  # fmt: skip
        events = [event async for event in run]
    summary = events[-1]
    assert isinstance(summary, SummaryEvent)
    assert summary.text == expected
    assert summary.metrics.tokens == 120
    times = [t.t for t in tokens_of(events)]
    assert times == sorted(times)
    # ~130 chunks over ~1.3 s, read every 0.25 s after the first token: a handful of reads
    # (the request's answer head, the first token, then batches), far fewer than the chunks.
    assert len([n for n in reads if n]) < 30
    (stream,) = streams
    assert stream.read_gap == 0.0  # reset: the connection goes back to the pool unpaced
