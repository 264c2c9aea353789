"""A `PER_READ` request: its body comes whole per socket read, and everything else about the
exchange behaves as through httpcore (status, headers, errors, timeouts, keep-alive, TLS).

The socket tests run a small HTTP/1.1 server on a real socket (`socket_server`); the parser's
property is checked on its own: however the bytes of a chunked answer are cut into reads, each
read gives exactly the body it carried, in one piece.
"""

from __future__ import annotations

import asyncio
import itertools
import ssl

import httpx
import pytest
from httpx_sse import aconnect_sse
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers.sse import FIXTURES, sse_payloads
from helpers.tls import loopback_tls
from spectui.core.llama.transport import AsyncioStream, AsyncioTransport
from spectui.core.net.per_read import PER_READ, ParsedResponse

from .socket_server import CHUNKED_HEAD, chunk, json_answer, plain, request_head, serve

PER_READ_ASKED = {PER_READ: True}


@settings(max_examples=300, deadline=None)
@given(
    payloads=st.lists(st.binary(min_size=1, max_size=40), max_size=20),
    cuts=st.lists(st.integers(min_value=0, max_value=2_000), max_size=15),
)
def test_each_read_gives_the_body_it_carried_in_one_piece(
    payloads: list[bytes], cuts: list[int]
) -> None:
    wire = CHUNKED_HEAD + b"".join(chunk(p) for p in payloads) + b"0\r\n\r\n"
    points = sorted({min(c, len(wire)) for c in cuts} | {0, len(wire)})
    parsed = ParsedResponse()
    pieces = [parsed.feed(wire[a:b]) for a, b in itertools.pairwise(points)]
    assert b"".join(pieces) == b"".join(payloads)
    assert parsed.complete and parsed.keep_alive and parsed.status == 200
    assert (b"content-type", b"text/event-stream") in parsed.headers
    whole = ParsedResponse()
    assert whole.feed(wire) == b"".join(payloads)  # one read: one piece, whatever the chunks


async def test_a_read_of_many_chunks_is_one_piece_and_the_connection_is_kept() -> None:
    written = asyncio.Event()
    events = [b'data: {"n": %d}\n\n' % n for n in range(30)]

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        for _ in range(2):
            await request_head(reader)
            writer.write(CHUNKED_HEAD)
            await writer.drain()
            await asyncio.sleep(0)  # (the head goes apart from the body)
            writer.write(b"".join(chunk(e) for e in events) + b"0\r\n\r\n")  # one write
            await writer.drain()
            written.set()
        await reader.read()

    async for url in serve(handler):
        async with httpx.AsyncClient(transport=AsyncioTransport()) as http:
            streams = []
            for _ in range(2):
                written.clear()
                async with http.stream("POST", url, json={}, extensions=PER_READ_ASKED) as answer:
                    assert answer.status_code == 200
                    assert answer.headers["content-type"] == "text/event-stream"
                    stream = answer.extensions["network_stream"]
                    assert isinstance(stream, AsyncioStream)
                    streams.append(stream)
                    await written.wait()
                    parts = [part async for part in answer.aiter_raw()]
                assert b"".join(parts) == b"".join(events)
                assert len(parts) < len(events)  # per read, not per chunk
        assert streams[0]._transport.is_closing()  # (closing the client closes the idle one)
    assert streams[0] is streams[1]  # a whole answer leaves the connection for the next


async def test_answers_with_a_length_or_ended_by_closing_read_whole() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await request_head(reader)
        writer.write(json_answer(b'{"error": {"message": "no"}}').replace(b"200 OK", b"500 Oops"))
        await request_head(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nuntil the end")
        await writer.drain()
        writer.close()

    async for url in serve(handler):
        async with httpx.AsyncClient(transport=AsyncioTransport()) as http:
            failed = await http.post(url, json={}, extensions=PER_READ_ASKED)
            ended = await http.post(url, json={}, extensions=PER_READ_ASKED)
    assert (failed.status_code, failed.reason_phrase) == (500, "Oops")
    assert failed.json() == {"error": {"message": "no"}}
    assert ended.text == "until the end"


async def test_an_interim_answer_is_skipped() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await request_head(reader)
        writer.write(b"HTTP/1.1 100 Continue\r\n\r\n" + plain(b"after"))
        await reader.read()

    async for url in serve(handler):
        async with httpx.AsyncClient(transport=AsyncioTransport()) as http:
            answer = await http.post(url, json={}, extensions=PER_READ_ASKED)
    assert (answer.status_code, answer.text) == (200, "after")


async def test_a_hang_up_mid_body_a_silent_server_and_nonsense_are_httpx_errors() -> None:
    async def hangs_up(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await request_head(reader)
        writer.write(CHUNKED_HEAD + chunk(b"data: 0\n\n"))
        await writer.drain()
        writer.close()

    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await request_head(reader)
        await reader.read()  # (the behaviour: a server that says nothing)

    async def nonsense(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await request_head(reader)
        writer.write(b"SSH-2.0-OpenSSH\r\n\r\n")
        await reader.read()

    async with httpx.AsyncClient(transport=AsyncioTransport()) as http:
        async for url in serve(hangs_up):
            with pytest.raises(httpx.RemoteProtocolError):
                await http.post(url, json={}, extensions=PER_READ_ASKED)
        async for url in serve(silent):
            timeout = httpx.Timeout(5.0, read=0.1)
            with pytest.raises(httpx.ReadTimeout):
                await http.post(url, json={}, extensions=PER_READ_ASKED, timeout=timeout)
        async for url in serve(nonsense):
            with pytest.raises(httpx.RemoteProtocolError):
                await http.post(url, json={}, extensions=PER_READ_ASKED)
        with pytest.raises(httpx.ConnectError):
            await http.post(url, json={}, extensions=PER_READ_ASKED)  # (the server is gone)


async def test_a_connection_the_server_closed_is_not_reused() -> None:
    async def once(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await request_head(reader)
        writer.write(plain(b"once"))  # (no "Connection: close")
        await writer.drain()
        writer.close()

    async for url in serve(once):
        async with httpx.AsyncClient(transport=AsyncioTransport()) as http:
            first = await http.post(url, json={}, extensions=PER_READ_ASKED)
            stream = first.extensions["network_stream"]
            await stream._protocol.wait()  # (the hang-up reached the client)
            second = await http.post(url, json={}, extensions=PER_READ_ASKED)
    assert first.text == second.text == "once"
    assert second.extensions["network_stream"] is not stream


async def test_https_and_httpx_own_transport_read_the_same() -> None:
    server_tls, client_tls = loopback_tls()

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                await request_head(reader)
                writer.write(CHUNKED_HEAD + chunk(b"data: 1\n\n") + chunk(b"data: 2\n\n"))
                writer.write(b"0\r\n\r\n")
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, ssl.SSLError):
            writer.close()

    async for url in serve(handler, tls=server_tls):
        transports = [
            AsyncioTransport(verify=client_tls),
            httpx.AsyncHTTPTransport(verify=client_tls),
        ]
        for transport in transports:
            async with httpx.AsyncClient(transport=transport) as http:
                answer = await http.post(url, json={}, extensions=PER_READ_ASKED)
                assert answer.text == "data: 1\n\ndata: 2\n\n"
        async with httpx.AsyncClient(transport=AsyncioTransport()) as http:
            with pytest.raises(httpx.ConnectError):  # (an unknown authority is refused)
                await http.post(url, json={}, extensions=PER_READ_ASKED)


async def test_a_capture_gives_the_same_events_as_through_httpx_own_transport() -> None:
    body = (FIXTURES / "chat-ngram-simple.sse").read_bytes()
    events = body.split(b"\n\n")

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                await request_head(reader)
                writer.write(CHUNKED_HEAD + b"".join(chunk(e + b"\n\n") for e in events if e))
                writer.write(b"0\r\n\r\n")
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    seen = []
    async for url in serve(handler):
        for transport in (AsyncioTransport(), httpx.AsyncHTTPTransport()):
            async with (
                httpx.AsyncClient(transport=transport) as http,
                aconnect_sse(http, "POST", url, json={}, extensions=PER_READ_ASKED) as source,
            ):
                seen.append([(e.event, e.data, e.id) async for e in source.aiter_sse()])
    payloads = [data for _, data, _ in seen[0] if data != "[DONE]"]
    assert payloads == sse_payloads("chat-ngram-simple.sse")
    assert seen[0] == seen[1]
