"""What the proxy reports about each request: typed, so the TUI, the JSON Lines output, the
Prometheus metrics and the recorder all read the same thing."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, SecretStr

from spectui.core.content import ContentClass, LengthBucket
from spectui.core.events import RunMetrics
from spectui.core.stream.dialects import EndpointKind

NO_DETAIL = "no per-token detail"
"""What a request without per-token timings says instead of guessing."""

METRICS_PATH = "/spectui/metrics"
"""Where the proxy serves its own Prometheus metrics."""

MIB = 1024 * 1024


class ProxyLimits(BaseModel):
    """What one client may make the proxy hold. Each bound has a clear answer: a client over it
    gets an error it can read, the upstream is freed, and the proxy keeps serving the others."""

    model_config = ConfigDict(frozen=True)

    max_body: int = Field(default=64 * MIB, gt=0)
    """Largest request body, in bytes (over it: 413 and one JSON line). 64 MiB holds a prompt of
    the largest context llama-server takes (~1M tokens of text) with room to spare, and bounds
    what one request can make the proxy hold."""
    max_sse_line: int = Field(default=16 * MIB, gt=0)
    """Longest SSE line of a generation stream, in bytes (over it: the stream ends with an SSE
    error event and the upstream is closed). A real chunk is under a kilobyte; a line this long
    is a broken or hostile upstream, and an unbounded line would be buffered without limit."""
    max_concurrency: int = Field(default=256, gt=0)
    """Requests handled at once (beyond: 503 and one JSON line). A llama-server serves a few
    slots at a time; the rest only queue there, each holding its body here."""


class ProxyOptions(BaseModel):
    """How `spectui proxy` was asked to run, once the command line is read."""

    model_config = ConfigDict(frozen=True)

    client_key: SecretStr | None = None
    """The key the proxy's own clients must send (None: no key asked)."""
    record: Path | None = None
    """The folder to record every request to (None: nothing recorded)."""
    limits: ProxyLimits = Field(default_factory=ProxyLimits)
    """Bounds on what one client may make the proxy hold."""
    keep_events: bool = False
    """Keep every token and step event of live requests (the TUI's token view)."""


class RequestStatus(StrEnum):
    """Where a request stands."""

    STREAMING = "streaming"
    """Upstream is still sending."""
    DONE = "done"
    """Finished normally."""
    ERROR = "error"
    """Upstream answered with an error, died, or sent something unreadable."""
    CANCELLED = "cancelled"
    """The client went away before the end; the upstream request was cancelled."""


class RequestInfo(BaseModel):
    """A generation request as it arrives at the proxy (no headers: they may hold keys)."""

    model_config = ConfigDict(frozen=True)

    id: int
    """The proxy's number for the request (1, 2, ...)."""
    started: datetime
    """Wall-clock time it arrived (UTC)."""
    client: str
    """The client's address, host:port."""
    endpoint: str
    """Path it was sent to, e.g. '/v1/chat/completions'."""
    kind: EndpointKind
    """The endpoint's stream shape."""
    model: str
    """Model named by the request or the response ('' when neither says)."""
    streamed: bool
    """Whether the client asked for a stream."""
    per_token: bool
    """Whether the proxy can attribute it token by token (a streamed request with timings)."""
    prompt: str | None = None
    """Prompt text (raw endpoints), or None."""
    messages: list[dict[str, object]] | None = None
    """Chat messages (chat endpoints), or None."""
    sampling: dict[str, object] = Field(default_factory=dict)
    """Sampling fields of the body (temperature, seed, top_k, top_p, ...)."""
    n_predict: int | None = None
    """Tokens asked for (n_predict / max_tokens), None when the body does not say."""


class ProxyRecord(BaseModel):
    """One finished request: what `--format jsonl` prints, the table shows and Prometheus counts.

    Fields the proxy could not know are None — never a guess: a non-streamed request has totals
    from the server's final ``timings`` but no steps or per-position histogram.
    """

    model_config = ConfigDict(frozen=True)

    info: RequestInfo
    """The request."""
    status: RequestStatus
    """How it ended."""
    http_status: int
    """Status upstream answered with (502 when upstream could not be reached)."""
    metrics: RunMetrics | None = None
    """Attributed numbers (per-token requests only)."""
    tokens: int | None = None
    """Tokens generated (per-token or from the final timings/usage)."""
    prompt_tokens: int | None = None
    """Prompt tokens processed (not cached), where the server said."""
    drafted: int | None = None
    """Draft tokens proposed, where the server said."""
    accepted: int | None = None
    """Draft tokens accepted, where the server said."""
    duration_ms: float = 0.0
    """Request arrival -> end, on the proxy's clock."""
    stop_reason: str = ""
    """'limit', 'eos', 'word', 'cancelled', 'error' or ''."""
    server_timings: dict[str, float] = Field(default_factory=dict)
    """The server's final ``timings``, when it sent them."""
    error: str | None = None
    """One line about what went wrong."""
    text: str = ""
    """The generated text (kept for recording; not printed by `--format jsonl`)."""
    content: ContentClass = ContentClass.OTHER
    """What the request holds (`spectui.core.content.classify` of its prompt and answer), set
    when it ends, so it survives the texts being dropped."""
    prompt_length: LengthBucket = LengthBucket.UNKNOWN
    """Its prompt's length bucket, from the prompt tokens the server reported."""

    @property
    def note(self) -> str | None:
        """'no per-token detail' for requests the proxy could not attribute."""
        return None if self.info.per_token else NO_DETAIL

    @property
    def acceptance_rate(self) -> float | None:
        """Accepted / drafted, None when unknown or nothing drafted."""
        if self.drafted and self.accepted is not None:
            return self.accepted / self.drafted
        return None


def request_prompt(info: RequestInfo) -> str | None:
    """The request's prompt text: the prompt, or for chat the last user message."""
    if info.prompt is not None:
        return info.prompt
    for message in reversed(info.messages or []):
        if isinstance(message, dict) and message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, str):
                return content
            if isinstance(content, list):  # OpenAI / Anthropic content parts
                parts = [p.get("text") for p in content if isinstance(p, dict)]
                return "".join(p for p in parts if isinstance(p, str)) or None
    return None


__all__ = [
    "METRICS_PATH",
    "MIB",
    "NO_DETAIL",
    "EndpointKind",
    "ProxyLimits",
    "ProxyOptions",
    "ProxyRecord",
    "RequestInfo",
    "RequestStatus",
    "request_prompt",
]
