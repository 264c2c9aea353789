"""Property: cutting a streamed line on its bytes gives exactly what parsing it, dropping what
the client did not ask for, and re-serialising it would give, for every dialect llama-server
streams, whatever text the tokens carry (the byte markers themselves, escapes, any Unicode)."""

from __future__ import annotations

import asyncio
import itertools
import json
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spectui.core.proxy.chunks import StreamAttribution
from spectui.core.stream.dialects import EndpointKind, is_final

MARKERS = [
    '"timings":{', '"timings":{"a":1}', '"stop":false', '"stop":true', '"finish_reason":null',
    '"finish_reason":"stop"', '"usage"', '"error"', '"timings_per_token":true', "{", "}", ",",
    '"', "\\", "\\u00e9", "\n", "\r", "\t", "\u2028", "\u2029", "é", "日本", "😀", "data: ",
]  # fmt: skip
"""Strings a token can carry that look like what the byte-level cut searches for."""

texts = st.lists(st.one_of(st.sampled_from(MARKERS), st.text(max_size=8)), max_size=6).map("".join)
rates = st.floats(min_value=0, max_value=1e9, allow_nan=False, allow_infinity=False)


def timings_of(counts: st.SearchStrategy[int]) -> st.SearchStrategy[dict[str, Any]]:
    """A chunk's timings whose counters are drawn from ``counts``."""
    return st.fixed_dictionaries(
        {"cache_n": counts, "prompt_n": counts, "prompt_ms": rates, "prompt_per_second": rates,
         "predicted_n": counts, "predicted_ms": rates, "predicted_per_second": rates},
        optional={"draft_n": counts, "draft_n_accepted": counts},
    )  # fmt: skip


any_counts = st.integers(min_value=0, max_value=10**6)
"""Any counters: the byte-level cut must not care how long the numbers are."""
counted = st.integers(min_value=0, max_value=12) | st.integers(min_value=0, max_value=600)
"""Counters for the properties that count them. Counting costs ~tokens x accepted (the splits
`spectui.core.stream.readings` reads) plus one event per claimed token: with counters up to 10^6
one example took up to seconds (153 s for the test in CI). Up to 600, half of them up to 12,
still reaches every path (no draft, every split enumerated up to 8 tokens, the wide reading up
to 256, no reading beyond it, accepted more than the tokens) at a few ms an example."""


@st.composite
def native(draw: st.DrawFn, counts: st.SearchStrategy[int]) -> dict[str, Any]:
    stop = draw(st.booleans())
    chunk: dict[str, Any] = {"index": 0, "content": draw(texts), "tokens": [1], "stop": stop}
    if stop:
        chunk["stop_type"] = draw(st.sampled_from(["limit", "eos", "word"]))
        chunk["generation_settings"] = {"timings_per_token": True, "n_predict": 8}
    chunk["tokens_predicted"] = draw(counts)
    return chunk


@st.composite
def openai_shaped(draw: st.DrawFn, chat: bool) -> dict[str, Any]:
    finish = draw(st.sampled_from([None, None, "length", "stop"]))
    choice: dict[str, Any] = {"finish_reason": finish, "index": 0}
    if chat:
        choice["delta"] = {"content": draw(texts)} if finish is None else {}
    else:
        choice["text"] = draw(texts)
    chunk: dict[str, Any] = {"choices": [choice], "created": 1, "model": draw(texts),
                             "object": "chunk", "id": draw(texts)}  # fmt: skip
    if finish is not None and draw(st.booleans()):
        chunk["usage"] = {"completion_tokens": 3}
    return chunk


KINDS = [EndpointKind.NATIVE, EndpointKind.OAI_COMPLETION, EndpointKind.OAI_CHAT]


@st.composite
def lines(
    draw: st.DrawFn, counts: st.SearchStrategy[int] = any_counts
) -> tuple[EndpointKind, dict[str, Any]]:
    kind = draw(st.sampled_from(KINDS))
    if kind is EndpointKind.NATIVE:
        chunk = draw(native(counts))
    else:
        chunk = draw(openai_shaped(chat=kind is EndpointKind.OAI_CHAT))
    items = list(chunk.items())
    at = draw(st.integers(0, len(items)))  # ("timings" anywhere: first, last, between)
    items.insert(at, ("timings", draw(timings_of(counts))))
    return kind, dict(items)


def _dumped(obj: dict[str, Any]) -> bytes:
    """As llama-server writes a chunk (nlohmann::json: compact, UTF-8 as is)."""
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode()


def _reference(kind: EndpointKind, obj: dict[str, Any]) -> bytes:
    """Parse-and-reserialise: the per-token timings the proxy added go; the final chunk keeps
    its timings and says timings_per_token was off, as the client asked."""
    if is_final(kind, obj):
        if kind is EndpointKind.NATIVE and "generation_settings" in obj:
            settings_ = {**obj["generation_settings"], "timings_per_token": False}
            obj = {**obj, "generation_settings": settings_}
    else:
        obj = {k: v for k, v in obj.items() if k != "timings"}
    return b"data: " + _dumped(obj) + b"\n"


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(lines())
def test_cutting_on_the_bytes_equals_parse_and_reserialise(
    case: tuple[EndpointKind, dict[str, Any]],
) -> None:
    kind, obj = case
    line = b"data: " + _dumped(obj) + b"\n"
    attribution = StreamAttribution(kind, strip=True, keep_events=False)
    assert attribution.line(line, 0.0) == _reference(kind, obj)


@settings(max_examples=60, deadline=None)
@given(lines(counted))
def test_counting_reads_the_text_the_chunk_carries(
    case: tuple[EndpointKind, dict[str, Any]],
) -> None:
    kind, obj = case
    attribution = StreamAttribution(kind, strip=True, keep_events=False)
    attribution.line(b"data: " + _dumped(obj) + b"\n", 0.0)
    attribution.settle()
    if kind is EndpointKind.NATIVE:
        expected = obj["content"]
    elif kind is EndpointKind.OAI_CHAT:
        expected = obj["choices"][0]["delta"].get("content", "")
    else:
        expected = obj["choices"][0]["text"]
    assert attribution.text == expected


def test_counters_of_the_wrong_type_are_not_counted_rather_than_fatal() -> None:
    # (found by the property above when its timings were any numbers: a float draft_n broke
    # the attribution, and with it the stream)
    attribution = StreamAttribution(EndpointKind.NATIVE, strip=True, keep_events=False)
    odd = {"content": "a", "stop": False, "timings": {"predicted_n": 1, "draft_n": 1.5,
                                                      "prompt_n": "x"}}  # fmt: skip
    attribution.line(b"data: " + _dumped(odd) + b"\n", 0.0)
    attribution.settle()
    assert attribution.text == "a" and attribution.tracker.tokens == 1


class _Pieces:
    """An upstream answer that arrives in the given pieces."""

    def __init__(self, pieces: list[bytes]) -> None:
        self.headers = [(b"content-type", b"text/event-stream")]
        self._pieces = pieces

    async def next_body(self) -> bytes:
        return self._pieces.pop(0) if self._pieces else b""

    def close(self) -> None:
        pass


async def _relayed(pieces: list[bytes], limit: int = 1 << 20) -> tuple[bytes, str | None]:
    from spectui.core.net.asgi import ClientSide
    from spectui.core.proxy.chunks import prepare_body
    from spectui.core.proxy.hub import ProxyHub
    from spectui.core.proxy.relay import relay

    sent: list[bytes] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message.get("body", b""))

    hub = ProxyHub()
    body = prepare_body(EndpointKind.NATIVE, b'{"prompt":"x","stream":true}')
    live = hub.start("/completion", EndpointKind.NATIVE, "c", body)
    _status, error = await relay(_Pieces(pieces), live, ClientSide(send), lambda: 0.0, limit)  # type: ignore[arg-type]  # _Pieces: the stream surface relay reads
    return b"".join(sent), error


CAPTURE = (
    Path(__file__).resolve().parent.parent / "fixtures" / "completion-ngram-simple-2.sse"
).read_bytes()


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(1, len(CAPTURE) - 1), max_size=40, unique=True))
def test_a_stream_relayed_in_any_pieces_reaches_the_client_as_in_one(cuts: list[int]) -> None:
    bounds = [0, *sorted(cuts), len(CAPTURE)]
    pieces = [CAPTURE[a:b] for a, b in itertools.pairwise(bounds)]
    assert asyncio.run(_relayed(pieces)) == asyncio.run(_relayed([CAPTURE]))
