"""The proxy's generation exchange over a real loopback socket: framing, endings, failures."""

from __future__ import annotations

import asyncio
import socket
import ssl
from pathlib import Path

import pytest
import trustme

from helpers.wait import await_until
from spectui.core.net.buffered import HIGH_WATER
from spectui.core.proxy.exchange import ExchangeError, open_exchange

from .socket_server import CHUNKED_HEAD, chunk, request_head, serve


async def exchange(url: str, target: str = "/completion", body: bytes = b"{}"):
    return await open_exchange(
        url, "POST", target, [("content-type", "application/json")], body, connect_timeout=5
    )


async def test_a_chunked_stream_arrives_piece_by_piece_and_ends() -> None:
    seen: list[str] = []
    go_on = asyncio.Event()

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        seen.append((await reader.readuntil(b"\r\n\r\n")).decode())
        await reader.readexactly(2)
        writer.write(CHUNKED_HEAD + chunk(b"data: 1\n\n"))
        await writer.drain()
        await go_on.wait()
        writer.write(chunk(b"data: 2\n\n") + b"0\r\n\r\n")
        await writer.drain()
        writer.close()

    async for url in serve(handler):
        credentialed = url.replace("://", "://user:secret@")  # (never in the Host header)
        response = await exchange(credentialed + "/base/", "/completion?x=1")
        assert response.status == 200
        assert (b"content-type", b"text/event-stream") in response.headers
        assert await response.next_body() == b"data: 1\n\n"  # before the rest was even sent
        go_on.set()
        assert await response.next_body() == b"data: 2\n\n"
        assert await response.next_body() == b""
        response.close()
    head = seen[0].lower()
    assert head.startswith("post /base/completion?x=1 http/1.1\r\n")
    assert "content-length: 2\r\n" in head and "connection: close\r\n" in head
    assert "secret" not in head and "host: 127.0.0.1:" in head


@pytest.mark.parametrize("framing", ["length", "close"])
async def test_whole_bodies_by_length_or_by_close(framing: str) -> None:
    body = b'{"error":{"code":401}}'

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await request_head(reader)
        length = b"Content-Length: %d\r\n" % len(body) if framing == "length" else b""
        writer.write(b"HTTP/1.1 401 Unauthorized\r\n" + length + b"\r\n" + body)
        await writer.drain()
        writer.close()

    async for url in serve(handler):
        response = await exchange(url)
        assert response.status == 401
        assert await response.read_all() == body


async def test_a_stream_cut_short_is_an_error() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await request_head(reader)
        writer.write(CHUNKED_HEAD + chunk(b"data: 1\n\n"))
        await writer.drain()
        writer.close()  # (no last chunk)

    async for url in serve(handler):
        response = await exchange(url)
        assert await response.next_body() == b"data: 1\n\n"
        with pytest.raises(ExchangeError, match="connection closed"):
            await response.next_body()


async def test_refused_silent_and_nonsense_upstreams() -> None:
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    with pytest.raises(ExchangeError, match="connection refused"):
        await exchange(f"http://127.0.0.1:{port}")

    async def hang_up(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await request_head(reader)
        writer.close()

    async for url in serve(hang_up):
        with pytest.raises(ExchangeError, match="closed before it answered"):
            await exchange(url)

    async def nonsense(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await request_head(reader)
        writer.write(b"SSH-2.0-OpenSSH\r\n\r\n")
        await writer.drain()
        await reader.read()

    async for url in serve(nonsense):
        with pytest.raises(ExchangeError, match="not an HTTP response"):
            await exchange(url)


async def test_a_slow_reader_pauses_the_socket_and_loses_nothing() -> None:
    piece = b"data: " + b"x" * 8000 + b"\n\n"
    count = 3 * HIGH_WATER // len(piece)

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await request_head(reader)
        writer.write(CHUNKED_HEAD)
        for _ in range(count):
            writer.write(chunk(piece))
            await writer.drain()
        writer.write(b"0\r\n\r\n")
        await writer.drain()
        writer.close()

    async for url in serve(handler):
        response = await exchange(url)
        # (the server writes until the proxy's buffer is full: reading stops at HIGH_WATER)
        await await_until(lambda: response.paused_reading, "reading paused")  # noqa: B023 (awaited here)
        assert await response.read_all() == piece * count


async def test_cancelled_before_the_answer_closes_the_connection() -> None:
    asked, closed = asyncio.Event(), asyncio.Event()

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await request_head(reader)
        asked.set()
        await reader.read()  # (until the proxy's side closes)
        closed.set()

    async for url in serve(handler):
        waiting = asyncio.create_task(exchange(url))
        await asyncio.wait_for(asked.wait(), 60)  # (the request is out: the answer is awaited)
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        async with asyncio.timeout(5):
            await closed.wait()


async def test_https_upstream_trusted_through_ssl_cert_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    authority = trustme.CA()
    server_tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    authority.issue_cert("127.0.0.1").configure_cert(server_tls)

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await request_head(reader)
        writer.write(CHUNKED_HEAD + chunk(b"data: secret\n\n") + b"0\r\n\r\n")
        await writer.drain()
        writer.close()

    async for url in serve(handler, tls=server_tls):
        with pytest.raises(ExchangeError):  # (an unknown authority is refused)
            await exchange(url)
        ca = tmp_path / "ca.pem"
        authority.cert_pem.write_to_path(str(ca))
        monkeypatch.setenv("SSL_CERT_FILE", str(ca))  # (as httpx honours it)
        response = await exchange(url)
        assert await response.read_all() == b"data: secret\n\n"
