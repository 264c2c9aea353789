"""`SSESplitter` gives the events httpx-sse's decoder gives, however the bytes are split.

The reference is httpx-sse's own path as `aiter_sse` runs it: httpx's text decoding, then
`SSELineDecoder` and `SSEDecoder`, fed the same pieces. The splitter must agree with it after
every piece (an event shows the moment its blank line came), not only at the end.
"""

from __future__ import annotations

import codecs
import itertools

from httpx_sse import ServerSentEvent
from httpx_sse._decoders import SSEDecoder, SSELineDecoder
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers.sse import FIXTURES, sse_payloads
from spectui.core.net.sse import SSESplitter

Seen = list[tuple[str, str, str, int | None]]


def seen(events: list[ServerSentEvent]) -> Seen:
    return [(e.event, e.data, e.id, e.retry) for e in events]


class Reference:
    """httpx-sse's decoding, piece by piece (what `EventSource.aiter_sse` does per text part)."""

    def __init__(self) -> None:
        self._text = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._lines = SSELineDecoder()
        self._sse = SSEDecoder()

    def _take(self, lines: list[str]) -> list[ServerSentEvent]:
        events = []
        for line in lines:
            if (event := self._sse.decode(line.rstrip("\n"))) is not None:
                events.append(event)
        return events

    def feed(self, data: bytes) -> list[ServerSentEvent]:
        text = self._text.decode(data)
        return self._take(self._lines.decode(text)) if text else []

    def end(self) -> list[ServerSentEvent]:
        text = self._text.decode(b"", True)
        events = self._take(self._lines.decode(text)) if text else []
        return events + self._take(self._lines.flush())


def pieces_of(body: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({min(c, len(body)) for c in cuts} | {0, len(body)})
    return [body[a:b] for a, b in itertools.pairwise(points) if b > a]


def check_agrees(pieces: list[bytes]) -> Seen:
    ours, theirs = SSESplitter(), Reference()
    got: Seen = []
    expected: Seen = []
    for piece in pieces:
        got += seen(ours.feed(piece))
        expected += seen(theirs.feed(piece))
        assert got == expected  # after every piece, not only at the end
    got += seen(ours.end())
    expected += seen(theirs.end())
    assert got == expected
    return got


FRAGMENTS = [
    "data", "data:", "data: ", "event:", "event: x", "id:", "id: 7", "retry:", "retry: 12",
    ":", ": comment", " ", "x", "{}", "[DONE]", "1", "\0", "é", "\u2028", "\x85", "\ufeff",
    "\n", "\n", "\n", "\r", "\r\n", "\r\n", "\n\n", "\r\r",
]  # fmt: skip
"""Pieces that make an event stream's every rule fire when strung together at random."""

texts = st.lists(st.sampled_from(FRAGMENTS), max_size=60).map("".join)
cuts = st.lists(st.integers(min_value=0, max_value=400), max_size=12)


@settings(max_examples=400, deadline=None)
@given(text=texts, cuts=cuts)
def test_any_stream_split_anywhere_gives_httpx_sse_events(text: str, cuts: list[int]) -> None:
    body = text.encode()
    whole = check_agrees([body])
    assert check_agrees(pieces_of(body, cuts)) == whole


@settings(max_examples=200, deadline=None)
@given(body=st.binary(max_size=200), cuts=cuts)
def test_any_bytes_give_httpx_sse_events(body: bytes, cuts: list[int]) -> None:
    # (invalid UTF-8 too, and a multi-byte character cut between two pieces)
    check_agrees(pieces_of(body, cuts))


@settings(max_examples=100, deadline=None)
@given(cuts=st.lists(st.integers(min_value=0, max_value=100_000), max_size=40))
def test_a_real_capture_split_anywhere_gives_its_payloads(cuts: list[int]) -> None:
    body = (FIXTURES / "chat-ngram-simple.sse").read_bytes()
    events = check_agrees(pieces_of(body, cuts))
    payloads = [data for _, data, _, _ in events if data != "[DONE]"]
    assert payloads == sse_payloads("chat-ngram-simple.sse")


def test_each_read_gives_every_event_it_completes_at_once() -> None:
    splitter = SSESplitter()
    batch = b"".join(b'data: {"n": %d}\n\n' % n for n in range(12)) + b'data: {"n"'
    assert [e.data for e in splitter.feed(batch)] == [f'{{"n": {n}}}' for n in range(12)]
    assert [e.data for e in splitter.feed(b": 12}\n\n")] == ['{"n": 12}']
    assert splitter.end() == []
