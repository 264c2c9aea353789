"""What `spectui proxy` adds: latency per chunk on loopback, and the server's tokens/s through
the headless proxy against direct.

    python bench/proxy_overhead.py latency [--chunks 2000] [--rate 200] [--rounds 3]
    python bench/proxy_overhead.py throughput [--reps 3] [--n-predict 128]
    python bench/proxy_overhead.py memory [--requests 10000]
    python bench/proxy_overhead.py chunk [--repeat 200]
    python bench/proxy_overhead.py overrides [--rounds 3] [--idle 10] [--chunks 1000]

latency: a stand-in upstream (its own process) streams /completion chunks shaped like the real
ones, each stamped with CLOCK_MONOTONIC when sent; the client reads them directly and through
`spectui proxy --format jsonl` (its own process), alternating, and the per-chunk delay added is
the difference of the two distributions' quantiles. throughput: the real llama-server
(Gemma 270M, ngram-simple), `predicted_per_second` of its final timings, direct vs through the
proxy, alternating. memory: the proxy's RSS before and after N short streamed requests.
overrides: what each gated override buys against its stock path (`SPECTUI_STOCK=1`), in one run,
alternating: the lean uvicorn server (no 10 Hz tick) as the idle proxy's CPU and as its CPU per
relayed chunk; the asyncio transport as a client's CPU per chunk read, against httpx's own
transport and against a blocking read in a thread (the simpler public path).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import psutil
from common import gemma_model, llama_binary, write_result

HERE = Path(__file__).resolve().parent
FIXTURES = HERE.parent / "tests" / "fixtures"


def free_port() -> int:
    from spectui.core.llama.server import free_port as pick

    return pick()


# -- the stand-in upstream (run as: proxy_overhead.py upstream PORT RATE) -------------------------


def upstream_main(port: int, rate: float) -> None:
    import uvicorn
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response, StreamingResponse
    from starlette.routing import Route

    lines = (FIXTURES / "completion-ngram-simple-2.sse").read_text().splitlines()
    chunks = [json.loads(line[6:]) for line in lines if line.startswith("data: ")][:-1]

    async def completion(request: Request) -> Response:
        body = await request.json()
        count = int(body.get("n_predict", 1000))

        async def stream() -> AsyncIterator[bytes]:
            start = time.monotonic()
            for index in range(count):
                due = start + index / rate
                if (wait := due - time.monotonic()) > 0:
                    await asyncio.sleep(wait)
                chunk = dict(chunks[index % len(chunks)])
                chunk["tokens_predicted"] = index + 1
                timings = dict(chunk.get("timings", {}))
                timings["predicted_n"] = index + 1
                chunk["timings"] = timings
                chunk["sent"] = time.monotonic()
                yield ("data: " + json.dumps(chunk, separators=(",", ":")) + "\n\n").encode()

        return StreamingResponse(stream(), media_type="text/event-stream")

    async def health(_: Request) -> Response:
        return JSONResponse({"status": "ok"})

    app = Starlette(routes=[Route("/completion", completion, methods=["POST"]),
                            Route("/health", health)])  # fmt: skip
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


@contextlib.contextmanager
def process(
    args: list[str], ready_url: str, env: dict[str, str] | None = None
) -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen(
        args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        env={**os.environ, **(env or {})},
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            with contextlib.suppress(httpx.TransportError):
                httpx.get(ready_url, timeout=1)
                break
            time.sleep(0.05)
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def proxy_cmd(upstream: str, port: int) -> list[str]:
    return [sys.executable, "-m", "spectui.cli", "proxy", "--url", upstream, "--format", "jsonl",
            "--listen", f"127.0.0.1:{port}"]  # fmt: skip


async def delays(url: str, chunks: int) -> list[float]:
    """Arrival minus send time of every chunk, in ms."""
    out: list[float] = []
    body = {"prompt": "x", "n_predict": chunks, "stream": True}
    async with (
        httpx.AsyncClient(timeout=120) as http,
        http.stream("POST", url + "/completion", json=body) as response,
    ):
        async for line in response.aiter_lines():
            if line.startswith("data: "):
                now = time.monotonic()
                out.append((now - json.loads(line[6:])["sent"]) * 1000)
    return out


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def latency(args: argparse.Namespace) -> None:
    up_port, px_port = free_port(), free_port()
    upstream = f"http://127.0.0.1:{up_port}"
    proxy = f"http://127.0.0.1:{px_port}"
    up_cmd = [sys.executable, __file__, "upstream", str(up_port), str(args.rate)]
    with (
        process(up_cmd, upstream + "/health"),
        process(proxy_cmd(upstream, px_port), proxy + "/spectui/metrics"),
    ):
        direct: list[float] = []
        through: list[float] = []
        asyncio.run(delays(upstream, 50))  # warm both paths
        asyncio.run(delays(proxy, 50))
        for _ in range(args.rounds):
            direct += asyncio.run(delays(upstream, args.chunks))
            through += asyncio.run(delays(proxy, args.chunks))
    added_median = statistics.median(through) - statistics.median(direct)
    added_p99 = quantile(through, 0.99) - quantile(direct, 0.99)
    result = {
        "chunks": len(through), "rate": args.rate,
        "direct_median_ms": statistics.median(direct), "direct_p99_ms": quantile(direct, 0.99),
        "proxy_median_ms": statistics.median(through), "proxy_p99_ms": quantile(through, 0.99),
        "added_median_ms": added_median, "added_p99_ms": added_p99,
        "met": added_median <= 1.0 and added_p99 <= 5.0,
        "load_average": os.getloadavg()[0],
    }  # fmt: skip
    write_result("proxy_latency", result)
    print(json.dumps(result, indent=2))


# -- throughput against the real server ----------------------------------------------------------

PROMPT = (FIXTURES.parent.parent / "src" / "spectui" / "core" / "prompts.py").read_text()[:1500]


def server_rate(url: str, n_predict: int) -> float:
    body = {"prompt": PROMPT, "n_predict": n_predict, "stream": True, "temperature": 0,
            "cache_prompt": False}  # fmt: skip
    last = None
    with httpx.stream("POST", url + "/completion", json=body, timeout=600) as response:
        for line in response.iter_lines():
            if line.startswith("data: ") and '"timings"' in line:
                last = line
    assert last is not None
    return float(json.loads(last[6:])["timings"]["predicted_per_second"])


def throughput(args: argparse.Namespace) -> None:
    port, px_port = free_port(), free_port()
    upstream = f"http://127.0.0.1:{port}"
    proxy = f"http://127.0.0.1:{px_port}"
    server = [str(llama_binary()), "-m", str(gemma_model()), "--port", str(port),
              "--ctx-size", "2048", "--spec-type", "ngram-simple", "--no-warmup"]  # fmt: skip
    with (
        process(server, upstream + "/health"),
        process(proxy_cmd(upstream, px_port), proxy + "/spectui/metrics"),
    ):
        while httpx.get(upstream + "/health").status_code != 200:
            time.sleep(0.2)
        server_rate(upstream, 16)
        direct, through = [], []
        for _ in range(args.reps):
            direct.append(server_rate(upstream, args.n_predict))
            through.append(server_rate(proxy, args.n_predict))
    # Paired, as compare does: each run through the proxy against the direct run just before it
    # (drift over the minutes of the benchmark hits both alike), not a ratio of medians.
    ratio = statistics.median(t / d for t, d in zip(through, direct, strict=True))
    result = {"direct_tps": direct, "proxy_tps": through, "ratio": ratio, "met": ratio >= 0.97,
              "load_average": os.getloadavg()[0]}  # fmt: skip
    write_result("proxy_throughput", result)
    print(json.dumps(result, indent=2))


def memory(args: argparse.Namespace) -> None:
    up_port, px_port = free_port(), free_port()
    upstream = f"http://127.0.0.1:{up_port}"
    proxy = f"http://127.0.0.1:{px_port}"
    up_cmd = [sys.executable, __file__, "upstream", str(up_port), "100000"]

    async def many(count: int) -> None:
        body = {"prompt": "x", "n_predict": 8, "stream": True}
        async with httpx.AsyncClient(timeout=60) as http:
            for _ in range(count):
                await http.post(proxy + "/completion", json=body)

    with (
        process(up_cmd, upstream + "/health"),
        process(proxy_cmd(upstream, px_port), proxy + "/spectui/metrics") as proc,
    ):
        asyncio.run(many(1000))  # past start-up allocations and the 1000-record window
        before = psutil.Process(proc.pid).memory_info().rss
        asyncio.run(many(args.requests))
        after = psutil.Process(proc.pid).memory_info().rss
    growth = after - before
    result = {"requests": args.requests, "rss_before": before, "rss_after": after,
              "growth_mb": growth / 2**20, "met": growth < 20 * 2**20}  # fmt: skip
    write_result("proxy_memory", result)
    print(json.dumps(result, indent=2))


def chunk(args: argparse.Namespace) -> None:
    """The proxy's own work per chunk, no network: attribution, metrics and the timings cut
    (hot: a tight loop, unlike a live stream's one wake-up per chunk)."""
    from spectui.core.proxy.chunks import StreamAttribution
    from spectui.core.proxy.models import EndpointKind

    lines = (FIXTURES / "completion-ngram-simple-2.sse").read_bytes().splitlines(keepends=True)
    data = [line for line in lines if line.startswith(b"data:")]
    count = 0
    start = time.perf_counter()
    for _ in range(args.repeat):
        attribution = StreamAttribution(EndpointKind.NATIVE, strip=True, keep_events=True)
        for index, line in enumerate(data):
            attribution.line(line, index * 0.01)
            count += 1
        attribution.settle()  # (the last lines are counted when the stream ends)
    per_chunk_us = (time.perf_counter() - start) / count * 1e6
    result = {"chunks": count, "per_chunk_us": per_chunk_us, "met": per_chunk_us < 1000}
    write_result("proxy_chunk", result)
    print(json.dumps(result, indent=2))


# -- what each override buys ------------------------------------------------------------------


def _cpu(proc: subprocess.Popen[bytes]) -> float:
    times = psutil.Process(proc.pid).cpu_times()
    return times.user + times.system


def _proxy_cpu(upstream: str, stock: bool, idle_s: float, chunks: int) -> tuple[float, float]:
    """(idle % of a core, µs of CPU per relayed chunk) of a headless proxy process."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {"SPECTUI_STOCK": "1"} if stock else {"SPECTUI_STOCK": ""}
    with process(proxy_cmd(upstream, port), url + "/spectui/metrics", env) as proc:
        asyncio.run(delays(url, 50))  # (warm)
        time.sleep(1)
        start = _cpu(proc)
        time.sleep(idle_s)
        idle = (_cpu(proc) - start) / idle_s * 100
        start = _cpu(proc)
        asyncio.run(delays(url, chunks))
        per_chunk = (_cpu(proc) - start) / chunks * 1e6
    return idle, per_chunk


async def _read_async(url: str, chunks: int, transport: httpx.AsyncBaseTransport | None) -> float:
    body = {"prompt": "x", "n_predict": chunks, "stream": True}
    async with httpx.AsyncClient(timeout=120, transport=transport) as http:
        start = time.process_time()
        async with http.stream("POST", url + "/completion", json=body) as response:
            async for _line in response.aiter_lines():
                pass
        return (time.process_time() - start) / chunks * 1e6


def _read_thread(url: str, chunks: int) -> float:
    """A blocking read in a thread that hands each line to the event loop, as a consumer on the
    loop (the TUI, a stream run) needs it."""

    async def run() -> float:
        loop = asyncio.get_running_loop()
        lines: asyncio.Queue[str | None] = asyncio.Queue()

        def blocking() -> None:
            body = {"prompt": "x", "n_predict": chunks, "stream": True}
            with httpx.stream("POST", url + "/completion", json=body, timeout=120) as response:
                for line in response.iter_lines():
                    loop.call_soon_threadsafe(lines.put_nowait, line)
            loop.call_soon_threadsafe(lines.put_nowait, None)

        start = time.process_time()
        reader = asyncio.create_task(asyncio.to_thread(blocking))
        while await lines.get() is not None:
            pass
        await reader
        return (time.process_time() - start) / chunks * 1e6

    return asyncio.run(run())


def overrides(args: argparse.Namespace) -> None:
    from spectui.core.llama.transport import AsyncioTransport

    up_port = free_port()
    upstream = f"http://127.0.0.1:{up_port}"
    up_cmd = [sys.executable, __file__, "upstream", str(up_port), str(args.rate)]
    figures: dict[str, list[float]] = {k: [] for k in (
        "proxy_idle_lean", "proxy_idle_stock", "relay_us_lean", "relay_us_stock",
        "read_us_asyncio", "read_us_httpx", "read_us_thread")}  # fmt: skip
    with process(up_cmd, upstream + "/health"):
        for _ in range(args.rounds):
            for stock in (False, True):
                idle, relay = _proxy_cpu(upstream, stock, args.idle, args.chunks)
                name = "stock" if stock else "lean"
                figures[f"proxy_idle_{name}"].append(idle)
                figures[f"relay_us_{name}"].append(relay)
            figures["read_us_asyncio"].append(
                asyncio.run(_read_async(upstream, args.chunks, AsyncioTransport()))
            )
            figures["read_us_httpx"].append(asyncio.run(_read_async(upstream, args.chunks, None)))
            figures["read_us_thread"].append(_read_thread(upstream, args.chunks))
    medians = {k: statistics.median(v) for k, v in figures.items()}
    result = {
        "rounds": args.rounds, "idle_s": args.idle, "chunks": args.chunks, "rate": args.rate,
        **{k: round(v, 3) for k, v in medians.items()},
        # (idle CPU is read in clock ticks: a lean idle proxy measures 0, so a difference)
        "lean_uvicorn_idle_saved_pct": medians["proxy_idle_stock"] - medians["proxy_idle_lean"],
        "lean_uvicorn_relay_ratio": medians["relay_us_stock"] / medians["relay_us_lean"],
        "transport_vs_httpx_ratio": medians["read_us_httpx"] / medians["read_us_asyncio"],
        "transport_vs_thread_ratio": medians["read_us_thread"] / medians["read_us_asyncio"],
        "load_average": os.getloadavg()[0],
    }  # fmt: skip
    write_result("proxy_overrides", result)
    print(json.dumps(result, indent=2))


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "upstream":
        upstream_main(int(sys.argv[2]), float(sys.argv[3]))
        return
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="what", required=True)
    lat = sub.add_parser("latency")
    lat.add_argument("--chunks", type=int, default=2000)
    lat.add_argument("--rate", type=float, default=200.0)
    lat.add_argument("--rounds", type=int, default=3)
    thr = sub.add_parser("throughput")
    thr.add_argument("--reps", type=int, default=3)
    thr.add_argument("--n-predict", type=int, default=128)
    one = sub.add_parser("chunk")
    one.add_argument("--repeat", type=int, default=200)
    mem = sub.add_parser("memory")
    mem.add_argument("--requests", type=int, default=10_000)
    ovr = sub.add_parser("overrides")
    ovr.add_argument("--rounds", type=int, default=3)
    ovr.add_argument("--idle", type=float, default=10.0)
    ovr.add_argument("--chunks", type=int, default=1000)
    ovr.add_argument("--rate", type=float, default=200.0)
    args = parser.parse_args()
    commands = {"latency": latency, "throughput": throughput, "memory": memory, "chunk": chunk,
                "overrides": overrides}  # fmt: skip
    commands[args.what](args)


if __name__ == "__main__":
    main()
