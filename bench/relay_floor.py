"""The floor under the proxy: `spectui proxy --format jsonl` against a bare asyncio relay that only
forwards bytes, each with STREAMS `curl -N` clients streaming through it from the paced stand-in
server (`fake_server.py`) at RATE tokens/s each.

The bare relay (`bare_relay`, run as a child of this script) is the least an asyncio process can
do per chunk: an upstream connection per client, each piece written to the client as it arrives
(no HTTP parsing, no attribution, no cutting, no ASGI). Rounds alternate the two; each reads the
process's CPU (user + system, all threads, /proc) over a window; medians of `--reps`. What the
proxy costs above the bare relay is what its own work could still save; what the bare relay
costs is the event loop's wake-ups and the socket calls per chunk.

    python bench/relay_floor.py [--rate 50] [--streams 4] [--reps 3] [--window 15]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator

from client_cpu import PYTHON, fake_server, window_cpu
from common import healthy, median, write_result

from spectui.core.llama.server import free_port

WARMUP_S = 4.0
"""Seconds of streaming before the window."""


class _Upstream(asyncio.Protocol):
    def __init__(self, client: asyncio.Transport) -> None:
        self.client = client

    def data_received(self, data: bytes) -> None:
        self.client.write(data)

    def connection_lost(self, exc: Exception | None) -> None:
        self.client.close()


class _Client(asyncio.Protocol):
    """A client connection: what it sends is kept until its upstream connection is open, then
    bytes flow both ways; either side closing closes the other."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.transport: asyncio.Transport | None = None
        self.upstream: asyncio.Transport | None = None
        self.pending = b""
        self.connecting: asyncio.Task[None] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        if self.upstream is not None:
            self.upstream.write(data)
            return
        self.pending += data
        if self.connecting is None:  # (kept: a task nothing refers to may be collected)
            self.connecting = asyncio.ensure_future(self._connect())

    def connection_lost(self, exc: Exception | None) -> None:
        if self.upstream is not None:
            self.upstream.close()

    async def _connect(self) -> None:
        assert self.transport is not None
        loop = asyncio.get_running_loop()
        client = self.transport
        upstream, _ = await loop.create_connection(
            lambda: _Upstream(client), "127.0.0.1", self.upstream_port
        )
        self.upstream = upstream
        upstream.write(self.pending)


async def bare_relay(upstream_port: int, port: int) -> None:
    """Forward every connection to ``upstream_port`` until cancelled."""
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: _Client(upstream_port), "127.0.0.1", port)
    async with server:
        await server.serve_forever()


@contextlib.contextmanager
def relay(kind: str, upstream: str) -> Iterator[tuple[int, str]]:
    """(pid, url) of a relay of ``kind`` ('bare' or 'proxy') in front of ``upstream``."""
    port = free_port("127.0.0.1")
    if kind == "bare":
        argv = [PYTHON, __file__, "bare", upstream.rsplit(":", 1)[1], str(port)]
    else:
        argv = [PYTHON, "-m", "spectui.cli", "proxy", "--url", upstream,
                "--listen", f"127.0.0.1:{port}", "--format", "jsonl"]  # fmt: skip
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        yield proc.pid, f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait()


def one_run(kind: str, upstream: str, streams: int, window: float) -> float:
    """CPU % of one relay of ``kind`` while ``streams`` clients stream through it."""
    body = '{"prompt": "x", "n_predict": 100000, "stream": true}'
    with relay(kind, upstream) as (pid, url):
        deadline = time.monotonic() + 30
        # (the bare relay has no /health of its own: it forwards the stand-in's)
        while not healthy(url):
            if time.monotonic() > deadline:
                raise SystemExit(f"relay_floor: the {kind} relay at {url} never answered")
            time.sleep(0.1)
        clients = [
            subprocess.Popen(
                ["curl", "-sN", f"{url}/completion", "-d", body], stdout=subprocess.DEVNULL
            )
            for _ in range(streams)
        ]
        try:
            time.sleep(WARMUP_S)
            return window_cpu(pid, window)
        finally:
            for client in clients:
                client.terminate()
                client.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=float, default=50.0, help="tokens per second per stream")
    parser.add_argument("--streams", type=int, default=4)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--window", type=float, default=15.0, help="seconds measured per run")
    args = parser.parse_args()
    if shutil.which("curl") is None:
        sys.exit("relay_floor: needs curl")
    runs: dict[str, list[float]] = {"bare relay": [], "spectui proxy": []}
    with fake_server(args.rate) as upstream:
        for _ in range(args.reps):
            for name, kind in (("bare relay", "bare"), ("spectui proxy", "proxy")):
                cpu = one_run(kind, upstream, args.streams, args.window)
                runs[name].append(cpu)
                print(f"{name}: {cpu:.2f} % of a core", flush=True)
    medians = {name: median(values) for name, values in runs.items()}
    ratio = medians["spectui proxy"] / medians["bare relay"] if medians["bare relay"] else None
    result = {
        "benchmark": "relay_floor",
        "rate": args.rate,
        "streams": args.streams,
        "window_s": args.window,
        "median": medians,
        "proxy_over_bare": ratio,
        "runs": runs,
    }
    path = write_result("relay_floor", result)
    shown = "n/a" if ratio is None else f"{ratio:.2f}"
    print(
        f"{args.streams} streams at {args.rate:g} tok/s: bare relay {medians['bare relay']:.2f} %,"
        f" spectui proxy {medians['spectui proxy']:.2f} % (proxy ÷ bare {shown}) -> {path}"
    )


if __name__ == "__main__":
    if sys.argv[1:2] == ["bare"]:
        asyncio.run(bare_relay(int(sys.argv[2]), int(sys.argv[3])))
    else:
        main()
