"""The proxy as real clients meet it: uvicorn on a loopback socket in front of a stand-in
llama-server on another, driven by curl, the OpenAI SDK and raw sockets. One test per case of
issue #20; every wait has a generous deadline and no verdict depends on how fast this machine is.
"""

from __future__ import annotations

import asyncio
import json
import logging
import shutil
import socket
import struct
from collections.abc import Callable
from pathlib import Path

import httpx
import openai
import pytest
from pydantic import SecretStr

from helpers.proxy import serving
from helpers.wait import await_until
from spectui.core.llama.transport import AsyncioTransport
from spectui.core.proxy.hub import ProxyHub
from spectui.core.proxy.models import ProxyLimits, RequestStatus

from .socket_server import CHUNKED_HEAD, StandIn, chunk, json_answer, until_read

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
DEADLINE_S = 30
"""How long any wait may take before the test fails: generous, so speed never decides."""


def _sse_lines(name: str) -> list[bytes]:
    return (FIXTURES / name).read_bytes().splitlines(keepends=True)


async def _stream_capture(
    stand_in: StandIn, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, name: str
) -> None:
    await stand_in.head(reader)
    writer.write(CHUNKED_HEAD)
    for line in _sse_lines(name):
        writer.write(chunk(line))
    writer.write(b"0\r\n\r\n")
    await writer.drain()


async def _raw_request(
    url: str, request: bytes
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    host, port = url.removeprefix("http://").rsplit(":", 1)
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(request)
    await writer.drain()
    return reader, writer


def _post(path: str, body: bytes, extra: str = "") -> bytes:
    return (
        f"POST {path} HTTP/1.1\r\nHost: proxy\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n{extra}\r\n"
    ).encode() + body


def _reset(writer: asyncio.StreamWriter) -> None:
    """Close with a TCP reset (SO_LINGER 0), as a killed client does."""
    sock = writer.get_extra_info("socket")
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


# -- interim responses -------------------------------------------------------------------------


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed")
async def test_curl_with_a_large_body_sends_expect_and_gets_the_real_stream(
    tmp_path: Path,
) -> None:
    # curl sends `Expect: 100-continue` for a body over 1 MiB; llama-server answers
    # `100 Continue` before the real head (the stand-in always does, Expect or not).
    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        _head, body = await stand_in.head(reader)
        writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        writer.write(CHUNKED_HEAD)
        for line in _sse_lines("completion-ngram-simple-2.sse"):
            writer.write(chunk(line))
        writer.write(b"0\r\n\r\n")
        await writer.drain()
        seen_bodies.append(len(body))

    seen_bodies: list[int] = []
    stand_in = StandIn(answer)
    prompt = "word " * (300 * 1024)  # 1.5 MiB
    body = tmp_path / "body.json"
    body.write_text(json.dumps({"prompt": prompt, "stream": True, "n_predict": 120}))
    async with stand_in.running() as upstream, serving(upstream) as (url, _proxy, records):
        curl = await asyncio.create_subprocess_exec(
            "curl", "-sS", "-N", "--max-time", str(DEADLINE_S), "-H",
            "Content-Type: application/json", "--data-binary", f"@{body}",
            "-w", "\n%{http_code}", f"{url}/completion",
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        out, err = await curl.communicate()
        (record,) = await records.wait_for(1)
    assert curl.returncode == 0, err
    text, _, code = out.decode().rpartition("\n")
    assert code == "200"
    assert text.count("data: ") == text.count('"content"') > 100  # the whole stream came
    assert "expect" not in stand_in.heads[0]  # (the proxy answered 100 itself)
    assert seen_bodies[0] > 1024 * 1024
    assert record.status is RequestStatus.DONE and record.http_status == 200
    assert record.tokens == 120


async def test_an_interim_103_before_a_whole_answer_is_skipped() -> None:
    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await stand_in.head(reader)
        body = b'{"content":"hi","tokens_predicted":1,"stop":true}'
        writer.write(b"HTTP/1.1 103 Early Hints\r\nLink: </x>\r\n\r\n")
        writer.write(json_answer(body))
        await writer.drain()

    stand_in = StandIn(answer)
    async with stand_in.running() as upstream, serving(upstream) as (url, _proxy, records):
        async with httpx.AsyncClient(timeout=DEADLINE_S) as http:
            response = await http.post(url + "/completion", json={"prompt": "x"})
        (record,) = await records.wait_for(1)
    assert response.status_code == 200 and response.json()["content"] == "hi"
    assert "link" not in response.headers
    assert record.http_status == 200 and record.status is RequestStatus.DONE


# -- every phase of a client's life --------------------------------------------------------------


def _stand_in(handler_name: str) -> StandIn:
    async def fast(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await stand_in.head(reader)
        writer.write(CHUNKED_HEAD)
        line = _sse_lines("completion-ngram-simple-2.sse")[0]
        piece = chunk(line * 64)
        while True:  # as fast as the proxy takes it, until it hangs up
            writer.write(piece)
            await writer.drain()

    async def slow(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await stand_in.head(reader)
        writer.write(CHUNKED_HEAD)
        for line in _sse_lines("completion-ngram-simple-2.sse") * 100:
            writer.write(chunk(line))
            await writer.drain()
            await asyncio.sleep(0.02)  # (the behaviour: an upstream slow on purpose)

    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await stand_in.head(reader)
        await until_read(reader)

    stand_in = StandIn({"fast": fast, "slow": slow, "silent": silent}[handler_name])
    return stand_in


@pytest.mark.parametrize(
    ("phase", "handler", "streamed", "read_lines", "how"),
    [
        ("before the head (prompt processing, queued)", "silent", True, 0, "close"),
        ("before the head, reset", "silent", True, 0, "reset"),
        ("a non-streamed request", "silent", False, 0, "close"),
        ("mid-stream, slow", "slow", True, 3, "close"),
        ("mid-stream, fast, reset", "fast", True, 200, "reset"),
    ],
)
async def test_a_client_gone_in_any_phase_frees_upstream_and_is_recorded_cancelled(
    phase: str, handler: str, streamed: bool, read_lines: int, how: str
) -> None:
    stand_in = _stand_in(handler)
    body = json.dumps({"prompt": "x", "stream": streamed}).encode()
    async with stand_in.running() as upstream, serving(upstream) as (url, proxy, records):
        reader, writer = await _raw_request(url, _post("/completion", body))
        await _settles(lambda: bool(stand_in.heads))  # (the request reached upstream)
        async with asyncio.timeout(DEADLINE_S):
            seen = 0
            while seen < read_lines:
                seen += (await reader.readline()).startswith(b"data: ")
        if how == "reset":
            _reset(writer)
        else:
            writer.close()
        await stand_in.wait_all_closed(DEADLINE_S)
        (record,) = await records.wait_for(1)
        assert not proxy.hub.live
    assert record.status is RequestStatus.CANCELLED, phase
    assert record.stop_reason == "cancelled"


async def test_a_pass_through_request_is_cancelled_with_its_client() -> None:
    stand_in = _stand_in("silent")
    async with stand_in.running() as upstream, serving(upstream) as (url, proxy, records):
        _reader, writer = await _raw_request(url, _post("/tokenize", b'{"content":"x"}'))
        await _settles(lambda: bool(stand_in.heads))
        writer.close()
        await stand_in.wait_all_closed(DEADLINE_S)
        assert proxy.active == 0 or await _settles(lambda: proxy.active == 0)
    assert records.records == []  # (not a generation request)


async def _settles(condition: Callable[[], bool]) -> bool:
    """Until ``condition`` holds (polled: the proxy has no event for it), within the deadline."""
    return await await_until(condition, "the proxy settled", give_up_s=DEADLINE_S)


# -- bounds ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("framing", ["length", "chunked"])
async def test_a_body_over_the_limit_is_a_413_and_never_goes_upstream(framing: str) -> None:
    stand_in = _stand_in("silent")
    limits = ProxyLimits(max_body=4096)
    body = json.dumps({"prompt": "x" * 10_000, "stream": True}).encode()
    async with stand_in.running() as upstream, serving(upstream, limits=limits) as (url, _p, rec):
        if framing == "length":
            request = _post("/completion", body)
        else:
            request = (
                b"POST /completion HTTP/1.1\r\nHost: p\r\nTransfer-Encoding: chunked\r\n\r\n"
                + chunk(body[:3000]) + chunk(body[3000:]) + b"0\r\n\r\n"
            )  # fmt: skip
        reader, writer = await _raw_request(url, request)
        async with asyncio.timeout(DEADLINE_S):
            answer = await reader.read()  # (the proxy closes after it)
        writer.close()
    head, _, payload = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 413")
    assert payload.count(b"\n") == 0 and b"4096 bytes" in payload
    assert json.loads(payload)["error"]["code"] == 413
    assert stand_in.heads == [] and rec.records == []


async def test_an_sse_line_over_the_limit_ends_the_stream_with_an_error_event() -> None:
    async def endless_line(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await stand_in.head(reader)
        writer.write(CHUNKED_HEAD + chunk(b'data: {"content":"'))
        while True:  # a line that never ends
            writer.write(chunk(b"x" * 65536))
            await writer.drain()

    stand_in = StandIn(endless_line)
    limits = ProxyLimits(max_sse_line=1024 * 1024)
    async with stand_in.running() as upstream, serving(upstream, limits=limits) as (url, _p, rec):
        async with httpx.AsyncClient(timeout=DEADLINE_S) as http:
            response = await http.post(url + "/completion", json={"prompt": "x", "stream": True})
        await stand_in.wait_all_closed(DEADLINE_S)
        (record,) = await rec.wait_for(1)
    assert response.status_code == 200
    assert response.content.startswith(b"event: error\ndata: ")  # (none of the line was sent)
    error = json.loads(response.content.split(b"data: ", 1)[1])["error"]
    assert "--max-sse-line" in error["message"]
    assert record.status is RequestStatus.ERROR and "--max-sse-line" in (record.error or "")


async def test_requests_beyond_the_concurrency_limit_get_a_503() -> None:
    stand_in = _stand_in("silent")
    limits = ProxyLimits(max_concurrency=2)
    body = json.dumps({"prompt": "x", "stream": True}).encode()
    async with stand_in.running() as upstream, serving(upstream, limits=limits) as (url, p, _r):
        held = [await _raw_request(url, _post("/completion", body)) for _ in range(2)]
        await _settles(lambda: p.active == 2)
        async with httpx.AsyncClient(timeout=DEADLINE_S) as http:
            refused = await http.post(url + "/completion", json={"prompt": "x"})
            assert refused.status_code == 503 and refused.headers["retry-after"] == "1"
            assert "--max-concurrency" in refused.json()["error"]["message"]
            for _reader, writer in held:
                writer.close()
            await _settles(lambda: p.active == 0)
            assert (await http.get(url + "/spectui/metrics")).status_code == 200


def test_the_hub_keeps_text_for_the_newest_requests_within_its_budget() -> None:
    from spectui.core.proxy.chunks import prepare_body
    from spectui.core.proxy.models import EndpointKind

    hub = ProxyHub()
    hub.text_requests, hub.text_budget = 3, 25_000
    for n in range(6):
        body = prepare_body(EndpointKind.NATIVE, json.dumps({"prompt": "p" * 10_000}).encode())
        live = hub.start("/completion", EndpointKind.NATIVE, "c", body)
        hub.finish(live, status=RequestStatus.DONE, http_status=200)
        assert hub.text_kept <= hub.text_budget, n
    kept = [r.info.prompt is not None for r in hub.recent]
    assert kept == [False, False, False, False, True, True]  # (two fit in 25,000 characters)
    assert all(r.http_status == 200 for r in hub.recent)  # (the numbers stay)


# -- secrets ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/completion", "/props"])
async def test_a_malformed_upstream_key_never_reaches_client_record_or_log(
    path: str, caplog: pytest.LogCaptureFixture
) -> None:
    stand_in = _stand_in("silent")
    key = SecretStr("sk-very-secret\r")  # (read from a file with CRLF line ends)
    caplog.set_level(logging.DEBUG)
    async with (
        stand_in.running() as upstream,
        serving(upstream, upstream_key=key) as (url, _p, rec),
    ):
        async with httpx.AsyncClient(timeout=DEADLINE_S) as http:
            if path == "/props":
                response = await http.get(url + path)
            else:
                response = await http.post(url + path, json={"prompt": "x", "stream": True})
        records = await rec.wait_for(1) if path == "/completion" else []
    assert response.status_code == 502
    shown = response.text + "".join(r.model_dump_json() for r in records) + caplog.text
    assert "very-secret" not in shown and "Bearer" not in shown
    assert stand_in.heads == []


# -- odd input -------------------------------------------------------------------------------------


async def test_a_lone_surrogate_gets_the_upstreams_answer_and_a_record() -> None:
    sent: list[bytes] = []

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        _head, body = await stand_in.head(reader)
        sent.append(body)
        if b'"stream": true' in body or b'"stream":true' in body:
            writer.write(CHUNKED_HEAD)
            for line in _sse_lines("completion-ngram-simple-2.sse"):
                writer.write(chunk(line))
            writer.write(b"0\r\n\r\n")
        else:  # llama-server echoes what it could not read
            reply = b'{"content":"\\ud800 back","stop":true,"tokens_predicted":2}'
            writer.write(json_answer(reply))
        await writer.drain()

    stand_in = StandIn(answer)
    async with stand_in.running() as upstream, serving(upstream) as (url, _proxy, records):
        async with httpx.AsyncClient(timeout=DEADLINE_S) as http:
            for streamed in (True, False):
                raw = b'{"prompt": "a \\ud800 b", "stream": %s}' % (
                    b"true" if streamed else b"false"
                )
                response = await http.post(
                    url + "/completion", content=raw, headers={"content-type": "application/json"}
                )
                assert response.status_code == 200, response.text
        streamed_record, whole_record = await records.wait_for(2)
    assert b"\\ud800" in sent[0] and sent[1] == raw  # (escaped as the client sent it)
    assert streamed_record.status is RequestStatus.DONE and streamed_record.tokens == 120
    assert whole_record.status is RequestStatus.DONE
    assert "\ufffd" in (streamed_record.info.prompt or "")
    assert response.content == b'{"content":"\\ud800 back","stop":true,"tokens_predicted":2}'
    from spectui.commands.proxy import request_record

    json.dumps(request_record(whole_record), ensure_ascii=False).encode()  # (writable)


# -- hop-by-hop ------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/completion", "/props"])
async def test_hop_by_hop_headers_stay_on_their_hop_both_ways(path: str) -> None:
    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await stand_in.head(reader)
        body = b'{"content":"hi","stop":true}'
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close, X-Hop\r\n"
            b"X-Hop: 1\r\nKeep-Alive: timeout=5\r\nProxy-Authenticate: Basic\r\n"
            b"X-Kept: yes\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)
        )
        await writer.drain()

    stand_in = StandIn(answer)
    extra = (
        "Connection: keep-alive, X-Private\r\nX-Private: mine\r\n"
        "Proxy-Authorization: Basic eA==\r\nProxy-Connection: keep-alive\r\n"
        "TE: trailers\r\nKeep-Alive: 300\r\nUpgrade: h2c\r\n"
        "X-End-To-End: kept\r\n"
    )
    method = "POST" if path == "/completion" else "GET"
    async with stand_in.running() as upstream, serving(upstream) as (url, _proxy, _records):
        body = b'{"prompt":"x"}' if method == "POST" else b""
        request = (
            f"{method} {path} HTTP/1.1\r\nHost: p\r\nContent-Length: {len(body)}\r\n{extra}\r\n"
        ).encode() + body
        reader, writer = await _raw_request(url, request)
        async with asyncio.timeout(DEADLINE_S):
            head = (await reader.readuntil(b"\r\n\r\n")).decode().lower()
        writer.close()
    sent = _names(stand_in.heads[0])
    hop = {"x-private", "proxy-authorization", "proxy-connection", "te", "keep-alive", "upgrade"}
    assert not hop & set(sent), hop & set(sent)
    assert "x-private" not in sent.get("connection", "")  # (httpx may say keep-alive: its hop)
    assert sent["x-end-to-end"] == "kept"
    got = _names(head)
    assert not {"x-hop", "keep-alive", "proxy-authenticate"} & set(got)
    assert got["x-kept"] == "yes"


def _names(head: str) -> dict[str, str]:
    lines = head.strip().split("\r\n")[1:]
    return {name.strip(): value.strip() for name, _, value in (x.partition(":") for x in lines)}


# -- ordinary clients ------------------------------------------------------------------------------


async def test_the_openai_sdk_streams_a_chat_through_the_proxy() -> None:
    stand_in = StandIn(lambda r, w: _stream_capture(stand_in, r, w, "chat-ngram-simple.sse"))
    async with stand_in.running() as upstream, serving(upstream) as (url, _proxy, records):
        client = openai.AsyncOpenAI(base_url=url + "/v1", api_key="none", max_retries=0)
        stream = await client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "hi"}], stream=True
        )
        text = "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])
        await client.close()
        (record,) = await records.wait_for(1)
    assert text and record.text == text
    assert record.status is RequestStatus.DONE and record.metrics is not None


async def test_a_chunked_request_body_from_a_raw_socket_is_relayed() -> None:
    stand_in = StandIn(
        lambda r, w: _stream_capture(stand_in, r, w, "completion-ngram-simple-2.sse")
    )
    body = json.dumps({"prompt": "x", "stream": True}).encode()
    request = (
        b"POST /completion HTTP/1.1\r\nHost: p\r\nTransfer-Encoding: chunked\r\n"
        b"Connection: close\r\n\r\n" + chunk(body[:5]) + chunk(body[5:]) + b"0\r\n\r\n"
    )
    async with stand_in.running() as upstream, serving(upstream) as (url, _proxy, records):
        reader, writer = await _raw_request(url, request)
        async with asyncio.timeout(DEADLINE_S):
            answer = await reader.read()
        writer.close()
        (record,) = await records.wait_for(1)
    sent = sum(line.startswith(b"data: ") for line in _sse_lines("completion-ngram-simple-2.sse"))
    assert answer.startswith(b"HTTP/1.1 200") and answer.count(b"data: ") == sent
    assert record.status is RequestStatus.DONE and record.tokens == 120


async def test_the_stock_paths_serve_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    # SPECTUI_STOCK=1: httpx's own transport for pass-through, uvicorn's own server.
    from spectui.core import overrides
    from spectui.core.proxy import serve

    monkeypatch.setenv(overrides.STOCK_ENV, "1")
    overrides.reset()
    try:
        stand_in = StandIn(lambda r, w: _stream_capture(stand_in, r, w, "chat-ngram-simple.sse"))
        async with stand_in.running() as upstream, serving(upstream) as (url, proxy, records):
            assert not isinstance(proxy.http._transport, AsyncioTransport)
            client = openai.AsyncOpenAI(base_url=url + "/v1", api_key="none", max_retries=0)
            stream = await client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": "hi"}], stream=True
            )
            text = "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])
            await client.close()
            (record,) = await records.wait_for(1)
        assert text and record.text == text and record.status is RequestStatus.DONE
        assert overrides.enabled(serve.LEAN_UVICORN, serve._server_hooks_present) is False
    finally:
        overrides.reset()


async def test_a_malformed_key_at_start_up_is_never_shown() -> None:
    # The start-up check (`ServerClient`) goes through httpx: its error is named, not quoted.
    from spectui.core.llama.client import ServerClient

    stand_in = _stand_in("silent")
    async with stand_in.running() as upstream:
        client = ServerClient(upstream, "sk-very-secret\r")
        said = (await client.health()).model_dump_json()
        await client.aclose()
    assert "very-secret" not in said and "not shown" in said
    assert stand_in.heads == []
