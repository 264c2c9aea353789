"""An httpx transport whose sockets are plain asyncio protocols, for the per-chunk cost of streams.

httpx's default async transport reaches the socket through anyio: every read enters a cancel
scope for its timeout and wakes the task through an `asyncio.Event`, several loop callbacks per
SSE chunk. At one chunk per token that was most of what watching a stream cost (measured at
50 tok/s on 2 cores: reading a stream took 2.5-2.8 % of a core through anyio, 1.4-1.6 % through
this backend, 1.2 % for a blocking read in a thread). httpcore takes its network layer as a
parameter (`network_backend`) and httpx takes any transport, so httpx stays the client and only
the bytes' path changes, through public interfaces only: data arrives in
`BufferedProtocol.data_received` (`spectui.core.net`) and a waiting read is woken by one future.
The gate `LEAN_TRANSPORT` (tested httpcore, `SPECTUI_STOCK=1`) falls back to httpx's own.

A request with the extension `PER_READ` (a stream's reader) is sent past httpcore's HTTP layer:
its body comes out whole per socket read, not per HTTP chunk (`spectui.core.net.per_read`), over
the same kind of connection, so pacing and every timeout below hold for it too.

Timeouts keep httpcore's meaning (a read or write that waits longer raises its `*Timeout`); a
read with no timeout (an open stream) costs no timer at all.
"""

# The `timeout` parameters are httpcore's interface (AsyncNetworkStream), not a design choice.
# ruff: noqa: ASYNC109

from __future__ import annotations

import asyncio
import contextlib
import inspect
import math
import os
import select
import socket
import ssl
from collections.abc import AsyncIterable, AsyncIterator, Iterator
from typing import Any

import httpcore
import httpx

from spectui.core.net.buffered import BufferedProtocol
from spectui.core.net.per_read import PER_READ, PerReadClient
from spectui.core.overrides import Override, enabled

BUSY_READ_BYTES = 16 * 1024
"""A read this large (~40 chunks of a stream with per-token timings) means the stream is busy:
the next read is not held back (see `AsyncioStream.read_gap`)."""

FAST_GAP_S = 0.03
"""The gap for a stream that arrives fast enough to fill a `BUSY_READ_BYTES` read within the
full gap (a few hundred tokens a second and more): the screen's lag stays within its budget
(~100 ms, of which the batching and the frame take the rest), at ~30 wake-ups a second."""


class AsyncioStream(httpcore.AsyncNetworkStream):
    """One connection, as httpcore reads and writes it; a response's reader finds it in
    ``response.extensions["network_stream"]`` to pace its reads (`read_gap`)."""

    def __init__(self, transport: asyncio.Transport, protocol: BufferedProtocol) -> None:
        self._transport = transport
        self._protocol = protocol
        self.read_gap = 0.0
        """Seconds between two reads that find nothing waiting (0: read as data arrives).

        A stream read once per token wakes the process once per token, and each wake-up costs
        the same whatever it carries. With a gap, what arrives meanwhile waits in the kernel's
        socket buffer and is taken in one read: at 50 tok/s and a 0.1 s gap, one wake-up per
        five tokens. Whoever sets it resets it to 0 before the connection is reused."""
        self.last_read_t = -math.inf
        """Loop time of the latest read that returned data."""
        self.previous_read_t = -math.inf
        """Loop time of the read before it: what the latest read returned arrived after this."""
        self._last_size = 0
        self._paced_reads = 0
        """Reads that returned data since `read_gap` was set (0 while it is not)."""

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        protocol = self._protocol
        loop = asyncio.get_running_loop()
        if not protocol.chunks and not protocol.eof:
            held = self._hold(loop) if self.read_gap > 0 else None
            try:
                if timeout is None:
                    await protocol.wait()
                else:
                    async with asyncio.timeout(timeout):
                        await protocol.wait()
            except TimeoutError as error:
                raise httpcore.ReadTimeout("timed out reading from the server") from error
            finally:
                if held is not None:  # (cancelled, or it ended early: never leave it paused)
                    held.cancel()
                    self._release()
        if protocol.chunks:
            self.previous_read_t, self.last_read_t = self.last_read_t, loop.time()
            data = protocol.take(max_bytes)
            self._last_size = len(data)
            self._paced_reads = self._paced_reads + 1 if self.read_gap > 0 else 0
            return data
        if protocol.error is not None:
            raise httpcore.ReadError(str(protocol.error)) from protocol.error
        return b""  # (end of stream: httpcore decides whether that was early)

    def _hold(self, loop: asyncio.AbstractEventLoop) -> asyncio.TimerHandle | None:
        """Leave the socket unread until `read_gap` after the latest read, unless that read was
        a full one (`BUSY_READ_BYTES`): a busy stream already comes in batches, and holding it
        would only make its tokens later (at 5,000 tok/s, by up to the whole gap).

        The socket is paused and a timer resumes it, while the read waits for data as usual:
        the reading task wakes once per batch (a sleep before waiting woke it twice)."""
        wait = self.last_read_t + self._gap() - loop.time()
        if wait <= 0 or self._last_size >= BUSY_READ_BYTES:
            return None
        self._transport.pause_reading()  # (else the loop would wake for each arrival anyway)
        return loop.call_later(wait, self._release)

    def _gap(self) -> float:
        """`read_gap`, or `FAST_GAP_S` when the latest read came at a rate that would fill a
        busy read within `read_gap`. At thousands of tokens a second a read after a full one
        is small (it came at once), so the full-read rule alone held every other read for the
        whole gap: up to 0.15 s of lag, where the screen's budget is 0.1 s.

        The first hold once pacing starts is `FAST_GAP_S` too: the read before it carried the
        first token after the prompt, whose pace says nothing of the stream's, and a whole gap
        there held the first quarter second of a fast stream (hundreds of tokens) behind it."""
        if self._paced_reads == 0:
            return min(self.read_gap, FAST_GAP_S)
        span = self.last_read_t - self.previous_read_t
        if span > 0 and self._last_size * self.read_gap >= BUSY_READ_BYTES * span:
            return min(self.read_gap, FAST_GAP_S)
        return self.read_gap

    def _release(self) -> None:
        if not self._protocol.paused_reading:  # (not held back for a full buffer)
            self._transport.resume_reading()  # (a no-op when reading is not paused)

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        protocol = self._protocol
        if protocol.error is not None or self._transport.is_closing():
            raise httpcore.WriteError(str(protocol.error or "the connection is closed"))
        self._transport.write(buffer)
        if (drained := protocol.drained) is not None:  # (the kernel's buffer is full: wait)
            try:
                async with asyncio.timeout(timeout):
                    await asyncio.shield(drained)
            except TimeoutError as error:
                raise httpcore.WriteTimeout("timed out writing to the server") from error

    async def aclose(self) -> None:
        self._transport.close()

    async def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore.AsyncNetworkStream:
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(timeout):
                transport = await loop.start_tls(
                    self._transport, self._protocol, ssl_context, server_hostname=server_hostname
                )
        except TimeoutError as error:
            self._transport.close()
            raise httpcore.ConnectTimeout("timed out in the TLS handshake") from error
        except (OSError, ssl.SSLError) as error:
            self._transport.close()
            raise httpcore.ConnectError(str(error)) from error
        assert isinstance(transport, asyncio.Transport)
        return AsyncioStream(transport, self._protocol)

    def get_extra_info(self, info: str) -> Any:
        transport = self._transport
        if info == "is_readable":  # (httpcore asks before reusing an idle connection)
            protocol = self._protocol
            if protocol.chunks or protocol.eof or transport.is_closing():
                return True
            # The kernel's view too, as httpcore's own backends look: a server that hung up a
            # moment ago has its end-of-stream in the socket before the loop has read it, and a
            # request sent on that connection would fail (502 through the proxy).
            return _socket_readable(transport.get_extra_info("socket"))
        if info == "client_addr":
            return transport.get_extra_info("sockname")
        if info == "server_addr":
            return transport.get_extra_info("peername")
        if info in ("socket", "ssl_object") and not transport.is_closing():
            return transport.get_extra_info(info)  # (a closed TLS transport raises instead)
        return None


def _socket_readable(sock: Any) -> bool:
    """Whether a read would return at once (data or end of stream), without reading."""
    fd = -1 if sock is None else sock.fileno()
    if fd < 0:
        return True
    if hasattr(select, "poll"):
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        return bool(poller.poll(0))
    return bool(select.select([fd], [], [], 0)[0])  # (Windows)


class AsyncioBackend(httpcore.AsyncNetworkBackend):
    """httpcore's network layer on asyncio's own transports (no anyio in the data path)."""

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Any = None,
    ) -> httpcore.AsyncNetworkStream:
        loop = asyncio.get_running_loop()
        local = (local_address, 0) if local_address else None
        connection = loop.create_connection(BufferedProtocol, host, port, local_addr=local)
        transport, protocol = await _connected(connection, timeout)
        sock: socket.socket | None = transport.get_extra_info("socket")
        for option in socket_options or ():
            if sock is not None:
                sock.setsockopt(*option)
        return AsyncioStream(transport, protocol)

    async def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Any = None
    ) -> httpcore.AsyncNetworkStream:
        loop = asyncio.get_running_loop()
        transport, protocol = await _connected(
            loop.create_unix_connection(BufferedProtocol, path), timeout
        )
        return AsyncioStream(transport, protocol)

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


async def _connected(
    connection: Any, timeout: float | None
) -> tuple[asyncio.Transport, BufferedProtocol]:
    try:
        async with asyncio.timeout(timeout):
            transport, protocol = await connection
    except TimeoutError as error:
        raise httpcore.ConnectTimeout("timed out connecting to the server") from error
    except ConnectionRefusedError as error:
        # Not "[Errno 111] Connect call failed ('127.0.0.1', 1)": the address is in spectui's
        # own message already.
        raise httpcore.ConnectError("connection refused") from error
    except OSError as error:
        raise httpcore.ConnectError(error.strerror or str(error)) from error
    return transport, protocol


_DEFAULT_LIMITS = httpx.Limits(max_connections=100, max_keepalive_connections=20)
"""httpx's own defaults."""

_PROXY_VARIABLES = ("http_proxy", "https_proxy", "all_proxy")


class AsyncioTransport(httpx.AsyncBaseTransport):
    """An httpx transport on httpcore's connection pool over `AsyncioBackend`, through public
    APIs only: httpx takes any `AsyncBaseTransport`, httpcore takes a `network_backend`. Requests
    and responses are mapped as httpx's own transport maps them, errors to httpx's types."""

    def __init__(
        self, *, verify: ssl.SSLContext | str | bool = True, limits: httpx.Limits = _DEFAULT_LIMITS
    ) -> None:
        self._tls = httpx.create_ssl_context(verify=verify)
        self._backend = AsyncioBackend()
        self.pool = httpcore.AsyncConnectionPool(
            ssl_context=self._tls,
            max_connections=limits.max_connections,
            max_keepalive_connections=limits.max_keepalive_connections,
            keepalive_expiry=limits.keepalive_expiry,
            network_backend=self._backend,
        )
        self._per_read = PerReadClient(self._connect, limits.keepalive_expiry)
        """Requests with the `PER_READ` extension (a stream's reader asks for its body whole
        per socket read): `spectui.core.net.per_read`, on connections of this backend."""

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if (
            request.extensions.get(PER_READ)
            and request.url.raw_scheme in (b"http", b"https")
            and request.method not in ("HEAD", "CONNECT")  # (no body that llhttp could frame)
        ):
            with _mapped(request):
                head, body = await self._per_read.send(request)
            return httpx.Response(
                status_code=head.status,
                headers=head.headers,
                stream=_ResponseStream(body, request),
                extensions={
                    "http_version": b"HTTP/1.1",
                    "reason_phrase": head.reason,
                    "network_stream": body.network_stream,
                },
            )
        url = request.url
        outgoing = httpcore.Request(
            method=request.method,
            url=httpcore.URL(
                scheme=url.raw_scheme, host=url.raw_host, port=url.port, target=url.raw_path
            ),
            headers=request.headers.raw,
            content=request.stream,
            extensions=request.extensions,
        )
        with _mapped(request):
            response = await self.pool.handle_async_request(outgoing)
        assert isinstance(response.stream, AsyncIterable)
        return httpx.Response(
            status_code=response.status,
            headers=response.headers,
            stream=_ResponseStream(response.stream, request),
            extensions=response.extensions,
        )

    async def _connect(self, request: httpx.Request) -> httpcore.AsyncNetworkStream:
        """A new connection for ``request`` (TLS for https), as httpcore's pool opens one."""
        url = request.url
        host = url.raw_host.decode("ascii")
        tls = url.raw_scheme == b"https"
        timeout = request.extensions.get("timeout", {}).get("connect")
        stream = await self._backend.connect_tcp(host, url.port or (443 if tls else 80), timeout)
        if tls:
            server_name = request.extensions.get("sni_hostname") or host
            stream = await stream.start_tls(self._tls, server_name, timeout)
        return stream

    async def aclose(self) -> None:
        await self._per_read.aclose()
        await self.pool.aclose()


class _ResponseStream(httpx.AsyncByteStream):
    def __init__(self, stream: AsyncIterable[bytes], request: httpx.Request) -> None:
        self._stream = stream
        self._request = request

    async def __aiter__(self) -> AsyncIterator[bytes]:
        with _mapped(self._request):
            async for part in self._stream:
                yield part

    async def aclose(self) -> None:
        close = getattr(self._stream, "aclose", None)
        if close is not None:
            with _mapped(self._request):
                await close()


_ERRORS: tuple[tuple[type[Exception], type[httpx.TransportError]], ...] = (
    (httpcore.ConnectTimeout, httpx.ConnectTimeout),
    (httpcore.ReadTimeout, httpx.ReadTimeout),
    (httpcore.WriteTimeout, httpx.WriteTimeout),
    (httpcore.PoolTimeout, httpx.PoolTimeout),
    (httpcore.TimeoutException, httpx.TimeoutException),
    (httpcore.ConnectError, httpx.ConnectError),
    (httpcore.ReadError, httpx.ReadError),
    (httpcore.WriteError, httpx.WriteError),
    (httpcore.NetworkError, httpx.NetworkError),
    (httpcore.ProxyError, httpx.ProxyError),
    (httpcore.UnsupportedProtocol, httpx.UnsupportedProtocol),
    (httpcore.RemoteProtocolError, httpx.RemoteProtocolError),
    (httpcore.LocalProtocolError, httpx.LocalProtocolError),
    (httpcore.ProtocolError, httpx.ProtocolError),
)
"""httpcore's errors and httpx's, most specific first (httpx's own transport maps them so)."""


@contextlib.contextmanager
def _mapped(request: httpx.Request) -> Iterator[None]:
    try:
        yield
    except Exception as error:
        for theirs, ours in _ERRORS:
            if isinstance(error, theirs):
                raise ours(str(error), request=request) from error
        raise


LEAN_TRANSPORT = Override(name="asyncio-transport", library="httpcore", tested_version="1.0.9")
"""`AsyncioTransport`: httpcore's network-backend interface, implemented here. Public, but an
interface spectui implements rather than calls, so it is held to the tested version too."""


def _backend_interface_present() -> bool:
    pool = inspect.signature(httpcore.AsyncConnectionPool).parameters
    names = ("read", "write", "aclose", "start_tls", "get_extra_info")
    backend = ("connect_tcp", "connect_unix_socket", "sleep")
    return (
        "network_backend" in pool
        and all(hasattr(httpcore.AsyncNetworkStream, name) for name in names)
        and all(hasattr(httpcore.AsyncNetworkBackend, name) for name in backend)
    )


def lean_transport(limits: httpx.Limits = _DEFAULT_LIMITS) -> AsyncioTransport | None:
    """The transport for a client of llama-server: `AsyncioTransport`, or None (httpx's own) when
    the environment names an HTTP proxy (httpx honours it only with its own transport), or when
    the gate says the stock path (`SPECTUI_STOCK=1`, another httpcore than the tested one)."""
    if any(os.environ.get(name) or os.environ.get(name.upper()) for name in _PROXY_VARIABLES):
        return None
    if not enabled(LEAN_TRANSPORT, _backend_interface_present):
        return None
    return AsyncioTransport(limits=limits)


__all__ = [
    "LEAN_TRANSPORT",
    "AsyncioBackend",
    "AsyncioStream",
    "AsyncioTransport",
    "lean_transport",
]
