"""One generation request to llama-server, as the proxy sends it: an asyncio protocol whose
response is parsed by httptools, one connection per request.

The proxy relays a stream chunk by chunk, and at one chunk per token what each chunk costs is what
watching costs the server. Through httpx every chunk climbed httpcore's and httpx's iterators
and h11's event machine: the relay took ~2 % of a core at 50 tok/s on the 2-core VM before any
attribution. Here a chunk is one `data_received` that feeds httptools (llhttp, in C: chunked
framing decoded without a Python call per event) and wakes the relaying task once. httpx still
carries everything else the proxy passes through.

The request itself is framed by h11 (headers validated as httpx would). The connection is
closed when the response ends or the client goes away — closing it is how llama-server learns to
free the slot. The upstream is reached directly: environment HTTP proxies are not used (nor, for
the same upstream, by the proxy's pass-through client).
"""

from __future__ import annotations

import asyncio
import ssl
from urllib.parse import urlsplit

import h11
import httptools
import httpx

from spectui.core.llama.transport import HIGH_WATER


class ExchangeError(Exception):
    """The upstream could not be reached, or broke the response; the message says how, in a
    few words ("connection refused")."""

    def __init__(self, message: str, *, timeout: bool = False) -> None:
        super().__init__(message)
        self.timeout = timeout
        """It did not answer in time (rather than refusing or breaking)."""


class UpstreamResponse(asyncio.Protocol):
    """The response of one exchange: status and headers once `open_exchange` returns, the body
    piece by piece through `next_body` (or whole through `read_all`)."""

    def __init__(self) -> None:
        self.status = 0
        """HTTP status."""
        self.headers: list[tuple[bytes, bytes]] = []
        """Headers as they came, names lower-cased, repeated ones apart."""
        self._parser = httptools.HttpResponseParser(self)
        self._transport: asyncio.Transport | None = None
        self._head: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._body: list[bytes] = []
        self._size = 0
        self._complete = False
        self._lost = False
        self._problem: str | None = None
        self._waiter: asyncio.Future[None] | None = None
        self._paused = False

    # -- httptools callbacks ---------------------------------------------------------------------

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers.append((name.lower(), value))

    def on_headers_complete(self) -> None:
        self.status = self._parser.get_status_code()
        if not self._head.done():
            self._head.set_result(None)

    def on_body(self, body: bytes) -> None:
        self._body.append(body)
        self._size += len(body)

    def on_message_complete(self) -> None:
        self._complete = True

    # -- asyncio callbacks -----------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport

    def data_received(self, data: bytes) -> None:
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError as error:
            self._problem = f"not an HTTP response ({error})"
            self.close()
        if self._size >= HIGH_WATER and self._transport is not None and not self._paused:
            self._transport.pause_reading()
            self._paused = True
        if self._body or self._complete or self._problem:
            self._wake()

    def eof_received(self) -> bool:
        return False  # (close the transport: nothing more is sent on it)

    def connection_lost(self, exc: Exception | None) -> None:
        self._lost = True
        if exc is not None and self._problem is None:
            self._problem = str(exc) or type(exc).__name__
        if not self._head.done():
            self._head.set_exception(ExchangeError(self._problem or "closed before it answered"))
        self._wake()

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    # -- reading ---------------------------------------------------------------------------------

    async def next_body(self) -> bytes:
        """What arrived of the body since the last call (waiting for some); b"" at its end.
        Raises `ExchangeError` when the connection ends before the body does."""
        while True:
            if self._body:
                body = self._body[0] if len(self._body) == 1 else b"".join(self._body)
                self._body, self._size = [], 0
                if self._paused and self._transport is not None:
                    self._transport.resume_reading()
                    self._paused = False
                return body
            if self._complete:
                return b""
            if self._lost or self._problem:
                if self._problem is None and self._framed_by_close():
                    return b""
                raise ExchangeError(self._problem or "connection closed")
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None

    async def read_all(self) -> bytes:
        """The whole body."""
        parts = []
        while piece := await self.next_body():
            parts.append(piece)
        return b"".join(parts)

    def close(self) -> None:
        """Close the connection (llama-server stops generating for it)."""
        if self._transport is not None:
            self._transport.close()

    async def _send(self, request: bytes) -> None:
        """Send the request; returns once the response's head came."""
        assert self._transport is not None
        self._transport.write(request)
        try:
            await self._head
        except BaseException:  # (cancelled too: the future is cancelled with the wait)
            self.close()
            raise

    def _framed_by_close(self) -> bool:
        """Whether the body ends where the connection does (no length, not chunked)."""
        names = {name for name, _ in self.headers}
        return b"content-length" not in names and b"transfer-encoding" not in names


async def open_exchange(
    base_url: str,
    method: str,
    target: str,
    headers: list[tuple[str, str]],
    body: bytes,
    *,
    connect_timeout: float,
) -> UpstreamResponse:
    """Send one request for ``target`` (path and query) to ``base_url`` (http or https, maybe with
    a path of its own); returns once the response's head came. Raises `ExchangeError` when the
    upstream cannot be reached or answers nonsense."""
    url = urlsplit(base_url)
    target = url.path.rstrip("/") + target
    tls = url.scheme == "https"
    host = url.hostname or "localhost"
    port = url.port or (443 if tls else 80)
    loop = asyncio.get_running_loop()
    response = UpstreamResponse()
    try:
        async with asyncio.timeout(connect_timeout):
            await loop.create_connection(
                lambda: response,
                host,
                port,
                ssl=httpx.create_ssl_context() if tls else None,
                server_hostname=host if tls else None,
            )
    except TimeoutError:
        raise ExchangeError("connect timed out", timeout=True) from None
    except ConnectionRefusedError:
        raise ExchangeError("connection refused") from None
    except (OSError, ssl.SSLError) as error:
        raise ExchangeError(getattr(error, "strerror", None) or str(error)) from None
    try:
        framing = h11.Connection(h11.CLIENT)
        head = h11.Request(
            method=method,
            target=target,
            headers=[("host", url.netloc.rpartition("@")[2]), ("content-length", str(len(body))),
                     ("connection", "close"), *headers],
        )  # fmt: skip
        request = b"".join(
            framing.send(event) or b"" for event in (head, h11.Data(data=body), h11.EndOfMessage())
        )
    except h11.LocalProtocolError as error:
        response.close()
        raise ExchangeError(f"the request cannot be sent: {error}") from None
    await response._send(request)
    return response


__all__ = ["ExchangeError", "UpstreamResponse", "open_exchange"]
