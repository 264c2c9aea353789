"""Server-sent events from a byte stream, split a whole piece at a time.

httpx-sse reads a stream line by line: each piece the transport hands on is decoded, split into
lines and every line parsed by a Python call of its own. A stream read paced (several events per
socket read, `llama.transport`) arrives in pieces that each hold a dozen events, and llama-server's
events are one `data:` line each: here a piece is decoded once and split at the blank lines that
end events (`str.split`, in C), and an event of a single `data:` line is taken without a parse
per line. Anything else (several lines, `event:`, `id:`, `retry:`, comments, CR or CRLF line
ends) goes through the line rules of the HTML standard's event-stream interpretation.

The events are httpx-sse's own `ServerSentEvent`s, equal field for field to what its decoder
gives for the same bytes however they are split (tests/unit/test_sse_split.py holds it so),
down to its choices where the standard leaves room: an event is dispatched at a blank line when
any field was set (an `id:` seen once keeps dispatching), a stream's unfinished last event is
dropped, a byte-order mark is kept, and undecodable bytes become U+FFFD. What else a reader took
from httpx-sse is here too: the request's headers and the content-type check.
"""

from __future__ import annotations

import codecs
import contextlib
from collections.abc import AsyncGenerator

import httpx
from httpx_sse import ServerSentEvent, SSEError

SSE_HEADERS = {"Accept": "text/event-stream", "Cache-Control": "no-store"}
"""What an SSE client asks with (httpx-sse's `aconnect_sse` sends the same)."""


class SSESplitter:
    """Feed it the body's bytes in pieces of any size (`feed`), then `end`; each call returns
    the events completed by what it was given."""

    def __init__(self, encoding: str = "utf-8") -> None:
        self._decode = codecs.getincrementaldecoder(encoding)(errors="replace").decode
        self._pending: list[str] = []
        """Text after the last blank line: the start of an event not finished yet."""
        self._cr = False
        """The text so far ended in CR, which may be the first half of a CRLF."""
        self._event = ""
        self._data: list[str] = []
        self._last_id = ""
        self._retry: int | None = None

    def feed(self, data: bytes) -> list[ServerSentEvent]:
        """The events that ``data`` completes."""
        return self._text(self._decode(data), final=False)

    def end(self) -> list[ServerSentEvent]:
        """The events the end of the stream completes (a CR left over can be a blank line)."""
        return self._text(self._decode(b"", True), final=True)

    def _text(self, text: str, *, final: bool) -> list[ServerSentEvent]:
        if self._cr:
            text = "\r" + text
            self._cr = False
        if text.endswith("\r") and not final:  # (its LF may come with the next piece)
            self._cr = True
            text = text[:-1]
        if "\r" in text:
            text = text.replace("\r\n", "\n").replace("\r", "\n")
        events: list[ServerSentEvent] = []
        pending = self._pending
        if not pending:
            text = self._blank_lines(text, events)
        # Only a blank line ends an event: nothing more to do until one came (looked for in the
        # new text and at its seam with the old, so an event arriving in many pieces is joined
        # once).
        if "\n\n" not in text and not (text[:1] == "\n" and pending and pending[-1][-1] == "\n"):
            if text:
                pending.append(text)
            return events
        if pending:
            pending.append(text)
            text = "".join(pending)
            pending.clear()
        blocks = text.split("\n\n")
        rest = blocks.pop()
        for block in blocks:
            # The common case: one `data:` line, with nothing pending from lines before it (a
            # blank line leaves no field set, or it dispatched them).
            if block[:5] == "data:" and "\n" not in block:
                value = block[6:] if block[5:6] == " " else block[5:]
                events.append(ServerSentEvent(data=value, id=self._last_id))
                continue
            for line in block.split("\n"):
                self._line(line, events)
            self._line("", events)
        if rest := self._blank_lines(rest, events):
            pending.append(rest)
        return events

    def _blank_lines(self, text: str, events: list[ServerSentEvent]) -> str:
        """``text`` (which starts a line) without its leading blank lines, each taken as a line
        of its own: they dispatch when an `id:` was ever set."""
        if text[:1] != "\n":
            return text
        rest = text.lstrip("\n")
        for _ in range(len(text) - len(rest)):
            self._line("", events)
        return rest

    def _line(self, line: str, events: list[ServerSentEvent]) -> None:
        """One line, as the standard's interpretation reads it (and httpx-sse's decoder)."""
        if not line:
            if self._event or self._data or self._last_id or self._retry is not None:
                events.append(
                    ServerSentEvent(
                        event=self._event,
                        data="\n".join(self._data),
                        id=self._last_id,
                        retry=self._retry,
                    )
                )
                self._event, self._data, self._retry = "", [], None
            return
        if line[0] == ":":  # a comment
            return
        name, _, value = line.partition(":")
        if value[:1] == " ":
            value = value[1:]
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event = value
        elif name == "id":
            if "\0" not in value:
                self._last_id = value
        elif name == "retry":
            with contextlib.suppress(ValueError):
                self._retry = int(value)


async def sse_batches(response: httpx.Response) -> AsyncGenerator[list[ServerSentEvent], None]:
    """The events of each piece the transport hands on (over spectui's, of each socket read:
    `net.per_read`), split at once; the stream's end can still complete one."""
    splitter = SSESplitter(response.encoding or "utf-8")  # (as httpx's `aiter_text` decodes)
    async for part in response.aiter_bytes():
        yield splitter.feed(part)
    yield splitter.end()


def check_event_stream(response: httpx.Response) -> None:
    """Raise `SSEError` (an httpx transport error) for an answer that is not an event stream, as
    httpx-sse does before reading one."""
    content_type = response.headers.get("content-type", "").partition(";")[0]
    if "text/event-stream" not in content_type:
        raise SSEError(
            "Expected response header Content-Type to contain 'text/event-stream', "
            f"got {content_type!r}"
        )


__all__ = ["SSE_HEADERS", "SSESplitter", "check_event_stream", "sse_batches"]
