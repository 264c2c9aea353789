"""One `spectui proxy` run, from start to close: the upstream llama-server brought up (launched
or attached to), the proxy built in front of it, served on a socket bound beforehand, closed.

The headless command and the proxy TUI both drive a `ProxySession` (built by
`spectui.app_setup.proxy_session`), so the two ways to run the proxy cannot drift apart. Its
``hub`` exists from the start: listeners (the JSON Lines writer, the screen) attach before any
request can arrive.
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from typing import TYPE_CHECKING

from spectui.core.engine.live import LiveEngine
from spectui.core.events import ServerStateEvent
from spectui.core.llama.client import safe_url
from spectui.core.proxy.app import Proxy
from spectui.core.proxy.hub import ProxyHub
from spectui.core.proxy.models import METRICS_PATH
from spectui.core.proxy.serve import ProxyServer
from spectui.core.proxy.upstream import start_upstream, upstream_url

if TYPE_CHECKING:
    from spectui.core.proxy.record import WorkloadRecorder


class ProxySession:
    """start → serve → close. ``make_proxy(upstream_url)`` builds the proxy once the upstream
    can take requests."""

    def __init__(
        self,
        engine: LiveEngine,
        sock: socket.socket,
        hub: ProxyHub,
        make_proxy: Callable[[str], Proxy],
        *,
        attach_url: str | None = None,
        recorder: WorkloadRecorder | None = None,
    ) -> None:
        self.engine = engine
        self.sock = sock
        self.hub = hub
        """The requests, from the first one (the same hub the proxy reports to)."""
        self._make_proxy = make_proxy
        self._attach_url = attach_url
        self.proxy: Proxy | None = None
        """Set by `start` once the upstream can take requests."""
        self.server: ProxyServer | None = None
        self.recorder = recorder
        """The `--record` listener, if any (already among the hub's listeners)."""
        self._stopping = False

    @property
    def upstream(self) -> str:
        """Where requests go."""
        return upstream_url(self.engine, self._attach_url)

    @property
    def address(self) -> str:
        """'host:port' the proxy listens on."""
        host, port = self.sock.getsockname()[:2]
        return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"

    def banner(self) -> str:
        """'http://ADDRESS -> UPSTREAM (metrics at PATH)', credentials never shown."""
        return f"http://{self.address} -> {safe_url(self.upstream)} (metrics at {METRICS_PATH})"

    async def start(
        self,
        *,
        on_state: Callable[[ServerStateEvent], None] | None = None,
        on_note: Callable[[str], None] | None = None,
    ) -> str | None:
        """Bring the upstream up and build the proxy; None when ready, else the line why not."""
        problem = await start_upstream(
            self.engine, self._attach_url, on_state=on_state, on_note=on_note
        )
        if problem is not None:
            return problem
        self.proxy = self._make_proxy(self.upstream)
        assert self.proxy.hub is self.hub, "the proxy reports to the session's hub"
        self.server = ProxyServer(self.proxy.app, self.sock)
        if self._stopping:
            self.server.stop()
        return None

    async def serve(self) -> None:
        """Serve until `stop` (or cancellation); the upstream connections are closed after."""
        assert self.proxy is not None and self.server is not None, "start() first"
        try:
            await self.server.serve()
        finally:
            await self.proxy.aclose()

    def problems(self) -> list[str]:
        """What went wrong on the way that the user must hear of once it is over."""
        return [self.recorder.problem] if self.recorder and self.recorder.problem else []

    def stop(self) -> None:
        """Ask the proxy to stop (open streams get `serve.SHUTDOWN_GRACE_S`)."""
        self._stopping = True
        if self.server is not None:
            self.server.stop()


__all__ = ["ProxySession"]
