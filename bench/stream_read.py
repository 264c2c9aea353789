"""What reading an SSE stream costs per event, layer by layer, over a real loopback socket.

A server thread streams the ngram-simple capture's events as llama-server does (one HTTP chunk
per event) but BATCH events per write, as a paced read finds them; the client reads EVENTS
events through spectui's transport, and its thread's CPU time (`time.thread_time`, so the server
is not counted) is divided by the events. The paths, alternated over the rounds:

* ``httpx_sse``: httpcore (h11, a chunk at a time), httpx's decoders, httpx-sse's `aiter_sse`
  (what a run read through before `PER_READ`);
* ``httpcore_bytes``: httpcore and `aiter_bytes`, no SSE parsing (what h11 and httpx cost);
* ``per_read_bytes``: `PER_READ` (`core.net.per_read`) and `aiter_bytes`, no SSE parsing;
* ``per_read_httpx_sse``: `PER_READ` and httpx-sse's `aiter_sse` (what a run reads through
  now).

    python bench/stream_read.py [--events 6000] [--batch 12] [--reps 5]
"""

from __future__ import annotations

import argparse
import asyncio
import threading
import time
from collections.abc import Awaitable, Callable

import httpx
from common import median, write_result
from httpx_sse import aconnect_sse
from streams import long_payloads

from spectui.core.llama.transport import AsyncioTransport
from spectui.core.net.per_read import PER_READ

HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"


def chunks(events: int) -> list[bytes]:
    """The capture's events, each an HTTP chunk of its own."""
    out = []
    for payload in long_payloads(events):
        event = f"data: {payload}\n\n".encode()
        out.append(b"%x\r\n%s\r\n" % (len(event), event))
    return out


def serve(body: list[bytes], batch: int) -> int:
    """A server in a thread of its own (its CPU is not the client's); returns its port."""
    ready = threading.Event()
    port: list[int] = []

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        await reader.readexactly(int(line.split(b":")[1]))
                writer.write(HEAD)
                for start in range(0, len(body), batch):
                    writer.write(b"".join(body[start : start + batch]))
                    await writer.drain()
                    await asyncio.sleep(0.0005)  # (a read per batch, as pacing makes it)
                writer.write(b"0\r\n\r\n")
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    async def run() -> None:
        server = await asyncio.start_server(handler, "127.0.0.1", 0)
        port.append(server.sockets[0].getsockname()[1])
        ready.set()
        await asyncio.Event().wait()

    threading.Thread(target=asyncio.run, args=(run(),), daemon=True).start()
    ready.wait()
    return port[0]


async def measure(url: str, events: int, reps: int) -> dict[str, float]:
    async with httpx.AsyncClient(transport=AsyncioTransport()) as http:

        async def httpx_sse(extensions: dict[str, object]) -> int:
            async with aconnect_sse(http, "POST", url, json={}, extensions=extensions) as source:
                return sum([1 async for _ in source.aiter_sse()])

        async def raw(extensions: dict[str, object]) -> int:
            async with http.stream("POST", url, json={}, extensions=extensions) as answer:
                return sum([part.count(b"\n\n") async for part in answer.aiter_bytes()])

        paths: dict[str, Callable[[], Awaitable[int]]] = {
            "httpx_sse": lambda: httpx_sse({}),
            "httpcore_bytes": lambda: raw({}),
            "per_read_bytes": lambda: raw({PER_READ: True}),
            "per_read_httpx_sse": lambda: httpx_sse({PER_READ: True}),
        }
        runs: dict[str, list[float]] = {name: [] for name in paths}
        for _ in range(reps):
            for name, path in paths.items():
                start = time.thread_time()
                seen = await path()
                spent = time.thread_time() - start
                assert seen == events, (name, seen)
                runs[name].append(spent / events * 1e6)
    return {name: round(median(values), 1) for name, values in runs.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=6000)
    parser.add_argument("--batch", type=int, default=12, help="events per write (per read)")
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args()
    body = chunks(args.events)  # (the capture repeated: at least that many events)
    port = serve(body, args.batch)
    figures = asyncio.run(measure(f"http://127.0.0.1:{port}/completion", len(body), args.reps))
    for name, value in figures.items():
        print(f"{name:>18}: {value:5.1f} µs per event (client thread)")
    write_result("stream_read", {"events": len(body), "batch": args.batch, "median_us": figures})


if __name__ == "__main__":
    main()
