"""Pipeline throughput on one core, from a recorded stream. Goal: >= 100,000 tokens/s.

Three figures, from the ngram-simple capture repeated to 20,000 tokens (`streams.long_payloads`):

* ``tokens_per_second`` (the goal's figure: SSE parsing + attribution + metrics): the raw SSE
  bytes split into lines and decoded by httpx-sse's decoder, each `data:` payload through
  `ChunkProcessor` (JSON parsing, attribution, metrics).
* ``core_tokens_per_second``: `ChunkProcessor` alone on the payloads (the earlier figure).
* ``stream_run_tokens_per_second``: everything a live run does on the client: `StreamRun` over
  httpx with the body arriving in 16 KiB reads (an in-memory transport instead of a socket), the
  stall watchdog, metric snapshots and the hand-over queue, consumed by an empty loop.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import AsyncIterator

import httpx
from common import median, write_result
from httpx_sse._decoders import SSEDecoder
from streams import long_payloads, sse_body

from spectui.core.events import TokenEvent
from spectui.core.request import GenerationRequest
from spectui.core.stream.run import ChunkProcessor, StreamRun

GOAL = 100_000
TOKENS = 20_000
REPS = 5


def core_pass(payloads: list[str]) -> float:
    start = time.perf_counter()
    processor = ChunkProcessor(chat=False)
    for i, payload in enumerate(payloads):
        processor.feed(payload, i * 1e-3)
    elapsed = time.perf_counter() - start
    return processor.tracker.tokens / elapsed


def sse_pass(body: bytes) -> float:
    start = time.perf_counter()
    processor = ChunkProcessor(chat=False)
    decoder = SSEDecoder()
    for i, line in enumerate(body.decode().splitlines()):
        sse = decoder.decode(line)
        if sse is not None:
            processor.feed(sse.data, i * 1e-3)
    elapsed = time.perf_counter() - start
    return processor.tracker.tokens / elapsed


async def _reads(body: bytes, size: int = 16384) -> AsyncIterator[bytes]:
    for start in range(0, len(body), size):
        yield body[start : start + size]
        await asyncio.sleep(0)  # a socket read would let the consumer run too


async def stream_run_pass(body: bytes) -> float:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            200, headers={"content-type": "text/event-stream"}, content=_reads(body)
        )

    async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as http:
        request = GenerationRequest(prompt="bench", n_predict=TOKENS)
        start = time.perf_counter()
        tokens = 0
        async for event in StreamRun(http, "http://bench", request):
            if isinstance(event, TokenEvent):
                tokens += 1
        elapsed = time.perf_counter() - start
    assert tokens >= TOKENS, tokens
    return tokens / elapsed


def main() -> dict[str, object]:
    payloads = long_payloads(TOKENS)
    body = sse_body(payloads)
    core_pass(payloads)  # warm-up: imports, pydantic validators
    sse, core, run = [], [], []
    for _ in range(REPS):  # alternating, so a busy moment hits all alike
        sse.append(sse_pass(body))
        core.append(core_pass(payloads))
        run.append(asyncio.run(stream_run_pass(body)))
    result: dict[str, object] = {
        "tokens_per_second": median(sse),
        "core_tokens_per_second": median(core),
        "stream_run_tokens_per_second": median(run),
        "runs": sse,
        "core_runs": core,
        "stream_run_runs": run,
        "tokens": TOKENS,
        "goal": GOAL,
        "met": median(sse) >= GOAL,
    }
    path = write_result("pipeline", result)
    print(
        f"pipeline: {median(sse):,.0f} tokens/s SSE+parse+attribution+metrics "
        f"(goal {GOAL:,}); ChunkProcessor alone {median(core):,.0f}; whole StreamRun "
        f"{median(run):,.0f} -> {path}"
    )
    return result


if __name__ == "__main__":
    # No options: parsed anyway so that --help answers instead of running (and overwriting
    # bench/results/pipeline.json).
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args()
    main()
