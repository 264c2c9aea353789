"""An HTTP/1.1 exchange whose response body is handed on one piece per socket read.

llama-server sends every SSE event as an HTTP chunk of its own. Through httpcore each chunk is an
h11 event, climbs httpcore's and httpx's iterators and httpx's decoders one by one, even when one
socket read brought a dozen (a stream read paced, `llama.transport`): then about two thirds of
what reading a stream costs (bench/stream_read.py). Here the response is parsed by httptools
(llhttp, in C: the chunked framing is decoded with no Python frame per chunk, the body's pieces
appended to a list), and what one read brought is handed on as one piece.

A request asks for it with the extension `PER_READ`; spectui's transport sends such requests
here, over a connection of its own backend (`PerReadClient`), and any other transport ignores the
extension. The request is framed by h11, as httpcore frames it. Errors are httpcore's (the
transport maps them to httpx's, as for every request). A connection whose response ended whole
and may be kept alive is kept, one per origin, and reused while the server has not hung up.
"""

# The `timeout` names are httpcore's interface (AsyncNetworkStream), not a design choice.
# ruff: noqa: ASYNC109

from __future__ import annotations

import time
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable

import h11
import httpcore
import httptools
import httpx

PER_READ = "spectui.per_read"
"""Request extension: True hands the response's body on whole per socket read (this module),
where spectui's transport serves the request; other transports ignore it."""

READ_BYTES = 64 * 1024
"""The most one read takes (httpcore's own figure)."""

Origin = tuple[bytes, bytes, int | None]
"""Scheme, host and port of a request: which connections can serve it."""


class ParsedResponse:
    """The response as httptools parses it: the head once it came, the body per `feed`."""

    def __init__(self) -> None:
        self.status = 0
        self.reason = b""
        self.headers: list[tuple[bytes, bytes]] = []
        """Names lower-cased (as h11 gives them to httpcore), repeated ones apart."""
        self.head_done = False
        self.complete = False
        self.keep_alive = False
        """The message ended and the connection may carry another (HTTP/1.1 rules)."""
        self.extra = False
        """Bytes came after the message: the connection is not reused."""
        self._interim = False
        self._body: list[bytes] = []
        self._body_end = -1
        # Per chunk httptools calls `on_body`: a bound `list.append` costs no Python frame.
        self.on_body = self._body.append
        self._parser = httptools.HttpResponseParser(self)

    # -- httptools callbacks ---------------------------------------------------------------------

    def on_message_begin(self) -> None:
        if self.complete:
            self.extra = True

    def on_status(self, reason: bytes) -> None:
        self.reason += reason

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers.append((name.lower(), value))

    def on_headers_complete(self) -> None:
        if self.complete:
            return
        status = self._parser.get_status_code()
        if 100 <= status < 200 and status != 101:
            # `100 Continue` or `103 Early Hints`: not the answer, which follows.
            self._interim = True
            self.headers, self.reason = [], b""
            return
        self.status = status
        self.head_done = True

    def on_message_complete(self) -> None:
        if self._interim:
            self._interim = False
        elif not self.complete:
            self.complete = True
            self.keep_alive = self._parser.should_keep_alive()
            self._body_end = len(self._body)

    # -- reading ---------------------------------------------------------------------------------

    def feed(self, data: bytes) -> bytes:
        """Parse what one read brought; returns the body it held (b"" for none)."""
        try:
            self._parser.feed_data(data)
        except (httptools.HttpParserError, httptools.HttpParserUpgrade) as error:
            raise httpcore.RemoteProtocolError("the server's answer is not HTTP/1.1") from error
        body = self._body
        if self._body_end >= 0:  # (complete: anything after the message is not its body)
            del body[self._body_end :]
            self._body_end = 0
        if not body:
            return b""
        piece = body[0] if len(body) == 1 else b"".join(body)
        body.clear()
        return piece

    def framed_by_close(self) -> bool:
        """Whether the body ends where the connection does (no length, not chunked)."""
        names = {name for name, _ in self.headers}
        return b"content-length" not in names and b"transfer-encoding" not in names


async def _request_bytes(request: httpx.Request) -> bytes:
    """The request as it goes on the wire, framed and checked by h11 (as httpcore does)."""
    framing = h11.Connection(h11.CLIENT)
    try:
        pieces = [
            framing.send(
                h11.Request(
                    method=request.method, target=request.url.raw_path, headers=request.headers.raw
                )
            )
        ]
        assert isinstance(request.stream, AsyncIterable)
        async for part in request.stream:
            pieces.append(framing.send(h11.Data(data=part)))
        pieces.append(framing.send(h11.EndOfMessage()))
    except h11.LocalProtocolError as error:
        raise httpcore.LocalProtocolError(str(error)) from error
    return b"".join(p for p in pieces if p)


class PerReadBody(AsyncIterable[bytes]):
    """A response's body, one piece per socket read; `aclose` hands the connection back."""

    def __init__(
        self,
        stream: httpcore.AsyncNetworkStream,
        parsed: ParsedResponse,
        first: bytes,
        timeout: float | None,
        release: Callable[[httpcore.AsyncNetworkStream, bool], Awaitable[None]],
    ) -> None:
        self._stream = stream
        self._parsed = parsed
        self._first = first
        self._timeout = timeout
        self._release = release
        self._closed = False

    @property
    def network_stream(self) -> httpcore.AsyncNetworkStream:
        """The connection (a reader paces it: `llama.transport.AsyncioStream.read_gap`)."""
        return self._stream

    async def __aiter__(self) -> AsyncIterator[bytes]:
        parsed = self._parsed
        if first := self._first:
            self._first = b""
            yield first
        while not parsed.complete:
            data = await self._stream.read(READ_BYTES, timeout=self._timeout)
            if not data:
                if not parsed.framed_by_close():
                    raise httpcore.RemoteProtocolError(
                        "peer closed connection without sending complete message body"
                    )
                break
            if piece := parsed.feed(data):
                yield piece

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        parsed = self._parsed
        await self._release(
            self._stream, parsed.complete and parsed.keep_alive and not parsed.extra
        )


class PerReadClient:
    """Sends `PER_READ` requests, over connections that ``connect`` opens for a request (its
    origin, its connect timeout, TLS), keeping one idle connection per origin for
    ``keepalive_expiry`` seconds (None: while the server keeps it)."""

    def __init__(
        self,
        connect: Callable[[httpx.Request], Awaitable[httpcore.AsyncNetworkStream]],
        keepalive_expiry: float | None,
    ) -> None:
        self._connect = connect
        self._expiry = keepalive_expiry
        self._idle: dict[Origin, tuple[httpcore.AsyncNetworkStream, float]] = {}

    async def send(self, request: httpx.Request) -> tuple[ParsedResponse, PerReadBody]:
        """Send ``request``; returns once the response's head came: the head, and the body to
        read. Raises httpcore's errors."""
        url = request.url
        origin = (url.raw_scheme, url.raw_host, url.port)
        timeouts = request.extensions.get("timeout", {})
        stream = await self._connection(origin, request)
        try:
            await stream.write(await _request_bytes(request), timeout=timeouts.get("write"))
            parsed, first = await _head(stream, timeouts.get("read"))
        except BaseException:  # (cancelled too: a half-sent request leaves the connection unusable)
            await stream.aclose()
            raise

        async def release(stream: httpcore.AsyncNetworkStream, reusable: bool) -> None:
            await self._release(origin, stream, reusable)

        return parsed, PerReadBody(stream, parsed, first, timeouts.get("read"), release)

    async def _connection(
        self, origin: Origin, request: httpx.Request
    ) -> httpcore.AsyncNetworkStream:
        """An idle connection to ``origin`` the server has not hung up, or a new one."""
        idle = self._idle.pop(origin, None)
        if idle is not None:
            stream, since = idle
            fresh = self._expiry is None or time.monotonic() - since < self._expiry
            # (readable while idle: the server hung up, or sent what no request asked for)
            if fresh and not stream.get_extra_info("is_readable"):
                return stream
            await stream.aclose()
        return await self._connect(request)

    async def _release(
        self, origin: Origin, stream: httpcore.AsyncNetworkStream, reusable: bool
    ) -> None:
        if not reusable:
            await stream.aclose()
            return
        previous = self._idle.pop(origin, None)
        self._idle[origin] = (stream, time.monotonic())
        if previous is not None:
            await previous[0].aclose()

    async def aclose(self) -> None:
        """Close the idle connections."""
        idle, self._idle = self._idle, {}
        for stream, _ in idle.values():
            await stream.aclose()


async def _head(
    stream: httpcore.AsyncNetworkStream, timeout: float | None
) -> tuple[ParsedResponse, bytes]:
    """Read until the response's head came; returns it with the body that came along."""
    parsed = ParsedResponse()
    first = b""
    while not parsed.head_done:
        data = await stream.read(READ_BYTES, timeout=timeout)
        if not data:
            raise httpcore.RemoteProtocolError("Server disconnected without sending a response.")
        first = parsed.feed(data)
    return parsed, first


__all__ = ["PER_READ", "PerReadBody", "PerReadClient"]
