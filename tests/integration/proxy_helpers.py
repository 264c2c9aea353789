"""Running the proxy in the test's own event loop or as `spectui proxy`, and reading a
llama-server's counters."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator

import httpx
from pydantic import SecretStr

from helpers.proxy import Records, serving
from helpers.wait import wait_until
from spectui.core.llama.protocol import ServerMetrics
from spectui.core.llama.server import free_port
from spectui.core.proxy.app import Proxy


@contextlib.asynccontextmanager
async def running_proxy(
    upstream: str,
    *,
    client_key: str | None = None,
    upstream_key: str | None = None,
    keep_events: bool = False,
) -> AsyncIterator[tuple[str, Proxy, Records]]:
    """`helpers.proxy.serving` with the keys as plain strings: yields (its URL, the proxy, the
    records)."""
    async with serving(
        upstream,
        keep_events=keep_events,
        client_key=SecretStr(client_key) if client_key else None,
        upstream_key=SecretStr(upstream_key) if upstream_key else None,
    ) as running:
        yield running


@contextlib.contextmanager
def proxy_process(
    *args: str, env: dict[str, str] | None = None
) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """`spectui proxy --format jsonl` as a subprocess on a free port; stopped with SIGTERM."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "spectui.cli", "proxy", "--format", "jsonl",
         "--listen", f"127.0.0.1:{port}", *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
        env={**os.environ, **(env or {})},
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"

    def answering() -> bool:
        """Any answer will do (it listens); or it is gone (the test reads why from its output)."""
        if proc.poll() is None:
            httpx.get(f"{url}/spectui/metrics", timeout=1)
        return True

    try:
        wait_until(
            answering,
            f"spectui proxy listening on {url}",
            interval=0.1,
            ignore=(httpx.TransportError,),
        )
        yield url, proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=20)
        if proc.poll() is None:
            proc.kill()
            proc.wait()


async def server_metrics(url: str, key: str | None = None) -> ServerMetrics:
    """The server's /metrics now."""
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    async with httpx.AsyncClient() as http:
        return ServerMetrics.parse((await http.get(url + "/metrics", headers=headers)).text)


def delta(before: ServerMetrics, after: ServerMetrics) -> tuple[int, int, int, list[int]]:
    """(steps, drafted, accepted, per-position histogram) the server counted in between."""
    old, new = before.accepted_per_position, after.accepted_per_position
    histogram = [n - (old[i] if i < len(old) else 0) for i, n in enumerate(new)]
    while histogram and histogram[-1] == 0:
        histogram.pop()
    return (
        after.spec_steps - before.spec_steps,
        after.spec_drafted - before.spec_drafted,
        after.spec_accepted - before.spec_accepted,
        histogram,
    )
