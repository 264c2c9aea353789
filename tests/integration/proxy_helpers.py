"""Running the proxy in the test's own event loop, and reading a llama-server's counters."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import httpx
from pydantic import SecretStr

from helpers.proxy import Records, serving
from spectui.core.llama.protocol import ServerMetrics
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
