"""`spectui proxy`'s ASGI app: every request passes through to one llama-server; generation
requests are attributed on the way (see `chunks`).

Starlette answers the clients (uvicorn serves it). Generation requests go upstream through
`exchange` (their streams are relayed chunk by chunk, and that path is kept lean); everything
else through httpx. Both reach the upstream directly (no environment HTTP proxy). Nothing here
logs, stores or shows a header: ``Authorization`` / ``x-api-key`` go upstream as they came (or
are replaced by the upstream key the proxy was given), and the proxy's own client key is checked
in constant time. A client that goes away mid-stream cancels the upstream request at once (the
connection is closed, so llama-server frees the slot); an upstream that fails gives the client an
error and the proxy keeps serving.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import time
from collections.abc import AsyncIterator, Callable

import anyio
import httpx
from pydantic import SecretStr
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from spectui.core.llama.transport import AsyncioTransport
from spectui.core.traffic.chunks import (
    GENERATION_PATHS,
    PreparedBody,
    prepare_body,
    response_totals,
)
from spectui.core.traffic.exchange import ExchangeError, UpstreamResponse, open_exchange
from spectui.core.traffic.hub import LiveRequest, TrafficHub
from spectui.core.traffic.models import METRICS_PATH, EndpointKind, RequestStatus
from spectui.core.traffic.prom import CONTENT_TYPE, ProxyMetrics

METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]

# Hop-by-hop headers (RFC 9110 §7.6.1) belong to one connection, not to the message.
_HOP = frozenset(
    {"connection", "keep-alive", "proxy-connection", "te", "trailer", "transfer-encoding",
     "upgrade", "host", "content-length"}
)  # fmt: skip
_HOP_BYTES = frozenset(name.encode() for name in _HOP)
_AUTH = frozenset({"authorization", "x-api-key"})

CONNECT_TIMEOUT_S = 10.0
"""How long the upstream may take to accept a connection. There is no read timeout: a long
prompt may keep the server silent for minutes; the client decides."""

UPSTREAM_TIMEOUT = httpx.Timeout(connect=CONNECT_TIMEOUT_S, read=None, write=30.0, pool=None)


class _AttributedStream(Response):
    """An upstream SSE stream relayed to the client, attributed line by line as it passes.

    It stops the moment the client disconnects, even while upstream is silent (whatever the ASGI
    version), and however it ended — done, broken, or the client gone before its first byte —
    the upstream connection is closed (llama-server frees the slot) and the hub told.
    """

    def __init__(self, upstream: UpstreamResponse, live: LiveRequest, proxy: TrafficProxy) -> None:
        super().__init__(status_code=200)
        self.raw_headers = _without_hop(upstream.headers, keep_length=False)
        self._upstream = upstream
        self._live = live
        self._proxy = proxy
        self._status = RequestStatus.CANCELLED
        self._error: str | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            async with anyio.create_task_group() as group:

                async def relay() -> None:
                    with contextlib.suppress(OSError):  # the client went away between two checks
                        await self._relay(send)
                    group.cancel_scope.cancel()

                async def disconnected() -> None:
                    while (await receive())["type"] != "http.disconnect":
                        pass
                    group.cancel_scope.cancel()

                group.start_soon(relay)
                group.start_soon(disconnected)
        finally:
            upstream = self._upstream
            upstream.close()
            self._proxy.hub.finish(
                self._live, status=self._status, http_status=upstream.status, error=self._error
            )

    async def _relay(self, send: Send) -> None:
        upstream, attribution = self._upstream, self._live.attribution
        assert attribution is not None
        clock, t0 = self._proxy.clock, self._live.t0
        await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
        pending = b""
        try:
            while data := await upstream.next_body():
                t = clock() - t0
                if pending:
                    data = pending + data
                out: list[bytes] = []
                start = 0
                while (end := data.find(b"\n", start)) >= 0:
                    out.append(attribution.line(data[start : end + 1], t))
                    start = end + 1
                pending = data[start:]
                if out:
                    await send({"type": "http.response.body", "body": b"".join(out),
                                "more_body": True})  # fmt: skip
            tail = attribution.line(pending, clock() - t0) if pending else b""
            attribution.settle()
            self._status = RequestStatus.ERROR if attribution.error else RequestStatus.DONE
            self._error = attribution.error
        except ExchangeError as problem:
            self._status = RequestStatus.ERROR
            self._error = f"the upstream llama-server broke the stream ({problem})"
            # The client already has a 200 and part of the stream: an SSE error is all it can
            # still be told (the OpenAI SDK raises on it).
            tail = _sse_error(self._error)
        await send({"type": "http.response.body", "body": tail, "more_body": False})


class TrafficProxy:
    """The proxy: ``app`` is the ASGI application; ``hub`` reports the requests."""

    def __init__(
        self,
        upstream: str,
        *,
        hub: TrafficHub | None = None,
        upstream_key: SecretStr | None = None,
        client_key: SecretStr | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.upstream = upstream.rstrip("/")
        self.hub = hub or TrafficHub(clock=clock)
        self.metrics = ProxyMetrics()
        self.hub.listeners.append(self.metrics)
        self._upstream_key = upstream_key
        self._client_key = client_key.get_secret_value().encode() if client_key else None
        self.clock = clock
        limits = httpx.Limits(max_connections=None, max_keepalive_connections=32)
        self.http = httpx.AsyncClient(
            base_url=self.upstream,
            timeout=UPSTREAM_TIMEOUT,
            limits=limits,
            transport=AsyncioTransport(limits=limits),
            trust_env=False,
        )
        self.app = Starlette(
            routes=[
                Route(METRICS_PATH, self._metrics, methods=["GET"]),
                Route("/{path:path}", self._forward, methods=METHODS),
            ]
        )

    async def aclose(self) -> None:
        """Close the upstream connections."""
        await self.http.aclose()

    # -- entry points --------------------------------------------------------------------------

    async def _metrics(self, request: Request) -> Response:
        if denied := self._deny(request):
            return denied
        return Response(self.metrics.exposition(), media_type=CONTENT_TYPE)

    async def _forward(self, request: Request) -> Response:
        if denied := self._deny(request):
            return denied
        path = request.url.path
        kind = GENERATION_PATHS.get(path) if request.method == "POST" else None
        raw = await request.body()
        headers = self._upstream_headers(request, generation=kind is not None)
        if kind is None:
            return await self._pass_through(request, raw, headers)
        body = prepare_body(kind, raw)
        client = f"{request.client.host}:{request.client.port}" if request.client else "?"
        live = self.hub.start(path, kind, client, body)
        try:
            return await self._generation(request, body, headers, live)
        except asyncio.CancelledError:  # (the proxy stops while upstream has not answered)
            if live.record is None:
                self.hub.finish(live, status=RequestStatus.CANCELLED, http_status=499)
            raise

    # -- helpers -------------------------------------------------------------------------------

    def _deny(self, request: Request) -> Response | None:
        """A 401 unless the client showed the proxy's own key (when it has one)."""
        if self._client_key is None:
            return None
        given = request.headers.get("x-api-key", "")
        bearer = request.headers.get("authorization", "")
        if bearer.lower().startswith("bearer "):
            given = given or bearer[7:].strip()
        if given and hmac.compare_digest(given.encode(), self._client_key):
            return None
        return _error(
            401, "invalid or missing API key for the spectui proxy", "authentication_error"
        )

    def _upstream_headers(self, request: Request, *, generation: bool) -> list[tuple[str, str]]:
        replace_auth = self._upstream_key is not None or self._client_key is not None
        headers = []
        for name, value in request.headers.items():
            lower = name.lower()
            if lower in _HOP or (replace_auth and lower in _AUTH):
                continue
            # Generation streams are parsed on the way down, so they must come unencoded.
            if generation and lower == "accept-encoding":
                continue
            headers.append((name, value))
        if self._upstream_key is not None:
            headers.append(("authorization", f"Bearer {self._upstream_key.get_secret_value()}"))
        return headers

    def _url(self, request: Request) -> str:
        query = request.url.query
        return request.url.path + (f"?{query}" if query else "")

    async def _open(
        self, request: Request, content: bytes, headers: list[tuple[str, str]]
    ) -> httpx.Response | Response:
        """Send upstream; an unreachable upstream is the client's 502 (never an exception)."""
        upstream = self.http.build_request(
            request.method, self._url(request), headers=headers, content=content
        )
        try:
            return await self.http.send(upstream, stream=True)
        except httpx.TimeoutException:
            return _error(504, "the upstream llama-server did not answer in time", "timeout_error")
        except httpx.TransportError as error:
            return _error(
                502,
                f"spectui proxy: cannot reach the upstream llama-server ({type(error).__name__})",
                "unavailable_error",
            )

    async def _pass_through(
        self, request: Request, raw: bytes, headers: list[tuple[str, str]]
    ) -> Response:
        opened = await self._open(request, raw, headers)
        if isinstance(opened, Response):
            return opened
        response = StreamingResponse(_raw(opened), status_code=opened.status_code)
        response.raw_headers = _without_hop(opened.headers.raw, keep_length=True)
        return response

    async def _generation(
        self,
        request: Request,
        body: PreparedBody,
        headers: list[tuple[str, str]],
        live: LiveRequest,
    ) -> Response:
        hub = self.hub
        try:
            opened = await open_exchange(
                self.upstream, request.method, self._url(request), headers, body.upstream,
                connect_timeout=CONNECT_TIMEOUT_S,
            )  # fmt: skip
        except ExchangeError as error:
            failed = _unreachable(error)
            hub.finish(live, status=RequestStatus.ERROR, http_status=failed.status_code,
                       error=_message_of(bytes(failed.body)))  # fmt: skip
            return failed
        is_sse = _header(opened.headers, b"content-type").startswith(b"text/event-stream")
        if live.attribution is None or not is_sse or opened.status != 200:
            return await self._whole(opened, live)
        return _AttributedStream(opened, live, self)

    async def _whole(self, opened: UpstreamResponse, live: LiveRequest) -> Response:
        """Errors and whole-body answers: read it all, pass it on unchanged, summarise it."""
        hub = self.hub
        try:
            content = await opened.read_all()
        except ExchangeError as error:
            hub.finish(live, status=RequestStatus.ERROR, http_status=502,
                       error=f"upstream broke ({error})")  # fmt: skip
            return _error(502, "spectui proxy: the upstream llama-server broke the response",
                          "unavailable_error")  # fmt: skip
        finally:
            opened.close()
        totals = response_totals(live.info.kind, content)
        ok = opened.status < 400
        hub.finish(
            live,
            status=RequestStatus.DONE if ok else RequestStatus.ERROR,
            http_status=opened.status,
            error=None if ok else (totals.error or f"HTTP {opened.status}"),
            totals=totals,
        )
        whole = Response(content, status_code=opened.status)
        whole.raw_headers = [
            *_without_hop(opened.headers, keep_length=False),
            (b"content-length", str(len(content)).encode()),
        ]
        return whole


async def _raw(response: httpx.Response) -> AsyncIterator[bytes]:
    try:
        async for chunk in response.aiter_raw():
            yield chunk
    finally:
        with anyio.CancelScope(shield=True):
            await response.aclose()


def _without_hop(
    headers: list[tuple[bytes, bytes]], *, keep_length: bool
) -> list[tuple[bytes, bytes]]:
    """Upstream's headers for the client, repeated ones kept apart, minus the per-connection ones
    (and the length of a body the proxy may change)."""
    kept = []
    for name, value in headers:
        lower = name.lower()
        if lower in _HOP_BYTES and not (keep_length and lower == b"content-length"):
            continue
        kept.append((lower, value))
    return kept


def _header(headers: list[tuple[bytes, bytes]], name: bytes) -> bytes:
    return next((value for key, value in headers if key == name), b"")


def _unreachable(error: ExchangeError) -> Response:
    if error.timeout:
        return _error(504, "the upstream llama-server did not answer in time", "timeout_error")
    return _error(502, f"spectui proxy: cannot reach the upstream llama-server ({error})",
                  "unavailable_error")  # fmt: skip


def _error(status: int, message: str, kind: str) -> Response:
    body = {"error": {"code": status, "message": message, "type": kind}}
    return Response(json.dumps(body), status_code=status, media_type="application/json")


def _sse_error(message: str) -> bytes:
    body = {"error": {"code": 502, "message": message, "type": "unavailable_error"}}
    return b"data: " + json.dumps(body).encode() + b"\n\n"


def _message_of(body: bytes) -> str:
    try:
        return str(json.loads(body)["error"]["message"])
    except (ValueError, KeyError, TypeError):
        return body.decode(errors="replace")[:200]


__all__ = ["METRICS_PATH", "EndpointKind", "TrafficProxy"]
