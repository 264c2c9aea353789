"""`spectui proxy`'s ASGI app: every request passes through to one llama-server; generation
requests are attributed on the way (see `chunks`).

uvicorn serves it. Generation requests go upstream through `exchange` (their streams are relayed
chunk by chunk, and that path is kept lean); everything else through httpx. Both reach the
upstream directly (no environment HTTP proxy). Whatever a client does, the proxy answers as the
upstream would, frees the upstream at once when the client is gone, holds bounded memory, and
never repeats a secret:

- the client's own key is checked in constant time; ``Authorization`` / ``x-api-key`` go
  upstream as they came (or are replaced by the upstream key the proxy was given); hop-by-hop
  headers stay on their hop, both ways (`net.headers`);
- a client that disconnects, in any phase, cancels its upstream request at once (the connection
  is closed, so llama-server frees the slot) and the request is recorded ``cancelled``
  (`net.asgi.while_connected`); streams are relayed by `relay`;
- `ProxyLimits` bound the request body (413), an SSE line (the stream ends with an error
  event), whole answers, and the requests in flight (503);
- no error text from a library reaches a client, a record or a log: errors are mapped to fixed
  words (h11 quotes header values, and a header may be a key).
"""

from __future__ import annotations

import hmac
import json
import logging
import re
import time
from collections.abc import Callable

import httpx
from pydantic import SecretStr
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from spectui.core.llama.transport import lean_transport
from spectui.core.net.asgi import (
    BodyTooLarge,
    ClientGone,
    ClientSide,
    json_error,
    read_body,
    while_connected,
)
from spectui.core.net.headers import FRAMED_HERE, end_to_end, end_to_end_raw
from spectui.core.proxy.chunks import GENERATION_PATHS, PreparedBody, prepare_body
from spectui.core.proxy.exchange import ExchangeError, UpstreamResponse, open_exchange
from spectui.core.proxy.hub import LiveRequest, ProxyHub
from spectui.core.proxy.models import METRICS_PATH, EndpointKind, ProxyLimits, RequestStatus
from spectui.core.proxy.prom import CONTENT_TYPE, ProxyMetrics
from spectui.core.proxy.relay import relay
from spectui.core.stream.dialects import ResponseTotals, response_totals

METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})

_AUTH = frozenset({"authorization", "x-api-key"})

_FIELD_VALUE = re.compile(r"[\x21-\x7e\x80-\xff]([\t\x20-\x7e\x80-\xff]*[\x21-\x7e\x80-\xff])?")
"""A header value HTTP allows (RFC 9110 §5.5; h11 checks the same)."""

BAD_UPSTREAM_KEY = (
    "spectui proxy: the upstream API key is not a valid HTTP header value (a trailing space or "
    "line end?); its value is not shown"
)

CONNECT_TIMEOUT_S = 10.0
"""How long the upstream may take to accept a connection. There is no read timeout: a long
prompt may keep the server silent for minutes; the client decides."""

UPSTREAM_TIMEOUT = httpx.Timeout(connect=CONNECT_TIMEOUT_S, read=None, write=30.0, pool=None)

log = logging.getLogger("spectui.proxy")


class Proxy:
    """The proxy: ``app`` is the ASGI application; ``hub`` reports the requests."""

    def __init__(
        self,
        upstream: str,
        *,
        hub: ProxyHub | None = None,
        upstream_key: SecretStr | None = None,
        client_key: SecretStr | None = None,
        clock: Callable[[], float] = time.monotonic,
        limits: ProxyLimits | None = None,
    ) -> None:
        self.upstream = upstream.rstrip("/")
        self.hub = hub or ProxyHub(clock=clock)
        self.metrics = ProxyMetrics()
        self.hub.listeners.append(self.metrics)
        self.limits = limits or ProxyLimits()
        self._upstream_key = upstream_key
        self.key_problem: str | None = None
        """Why the upstream key cannot be sent (checked once here, so no library ever gets the
        chance to quote it in an error), or None."""
        if upstream_key is not None and not _FIELD_VALUE.fullmatch(
            f"Bearer {upstream_key.get_secret_value()}"
        ):
            self.key_problem = BAD_UPSTREAM_KEY
        self._client_key = client_key.get_secret_value().encode() if client_key else None
        self.clock = clock
        self.active = 0
        """Requests being handled now."""
        limits_http = httpx.Limits(max_connections=None, max_keepalive_connections=32)
        self.http = httpx.AsyncClient(
            base_url=self.upstream,
            timeout=UPSTREAM_TIMEOUT,
            limits=limits_http,
            transport=lean_transport(limits_http),
            trust_env=False,
        )

    async def aclose(self) -> None:
        """Close the upstream connections."""
        await self.http.aclose()

    # -- the ASGI application ------------------------------------------------------------------

    async def app(self, scope: Scope, receive: Receive, send: Send) -> None:
        """The ASGI entry point."""
        if scope["type"] != "http":
            return  # (lifespan is off; nothing else is proxied)
        client = ClientSide(send)
        request = Request(scope)
        try:
            if (refused := self._refused(request)) is not None:
                await client.respond(refused)
                return
            if request.url.path == METRICS_PATH and request.method == "GET":
                await client.respond(Response(self.metrics.exposition(), media_type=CONTENT_TYPE))
                return
            self.active += 1
            try:
                await self._forward(request, scope, receive, client)
            finally:
                self.active -= 1
        except OSError:
            pass  # (the client's socket went away under a write: nothing to tell anyone)
        except Exception as error:  # (a bug: one fixed line, never the error's text)
            log.error("spectui proxy: %s while handling a request", type(error).__name__)
            if not client.started:
                await client.respond(
                    json_error(500, "spectui proxy: internal error", "server_error")
                )

    def _refused(self, request: Request) -> Response | None:
        """A 401 without the proxy's key, a 405 for a method it does not pass, a 503 when full."""
        if self._client_key is not None and not self._key_given(request):
            return json_error(
                401, "invalid or missing API key for the spectui proxy", "authentication_error"
            )
        if request.method not in METHODS:
            return json_error(
                405,
                f"spectui proxy: method {request.method} is not passed on",
                "invalid_request_error",
            )
        if self.active >= self.limits.max_concurrency and request.url.path != METRICS_PATH:
            refused = json_error(
                503,
                f"spectui proxy: {self.limits.max_concurrency} requests are in flight already "
                "(--max-concurrency); retry later",
                "unavailable_error",
            )
            refused.headers["retry-after"] = "1"
            return refused
        return None

    def _key_given(self, request: Request) -> bool:
        assert self._client_key is not None
        given = request.headers.get("x-api-key", "")
        bearer = request.headers.get("authorization", "")
        if bearer.lower().startswith("bearer "):
            given = given or bearer[7:].strip()
        return bool(given) and hmac.compare_digest(given.encode(), self._client_key)

    async def _forward(
        self, request: Request, scope: Scope, receive: Receive, client: ClientSide
    ) -> None:
        limit = self.limits.max_body
        try:
            raw = await read_body(scope, receive, limit)
        except ClientGone:
            return
        except BodyTooLarge:
            too_large = json_error(
                413,
                f"spectui proxy: the request body is larger than {limit} bytes (--max-body)",
                "invalid_request_error",
            )
            too_large.headers["connection"] = "close"  # (the rest of the body is not read)
            await client.respond(too_large)
            return
        path = request.url.path
        kind = GENERATION_PATHS.get(path) if request.method == "POST" else None
        if self.key_problem is not None:
            await client.respond(json_error(502, self.key_problem, "unavailable_error"))
            if kind is not None:
                live = self.hub.start(path, kind, _peer(request), prepare_body(kind, raw))
                self.hub.finish(
                    live, status=RequestStatus.ERROR, http_status=502, error=self.key_problem
                )
            return
        headers = self._upstream_headers(request, generation=kind is not None)
        if kind is None:
            await while_connected(
                receive, self._pass_through(request, raw, headers, client), client.answered
            )
            return
        body = prepare_body(kind, raw)
        live = self.hub.start(path, kind, _peer(request), body)
        try:
            await while_connected(
                receive, self._generation(request, body, headers, live, client), client.answered
            )
        finally:
            if live.record is None:  # (cancelled before `_generation` could say how it ended)
                self.hub.finish(live, status=RequestStatus.CANCELLED, http_status=499)

    # -- helpers -------------------------------------------------------------------------------

    def _upstream_headers(self, request: Request, *, generation: bool) -> list[tuple[str, str]]:
        drop = set(FRAMED_HERE)
        if self._upstream_key is not None or self._client_key is not None:
            drop |= _AUTH
        if generation:  # (streams are parsed on the way down, so they must come unencoded)
            drop.add("accept-encoding")
        headers = end_to_end(request.headers.items(), drop=frozenset(drop))
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
        try:
            upstream = self.http.build_request(
                request.method, self._url(request), headers=headers, content=content
            )
            return await self.http.send(upstream, stream=True)
        except httpx.TimeoutException:
            return json_error(
                504, "the upstream llama-server did not answer in time", "timeout_error"
            )
        except (httpx.TransportError, httpx.InvalidURL, ValueError) as error:
            # The type only: h11's text quotes the header it refused.
            return json_error(
                502,
                f"spectui proxy: cannot reach the upstream llama-server ({type(error).__name__})",
                "unavailable_error",
            )

    async def _pass_through(
        self, request: Request, raw: bytes, headers: list[tuple[str, str]], client: ClientSide
    ) -> None:
        opened = await self._open(request, raw, headers)
        if isinstance(opened, Response):
            await client.respond(opened)
            return
        try:
            await client.send(
                {
                    "type": "http.response.start",
                    "status": opened.status_code,
                    "headers": end_to_end_raw(opened.headers.raw),
                }
            )
            try:
                async for piece in opened.aiter_raw():
                    await client.send(
                        {"type": "http.response.body", "body": piece, "more_body": True}
                    )
            except httpx.TransportError:
                return  # (upstream broke mid-body: the client's connection is closed unfinished)
            await client.send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            await opened.aclose()

    async def _generation(
        self,
        request: Request,
        body: PreparedBody,
        headers: list[tuple[str, str]],
        live: LiveRequest,
        client: ClientSide,
    ) -> None:
        """One generation request, from sending it upstream to telling the hub how it ended
        (``cancelled`` unless it got further: the client left, or the proxy stopped)."""
        status, http_status = RequestStatus.CANCELLED, 499
        error: str | None = None
        totals: ResponseTotals | None = None
        opened: UpstreamResponse | None = None
        try:
            try:
                opened = await open_exchange(
                    self.upstream,
                    request.method,
                    self._url(request),
                    headers,
                    body.upstream,
                    connect_timeout=CONNECT_TIMEOUT_S,
                )
            except ExchangeError as problem:
                failed = _unreachable(problem)
                status, http_status = RequestStatus.ERROR, failed.status_code
                error = _message_of(bytes(failed.body))
                await client.respond(failed)
                return
            http_status = opened.status
            is_sse = _header(opened.headers, b"content-type").startswith(b"text/event-stream")
            if live.attribution is None or not is_sse or opened.status != 200:
                status, http_status, error, totals = await self._whole(opened, live, client)
            else:
                status, error = await relay(
                    opened, live, client, self.clock, self.limits.max_sse_line
                )
        except OSError:
            pass  # (the client went away under a write: cancelled)
        finally:
            if opened is not None:
                opened.close()
            if live.record is None:
                self.hub.finish(
                    live, status=status, http_status=http_status, error=error, totals=totals
                )

    async def _whole(
        self, opened: UpstreamResponse, live: LiveRequest, client: ClientSide
    ) -> tuple[RequestStatus, int, str | None, ResponseTotals | None]:
        """Errors and whole-body answers: read it all, pass it on unchanged, summarise it."""
        try:
            content = await opened.read_all(limit=self.limits.max_body)
        except ExchangeError as error:
            await client.respond(
                json_error(
                    502,
                    "spectui proxy: the upstream llama-server broke the response",
                    "unavailable_error",
                )
            )
            return RequestStatus.ERROR, 502, f"upstream broke ({error})", None
        totals = response_totals(live.info.kind, content)
        ok = opened.status < 400
        whole = Response(content, status_code=opened.status)
        whole.raw_headers = [
            *end_to_end_raw(opened.headers, drop=_LENGTH),
            (b"content-length", str(len(content)).encode()),
        ]
        await client.respond(whole)
        if ok:
            return RequestStatus.DONE, opened.status, None, totals
        return RequestStatus.ERROR, opened.status, totals.error or f"HTTP {opened.status}", totals


_LENGTH = frozenset({b"content-length"})


def _peer(request: Request) -> str:
    return f"{request.client.host}:{request.client.port}" if request.client else "?"


def _header(headers: list[tuple[bytes, bytes]], name: bytes) -> bytes:
    return next((value for key, value in headers if key == name), b"")


def _timed_out() -> Response:
    return json_error(504, "the upstream llama-server did not answer in time", "timeout_error")


def _unreachable(error: ExchangeError) -> Response:
    if error.timeout:
        return _timed_out()
    return json_error(
        502, f"spectui proxy: cannot reach the upstream llama-server ({error})", "unavailable_error"
    )


def _message_of(body: bytes) -> str:
    try:
        return str(json.loads(body)["error"]["message"])
    except (ValueError, KeyError, TypeError):
        return body.decode(errors="replace")[:200]


__all__ = ["METRICS_PATH", "EndpointKind", "Proxy"]
