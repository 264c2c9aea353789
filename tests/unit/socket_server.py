"""A small HTTP/1.1 server on a real socket, for tests of what travels over one."""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


async def request_head(reader: asyncio.StreamReader) -> tuple[str, int]:
    """The request line and the body's length; the body is read too."""
    head = (await reader.readuntil(b"\r\n\r\n")).decode()
    length = 0
    for line in head.split("\r\n")[1:]:
        name, _, value = line.partition(":")
        if name.lower() == "content-length":
            length = int(value)
    if length:
        await reader.readexactly(length)
    return head.split("\r\n")[0], length


def plain(body: bytes) -> bytes:
    """A whole 200 answer."""
    return b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)


def json_answer(body: bytes) -> bytes:
    """A whole 200 answer with a JSON body, as llama-server sends one."""
    head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
    return head + b"Content-Length: %d\r\n\r\n%s" % (len(body), body)


CHUNKED_HEAD = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
)
"""The head of a streamed (SSE) answer; its body follows as `chunk`s and ends with b"0\r\n\r\n"."""


def chunk(data: bytes) -> bytes:
    """One chunk of a chunked body."""
    return b"%x\r\n%s\r\n" % (len(data), data)


async def serve(handler: Handler, tls: ssl.SSLContext | None = None) -> AsyncIterator[str]:
    """Serve on a free port of 127.0.0.1 while the caller iterates; yields the base URL."""
    server = await asyncio.start_server(handler, "127.0.0.1", 0, ssl=tls)
    port = server.sockets[0].getsockname()[1]
    scheme = "https" if tls else "http"
    async with server:
        yield f"{scheme}://127.0.0.1:{port}"


class StandIn:
    """A stand-in llama-server on a real loopback socket: ``handler`` scripts each connection;
    the stand-in counts the connections still open and keeps every request head it read."""

    def __init__(self, handler: Handler) -> None:
        self._handler = handler
        self.open = 0
        """Connections the proxy has open to it now."""
        self.closed = asyncio.Event()
        """Set each time a connection ends (cleared by `wait_all_closed`)."""
        self.heads: list[str] = []
        """Request heads as they came (lower-cased), in order."""
        self.url = ""

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.open += 1
        try:
            await self._handler(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()
            self.open -= 1
            self.closed.set()

    async def head(self, reader: asyncio.StreamReader) -> tuple[str, bytes]:
        """Read one request: its head (kept in ``heads``) and its body."""
        head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1")
        self.heads.append(head.lower())
        length = 0
        for line in head.split("\r\n")[1:]:
            name, _, value = line.partition(":")
            if name.lower() == "content-length":
                length = int(value)
        return head, (await reader.readexactly(length) if length else b"")

    async def wait_all_closed(self, within: float = 30) -> None:
        """Until no connection to it is open (a generous deadline: not a speed assumption)."""
        async with asyncio.timeout(within):
            while self.open:
                self.closed.clear()
                await self.closed.wait()

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[str]:
        server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
        async with server:
            yield self.url


async def until_read(reader: asyncio.StreamReader) -> None:
    """Until the peer closes its side (what a stand-in does while it 'generates')."""
    while await reader.read(65536):
        pass
