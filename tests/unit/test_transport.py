"""`AsyncioTransport`: httpx on asyncio's own sockets behaves as httpx's own transport does.

Each test runs a small HTTP/1.1 server on a real socket (asyncio.start_server), so the bytes take
the path a llama-server's do: connect, write, read, keep-alive, chunked streams, timeouts, TLS.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import socket
import threading
from collections.abc import AsyncIterator

import httpx
import pytest

from helpers.tls import loopback_tls
from helpers.wait import await_until, wait_until
from spectui.core import overrides
from spectui.core.llama.transport import (
    BUSY_READ_BYTES,
    FAST_GAP_S,
    AsyncioStream,
    AsyncioTransport,
    lean_transport,
)
from spectui.core.net.buffered import BufferedProtocol

from .socket_server import CHUNKED_HEAD, chunk, plain, request_head, serve


@pytest.fixture
async def echo_server() -> AsyncIterator[str]:
    """Answers every request on a connection with its request line and body length."""

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                line, length = await request_head(reader)
                writer.write(plain(f"{line} {length}".encode()))
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    async for url in serve(handler):
        yield url


async def test_requests_take_the_asyncio_path_and_reuse_the_connection(echo_server: str) -> None:
    async with httpx.AsyncClient(transport=AsyncioTransport()) as http:
        first = await http.get(f"{echo_server}/health")
        second = await http.post(f"{echo_server}/completion", content=b"x" * 10)
    assert first.text == "GET /health HTTP/1.1 0"
    assert second.text == "POST /completion HTTP/1.1 10"
    stream = first.extensions["network_stream"]
    assert isinstance(stream, AsyncioStream)  # (httpx did not fall back to its own backend)
    assert second.extensions["network_stream"] is stream  # one connection, kept alive


async def test_a_connection_the_server_just_closed_is_not_reused() -> None:
    # A server in a thread of its own, so it can hang up while the client's loop is held.
    listener = socket.create_server(("127.0.0.1", 0))
    url = f"http://127.0.0.1:{listener.getsockname()[1]}"

    answered = threading.Event()

    def serve_twice() -> None:
        for _ in range(2):
            connection, _ = listener.accept()
            with connection:
                connection.recv(65536)
                connection.sendall(plain(b"once"))  # (no "Connection: close")
                answered.wait(60)  # then it hangs up, after the client has its answer

    server = threading.Thread(target=serve_twice, daemon=True)
    server.start()
    async with httpx.AsyncClient(transport=AsyncioTransport()) as http:
        first = await http.get(url)
        stream = first.extensions["network_stream"]
        answered.set()
        # The hang-up reaches the kernel while the loop does not run (as when the next request
        # follows at once): the connection must count as gone all the same. (A blocking wait
        # on purpose: the loop must not see it.)
        wait_until(lambda: stream.get_extra_info("is_readable"), "the hang-up reached the socket")
        second = await http.get(url)
    server.join(5)
    listener.close()
    assert first.text == second.text == "once"
    assert second.extensions["network_stream"] is not stream  # a fresh connection


async def test_a_large_body_is_sent_whole(echo_server: str) -> None:
    body = b"y" * (4 * 2**20)  # (more than the socket's buffer: the write waits for it to drain)
    async with httpx.AsyncClient(transport=AsyncioTransport()) as http:
        answer = await http.post(f"{echo_server}/big", content=body)
    assert answer.text == f"POST /big HTTP/1.1 {len(body)}"


@contextlib.asynccontextmanager
async def streamed(url: str) -> AsyncIterator[httpx.Response]:
    """A GET of ``url`` streamed through spectui's transport."""
    async with (
        httpx.AsyncClient(transport=AsyncioTransport()) as http,
        http.stream("GET", url) as response,
    ):
        yield response


async def test_a_large_answer_read_late_arrives_whole() -> None:
    body = bytes(range(256)) * 8192  # 2 MiB: reading pauses at the high-water mark and resumes

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await request_head(reader)
        writer.write(plain(body))
        await writer.drain()
        writer.close()

    async for url in serve(handler):
        async with streamed(url) as response:
            stream = response.extensions["network_stream"]
            # (the answer fills the buffer meanwhile: reading pauses at the high-water mark)
            held = stream._protocol
            await await_until(lambda: held.paused_reading, "reading paused")  # noqa: B023
            assert await response.aread() == body


async def test_a_paced_stream_takes_what_arrived_meanwhile_in_one_read() -> None:
    gate = asyncio.Event()

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await request_head(reader)
        writer.write(CHUNKED_HEAD + chunk(b"data: 0\n\n"))
        await writer.drain()
        await gate.wait()
        for n in range(1, 4):  # three chunks, each its own write, inside the client's gap
            writer.write(chunk(f"data: {n}\n\n".encode()))
            await writer.drain()
            await asyncio.sleep(0.02)  # (the behaviour: a paced stream)
        writer.write(b"0\r\n\r\n")
        await writer.drain()
        writer.close()

    async for url in serve(handler):
        async with streamed(url) as response:
            stream = response.extensions["network_stream"]
            assert isinstance(stream, AsyncioStream)
            lines = response.aiter_lines()
            assert await anext(lines) == "data: 0"
            stream.read_gap = 2.0  # far longer than the three chunks take
            stream._paced_reads = 1  # (paced a while: past the first hold, which is short)
            reads_before = stream.last_read_t
            gate.set()
            rest = [line async for line in lines if line]
            stream.read_gap = 0.0
    assert rest == ["data: 1", "data: 2", "data: 3"]
    # The three chunks (and the end) were taken after the gap, in one read, not one each.
    assert stream.previous_read_t == reads_before


async def test_a_silent_server_times_out_and_a_closed_port_is_a_connect_error() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await request_head(reader)
        await asyncio.sleep(5)  # (the behaviour: a server that says nothing)

    async for url in serve(handler):
        async with httpx.AsyncClient(transport=AsyncioTransport()) as http:
            with pytest.raises(httpx.ReadTimeout):
                await http.get(url, timeout=httpx.Timeout(5.0, read=0.1))
    async with httpx.AsyncClient(transport=AsyncioTransport()) as http:
        with pytest.raises(httpx.ConnectError):
            await http.get(url)  # (the server is gone)


async def test_a_server_that_hangs_up_mid_answer_is_a_transport_error() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await request_head(reader)
        writer.write(CHUNKED_HEAD + chunk(b"data: 0\n\n"))
        await writer.drain()
        writer.close()

    async for url in serve(handler):
        async with httpx.AsyncClient(transport=AsyncioTransport()) as http:
            with pytest.raises(httpx.TransportError):
                await http.get(url)


async def test_https_through_the_asyncio_path() -> None:
    server_tls, client_tls = loopback_tls()

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await request_head(reader)
        writer.write(plain(b"secret"))
        await writer.drain()
        await reader.read()  # (open until the client hangs up)
        writer.close()

    async for url in serve(handler, tls=server_tls):
        async with (
            httpx.AsyncClient(transport=AsyncioTransport(verify=client_tls)) as http,
            http.stream("GET", url) as answer,
        ):
            assert answer.extensions["network_stream"].get_extra_info("ssl_object") is not None
            assert await answer.aread() == b"secret"
        async with httpx.AsyncClient(transport=AsyncioTransport()) as http:
            with pytest.raises(httpx.ConnectError):  # (an unknown authority is refused)
                await http.get(url)


def test_an_http_proxy_in_the_environment_keeps_httpx_own_transport(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)
    monkeypatch.delenv(overrides.STOCK_ENV, raising=False)  # (this test is about the proxy)
    overrides.reset()
    try:
        assert isinstance(lean_transport(), AsyncioTransport)
        monkeypatch.setenv("HTTPS_PROXY", "http://proxy.example:3128")
        assert lean_transport() is None  # (httpx honours it only with its own transport)
    finally:
        overrides.reset()


def test_spectui_stock_gives_httpx_own_transport(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(overrides.STOCK_ENV, "1")
    overrides.reset()
    try:
        assert lean_transport() is None
    finally:
        overrides.reset()


async def test_a_busy_stream_is_not_held_back() -> None:
    # Paced reads hold a thin stream in the kernel; a read that came back full (a busy stream)
    # means the next one is not held: its tokens would only be later for it.
    class Transport:
        paused = 0

        def pause_reading(self) -> None:
            self.paused += 1

        def resume_reading(self) -> None:
            pass

    transport = Transport()
    stream = AsyncioStream(transport, BufferedProtocol())  # type: ignore[arg-type]  # fake transport
    loop = asyncio.get_running_loop()
    stream.read_gap, stream.last_read_t = 0.05, loop.time()
    stream._last_size = BUSY_READ_BYTES
    assert stream._hold(loop) is None
    assert transport.paused == 0
    stream._last_size = 400  # one chunk: a thin stream is held until the gap has passed
    held = stream._hold(loop)
    assert held is not None and transport.paused == 1
    held.cancel()


async def test_a_fast_stream_is_held_for_the_short_gap_only() -> None:
    # At thousands of tokens a second the read after a full one is small but came at once: the
    # stream's rate, not that read's size, says it is busy, and it is held for FAST_GAP_S only
    # (a whole gap each time would put up to 0.15 s between a token and the screen).
    class Transport:
        def pause_reading(self) -> None:
            pass

        def resume_reading(self) -> None:
            pass

    stream = AsyncioStream(Transport(), BufferedProtocol())  # type: ignore[arg-type]  # fake transport
    stream.read_gap = 0.15
    # The first hold after pacing starts: the read before it (the first token) tells no rate.
    stream.previous_read_t, stream.last_read_t, stream._last_size = 10.0, 10.15, 300
    assert stream._gap() == FAST_GAP_S
    stream._paced_reads = 1  # one paced read since: its pace is the stream's
    stream.previous_read_t, stream.last_read_t, stream._last_size = 10.0, 10.002, 800
    assert stream._gap() == FAST_GAP_S  # two chunks in 2 ms: ~400 KB/s
    stream.previous_read_t, stream.last_read_t, stream._last_size = 10.0, 10.15, 3000
    assert stream._gap() == 0.15  # a 50 tok/s stream's batch over a whole gap: held as before
    stream.previous_read_t = -math.inf  # the first read: nothing to tell a rate from
    assert stream._gap() == 0.15


async def test_a_read_cancelled_while_held_leaves_the_socket_readable() -> None:
    # The hold pauses the socket and a timer resumes it; a read cancelled before the timer
    # fires (the user stopped the run) must not leave the connection paused for the next one.
    class Transport:
        reading = True

        def pause_reading(self) -> None:
            self.reading = False

        def resume_reading(self) -> None:
            self.reading = True

    transport = Transport()
    stream = AsyncioStream(transport, BufferedProtocol())  # type: ignore[arg-type]  # fake transport
    loop = asyncio.get_running_loop()
    stream.read_gap, stream.last_read_t, stream._last_size = 30.0, loop.time(), 400
    read = asyncio.ensure_future(stream.read(1024))
    # held: the data waits in the kernel
    await await_until(lambda: not transport.reading, "the read held the transport")
    read.cancel()
    with pytest.raises(asyncio.CancelledError):
        await read
    assert transport.reading
