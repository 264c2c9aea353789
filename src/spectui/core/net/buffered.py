"""One buffered asyncio protocol, for every socket spectui reads itself.

Both the client transport (`llama.transport`, under httpx) and the proxy's generation exchange
(`proxy.exchange`, under httptools) read the same way: what arrives is appended to a list and
wakes the one task waiting for it through a future (one loop callback per arrival, no anyio
cancel scope, no `asyncio.Event`); past `HIGH_WATER` unread bytes the socket stops being read, so
a consumer that stops pulling cannot make a stream fill memory; a full kernel send buffer makes
writers wait on `drained`.
"""

from __future__ import annotations

import asyncio

HIGH_WATER = 256 * 1024
"""Unread bytes at which a socket stops being read (reading resumes below half of it)."""


class BufferedProtocol(asyncio.Protocol):
    """Collects what arrives (`push`) and wakes the one reader waiting for it (`wait`).

    A subclass that parses what arrives (an HTTP response) overrides `data_received` and pushes
    only the decoded body.
    """

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.chunks: list[bytes] = []
        """What arrived and was not taken yet, in order."""
        self.size = 0
        """Bytes in ``chunks``."""
        self.eof = False
        """The peer ended its side (or the connection is gone)."""
        self.error: BaseException | None = None
        """Why the connection was lost, when it was lost abnormally."""
        self.waiter: asyncio.Future[None] | None = None
        """The one reader's wake-up, while it waits."""
        self.drained: asyncio.Future[None] | None = None
        """Set while the kernel's send buffer is full; done once it drains."""
        self.paused_reading = False
        """Reading is stopped because ``size`` reached `HIGH_WATER`."""

    # -- asyncio callbacks -----------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.push(data)

    def eof_received(self) -> bool:
        self.eof = True
        self.wake()
        return False  # (close the transport: HTTP/1.1 has nothing to send after the peer's EOF)

    def connection_lost(self, exc: Exception | None) -> None:
        self.eof = True
        self.error = exc
        self.wake()
        if self.drained is not None and not self.drained.done():
            self.drained.set_result(None)

    def pause_writing(self) -> None:
        self.drained = asyncio.get_running_loop().create_future()

    def resume_writing(self) -> None:
        if self.drained is not None and not self.drained.done():
            self.drained.set_result(None)
        self.drained = None

    # -- the buffer ------------------------------------------------------------------------------

    def push(self, data: bytes) -> None:
        """Keep ``data`` for the reader and wake it; stop reading at `HIGH_WATER`."""
        self.chunks.append(data)
        self.size += len(data)
        if self.size >= HIGH_WATER and not self.paused_reading and self.transport is not None:
            self.transport.pause_reading()
            self.paused_reading = True
        self.wake()

    def wake(self) -> None:
        """Wake the waiting reader, if any."""
        waiter = self.waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def wait(self) -> None:
        """Until something arrives or the peer ends (returns at once when either holds)."""
        if self.chunks or self.eof:
            return
        self.waiter = asyncio.get_running_loop().create_future()
        try:
            await self.waiter
        finally:
            self.waiter = None

    def take(self, max_bytes: int | None = None) -> bytes:
        """Up to ``max_bytes`` (default: all) of what has arrived, uncopied in the common case
        of one piece; reading resumes once less than half of `HIGH_WATER` is left."""
        chunks = self.chunks
        data = chunks[0] if len(chunks) == 1 else b"".join(chunks)
        if max_bytes is not None and len(data) > max_bytes:
            data, rest = data[:max_bytes], data[max_bytes:]
            self.chunks, self.size = [rest], len(rest)
        else:
            self.chunks, self.size = [], 0
        if self.paused_reading and self.size < HIGH_WATER // 2 and self.transport is not None:
            self.transport.resume_reading()
            self.paused_reading = False
        return data

    def close(self) -> None:
        """Close the connection (a peer that generates for it stops)."""
        if self.transport is not None:
            self.transport.close()


__all__ = ["HIGH_WATER", "BufferedProtocol"]
