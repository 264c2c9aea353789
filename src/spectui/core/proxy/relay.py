"""A generation stream relayed from llama-server to the client, attributed line by line as it
passes (`chunks.StreamAttribution`), each line's bytes cut where the client asked nothing.

Lines are found by their newline in whatever pieces the socket gives; a line still open at the
end of a piece is kept in pieces and joined once, when it ends (never re-copied per piece), and
one longer than the limit ends the stream: an SSE error event for the client, the upstream
connection closed.
"""

from __future__ import annotations

from collections.abc import Callable

from spectui.core.net.asgi import ClientSide, sse_error
from spectui.core.net.headers import end_to_end_raw
from spectui.core.proxy.exchange import ExchangeError, UpstreamResponse
from spectui.core.proxy.hub import LiveRequest
from spectui.core.proxy.models import RequestStatus

_LENGTH = frozenset({b"content-length"})


class _LineTooLong(Exception):
    pass


async def relay(
    upstream: UpstreamResponse,
    live: LiveRequest,
    client: ClientSide,
    clock: Callable[[], float],
    limit: int,
) -> tuple[RequestStatus, str | None]:
    """An upstream SSE stream relayed to the client, attributed line by line as it passes;
    a line longer than `ProxyLimits.max_sse_line` ends it."""
    attribution = live.attribution
    assert attribution is not None
    t0 = live.t0
    await client.send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": end_to_end_raw(upstream.headers, drop=_LENGTH),
        }
    )
    pending: list[bytes] = []  # (a line not ended yet, in pieces: joined once, when it ends)
    pending_size = 0
    try:
        while data := await upstream.next_body():
            t = clock() - t0
            out: list[bytes] = []
            start = 0
            end = data.find(b"\n")
            if end >= 0 and pending:
                out.append(attribution.line(b"".join([*pending, data[: end + 1]]), t))
                pending, pending_size, start = [], 0, end + 1
                end = data.find(b"\n", start)
            while end >= 0:
                out.append(attribution.line(data[start : end + 1], t))
                start = end + 1
                end = data.find(b"\n", start)
            if start < len(data):
                pending.append(data[start:] if start else data)
                pending_size += len(data) - start
                if pending_size > limit:
                    raise _LineTooLong
            if out:
                await client.send(
                    {"type": "http.response.body", "body": b"".join(out), "more_body": True}
                )
        tail = attribution.line(b"".join(pending), clock() - t0) if pending else b""
        attribution.settle()
        status = RequestStatus.ERROR if attribution.error else RequestStatus.DONE
        error = attribution.error
    except ExchangeError as problem:
        status = RequestStatus.ERROR
        error = f"the upstream llama-server broke the stream ({problem})"
        # The client already has a 200 and part of the stream: an SSE error is all it can
        # still be told (the OpenAI SDK raises on it).
        tail = sse_error(error)
    except _LineTooLong:
        upstream.close()
        status = RequestStatus.ERROR
        error = (
            f"the upstream llama-server sent an SSE line longer than {limit} bytes "
            "(--max-sse-line): the stream was ended"
        )
        tail = sse_error(error)
    await client.send({"type": "http.response.body", "body": tail, "more_body": False})
    return status, error


__all__ = ["relay"]
