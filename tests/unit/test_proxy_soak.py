"""Soak: thousands of requests through the proxy (uvicorn on loopback) in front of a stand-in
llama-server, clients leaving at random phases (seeded). Afterwards nothing may be left over: no
upstream connection open, no request live in the hub, every generation request recorded once,
the proxy still answering, and its memory back within a bound.

Bounded by the number of requests, not by time: a slow or busy machine takes longer, never
decides the verdict (the one deadline is generous and only stops a hang).
"""

from __future__ import annotations

import asyncio
import gc
import json
import random
import socket
import struct
from pathlib import Path

import httpx
import psutil

from helpers.proxy import serving
from spectui.core.proxy.models import ProxyRecord, RequestStatus

from .socket_server import CHUNKED_HEAD, StandIn, chunk, json_answer

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
REQUESTS = 2000
WARM_UP = 200
CONCURRENT = 16
SEED = 20
DEADLINE_S = 900
RSS_GROWTH_LIMIT = 32 * 1024 * 1024
"""What the process may grow by over the soak, after a warm-up (measured on the 2-core VM: 5.9 MiB
over 2,000 requests, 8.1 MiB over 6,000, most of it the hub filling its 1,000 recent records)."""

LINES = [
    line
    for line in (FIXTURES / "completion-ngram-simple-2.sse").read_bytes().splitlines(True)
    if line.strip()
]


def _final_after(line: bytes, final: bytes) -> bytes:
    """The capture's final line with the counters of ``line``: it adds no token, as a server's
    final chunk does, rather than claiming the ~100 tokens the cut left out (whose several-step
    reading cost ~50 ms a request, most of the soak's time)."""
    before, last = (
        json.loads(line.removeprefix(b"data: ")),
        json.loads(final.removeprefix(b"data: ")),
    )
    last["timings"] = before["timings"]
    last["tokens_predicted"] = before["tokens_predicted"]
    return b"data: " + json.dumps(last, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"


STREAM = (
    b"".join(chunk(line + b"\n") for line in [*LINES[:11], _final_after(LINES[10], LINES[-1])])
    + b"0\r\n\r\n"
)
WHOLE = json.dumps({"content": "hi", "stop": True, "tokens_predicted": 2}).encode()

PHASES = [
    "complete", "complete", "gone-at-once", "gone-after-head", "gone-mid", "reset-mid",
    "whole", "whole-gone", "pass-through",
]  # fmt: skip


class Counted:
    """A listener that counts how requests ended and keeps nothing (the soak measures memory)."""

    def __init__(self) -> None:
        self.statuses = dict.fromkeys(RequestStatus, 0)
        self.count = 0
        self._changed = asyncio.Event()

    def request_started(self, live: object) -> None:
        pass

    def request_finished(self, live: object, record: ProxyRecord) -> None:
        self.statuses[record.status] += 1
        self.count += 1
        self._changed.set()

    async def wait_for(self, count: int) -> None:
        while self.count < count:
            self._changed.clear()
            await self._changed.wait()


async def _upstream(stand_in: StandIn, reader: asyncio.StreamReader,
                    writer: asyncio.StreamWriter) -> None:  # fmt: skip
    head, body = await stand_in.head(reader)
    stand_in.heads.clear()  # (a soak keeps no history)
    if head.startswith("GET"):
        writer.write(b'HTTP/1.1 200 OK\r\nContent-Length: 15\r\n\r\n{"status":"ok"}')
        await writer.drain()
        return
    await asyncio.sleep(0)  # ("prompt processing": the client may be gone already)
    if b'"stream": true' not in body:
        writer.write(json_answer(WHOLE))
        await writer.drain()
        return
    writer.write(CHUNKED_HEAD)
    for start in range(0, len(STREAM), 400):  # (in pieces, with a turn of the loop between)
        writer.write(STREAM[start : start + 400])
        await writer.drain()
        await asyncio.sleep(0)


async def _client(url: str, phase: str, rng: random.Random) -> None:
    host, port = url.removeprefix("http://").rsplit(":", 1)
    reader, writer = await asyncio.open_connection(host, int(port))
    if phase == "pass-through":
        writer.write(b"GET /health HTTP/1.1\r\nHost: p\r\nConnection: close\r\n\r\n")
    else:
        body = json.dumps({"prompt": "x", "stream": not phase.startswith("whole")}).encode()
        writer.write(
            b"POST /completion HTTP/1.1\r\nHost: p\r\nConnection: close\r\n"
            b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)
        )
    try:
        await writer.drain()
        if phase in ("complete", "whole", "pass-through"):
            await reader.read()  # (until the proxy closes: Connection: close)
        elif phase == "gone-after-head" or phase == "whole-gone":
            await reader.readuntil(b"\r\n\r\n")
        elif phase in ("gone-mid", "reset-mid"):
            await reader.readuntil(b"\r\n\r\n")
            for _ in range(rng.randint(1, 8)):
                await reader.readline()
            if phase == "reset-mid":
                sock = writer.get_extra_info("socket")
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                writer.transport.abort()
                return
    except (asyncio.IncompleteReadError, ConnectionError):
        pass  # (the proxy answered faster than the client left: fine)
    writer.close()


async def _run(url: str, phases: list[str], rng: random.Random) -> None:
    queue: asyncio.Queue[str] = asyncio.Queue()
    for phase in phases:
        queue.put_nowait(phase)

    async def worker() -> None:
        while not queue.empty():
            await _client(url, queue.get_nowait(), rng)

    await asyncio.gather(*(worker() for _ in range(CONCURRENT)))


async def test_clients_leaving_at_random_phases_leave_nothing_behind() -> None:
    rng = random.Random(SEED)
    phases = [rng.choice(PHASES) for _ in range(WARM_UP + REQUESTS)]
    stand_in = StandIn(lambda r, w: _upstream(stand_in, r, w))
    process = psutil.Process()
    async with asyncio.timeout(DEADLINE_S):
        async with stand_in.running() as upstream, serving(upstream) as (url, proxy, records):
            proxy.hub.keep_events = False  # (as `--format jsonl` runs)
            proxy.hub.listeners.remove(records)  # (it keeps every record: the soak counts)
            counted = Counted()
            proxy.hub.listeners.append(counted)
            await _run(url, phases[:WARM_UP], rng)
            await stand_in.wait_all_closed(DEADLINE_S)
            gc.collect()
            before = process.memory_info().rss
            await _run(url, phases[WARM_UP:], rng)
            await stand_in.wait_all_closed(DEADLINE_S)
            generation = sum(p != "pass-through" for p in phases)
            await counted.wait_for(generation)
            gc.collect()
            growth = process.memory_info().rss - before
            async with httpx.AsyncClient(timeout=60) as http:
                assert (await http.get(url + "/health")).status_code == 200
            assert not proxy.hub.live and proxy.active == 0
            assert stand_in.open == 0
    statuses = counted.statuses
    print(f"soak: {REQUESTS} requests, RSS growth {growth / 2**20:.1f} MiB, {statuses}")
    assert counted.count == generation  # (each recorded once)
    assert statuses[RequestStatus.ERROR] == 0
    assert statuses[RequestStatus.CANCELLED] > 0 and statuses[RequestStatus.DONE] > 0
    assert growth < RSS_GROWTH_LIMIT, f"RSS grew by {growth / 2**20:.1f} MiB"
