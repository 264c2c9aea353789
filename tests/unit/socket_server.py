"""A small HTTP/1.1 server on a real socket, for tests of what travels over one."""

from __future__ import annotations

import asyncio
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
