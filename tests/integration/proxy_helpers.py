"""Running the proxy in the test's own event loop, and reading a llama-server's counters."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import httpx
from pydantic import SecretStr

from spectui.core.llama.protocol import ServerMetrics
from spectui.core.proxy.app import Proxy
from spectui.core.proxy.hub import ProxyHub
from spectui.core.proxy.models import ProxyRecord
from spectui.core.proxy.serve import ProxyServer, bind


class Collected:
    """A listener keeping every finished record."""

    def __init__(self) -> None:
        self.records: list[ProxyRecord] = []
        self.finished = asyncio.Event()

    def request_started(self, live: object) -> None:
        pass

    def request_finished(self, live: object, record: ProxyRecord) -> None:
        self.records.append(record)
        self.finished.set()

    async def wait_for(self, count: int, within: float = 30) -> list[ProxyRecord]:
        async with asyncio.timeout(within):
            while len(self.records) < count:
                self.finished.clear()
                await self.finished.wait()
        return self.records


@contextlib.asynccontextmanager
async def running_proxy(
    upstream: str,
    *,
    client_key: str | None = None,
    upstream_key: str | None = None,
    keep_events: bool = False,
) -> AsyncIterator[tuple[str, Proxy, Collected]]:
    """The proxy on a free loopback port: yields (its URL, the proxy, the records)."""
    hub = ProxyHub(keep_events=keep_events)
    collected = Collected()
    hub.listeners.append(collected)
    proxy = Proxy(
        upstream,
        hub=hub,
        client_key=SecretStr(client_key) if client_key else None,
        upstream_key=SecretStr(upstream_key) if upstream_key else None,
    )
    sock = bind("127.0.0.1", 0)
    server = ProxyServer(proxy.app, sock)
    address = server.address
    task = asyncio.create_task(server.serve())
    try:
        while not server.started:  # noqa: ASYNC110 (uvicorn offers no event for it)
            await asyncio.sleep(0.01)
        yield f"http://{address}", proxy, collected
    finally:
        server.stop()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait_for(task, 10)
        await proxy.aclose()


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
