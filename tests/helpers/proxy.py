"""The proxy served by uvicorn on a free loopback port in the test's own event loop, with a
listener that keeps every finished record."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

from spectui.core.proxy.app import Proxy
from spectui.core.proxy.hub import ProxyHub
from spectui.core.proxy.models import ProxyRecord
from spectui.core.proxy.serve import ProxyServer, bind

from .wait import GIVE_UP_S, await_until


class Records:
    """A listener keeping every finished record."""

    def __init__(self) -> None:
        self.records: list[ProxyRecord] = []
        self._changed = asyncio.Event()

    def request_started(self, live: object) -> None:
        pass

    def request_finished(self, live: object, record: ProxyRecord) -> None:
        self.records.append(record)
        self._changed.set()

    async def wait_for(self, count: int, within: float = GIVE_UP_S) -> list[ProxyRecord]:
        """The records once there are ``count`` (``within``: a hang guard)."""
        try:
            async with asyncio.timeout(within):
                while len(self.records) < count:
                    self._changed.clear()
                    await self._changed.wait()
        except TimeoutError:
            raise AssertionError(
                f"{len(self.records)} of {count} records within the {within:.0f} s hang guard"
            ) from None
        return self.records


@contextlib.asynccontextmanager
async def serving(
    upstream: str, *, keep_events: bool = True, **options: Any
) -> AsyncIterator[tuple[str, Proxy, Records]]:
    """The proxy in front of ``upstream`` (``options``: `Proxy`'s keywords): yields (its URL,
    the proxy, its records); stopped and closed afterwards."""
    hub = ProxyHub(keep_events=keep_events)
    records = Records()
    hub.listeners.append(records)
    proxy = Proxy(upstream, hub=hub, **options)
    server = ProxyServer(proxy.app, bind("127.0.0.1", 0))
    address = server.address
    task = asyncio.create_task(server.serve())
    try:
        # (uvicorn offers no event for "started")
        await await_until(lambda: server.started, "the proxy's uvicorn started")
        yield f"http://{address}", proxy, records
    finally:
        server.stop()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait_for(task, GIVE_UP_S)
        await proxy.aclose()
