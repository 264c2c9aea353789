"""The TUI of `spectui proxy`: the Traffic screen over a proxy served on the app's own loop.

The app is a router: it shows the screen, starts (or attaches to) the server in a worker, then
serves the proxy there until it quits. The proxy's listener turns each request's start and end
into the screen's typed messages; the screen pulls live numbers itself at a few hertz.
"""

from __future__ import annotations

import socket
from collections.abc import Callable

from textual import on, work
from textual.worker import Worker, WorkerState

from spectui.config import Settings
from spectui.core.engine.live import LiveEngine
from spectui.core.events import ServerState, ServerStateEvent
from spectui.core.llama.client import safe_url
from spectui.core.traffic.hub import LiveRequest, TrafficHub
from spectui.core.traffic.models import TrafficRecord
from spectui.core.traffic.proxy import METRICS_PATH, TrafficProxy
from spectui.core.traffic.serve import ProxyServer
from spectui.core.traffic.upstream import start_upstream, upstream_url
from spectui.ui.base_app import SpectuiBaseApp
from spectui.ui.screens.traffic import TrafficScreen


class ScreenListener:
    """Hands the proxy's requests to the screen as messages (same event loop: no threads)."""

    def __init__(self, screen: TrafficScreen) -> None:
        self.screen = screen

    def request_started(self, live: LiveRequest) -> None:
        self.screen.post_message(TrafficScreen.RequestStarted(live))

    def request_finished(self, live: LiveRequest, record: TrafficRecord) -> None:
        self.screen.post_message(TrafficScreen.RequestFinished(live, record))


class TrafficApp(SpectuiBaseApp):
    """`spectui proxy`'s TUI. Without an engine (tests), it shows ``hub`` and serves nothing."""

    CSS_PATH = ["app.tcss", "traffic.tcss"]  # type: ignore[assignment]  # noqa: RUF012
    TITLE = "spectui proxy"

    def __init__(
        self,
        engine: LiveEngine | None,
        settings: Settings,
        *,
        make_proxy: Callable[[], TrafficProxy] | None = None,
        sock: socket.socket | None = None,
        hub: TrafficHub | None = None,
        warnings: list[str] | None = None,
    ) -> None:
        super().__init__(engine, settings)
        self._warnings = warnings or []
        self._make_proxy = make_proxy
        self._sock = sock
        self.hub = hub or TrafficHub(keep_events=True)
        self.screen_traffic = TrafficScreen(self.hub)

    def show_first_screen(self) -> None:
        self.push_screen(self.screen_traffic)
        self.hub.listeners.append(ScreenListener(self.screen_traffic))
        for warning in self._warnings:
            self.notify(warning, title="Proxy", severity="warning", timeout=15)
        if self.engine is not None and self._make_proxy is not None:
            self._serve()

    def _status(self, text: str, *, failed: bool = False) -> None:
        self.screen_traffic.post_message(TrafficScreen.StatusChanged(text, failed=failed))

    @work(exclusive=True, exit_on_error=False, group="proxy")
    async def _serve(self) -> None:
        """Start the server, then serve the proxy until the app quits."""
        engine, sock, make = self.engine, self._sock, self._make_proxy
        assert isinstance(engine, LiveEngine) and sock is not None and make is not None
        self._status("starting llama-server…")

        def state(event: ServerStateEvent) -> None:
            if event.state is not ServerState.FAILED:
                self._status(f"llama-server: {event.state.value} {event.detail}".strip())

        def note(line: str) -> None:
            self.notify(line, title="Upstream", severity="warning", timeout=15)

        url = self.settings.url
        problem = await start_upstream(engine, url, on_state=state, on_note=note)
        if problem is not None:
            self._status(f"failed: {problem}", failed=True)
            return
        proxy = make()
        # The screen's listener moves to the proxy's hub (it replaces the app's placeholder).
        proxy.hub.listeners.extend(self.hub.listeners)
        self.hub = self.screen_traffic.hub = proxy.hub
        server = ProxyServer(proxy.app, sock)
        self._status(
            f"proxy http://{server.address} → {safe_url(upstream_url(engine, url))} · "
            f"metrics {METRICS_PATH} · Enter: tokens · ? help"
        )
        try:
            await server.serve()
        finally:
            await proxy.aclose()

    def quitting(self) -> None:
        self._status("stopping…")

    @on(Worker.StateChanged)
    def _serve_ended(self, event: Worker.StateChanged) -> None:
        # The proxy failing (a bad upstream, a socket error) must show, not leave a stale status.
        if event.worker.group == "proxy" and event.state is WorkerState.ERROR:
            error = event.worker.error
            self._status(f"failed: {error}", failed=True)
            self.notify(str(error), title="Proxy stopped", severity="error", timeout=30)


async def run_traffic_tui(
    engine: LiveEngine,
    make_proxy: Callable[[], TrafficProxy],
    sock: socket.socket,
    settings: Settings,
    *,
    warnings: list[str] | None = None,
) -> int:
    """Run the Traffic TUI until the user quits (signals end it cleanly too)."""
    app = TrafficApp(engine, settings, make_proxy=make_proxy, sock=sock, warnings=warnings)
    return await app.run_until_quit()
