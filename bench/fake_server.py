"""A stand-in llama-server that streams a recorded capture at a fixed token rate, for measuring
what a *client* costs without the real server's noise.

It answers what `spectui --url` and `spectui stream --url` ask (/health, /props, /slots,
/metrics) with the captures in tests/fixtures, and streams /completion as the recorded
ngram-simple capture repeated (`streams.long_payloads`), one chunk every 1/RATE seconds. It runs
in a process of its own, so the client's CPU can be read from /proc alone.

    python bench/fake_server.py PORT RATE
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route
from streams import long_payloads

FIXTURES = Path(__file__).resolve().parent.parent / "tests" / "fixtures"


def app(rate: float) -> Starlette:
    props = json.loads((FIXTURES / "props.json").read_text())
    slots = json.loads((FIXTURES / "slots.json").read_text())
    metrics = (FIXTURES / "metrics-after-ngram-simple-2.prom").read_text()

    async def health(_: Request) -> Response:
        return JSONResponse({"status": "ok"})

    async def get_props(_: Request) -> Response:
        return JSONResponse(props)

    async def get_slots(_: Request) -> Response:
        return JSONResponse(slots)

    async def get_metrics(_: Request) -> Response:
        return PlainTextResponse(metrics)

    async def completion(request: Request) -> Response:
        body = await request.json()
        payloads = long_payloads(int(body.get("n_predict", 256)))

        async def chunks() -> AsyncIterator[bytes]:
            loop = asyncio.get_running_loop()
            start = loop.time()
            for n, payload in enumerate(payloads):
                # Paced on the clock, not by sleeping a fixed gap: a late chunk does not
                # slow the rest, as a server decoding at a steady rate would not.
                await asyncio.sleep(max(0.0, start + n / rate - loop.time()))
                yield f"data: {payload}\n\n".encode()

        return StreamingResponse(chunks(), media_type="text/event-stream")

    return Starlette(
        routes=[
            Route("/health", health),
            Route("/props", get_props),
            Route("/slots", get_slots),
            Route("/metrics", get_metrics),
            Route("/completion", completion, methods=["POST"]),
        ]
    )


def main() -> None:
    port, rate = int(sys.argv[1]), float(sys.argv[2])
    uvicorn.run(app(rate), host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    main()
