"""The client's side of one proxied request, in ASGI terms: its body read within a bound, and
the work done for it cancelled the moment it disconnects, whatever phase that work is in.

A client can go at any time: before the upstream answered its head, while llama-server processes
its prompt or queues it behind `--parallel`, during a non-streamed answer, mid-stream. The server
(uvicorn) reports that as an ``http.disconnect`` message to a pending ``receive()``; one task keeps
such a call pending for as long as the work runs, so the disconnect is seen when it happens, not
when the work next writes to the client (a continuous fast stream is never idle enough for that).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.responses import Response
from starlette.types import Message, Receive, Scope, Send


class ClientSide:
    """The client's side of one request: its ``send``, and what has been sent so far."""

    __slots__ = ("_send", "complete", "started")

    def __init__(self, send: Send) -> None:
        self._send = send
        self.started = False
        """The response's head has gone out."""
        self.complete = False
        """The whole response has gone out."""

    async def send(self, message: Message) -> None:
        """Send one ASGI message, noting how far the response is."""
        if message["type"] == "http.response.start":
            self.started = True
        elif not message.get("more_body", False):
            self.complete = True
        await self._send(message)

    async def respond(self, response: Response) -> None:
        """Send a whole (not streamed) response."""
        await self.send(
            {
                "type": "http.response.start",
                "status": response.status_code,
                "headers": response.raw_headers,
            }
        )
        await self.send({"type": "http.response.body", "body": bytes(response.body)})

    def answered(self) -> bool:
        """Whether the whole response has gone out (for `while_connected`)."""
        return self.complete


def json_error(status: int, message: str, kind: str) -> Response:
    """An OpenAI-shaped error answer, one JSON line: what llama-server's own errors look like."""
    body = {"error": {"code": status, "message": message, "type": kind}}
    return Response(json.dumps(body), status_code=status, media_type="application/json")


def sse_error(message: str, status: int = 502) -> bytes:
    """An SSE ``error`` event ending a stream whose 200 has gone out already (the OpenAI SDK
    raises on it; so does `stream.run`)."""
    body = {"error": {"code": status, "message": message, "type": "unavailable_error"}}
    return b"event: error\ndata: " + json.dumps(body).encode() + b"\n\n"


class ClientGone(Exception):
    """The client disconnected before its request's body had arrived."""


class BodyTooLarge(Exception):
    """The request's body is longer than allowed."""


def declared_length(scope: Scope) -> int | None:
    """The request's ``Content-Length``, when it has one that is a number."""
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


async def read_body(scope: Scope, receive: Receive, limit: int) -> bytes:
    """The whole body, or `BodyTooLarge` past ``limit`` bytes (at once when the declared length
    says so: nothing is read, and a client waiting on ``Expect: 100-continue`` is never told to
    send it), or `ClientGone`.

    The first ``receive()`` is what makes the server answer ``100 Continue`` to a client that
    asked: the proxy reads the body itself and sends it upstream whole, so upstream never sees
    the ``Expect``.
    """
    declared = declared_length(scope)
    if declared is not None and declared > limit:
        raise BodyTooLarge
    parts: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ClientGone
        piece = message.get("body", b"")
        if piece:
            size += len(piece)
            if size > limit:
                raise BodyTooLarge
            parts.append(piece)
        if not message.get("more_body", False):
            return parts[0] if len(parts) == 1 else b"".join(parts)


async def while_connected(
    receive: Receive, work: Awaitable[Any], answered: Callable[[], bool]
) -> bool:
    """Await ``work`` in this task, cancelling it if the client disconnects first; returns
    whether it did (the work has then run its own clean-up: it sees a `CancelledError`).

    ``answered``: whether the whole response has been sent (a server reports a disconnect to
    a pending ``receive()`` once the response is complete too: that one is not the client
    leaving). Cancellation from outside (the proxy stopping) passes through unchanged.
    """
    task = asyncio.current_task()
    assert task is not None
    state = {"finished": False, "gone": False}

    async def watch() -> None:
        while (await receive())["type"] != "http.disconnect":
            pass  # (a body after the body: nothing to do with it)
        if not state["finished"] and not answered():
            state["gone"] = True
            task.cancel()

    watcher = asyncio.create_task(watch())
    try:
        await work
    except asyncio.CancelledError:
        if state["gone"] and task.uncancel() == 0:
            return True
        raise
    finally:
        state["finished"] = True
        watcher.cancel()
    if state["gone"]:  # (the work swallowed the cancellation: take it back, it was ours)
        task.uncancel()
    return bool(state["gone"])


__all__ = [
    "BodyTooLarge",
    "ClientGone",
    "ClientSide",
    "declared_length",
    "json_error",
    "read_body",
    "sse_error",
    "while_connected",
]
