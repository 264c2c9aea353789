"""The wire dialects of llama-server's generation endpoints, read in one place.

`/completion` (native), `/v1/completions`, `/v1/chat/completions` and `/v1/messages` (Anthropic)
say the same things in different shapes: the text a chunk releases, tokens so far, the cumulative
``timings``, prompt progress, why generation stopped, the model, and errors. `stream.run` (the
engine's own streams) and `proxy` (the proxy's attribution and totals) both read them through
these functions, so a shape llama-server changes is changed here once.

Two ways in, one vocabulary. `typed_chunk` validates a payload in one call into the pydantic
models of `llama.protocol` (in Rust: half the per-token cost of parsing to dicts first, measured
151k against 83k payloads/s); the engine's own streams, which only read what they declared, take
it. `read_chunk` reads a dict leniently (a field of the wrong type counts as absent) and keeps
``timings`` as sent; the proxy, which must pass on anything an upstream sends, takes it. Both map
stop reasons and errors through the same tables and functions.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from pydantic import ValidationError
from pydantic_core import from_json

from spectui.core.errors import StreamError
from spectui.core.llama.protocol import ChatChunk, CompletionChunk, PromptProgress, Timings


class EndpointKind(StrEnum):
    """The shape of a generation endpoint's stream."""

    NATIVE = "native"
    """`/completion`: ``content``, ``tokens_predicted``, ``stop``."""
    OAI_COMPLETION = "oai-completion"
    """`/v1/completions`: ``choices[0].text``."""
    OAI_CHAT = "oai-chat"
    """`/v1/chat/completions`: ``choices[0].delta.content``."""
    ANTHROPIC = "anthropic"
    """`/v1/messages`: its stream carries no ``timings`` at all on this build."""


FINISH_REASONS = {"length": "limit", "stop": "eos"}
"""OpenAI ``finish_reason`` -> llama-server's own ``stop_type``."""

ANTHROPIC_STOPS = {"max_tokens": "limit", "end_turn": "eos", "stop_sequence": "word"}
"""Anthropic ``stop_reason`` -> llama-server's own ``stop_type``."""


def payload_object(payload: bytes | str) -> dict[str, Any] | None:
    """The JSON object of an SSE ``data:`` payload, or None ([DONE], empty, not JSON, not an
    object)."""
    payload = payload.strip()
    if not payload or payload in (b"[DONE]", "[DONE]"):
        return None
    try:
        # pydantic-core's parser (Rust) reads a chunk in half json's time, and the proxy reads
        # every chunk of every stream; what it refuses (a lone surrogate's escape, a byte-order
        # mark, UTF-16) json reads as it always did.
        obj = from_json(payload)
    except ValueError:
        try:
            obj = json.loads(payload)
        except (json.JSONDecodeError, UnicodeDecodeError):
            return None
    return obj if isinstance(obj, dict) else None


def error_line(error: object) -> str:
    """One line for an ``error`` member: 'message (code)'."""
    if isinstance(error, dict):
        message = error.get("message") or error.get("type") or error
        code = error.get("code")
        return f"{message} ({code})" if code else str(message)
    return str(error)


def reported_error(obj: dict[str, Any]) -> str:
    """The line for an error body or event the server sent: 'the server reported an error
    (code): message'."""
    error = obj.get("error")
    if not isinstance(error, dict):
        return f"the server reported an error: {str(obj)[:120]}"
    label = error.get("code") or error.get("type") or ""
    return f"the server reported an error ({label}): {error.get('message') or ''}"


def first_choice(obj: dict[str, Any]) -> dict[str, Any] | None:
    """``choices[0]`` of an OpenAI-shaped object, when it is an object."""
    choices = obj.get("choices") or []
    choice = choices[0] if isinstance(choices, list) and choices else None
    return choice if isinstance(choice, dict) else None


def is_final(kind: EndpointKind, obj: dict[str, Any]) -> bool:
    """Whether a chunk is the stream's last with content (it keeps its ``timings``)."""
    if kind is EndpointKind.NATIVE:
        return obj.get("stop") is True
    choice = first_choice(obj)
    return "usage" in obj or bool(choice is not None and choice.get("finish_reason"))


@dataclass(slots=True)
class ChunkFields:
    """What one streamed chunk says, whatever the endpoint."""

    text: str = ""
    """Text released by this chunk."""
    predicted: int | None = None
    """Tokens generated so far (``tokens_predicted``, else the timings' ``predicted_n``)."""
    timings: dict[str, Any] | None = None
    """The cumulative ``timings`` object, as sent."""
    progress: dict[str, Any] | None = None
    """``prompt_progress``, as sent (with ``return_progress``)."""
    stop_reason: str = ""
    """Why generation stopped, on the chunk that says so ('limit', 'eos', 'word', ...)."""
    model: str = ""
    """The model the chunk names."""
    drafted: int = 0
    """Draft tokens proposed so far (the timings' ``draft_n``; absent until > 0)."""
    accepted: int = 0
    """Draft tokens accepted so far (``draft_n_accepted``)."""


def read_chunk(kind: EndpointKind, obj: dict[str, Any]) -> ChunkFields:
    """The fields of one streamed chunk of ``kind`` (not Anthropic: see `read_anthropic`)."""
    fields = ChunkFields()
    if isinstance(model := obj.get("model"), str):
        fields.model = model
    timings = obj.get("timings")
    fields.timings = timings if isinstance(timings, dict) else None
    progress = obj.get("prompt_progress")
    fields.progress = progress if isinstance(progress, dict) else None
    predicted: object = None
    if kind is EndpointKind.NATIVE:
        fields.text = _text(obj.get("content"))
        predicted = obj.get("tokens_predicted")
        if obj.get("stop") is True:
            fields.stop_reason = _text(obj.get("stop_type"))
    elif (choice := first_choice(obj)) is not None:
        if kind is EndpointKind.OAI_CHAT:
            delta = choice.get("delta")
            fields.text = _text(delta.get("content")) if isinstance(delta, dict) else ""
        else:
            fields.text = _text(choice.get("text"))
        if finish := choice.get("finish_reason"):
            fields.stop_reason = FINISH_REASONS.get(str(finish), str(finish))
    if fields.timings is not None:
        if not isinstance(predicted, int):
            predicted = fields.timings.get("predicted_n")
        fields.drafted = _int(fields.timings.get("draft_n")) or 0
        fields.accepted = _int(fields.timings.get("draft_n_accepted")) or 0
    fields.predicted = _int(predicted)
    return fields


# The models' validators, called directly: `model_validate_json` wraps them in a Python call
# that cost a tenth of the per-token pipeline.
_validate_completion = CompletionChunk.__pydantic_validator__.validate_json
_validate_chat = ChatChunk.__pydantic_validator__.validate_json

TypedFields = tuple[str, int | None, Timings | None, PromptProgress | None, str, list[int]]
"""What `typed_chunk` reads: text, tokens so far, timings, prompt progress, stop reason (''),
and the ids of the tokens released (`/completion` with ``return_tokens``; else empty)."""


def typed_chunk(kind: EndpointKind, data: str) -> TypedFields:
    """One streamed payload of `/completion` (``NATIVE``) or `/v1/chat/completions`
    (``OAI_CHAT``), validated into `llama.protocol`'s models; `StreamError` for an error payload
    or data that is not such a chunk."""
    # Cheap pre-check: a real error object has an unescaped "error" key; token text that
    # mentions "error" is escaped inside a JSON string and cannot match.
    if '"error"' in data and (obj := payload_object(data)) is not None and "error" in obj:
        raise StreamError(reported_error(obj))
    try:
        if kind is EndpointKind.OAI_CHAT:
            chat: ChatChunk = _validate_chat(data)
            choice = chat.choices[0] if chat.choices else None
            text = (choice.delta.content or "") if choice is not None else ""
            finish = choice.finish_reason if choice is not None else None
            stop = FINISH_REASONS.get(finish, finish) if finish else ""
            timings = chat.timings
            predicted = timings.predicted_n if timings else None
            return text, predicted, timings, chat.prompt_progress, stop, []
        chunk: CompletionChunk = _validate_completion(data)
    except ValidationError as error:
        what = "is not JSON" if error.errors()[0]["type"] == "json_invalid" else "is unexpected"
        raise StreamError(f"data from the server {what}: {data[:80]!r}") from None
    predicted = chunk.tokens_predicted
    if predicted is None and chunk.timings is not None:
        predicted = chunk.timings.predicted_n
    stop = (chunk.stop_type or "") if chunk.stop else ""
    return chunk.content, predicted, chunk.timings, chunk.prompt_progress, stop, chunk.tokens


@dataclass(slots=True)
class AnthropicFields:
    """What one `/v1/messages` stream event says."""

    text: str = ""
    """Text of a ``content_block_delta``."""
    model: str = ""
    """The model of ``message_start``."""
    output_tokens: int | None = None
    """Tokens generated, from ``message_delta``'s usage."""
    stop_reason: str = ""
    """Why generation stopped, from ``message_delta``."""


def read_anthropic(obj: dict[str, Any]) -> AnthropicFields:
    """The fields of one `/v1/messages` stream event."""
    fields = AnthropicFields()
    kind = obj.get("type")
    if kind == "content_block_delta":
        delta = obj.get("delta")
        if isinstance(delta, dict) and isinstance(text := delta.get("text"), str):
            fields.text = text
    elif kind == "message_start":
        message = obj.get("message")
        if isinstance(message, dict) and isinstance(model := message.get("model"), str):
            fields.model = model
    elif kind == "message_delta":
        usage = obj.get("usage")
        if isinstance(usage, dict) and isinstance(out := usage.get("output_tokens"), int):
            fields.output_tokens = out
        delta = obj.get("delta")
        if isinstance(delta, dict) and delta.get("stop_reason"):
            fields.stop_reason = ANTHROPIC_STOPS.get(str(delta["stop_reason"]), "")
    return fields


def _text(value: object) -> str:
    return value if isinstance(value, str) else ("" if value is None else str(value))


@dataclass(slots=True)
class ResponseTotals:
    """What a non-streamed generation response says about itself (no per-token detail)."""

    tokens: int | None = None
    """Tokens generated."""
    prompt_tokens: int | None = None
    """Prompt tokens processed."""
    drafted: int | None = None
    """Draft tokens proposed (from the final timings)."""
    accepted: int | None = None
    """Draft tokens accepted (from the final timings)."""
    timings: dict[str, float] = field(default_factory=dict)
    """The final timings."""
    text: str = ""
    """The generated text."""
    stop_reason: str = ""
    """Why generation stopped."""
    model: str = ""
    """The model the response names."""
    error: str | None = None
    """An error body's message."""


def response_totals(kind: EndpointKind, raw: bytes) -> ResponseTotals:
    """Totals of a non-streamed response body (empty when it is not the JSON expected)."""
    obj = payload_object(raw)
    if obj is None:
        return ResponseTotals()
    totals = ResponseTotals(model=_text(obj.get("model")))
    if "error" in obj:
        totals.error = error_line(obj["error"])
        return totals
    timings = obj.get("timings")
    if isinstance(timings, dict):
        totals.timings = {k: float(v) for k, v in timings.items() if isinstance(v, int | float)}
        totals.tokens = _int(timings.get("predicted_n"))
        totals.prompt_tokens = _int(timings.get("prompt_n"))
        totals.drafted = _int(timings.get("draft_n", 0))
        totals.accepted = _int(timings.get("draft_n_accepted", 0))
    usage = obj.get("usage")
    if totals.tokens is None and isinstance(usage, dict):
        totals.tokens = _int(usage.get("completion_tokens", usage.get("output_tokens")))
    if kind is EndpointKind.NATIVE:
        totals.text = _text(obj.get("content"))
        totals.stop_reason = _text(obj.get("stop_type"))
        if totals.tokens is None:
            totals.tokens = _int(obj.get("tokens_predicted"))
    elif kind is EndpointKind.ANTHROPIC:
        content = obj.get("content")
        parts = content if isinstance(content, list) else []
        totals.text = "".join(_text(p.get("text")) for p in parts if isinstance(p, dict))
        totals.stop_reason = ANTHROPIC_STOPS.get(str(obj.get("stop_reason")), "")
    elif (choice := first_choice(obj)) is not None:
        message = choice.get("message")
        totals.text = _text(
            message.get("content") if isinstance(message, dict) else choice.get("text")
        )
        finish = _text(choice.get("finish_reason"))
        totals.stop_reason = FINISH_REASONS.get(finish, finish)
    return totals


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


__all__ = [
    "ANTHROPIC_STOPS",
    "FINISH_REASONS",
    "AnthropicFields",
    "ChunkFields",
    "EndpointKind",
    "ResponseTotals",
    "TypedFields",
    "error_line",
    "first_choice",
    "is_final",
    "payload_object",
    "read_anthropic",
    "read_chunk",
    "reported_error",
    "response_totals",
    "typed_chunk",
]
