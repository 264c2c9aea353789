"""The proxy's hot path: a generation request's body on the way up, its SSE lines on the way down.

On the way up a streamed generation request gets ``timings_per_token: true`` (unless the client
asked for it itself). On the way down each ``data:`` line is attributed with the engine's own
`Attributor` and `MetricsTracker`, and the per-token ``timings`` the client did not ask for are
cut out of the line's bytes, so every other byte reaches the client as upstream sent it. The final
chunk keeps its ``timings``: llama-server sends them there without the flag too.

Cutting is textual because re-serialising every chunk would cost more than the attribution and
could change the bytes (number formats, escapes). It is safe: inside a JSON string every ``"`` is
escaped, so ``"timings":{`` can only be the key itself; ``timings`` is a flat object of numbers
(checked: a nested one falls back to re-serialising that chunk). The same holds for the markers
that tell a middle chunk from the final one (``"stop":false``, ``"finish_reason":null``), so a
middle chunk is cut without being parsed; the first and final chunks, errors and anything shaped
otherwise are parsed to decide.

Counting waits (`StreamAttribution.settle`): the client's bytes leave at once, the lines are
parsed and attributed `SETTLE_LINES` at a time or when someone reads the numbers. At one chunk per
token the proxy wakes once per chunk, and what runs once per wake-up runs with cold caches: parsing
and attributing each chunk as it passed was 0.5-0.7 % of a core at 50 tok/s on the 2-core VM, as
much as the rest of the relay; in batches it is a tenth of that.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from spectui.core.events import StepEvent, TokenEvent
from spectui.core.stream.attribution import Attributor, ChunkCounters
from spectui.core.stream.dialects import (
    ChunkFields,
    EndpointKind,
    error_line,
    is_final,
    payload_object,
    read_anthropic,
    read_chunk,
)
from spectui.core.stream.metrics import MetricsTracker

GENERATION_PATHS: dict[str, EndpointKind] = {
    "/completion": EndpointKind.NATIVE,
    "/completions": EndpointKind.NATIVE,
    "/v1/completions": EndpointKind.OAI_COMPLETION,
    "/chat/completions": EndpointKind.OAI_CHAT,
    "/v1/chat/completions": EndpointKind.OAI_CHAT,
    "/v1/messages": EndpointKind.ANTHROPIC,
}
"""Paths whose requests the proxy attributes (or at least summarises); the rest pass through."""

SAMPLING_KEYS = (
    "temperature",
    "seed",
    "top_k",
    "top_p",
    "min_p",
    "repeat_penalty",
    "presence_penalty",
    "frequency_penalty",
    "stop",
    "cache_prompt",
)
"""Body fields a recorded workload keeps besides the prompt and its length."""

_KEY = b'"timings":{'
_ESCAPED_SURROGATE = re.compile(rb"\\u[dD][89a-fA-F]")

SETTLE_LINES = 32
"""``data:`` lines a stream's attribution queues before counting them (readers settle first)."""


@dataclass(slots=True)
class PreparedBody:
    """A generation request's body, read once: what to send upstream and what it asked for."""

    upstream: bytes
    """The body to send upstream (the client's own unless the flag was added)."""
    streamed: bool
    """The client asked for a stream."""
    strip: bool
    """The proxy added ``timings_per_token``, so it removes the per-token timings again."""
    model: str = ""
    """The ``model`` field, if any."""
    prompt: str | None = None
    """A raw prompt (a string ``prompt``)."""
    messages: list[dict[str, object]] | None = None
    """Chat / Anthropic messages."""
    sampling: dict[str, object] = field(default_factory=dict)
    """The body's sampling fields."""
    n_predict: int | None = None
    """n_predict / max_tokens."""


def prepare_body(kind: EndpointKind, raw: bytes) -> PreparedBody:
    """Read a generation body; a body that is not a JSON object goes up unchanged (upstream
    answers it with its own error)."""
    try:
        body = json.loads(raw) if raw else None
    except (json.JSONDecodeError, UnicodeDecodeError):
        body = None
    if not isinstance(body, dict):
        return PreparedBody(upstream=raw, streamed=False, strip=False)
    streamed = body.get("stream") is True
    strip = streamed and kind is not EndpointKind.ANTHROPIC and not body.get("timings_per_token")
    odd = _ESCAPED_SURROGATE.search(raw) is not None and not _encodable(body)
    upstream = raw
    if strip:
        # A lone surrogate ("\ud800") cannot be UTF-8: it goes up escaped, as the client sent
        # it, and llama-server answers it as it would directly.
        flagged = {**body, "timings_per_token": True}
        upstream = json.dumps(flagged, ensure_ascii=odd).encode()
    if odd:  # (the records keep text that can be written anywhere)
        body = _scrubbed(body)
    prompt = body.get("prompt")
    messages = body.get("messages")
    n_predict = body.get("n_predict", body.get("max_tokens", body.get("max_completion_tokens")))
    return PreparedBody(
        upstream=upstream,
        streamed=streamed,
        strip=strip,
        model=str(body.get("model") or ""),
        prompt=prompt if isinstance(prompt, str) else None,
        messages=messages if isinstance(messages, list) else None,
        sampling={k: body[k] for k in SAMPLING_KEYS if k in body},
        n_predict=n_predict if isinstance(n_predict, int) and n_predict > 0 else None,
    )


def _encodable(body: object) -> bool:
    try:
        json.dumps(body, ensure_ascii=False).encode()
    except UnicodeEncodeError:
        return False
    return True


def _scrubbed(value: Any) -> Any:
    """``value`` with every lone surrogate replaced by U+FFFD."""
    if isinstance(value, str):
        return value.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    if isinstance(value, list):
        return [_scrubbed(item) for item in value]
    if isinstance(value, dict):
        return {_scrubbed(k): _scrubbed(v) for k, v in value.items()}
    return value


def strip_timings(line: bytes) -> bytes:
    """``line`` without its ``"timings":{...}`` member (and one adjacent comma)."""
    start = line.find(_KEY)
    if start < 0:
        return line
    end = line.find(b"}", start)
    if end < 0 or line.find(b"{", start + len(_KEY), end) >= 0:
        return _strip_by_parsing(line)
    if line[start - 1 : start] == b",":
        start -= 1
    elif line[end + 1 : end + 2] == b",":
        end += 1
    return line[:start] + line[end + 1 :]


def _strip_by_parsing(line: bytes) -> bytes:
    prefix, _, rest = line.partition(b":")
    body = rest.strip()
    ending = rest[len(rest.rstrip()) :]
    try:
        obj = json.loads(body)
    except json.JSONDecodeError:
        return line
    obj.pop("timings", None)
    dumped = json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode()
    return prefix + b": " + dumped + ending


class StreamAttribution:
    """One streamed response, line by line: attributed, and cut where the client asked nothing.

    ``keep_events`` keeps every token and step event (for the TUI's token view and recording);
    otherwise only the numbers are kept. ``limit``: the request's n_predict, when it says. The
    numbers (``events``, ``tracker``, ``error``, ``text`` and the rest) are those of the lines
    counted so far: call `settle` before reading them
    (`LiveRequest` does).
    """

    __slots__ = (
        "anthropic_tokens",
        "attributor",
        "error",
        "events",
        "keep_events",
        "kind",
        "last_timings",
        "model",
        "queued",
        "saw_timings",
        "stop_reason",
        "strip",
        "text_parts",
        "tracker",
    )

    def __init__(
        self, kind: EndpointKind, *, strip: bool, keep_events: bool, limit: int | None = None
    ) -> None:
        self.kind = kind
        self.strip = strip
        self.keep_events = keep_events
        # The request's n_predict, when it says: the server drafts nothing for the last token,
        # which settles some chunks that carry several steps (`Attributor.limit`).
        self.attributor = Attributor(limit=limit)
        self.tracker = MetricsTracker()
        self.events: list[TokenEvent | StepEvent] = []
        self.text_parts: list[str] = []
        self.last_timings: dict[str, Any] | None = None
        self.saw_timings = False
        self.stop_reason = ""
        self.error: str | None = None
        self.model = ""
        self.anthropic_tokens: int | None = None
        self.queued: list[tuple[bytes, float]] = []
        """``data:`` lines not counted yet, with their arrival times."""

    def line(self, line: bytes, t: float) -> bytes:
        """One complete SSE line (terminator included) that arrived at ``t``; returns what the
        client gets. It is counted by the next `settle`."""
        if line.startswith(b"data:"):
            queued = self.queued
            queued.append((line, t))
            if len(queued) >= SETTLE_LINES:
                self.settle()
            if self.strip:
                return self._outgoing(line)
        return line

    def settle(self) -> None:
        """Count the queued lines."""
        queued, self.queued = self.queued, []
        for line, t in queued:
            self._count(line, t)

    def _outgoing(self, line: bytes) -> bytes:
        """The client's bytes of a ``data:`` line whose per-token timings it did not ask for."""
        if _KEY in line and b'"error"' not in line and line.rstrip().endswith(b"}"):
            if self.kind is EndpointKind.NATIVE:
                middle = b'"stop":false' in line and b'"stop":true' not in line
            else:
                reasons = line.count(b'"finish_reason":')
                middle = (
                    b'"usage"' not in line
                    and reasons > 0
                    and line.count(b'"finish_reason":null') == reasons
                )
            if middle:
                return strip_timings(line)
        return self._outgoing_parsed(line)

    def _outgoing_parsed(self, line: bytes) -> bytes:
        obj = payload_object(line[5:])
        if obj is None or "error" in obj:
            return line  # not ours to judge: the client gets it as it came
        final = is_final(self.kind, obj)
        if isinstance(obj.get("timings"), dict) and not final:
            return strip_timings(line)
        if final and self.kind is EndpointKind.NATIVE:
            # The final chunk echoes the request's settings: say what the client asked.
            return line.replace(b'"timings_per_token":true', b'"timings_per_token":false', 1)
        return line

    def _count(self, line: bytes, t: float) -> None:
        obj = payload_object(line[5:])
        if obj is None:
            return
        if "error" in obj:
            self.error = error_line(obj["error"])
            return
        if self.kind is EndpointKind.ANTHROPIC:
            event = read_anthropic(obj)
            if event.text:
                self.text_parts.append(event.text)
            self.model = self.model or event.model
            if event.output_tokens is not None:
                self.anthropic_tokens = event.output_tokens
            self.stop_reason = event.stop_reason or self.stop_reason
            return
        fields = read_chunk(self.kind, obj)
        self.model = self.model or fields.model
        if fields.stop_reason:
            self.stop_reason = fields.stop_reason
        if fields.timings is not None:
            self._attribute(fields, fields.timings, t)
        elif fields.text:
            self.text_parts.append(fields.text)

    def _attribute(self, fields: ChunkFields, timings: dict[str, Any], t: float) -> None:
        self.saw_timings = True
        self.last_timings = timings
        text = fields.text
        counters = ChunkCounters(text, fields.predicted, fields.drafted, fields.accepted)
        tracker = self.tracker
        if isinstance(prompt_n := timings.get("prompt_n"), int) and prompt_n:
            tracker.prompt_tokens = prompt_n
            rate = timings.get("prompt_per_second")
            tracker.prompt_tokens_per_second = rate if isinstance(rate, int | float) else None
        attributed = self.attributor.feed(counters, t)
        tracker.on_attributed(attributed)
        if self.keep_events:
            self.events.extend(attributed)
        if text:
            self.text_parts.append(text)

    @property
    def text(self) -> str:
        """The text so far."""
        return "".join(self.text_parts)
