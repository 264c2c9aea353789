"""The TUI of `spectui proxy`: the proxy screen over a proxy served on the app's own loop.

The app is a router: it shows the screen and drives a `ProxySession` in a worker (start or
attach to the server, then serve the proxy until it quits), the same session the headless
command runs. The session's listener turns each request's start and end into the screen's typed
messages; the screen pulls live numbers itself at a few hertz.
"""

from __future__ import annotations

from textual import on, work
from textual.worker import Worker, WorkerState

from spectui.config import Settings
from spectui.core.errors import SpectuiError
from spectui.core.events import ServerState, ServerStateEvent
from spectui.core.proxy.hub import LiveRequest, ProxyHub
from spectui.core.proxy.models import ProxyRecord
from spectui.core.proxy.session import ProxySession
from spectui.ui.apps.base import SpectuiBaseApp
from spectui.ui.screens.proxy import ProxyScreen


class ScreenListener:
    """Hands the proxy's requests to the screen as messages (same event loop: no threads)."""

    def __init__(self, screen: ProxyScreen) -> None:
        self.screen = screen

    def request_started(self, live: LiveRequest) -> None:
        self.screen.post_message(ProxyScreen.RequestStarted(live))

    def request_finished(self, live: LiveRequest, record: ProxyRecord) -> None:
        self.screen.post_message(ProxyScreen.RequestFinished(live, record))


class ProxyApp(SpectuiBaseApp):
    """`spectui proxy`'s TUI. Without a session (tests), it shows ``hub`` and serves nothing."""

    TITLE = "spectui proxy"

    def __init__(
        self,
        session: ProxySession | None,
        settings: Settings,
        *,
        hub: ProxyHub | None = None,
        warnings: list[str] | None = None,
        slots: bool = False,
    ) -> None:
        super().__init__(session.engine if session is not None else None, settings)
        self._warnings = warnings or []
        self._slots = slots
        self._session = session
        self.hub = session.hub if session is not None else hub or ProxyHub(keep_events=True)
        self.screen_proxy = ProxyScreen(self.hub)

    def show_first_screen(self) -> None:
        self.push_screen(self.screen_proxy)
        self.hub.listeners.append(ScreenListener(self.screen_proxy))
        if self._slots:  # (the proxy screen's own `s`: the table stays under it)
            self.call_after_refresh(self.screen_proxy.action_slots)
        for warning in self._warnings:
            self.notify(warning, title="Proxy", severity="warning", timeout=15)
        if self._session is not None:
            self._serve()

    def _status(self, text: str, *, failed: bool = False) -> None:
        self.screen_proxy.post_message(ProxyScreen.StatusChanged(text, failed=failed))

    @work(exclusive=True, exit_on_error=False, group="proxy")
    async def _serve(self) -> None:
        """Start the server, then serve the proxy until the app quits."""
        session = self._session
        assert session is not None
        self._status("starting llama-server…")

        def state(event: ServerStateEvent) -> None:
            if event.state is not ServerState.FAILED:
                self._status(f"llama-server: {event.state.value} {event.detail}".strip())

        def note(line: str) -> None:
            self.notify(line, title="Upstream", severity="warning", timeout=15)

        problem = await session.start(on_state=state, on_note=note)
        if problem is not None:
            self._status(f"failed: {problem}", failed=True)
            return
        self._status(f"proxy {session.banner().replace(' -> ', ' → ')} · Enter: tokens · ? help")
        await session.serve()

    def quitting(self) -> None:
        self._status("stopping…")

    @on(Worker.StateChanged)
    def _serve_ended(self, event: Worker.StateChanged) -> None:
        # The proxy failing (a bad upstream, a socket error) must show, not leave a stale status;
        # only spectui's own messages are shown whole (a library's text may quote a header).
        if event.worker.group == "proxy" and event.state is WorkerState.ERROR:
            error = event.worker.error
            line = str(error) if isinstance(error, SpectuiError) else type(error).__name__
            self._status(f"failed: {line}", failed=True)
            self.notify(line, title="Proxy stopped", severity="error", timeout=30)


async def run_proxy_tui(
    session: ProxySession,
    settings: Settings,
    *,
    warnings: list[str] | None = None,
    slots: bool = False,
) -> int:
    """Run the proxy TUI over ``session`` until the user quits (signals end it cleanly too);
    ``slots``: open on the slots view (a lane per request streaming)."""
    app = ProxyApp(session, settings, warnings=warnings, slots=slots)
    return await app.run_until_quit()
