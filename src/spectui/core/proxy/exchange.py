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

from spectui.core.net.buffered import BufferedProtocol


class ExchangeError(Exception):
    """The upstream could not be reached, or broke the response; the message says how, in a
    few words ("connection refused")."""

    def __init__(self, message: str, *, timeout: bool = False) -> None:
        super().__init__(message)
        self.timeout = timeout
        """It did not answer in time (rather than refusing or breaking)."""


class UpstreamResponse(BufferedProtocol):
    """The response of one exchange: status and headers once `open_exchange` returns, the body
    piece by piece through `next_body` (or whole through `read_all`). The decoded body is kept
    in the buffer of `BufferedProtocol` (so reading stops at its high-water mark)."""

    def __init__(self) -> None:
        super().__init__()
        self.status = 0
        """HTTP status (of the final response: interim 1xx ones are skipped)."""
        self.headers: list[tuple[bytes, bytes]] = []
        """Headers as they came, names lower-cased, repeated ones apart."""
        self._parser = httptools.HttpResponseParser(self)
        self._head: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._interim = False
        self._complete = False
        self._problem: str | None = None

    # -- httptools callbacks ---------------------------------------------------------------------

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers.append((name.lower(), value))

    def on_headers_complete(self) -> None:
        status = self._parser.get_status_code()
        if 100 <= status < 200 and status != 101:
            # `100 Continue` (llama-server sends it for `Expect`) or `103 Early Hints`: not the
            # answer, which follows on the same connection.
            self._interim = True
            self.headers = []
            return
        self.status = status
        if not self._head.done():
            self._head.set_result(None)

    def on_body(self, body: bytes) -> None:
        self.push(body)

    def on_message_complete(self) -> None:
        if self._interim:
            self._interim = False
            return
        self._complete = True
        self.wake()

    # -- asyncio callbacks -----------------------------------------------------------------------

    def data_received(self, data: bytes) -> None:
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError:
            self._problem = "not an HTTP response"  # (fixed: the parser's text quotes bytes)
            self.close()
            self.wake()

    def connection_lost(self, exc: Exception | None) -> None:
        if exc is not None and self._problem is None:
            self._problem = _os_error(exc)
        if not self._head.done():
            self._head.set_exception(ExchangeError(self._problem or "closed before it answered"))
        super().connection_lost(exc)

    # -- reading ---------------------------------------------------------------------------------

    async def next_body(self) -> bytes:
        """What arrived of the body since the last call (waiting for some); b"" at its end.
        Raises `ExchangeError` when the connection ends before the body does."""
        while True:
            if self.chunks:
                return self.take()
            if self._complete:
                return b""
            if self.eof or self._problem:
                if self._problem is None and self._framed_by_close():
                    return b""
                raise ExchangeError(self._problem or "connection closed")
            await self.wait()

    async def read_all(self, limit: int | None = None) -> bytes:
        """The whole body; `ExchangeError` past ``limit`` bytes."""
        parts = []
        size = 0
        while piece := await self.next_body():
            parts.append(piece)
            size += len(piece)
            if limit is not None and size > limit:
                self.close()
                raise ExchangeError(f"the answer is longer than {limit} bytes")
        return b"".join(parts)

    async def _send(self, request: bytes) -> None:
        """Send the request; returns once the response's head came."""
        assert self.transport is not None
        self.transport.write(request)
        try:
            await self._head
        except BaseException:  # (cancelled too: the future is cancelled with the wait)
            self.close()
            raise

    def _framed_by_close(self) -> bool:
        """Whether the body ends where the connection does (no length, not chunked)."""
        names = {name for name, _ in self.headers}
        return b"content-length" not in names and b"transfer-encoding" not in names


def _os_error(error: BaseException) -> str:
    """A few fixed words for a socket error (its text never carries what was sent)."""
    if isinstance(error, ConnectionResetError):
        return "connection reset"
    if isinstance(error, OSError) and error.strerror:
        return error.strerror
    return type(error).__name__


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
    except ssl.SSLError as error:
        raise ExchangeError(f"TLS failed ({error.reason or type(error).__name__})") from None
    except OSError as error:
        raise ExchangeError(_os_error(error)) from None
    try:
        framing = h11.Connection(h11.CLIENT)
        head = h11.Request(
            method=method,
            target=target,
            headers=[
                ("host", url.netloc.rpartition("@")[2]),
                ("content-length", str(len(body))),
                ("connection", "close"),
                *headers,
            ],
        )
        request = b"".join(
            framing.send(event) or b"" for event in (head, h11.Data(data=body), h11.EndOfMessage())
        )
    except h11.LocalProtocolError:
        # Never the error's text: h11 quotes the header value it refused, and a header may be
        # a key (one read from a CRLF file ends in "\r").
        response.close()
        raise ExchangeError("a request header is not valid HTTP (its value is not shown)") from None
    await response._send(request)
    return response


__all__ = ["ExchangeError", "UpstreamResponse", "open_exchange"]
