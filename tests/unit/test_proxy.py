"""The proxy without a server: recorded captures served by a mock upstream, the proxy's ASGI app
called in-process. Pass-through, timings cut, attribution equal to the server's counters."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import SecretStr

from spectui.core.events import TokenEvent
from spectui.core.llama.protocol import ServerMetrics
from spectui.core.proxy.app import Proxy
from spectui.core.proxy.chunks import (
    SETTLE_LINES,
    StreamAttribution,
    prepare_body,
    strip_timings,
)
from spectui.core.proxy.hub import ProxyHub
from spectui.core.proxy.models import EndpointKind, ProxyRecord, RequestStatus
from spectui.core.stream.dialects import response_totals

from .socket_server import CHUNKED_HEAD, chunk, request_head, serve

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


def capture(name: str) -> bytes:
    return (FIXTURES / name).read_bytes()


def data_lines(body: bytes) -> list[bytes]:
    return [
        line[6:] for line in body.split(b"\n")
        if line.startswith(b"data: ") and line != b"data: [DONE]"
    ]  # fmt: skip


class Upstream:
    """A mock llama-server: answers from a table, remembers what it was sent."""

    def __init__(self, answer: Callable[[httpx.Request], httpx.Response]) -> None:
        self.answer = answer
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        request.read()
        self.requests.append(request)
        return self.answer(request)


def reply(
    status: int, body: bytes | object, headers: list[tuple[str, str]] | None = None
) -> httpx.Response:
    """A response that streams like a network one (``content=`` would be read already)."""
    if not isinstance(body, bytes):
        body = json.dumps(body).encode()
        headers = [("content-type", "application/json"), *(headers or [])]
    return httpx.Response(status, stream=httpx.ByteStream(body), headers=headers or [])


def sse(name: str) -> Callable[[httpx.Request], httpx.Response]:
    def answer(_request: httpx.Request) -> httpx.Response:
        return reply(200, capture(name), [("content-type", "text/event-stream")])

    return answer


class Records:
    def __init__(self) -> None:
        self.records: list[ProxyRecord] = []

    def request_started(self, live: object) -> None:
        pass

    def request_finished(self, live: object, record: ProxyRecord) -> None:
        self.records.append(record)


async def _answer_over_socket(
    upstream: Upstream, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
) -> None:
    """Read one HTTP/1.1 request, answer it with ``upstream`` (chunked when it is a stream),
    close: a mock llama-server on a real socket, so the proxy's own exchange path is what runs."""
    try:
        head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
        method, target, _ = head[0].split(" ", 2)
        headers = [(k, v) for k, v in (line.split(": ", 1) for line in head[1:] if line)]
        length = next((int(v) for k, v in headers if k.lower() == "content-length"), 0)
        content = await reader.readexactly(length) if length else b""
        request = httpx.Request(method, "http://upstream" + target, headers=headers,
                                content=content)  # fmt: skip
        try:
            response = upstream(request)
        except httpx.ConnectError:
            return  # (closed without an answer)
        body = response.read()
        streamed = response.headers.get("content-type", "").startswith("text/event-stream")
        lines = [f"HTTP/1.1 {response.status_code} {response.reason_phrase}".encode()]
        lines += [name + b": " + value for name, value in response.headers.raw
                  if name.lower() not in (b"content-length", b"transfer-encoding")]  # fmt: skip
        lines.append(
            b"transfer-encoding: chunked" if streamed else b"content-length: %d" % len(body)
        )
        writer.write(b"\r\n".join([*lines, b"connection: close", b"", b""]))
        if streamed:
            for piece in body.splitlines(keepends=True):
                writer.write(chunk(piece))
            writer.write(b"0\r\n\r\n")
        else:
            writer.write(body)
        await writer.drain()
    finally:
        writer.close()


@dataclass
class Proxied:
    client: httpx.AsyncClient
    upstream: Upstream
    proxy: Proxy
    records: Records


@contextlib.asynccontextmanager
async def proxied(
    answer: Callable[[httpx.Request], httpx.Response], **options: Any
) -> AsyncIterator[Proxied]:
    """The proxy's ASGI app in-process, in front of ``answer`` served on a loopback socket."""
    upstream = Upstream(answer)
    hub = ProxyHub(keep_events=True)
    records = Records()
    hub.listeners.append(records)
    async for url in serve(functools.partial(_answer_over_socket, upstream)):
        proxy = Proxy(url, hub=hub, **options)
        transport = httpx.ASGITransport(app=proxy.app)
        async with httpx.AsyncClient(transport=transport, base_url="http://proxy") as client:
            yield Proxied(client, upstream, proxy, records)
        await proxy.aclose()


@pytest.mark.parametrize(
    "name",
    ["completion-ngram-simple-2.sse", "chat-ngram-simple.sse", "v1-completions-ngram-mod.sse"],
)
def test_strip_timings_removes_only_timings(name: str) -> None:
    for line in data_lines(capture(name)):
        original = json.loads(line)
        stripped = json.loads(strip_timings(line))
        assert stripped == {k: v for k, v in original.items() if k != "timings"}


def test_strip_timings_edge_shapes() -> None:
    assert strip_timings(b'{"timings":{"a":1},"b":2}') == b'{"b":2}'
    assert strip_timings(b'{"timings":{"a":1}}') == b"{}"
    assert strip_timings(b'{"content":"say \\"timings\\":{","b":1}') == (
        b'{"content":"say \\"timings\\":{","b":1}'
    )
    nested = b'data: {"x":1,"timings":{"a":{"b":1}}}\n'
    assert json.loads(strip_timings(nested)[6:]) == {"x": 1}


def test_prepare_body() -> None:
    kind = EndpointKind.OAI_CHAT
    body = prepare_body(kind, b'{"messages":[{"role":"user","content":"hi"}],"stream":true}')
    assert body.strip and json.loads(body.upstream)["timings_per_token"] is True
    assert body.messages == [{"role": "user", "content": "hi"}]
    asked = b'{"prompt":"x","stream":true,"timings_per_token":true,"n_predict":5}'
    body = prepare_body(EndpointKind.NATIVE, asked)
    assert not body.strip and body.upstream == asked and body.n_predict == 5
    assert prepare_body(kind, b"not json").upstream == b"not json"
    unstreamed = b'{"prompt":"x"}'
    assert prepare_body(EndpointKind.NATIVE, unstreamed).upstream == unstreamed
    messages = b'{"messages":[],"stream":true}'
    assert prepare_body(EndpointKind.ANTHROPIC, messages).upstream == messages


async def test_streamed_completion_attributed_and_cut() -> None:
    async with proxied(sse("completion-ngram-simple-2.sse")) as made:
        client = made.client
        upstream = made.upstream
        records = made.records
        body = {"prompt": "def", "n_predict": 120, "stream": True}
        response = await client.post("/completion", json=body)
        assert response.status_code == 200
        assert json.loads(upstream.requests[0].content)["timings_per_token"] is True
        got, sent = (
            data_lines(response.content),
            data_lines(capture("completion-ngram-simple-2.sse")),
        )
        assert len(got) == len(sent)
        assert all(b'"timings"' not in line for line in got[:-1])
        assert json.loads(got[-1])["timings"] == json.loads(sent[-1])["timings"]
        (record,) = records.records
        expected = ServerMetrics.parse((FIXTURES / "metrics-after-ngram-simple-2.prom").read_text())
        assert record.metrics is not None and record.info.per_token
        assert record.metrics.steps == expected.spec_steps == 20
        assert record.metrics.accepted_per_position == expected.accepted_per_position
        assert (record.drafted, record.accepted, record.tokens) == (155, 46, 120)
        assert record.status is RequestStatus.DONE and record.stop_reason == "limit"


async def test_client_that_asked_for_timings_gets_them() -> None:
    async with proxied(sse("chat-ngram-simple.sse")) as made:
        client = made.client
        body = {"messages": [], "stream": True, "timings_per_token": True}
        response = await client.post("/v1/chat/completions", json=body)
        assert response.content == capture("chat-ngram-simple.sse")


async def test_v1_completions_and_messages() -> None:
    async with proxied(sse("v1-completions-ngram-mod.sse")) as made:
        client = made.client
        records = made.records
        await client.post("/v1/completions", json={"prompt": "x", "stream": True})
        record = records.records[-1]
        assert record.metrics is not None and record.tokens == 40
        assert record.text == "".join(
            json.loads(line)["choices"][0]["text"]
            for line in data_lines(capture("v1-completions-ngram-mod.sse"))
        )
        async with proxied(sse("messages-ngram-mod.sse")) as made:
            client = made.client
            records = made.records
            response = await client.post("/v1/messages", json={"messages": [], "stream": True})
            assert response.content == capture("messages-ngram-mod.sse")
            record = records.records[-1]
            assert not record.info.per_token and record.metrics is None and record.note
            assert record.tokens is not None and record.text


async def test_pass_through_is_exact() -> None:
    def answer(request: httpx.Request) -> httpx.Response:
        return reply(
            404 if request.url.path == "/nope" else 200,
            b'{"path":"' + request.url.path.encode() + b'","q":"' + request.url.query + b'"}',
            [("content-type", "application/json"), ("set-cookie", "a=1"),
                     ("set-cookie", "b=2"), ("x-upstream", "yes")],
        )  # fmt: skip

    async with proxied(answer) as made:
        client = made.client
        upstream = made.upstream
        records = made.records
        response = await client.get("/props?x=1&y=2", headers={"Authorization": "Bearer k"})
        assert response.json() == {"path": "/props", "q": "x=1&y=2"}
        assert response.headers.get_list("set-cookie") == ["a=1", "b=2"]
        assert response.headers["x-upstream"] == "yes"
        assert upstream.requests[0].headers["authorization"] == "Bearer k"
        assert (await client.get("/nope")).status_code == 404
        response = await client.post("/tokenize", content=b'{"content":"hi"}')
        assert upstream.requests[-1].content == b'{"content":"hi"}'
        assert records.records == []  # not a generation request


async def test_non_streamed_generation_totals() -> None:
    final = json.loads(data_lines(capture("completion-ngram-simple-2.sse"))[-1])
    whole = {**final, "content": "hello"}

    async with proxied(lambda _r: reply(200, whole)) as made:
        client = made.client
        upstream = made.upstream
        records = made.records
        response = await client.post("/completion", json={"prompt": "x"})
        assert response.json() == whole
        assert b"timings_per_token" not in upstream.requests[0].content
        (record,) = records.records
        assert record.metrics is None and not record.info.per_token
        assert (record.tokens, record.drafted, record.accepted) == (120, 155, 46)


async def test_client_key_and_upstream_key() -> None:
    async with proxied(
        lambda _r: reply(200, {"ok": True}),
        client_key=SecretStr("mine"),
        upstream_key=SecretStr("theirs"),
    ) as made:
        client = made.client
        upstream = made.upstream
        assert (await client.get("/health")).status_code == 401
        assert (await client.get("/spectui/metrics")).status_code == 401
        assert (await client.get("/health", headers={"x-api-key": "wrong"})).status_code == 401
        response = await client.get("/health", headers={"Authorization": "Bearer mine"})
        assert response.status_code == 200
        sent = upstream.requests[-1].headers
        assert sent["authorization"] == "Bearer theirs" and "x-api-key" not in sent
        assert (await client.get("/health", headers={"x-api-key": "mine"})).status_code == 200


async def test_upstream_401_and_unreachable() -> None:
    error = {"error": {"code": 401, "message": "Invalid API Key", "type": "authentication_error"}}
    async with proxied(lambda _r: reply(401, error)) as made:
        client = made.client
        records = made.records
        response = await client.post("/completion", json={"prompt": "x", "stream": True})
        assert response.status_code == 401 and response.json() == error
        assert records.records[-1].status is RequestStatus.ERROR

        def refuse(request: httpx.Request) -> httpx.Response:
            raise httpx.ConnectError("refused", request=request)

        async with proxied(refuse) as made:
            client = made.client
            records = made.records
            response = await client.post(
                "/v1/chat/completions", json={"messages": [], "stream": True}
            )
            assert (
                response.status_code == 502
                and response.json()["error"]["type"] == "unavailable_error"
            )
            assert records.records[-1].status is RequestStatus.ERROR
            assert (await client.get("/health")).status_code == 502


async def test_prometheus_metrics() -> None:
    async with proxied(sse("completion-ngram-simple-2.sse")) as made:
        client = made.client
        records = made.records
        await client.post("/completion", json={"prompt": "x", "stream": True, "model": "m"})
        model = records.records[0].info.model  # the response's own name wins over the request's
        assert model == "models/gemma-3-270m-q4_k_m.gguf"
        text = (await client.get("/spectui/metrics")).text
        samples = {
            line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1])
            for line in text.splitlines() if line and not line.startswith("#")
        }  # fmt: skip
        labels = f'endpoint="/completion",model="{model}"'
        assert samples[f"spectui_proxy_tokens_total{{{labels}}}"] == 120
        assert samples[f"spectui_proxy_steps_total{{{labels}}}"] == 20
        assert samples[f"spectui_proxy_accepted_tokens_total{{{labels}}}"] == 46
        assert samples[f'spectui_proxy_accepted_per_position_total{{{labels},position="0"}}'] == 14
        assert samples[f'spectui_proxy_requests_total{{{labels},status="done"}}'] == 1
        assert f"spectui_proxy_ttft_seconds_count{{{labels}}}" in samples


def test_response_totals_of_chat_and_errors() -> None:
    chat = {"choices": [{"message": {"content": "hi"}, "finish_reason": "stop"}],
            "usage": {"completion_tokens": 3}}  # fmt: skip
    totals = response_totals(EndpointKind.OAI_CHAT, json.dumps(chat).encode())
    assert (totals.text, totals.tokens, totals.stop_reason) == ("hi", 3, "eos")
    assert totals.drafted is None  # no timings: unknown, not zero
    assert response_totals(EndpointKind.NATIVE, b"<html>").tokens is None


def _parsed_outgoing(kind: EndpointKind, line: bytes) -> bytes:
    """What the client gets of a line, decided by parsing it (the rule the bytes path follows):
    per-token timings cut, except on the final chunk, which says timings_per_token was off."""
    try:
        obj = json.loads(line[5:])
    except ValueError:
        return line
    if not isinstance(obj, dict) or "error" in obj:
        return line
    choices = obj.get("choices") or [{}]
    if kind is EndpointKind.NATIVE:
        final = obj.get("stop") is True
    else:
        final = "usage" in obj or bool(choices[0].get("finish_reason"))
    if isinstance(obj.get("timings"), dict) and not final:
        return strip_timings(line)
    if final and kind is EndpointKind.NATIVE:
        return line.replace(b'"timings_per_token":true', b'"timings_per_token":false', 1)
    return line


_MIDDLE = b'"timings":{"predicted_n":2,"draft_n":4,"draft_n_accepted":1}}\n'
_ODD_LINES = [
    # Spaced JSON (not llama-server's): parsed, so its final chunk is still recognised.
    (EndpointKind.NATIVE, b'data: {"content": "a", "stop": true, "timings": {"predicted_n": 2}}\n'),
    (EndpointKind.NATIVE, b'data: {"content":"a","stop":false,' + _MIDDLE),
    (EndpointKind.NATIVE, b'data: {"content":"\\"stop\\":true","stop":false,' + _MIDDLE),
    (EndpointKind.NATIVE, b'data: {"content":"a","stop":true,"x":{"stop":false},' + _MIDDLE),
    (EndpointKind.NATIVE, b'data: {"error":{"message":"x"},"stop":false,' + _MIDDLE),
    (EndpointKind.NATIVE, b'data: {"content":"a","stop":false,' + _MIDDLE[:-3] + b"\n"),
    (EndpointKind.OAI_CHAT, b'data: {"choices":[{"finish_reason":null}],' + _MIDDLE),
    (EndpointKind.OAI_CHAT,
     b'data: {"choices":[{"finish_reason":"stop"},{"finish_reason":null}],' + _MIDDLE),
    (EndpointKind.OAI_CHAT, b'data: {"choices":[{"finish_reason":null}],"usage":{},' + _MIDDLE),
    (EndpointKind.OAI_COMPLETION, b'data: {"choices":[{"finish_reason": "length"}],' + _MIDDLE),
    (EndpointKind.OAI_COMPLETION, b"data: [DONE]\n"),
    (EndpointKind.OAI_COMPLETION, b"data: not json\n"),
]  # fmt: skip


_CAPTURE_KINDS = {
    "completion-ngram-simple-2.sse": EndpointKind.NATIVE,
    "completion-draft-simple.sse": EndpointKind.NATIVE,
    "chat-ngram-simple.sse": EndpointKind.OAI_CHAT,
    "v1-completions-ngram-mod.sse": EndpointKind.OAI_COMPLETION,
}


@pytest.mark.parametrize("name", _CAPTURE_KINDS)
def test_capture_lines_cut_on_their_bytes_as_parsing_would(name: str) -> None:
    kind = _CAPTURE_KINDS[name]
    attribution = StreamAttribution(kind, strip=True, keep_events=False)
    for line in capture(name).splitlines(keepends=True):
        assert attribution.line(line, 0.0) == _parsed_outgoing(kind, line), line


@pytest.mark.parametrize(("kind", "line"), _ODD_LINES)
def test_odd_lines_cut_as_parsing_would(kind: EndpointKind, line: bytes) -> None:
    attribution = StreamAttribution(kind, strip=True, keep_events=False)
    assert attribution.line(line, 0.0) == _parsed_outgoing(kind, line)


def test_counting_waits_for_a_batch_or_a_reader() -> None:
    hub = ProxyHub(keep_events=True)
    body = prepare_body(EndpointKind.NATIVE, b'{"prompt":"x","stream":true}')
    live = hub.start("/completion", EndpointKind.NATIVE, "c", body)
    attribution = live.attribution
    assert attribution is not None
    lines = data_lines(capture("completion-ngram-simple-2.sse"))
    for n, line in enumerate(lines[:5]):
        attribution.line(b"data: " + line + b"\n", 0.01 * n)
        attribution.line(b"\n", 0.01 * n)
    assert len(attribution.queued) == 5 and attribution.tracker.tokens == 0  # not counted yet
    snapshot = live.snapshot()
    assert snapshot is not None and snapshot.tokens == 5 and not attribution.queued
    for n, line in enumerate(lines[5 : 5 + SETTLE_LINES], start=5):
        attribution.line(b"data: " + line + b"\n", 0.01 * n)
    assert not attribution.queued  # a full batch is counted at once
    assert [e.index for e in live.events if isinstance(e, TokenEvent)] == list(range(37))


_SCOPE = {
    "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
    "scheme": "http", "path": "/completion", "raw_path": b"/completion", "root_path": "",
    "query_string": b"", "headers": [(b"content-type", b"application/json")],
    "client": ("127.0.0.1", 5000), "server": ("proxy", 80),
}  # fmt: skip
"""A streamed /completion as uvicorn hands it to the app."""


def _body_then_wait() -> Callable[[], Awaitable[dict[str, object]]]:
    """A client still connected after its body (a later receive waits, as uvicorn's does)."""
    incoming = [
        {"type": "http.request", "body": b'{"prompt":"x","stream":true}', "more_body": False}
    ]

    async def receive() -> dict[str, object]:
        if incoming:
            return incoming.pop(0)
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    return receive


def _body_then_disconnect() -> Callable[[], Awaitable[dict[str, object]]]:
    incoming = [
        {"type": "http.request", "body": b'{"prompt":"x","stream":true}', "more_body": False}
    ]

    async def receive() -> dict[str, object]:
        return incoming.pop(0) if incoming else {"type": "http.disconnect"}

    return receive


async def test_client_gone_before_the_first_byte_closes_upstream_and_is_recorded() -> None:
    upstream_closed = asyncio.Event()

    async def stalling(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:  # (the proxy may see the client gone before its request is even sent)
            await request_head(reader)
            writer.write(CHUNKED_HEAD + chunk(b'data: {"content":"a"}\n\n'))
            await writer.drain()
            await reader.read()  # (until the proxy closes its side)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            upstream_closed.set()

    hub, records = ProxyHub(), Records()
    hub.listeners.append(records)

    async def send(_message: object) -> None:
        raise OSError("the client went away")  # (before even the response's head)

    async for url in serve(stalling):
        proxy = Proxy(url, hub=hub)
        await proxy.app(_SCOPE, _body_then_disconnect(), send)
        async with asyncio.timeout(5):
            await upstream_closed.wait()
        await proxy.aclose()
    (record,) = records.records
    assert record.status is RequestStatus.CANCELLED and not hub.live


async def test_a_request_still_waiting_for_upstream_when_the_proxy_stops_is_recorded() -> None:
    asked = asyncio.Event()

    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await request_head(reader)
        asked.set()
        await reader.read()  # (never answers)

    hub, records = ProxyHub(), Records()
    hub.listeners.append(records)

    async def send(_message: object) -> None:
        pass

    async for url in serve(silent):
        proxy = Proxy(url, hub=hub)
        waiting = asyncio.create_task(proxy.app(_SCOPE, _body_then_wait(), send))
        await asyncio.wait_for(asked.wait(), 60)  # (the request waits for upstream's answer)
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        await proxy.aclose()
    (record,) = records.records
    assert record.status is RequestStatus.CANCELLED and not hub.live
