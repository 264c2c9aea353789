"""Serving the proxy's ASGI app with uvicorn, on the caller's event loop.

spectui's lifecycle owns the signals (SIGHUP/SIGTERM stop a launched llama-server too), so
uvicorn's own signal capture is switched off, and its 10 Hz tick with it (`LEAN_UVICORN`: two
overridden methods of `uvicorn.Server`, gated; the stock server is used under `SPECTUI_STOCK=1`
or another uvicorn, and then captures SIGINT/SIGTERM itself and re-raises them once stopped).
The socket is bound here first, so a port in use is one clear line instead of uvicorn's
`sys.exit`.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import ipaddress
import socket
from collections.abc import Iterator

import uvicorn
from starlette.types import ASGIApp

from spectui.core.errors import SpectuiError
from spectui.core.overrides import Override, enabled

SHUTDOWN_GRACE_S = 2
"""How long open streams may take to end when the proxy stops."""


class ProxyError(SpectuiError):
    """The proxy cannot listen where it was asked to."""

    title = "Proxy problem"
    exit_code = 2


def parse_listen(text: str) -> tuple[str, int]:
    """'HOST:PORT', ':PORT' or 'PORT' (host 127.0.0.1); '[::1]:PORT' for IPv6."""
    host, port_text = "127.0.0.1", text
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        port_text = rest.removeprefix(":")
    elif ":" in text:
        host, _, port_text = text.rpartition(":")
        host = host or "127.0.0.1"
    try:
        port = int(port_text)
    except ValueError:
        raise ProxyError(f"--listen wants HOST:PORT, e.g. 127.0.0.1:8081, not {text!r}") from None
    if not 0 <= port <= 65535:
        raise ProxyError(f"--listen: port {port} is out of range")
    return host, port


def is_loopback(host: str) -> bool:
    """Whether ``host`` only listens on this machine."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def bind(host: str, port: int) -> socket.socket:
    """A listening socket, or one clear line why not."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as error:
        raise ProxyError(f"cannot listen on {host}:{port}: {error.strerror}") from None
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(128)
    except OSError as error:
        sock.close()
        raise ProxyError(f"cannot listen on {host}:{port}: {error.strerror}") from None
    sock.setblocking(False)
    return sock


LEAN_UVICORN = Override(name="lean-uvicorn", library="uvicorn", tested_version="0.54.0")
"""`_LeanServer`: `uvicorn.Server.capture_signals` and `main_loop` overridden."""


def _server_hooks_present() -> bool:
    server = uvicorn.Server
    tick = inspect.signature(server.on_tick).parameters
    return (
        inspect.isfunction(server.capture_signals)
        and inspect.iscoroutinefunction(server.main_loop)
        and inspect.iscoroutinefunction(server.on_tick)
        and list(tick) == ["self", "counter"]
    )


class _StockServer(uvicorn.Server):
    """uvicorn's own server (what `stop` needs, nothing overridden)."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.exit_requested = asyncio.Event()
        """Set by `ProxyServer.stop` (with ``should_exit``, which this server polls at 10 Hz)."""


class _LeanServer(_StockServer):
    """No signal capture (spectui's own), no 10 Hz tick."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield  # spectui.lifecycle handles signals

    async def main_loop(self) -> None:
        # uvicorn's own loop wakes 10 times a second to refresh the Date header (switched off
        # here) and to look at ``should_exit``: 0.2 % of a core on the 2-core VM, as much as a
        # tenth of what relaying a 50 tok/s stream costs. One wake-up when asked to stop instead.
        await self.on_tick(0)  # (sets the default headers once)
        await self.exit_requested.wait()


class ProxyServer:
    """uvicorn serving ``app`` on a socket bound by `bind`."""

    def __init__(self, app: ASGIApp, sock: socket.socket) -> None:
        self.sock = sock
        config = uvicorn.Config(
            app,
            lifespan="off",
            interface="asgi3",  # (a bound method: uvicorn's guess would take it for ASGI 2)
            proxy_headers=False,  # (the client's own address, not one X-Forwarded-For claims)
            log_level="warning",
            access_log=False,  # nothing about requests goes to a log (headers hold keys)
            server_header=False,  # the client sees upstream's `server`, not ours
            date_header=False,
            timeout_graceful_shutdown=SHUTDOWN_GRACE_S,
            timeout_keep_alive=30,
        )
        lean = enabled(LEAN_UVICORN, _server_hooks_present)
        self._server = (_LeanServer if lean else _StockServer)(config)

    @property
    def address(self) -> str:
        """'host:port' actually bound."""
        host, port = self.sock.getsockname()[:2]
        return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"

    @property
    def started(self) -> bool:
        """Whether uvicorn is accepting connections."""
        return self._server.started

    async def serve(self) -> None:
        """Serve until `stop()` (or cancellation, which stops it too)."""
        try:
            await self._server.serve(sockets=[self.sock])
        except asyncio.CancelledError:
            self.stop()
            with contextlib.suppress(Exception):
                await asyncio.shield(self._server.shutdown(sockets=[self.sock]))
            raise
        finally:
            self.sock.close()

    def stop(self) -> None:
        """Ask it to stop (open streams get `SHUTDOWN_GRACE_S`)."""
        self._server.should_exit = True
        self._server.exit_requested.set()
