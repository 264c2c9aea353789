"""pydantic models of what llama-server sends: stream chunks, timings, /props, /slots, /metrics.

Models ignore unknown fields: llama-server adds fields often, and spectui must keep working on a
newer build. Only what spectui reads is declared.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class _Payload(BaseModel):
    model_config = ConfigDict(extra="ignore")


class Timings(_Payload):
    """The `timings` object of a chunk; counters are cumulative over the response."""

    cache_n: int = 0
    """Prompt tokens reused from the cache."""
    prompt_n: int = 0
    """Prompt tokens processed."""
    prompt_ms: float = 0.0
    """Time spent processing the prompt."""
    prompt_per_second: float = 0.0
    """Prompt processing rate."""
    predicted_n: int = 0
    """Tokens generated so far."""
    predicted_ms: float = 0.0
    """Time spent generating so far."""
    predicted_per_second: float = 0.0
    """The server's generation rate."""
    draft_n: int = 0
    """Draft tokens proposed so far (absent until > 0)."""
    draft_n_accepted: int = 0
    """Draft tokens accepted so far (absent until > 0)."""

    def as_floats(self) -> dict[str, float]:
        """The timings as a flat dict of numbers (for summaries and reports)."""
        return {k: float(v) for k, v in self.model_dump().items()}


class PromptProgress(_Payload):
    """`prompt_progress` of a chunk sent while the prompt is processed (``return_progress``)."""

    total: int = 0
    """Prompt tokens in all."""
    cache: int = 0
    """Prompt tokens reused from the cache."""
    processed: int = 0
    """Prompt tokens processed so far."""
    time_ms: float = 0.0
    """Time spent so far."""


class CompletionChunk(_Payload):
    """One SSE `data:` object of a streamed `/completion`."""

    content: str = ""
    """Text released by this chunk."""
    stop: bool = False
    """True on the final chunk."""
    tokens_predicted: int | None = None
    """Tokens generated so far, cumulative."""
    tokens: list[int] = []
    """The ids of the tokens this chunk releases (with ``return_tokens``)."""
    stop_type: str | None = None
    """Why generation stopped ('limit', 'eos', 'word', ...), on the final chunk."""
    timings: Timings | None = None
    """Cumulative timings (with ``timings_per_token``)."""
    prompt_progress: PromptProgress | None = None
    """Prompt processing progress (with ``return_progress``)."""


class ChatDelta(_Payload):
    """The `delta` of a chat completion chunk."""

    role: str | None = None
    """Set on the first chunk only."""
    content: str | None = None
    """Text released by this chunk."""
    reasoning_content: str | None = None
    """Reasoning text, for models that separate it."""


class ChatChoice(_Payload):
    """One choice of a chat completion chunk."""

    index: int = 0
    """Choice index (spectui asks for one)."""
    delta: ChatDelta = Field(default_factory=ChatDelta)
    """What this chunk adds."""
    finish_reason: str | None = None
    """Why generation stopped ('length', 'stop'), on the final chunk."""


class ChatChunk(_Payload):
    """One SSE `data:` object of a streamed `/v1/chat/completions`."""

    choices: list[ChatChoice] = Field(default_factory=list)
    """Choices; spectui reads the first."""
    timings: Timings | None = None
    """Cumulative timings (with ``timings_per_token``)."""
    prompt_progress: PromptProgress | None = None
    """Prompt processing progress (with ``return_progress``)."""


class ErrorDetail(_Payload):
    """The `error` object of an error response."""

    message: str = ""
    """Human message."""
    type: str = ""
    """Category, e.g. 'unavailable_error'."""
    code: int | None = None
    """HTTP status code."""


class ErrorBody(_Payload):
    """An error response body (also sent as an SSE `error:` event)."""

    error: ErrorDetail
    """The error."""


class GenerationSettings(_Payload):
    """Default generation settings reported by /props."""

    n_ctx: int | None = None
    """Context size per slot."""
    params: dict[str, Any] = Field(default_factory=dict)
    """Default sampling parameters."""


class Props(_Payload):
    """`GET /props`. Note: ``speculative.types`` there says 'none' even when ngram is active."""

    model_path: str | None = None
    """Path of the loaded model."""
    model_alias: str | None = None
    """Alias of the loaded model."""
    total_slots: int | None = None
    """Parallel slots."""
    build_info: str | None = None
    """Build string, e.g. 'b0-unknown'."""
    chat_template: str | None = None
    """The chat template in use."""
    endpoint_slots: bool | None = None
    """Whether /slots is enabled."""
    endpoint_metrics: bool | None = None
    """Whether /metrics is enabled."""
    default_generation_settings: GenerationSettings | None = None
    """Defaults."""


class Slot(_Payload):
    """One entry of `GET /slots`."""

    id: int
    """Slot id."""
    n_ctx: int | None = None
    """Context size of the slot."""
    speculative: bool = False
    """The truth about whether speculative decoding is active in this slot."""
    is_processing: bool = False
    """Whether the slot is generating now."""
    params: dict[str, Any] = Field(default_factory=dict)
    """Parameters of the slot's last task; ``speculative.types`` lists the types in effect."""

    @property
    def spec_types(self) -> list[str]:
        """Spec types the last task ran with (from ``params["speculative.types"]``)."""
        raw = self.params.get("speculative.types")
        return [t for t in str(raw).split(",") if t] if raw else []


_SAMPLE = re.compile(
    r"^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(?P<labels>[^}]*)\})?\s+(?P<value>\S+)"
)
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


class MetricSample(BaseModel):
    """One Prometheus sample."""

    model_config = ConfigDict(frozen=True)

    name: str
    """Metric name, e.g. 'llamacpp:spec_decode_num_drafts_total'."""
    labels: dict[str, str] = Field(default_factory=dict)
    """Label set."""
    value: float
    """Sample value."""


class ServerMetrics(BaseModel):
    """`GET /metrics` (Prometheus text format), parsed."""

    samples: list[MetricSample] = Field(default_factory=list)
    """Every sample in the exposition."""

    @classmethod
    def parse(cls, text: str) -> ServerMetrics:
        """Parse the Prometheus text exposition format (comments and blank lines skipped)."""
        samples = []
        for line in text.splitlines():
            match = _SAMPLE.match(line.strip())
            if not match or line.startswith("#"):
                continue
            labels = dict(_LABEL.findall(match.group("labels") or ""))
            samples.append(
                MetricSample(name=match.group("name"), labels=labels, value=float(match["value"]))
            )
        return cls(samples=samples)

    def value(self, name: str, default: float = 0.0) -> float:
        """Value of an unlabelled metric."""
        for sample in self.samples:
            if sample.name == name and not sample.labels:
                return sample.value
        return default

    @property
    def spec_steps(self) -> int:
        """Verification steps the server counted."""
        return int(self.value("llamacpp:spec_decode_num_drafts_total"))

    @property
    def spec_drafted(self) -> int:
        """Draft tokens the server counted."""
        return int(self.value("llamacpp:spec_decode_num_draft_tokens_total"))

    @property
    def spec_accepted(self) -> int:
        """Accepted draft tokens the server counted."""
        return int(self.value("llamacpp:spec_decode_num_accepted_tokens_total"))

    @property
    def accepted_per_position(self) -> list[int]:
        """Accepted tokens per draft position, position 0 first, trailing zeros trimmed."""
        by_position: dict[int, int] = {}
        for sample in self.samples:
            if sample.name == "llamacpp:spec_decode_num_accepted_tokens_per_pos_total":
                by_position[int(sample.labels.get("position", "0"))] = int(sample.value)
        histogram = [by_position.get(i, 0) for i in range(max(by_position, default=-1) + 1)]
        while histogram and histogram[-1] == 0:
            histogram.pop()
        return histogram
