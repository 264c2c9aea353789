"""Prompt sets for a comparison: the built-in library, or a TOML / JSON Lines file with checkers.

TOML::

    [[prompts]]
    key = "invoice"              # optional (p1, p2, ... by default)
    text = "Extract ... as JSON"
    n_predict = 120              # optional
    [prompts.check]              # optional; every part given must pass
    json_fields = ["number", "date"]
    regex = 'INV-\\d+'
    python = '''
    import json
    assert json.loads(response[response.index("{"):])["number"] == "INV-2291"
    '''

JSON Lines: one object per line with the same keys (``check`` as a nested object); the
``workload.jsonl`` that `spectui proxy --record` writes is one too.
"""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from spectui.core.compare.checkers import Checker
from spectui.core.compare.models import ComparePrompt
from spectui.core.errors import SpectuiError, read_bytes
from spectui.core.prompts import BUILTIN_PROMPTS, CODE_EDIT_TESTS

DEFAULT_N_PREDICT = 256
"""Generation length of a file prompt that sets none (and no --n-predict is given)."""

BUILTIN_CHECKS: dict[str, Checker] = {
    "table-row": Checker(regex=r"\|\s*6\s*\|\s*Farah"),
    "code-edit": Checker(python=CODE_EDIT_TESTS),  # code is checked by running it
    "json-rewrite": Checker(json_fields=("name", "age")),
    "extract": Checker(regex=r"INV-2291"),
    "two-lines": Checker(regex=r"(?i)lisbon"),
}
"""What a correct answer to each built-in prompt contains (the task, stated as a test)."""


class PromptFileError(SpectuiError):
    """A prompt set that cannot be used: unreadable, malformed, or empty."""

    title = "Prompt file problem"
    exit_code = 2


class _Entry(BaseModel):
    """One prompt as a file states it."""

    model_config = ConfigDict(extra="forbid")

    key: str | None = Field(default=None, min_length=1)
    """Identifier (default: p1, p2, ...)."""
    text: str = Field(min_length=1)
    """The prompt."""
    n_predict: int | None = Field(default=None, ge=1)
    """Tokens to generate."""
    check: Checker | None = None
    """What a correct response satisfies."""
    # Written by `spectui proxy --record` (its workload.jsonl); compare runs ``text`` under its
    # own fixed sampling, so these are kept for the reader, not used (``arrival_s`` aside:
    # `compare --arrivals recorded` replays it).
    endpoint: str | None = None
    """The endpoint the recorded request was sent to."""
    sampling: dict[str, Any] | None = None
    """The recorded request's sampling fields."""
    messages: list[Any] | None = None
    """The recorded chat request's messages (``text`` is its last user message)."""
    stream: bool | None = None
    """Whether the recorded request was streamed."""
    arrival_s: float | None = Field(default=None, ge=0)
    """When the recorded request arrived, in seconds after the first one (the traffic's shape)."""


def builtin_prompts(keys: list[str] | None, n_predict: int | None) -> tuple[ComparePrompt, ...]:
    """The library (all of it, or ``keys`` in that order), with its checkers."""
    by_key = {p.key: p for p in BUILTIN_PROMPTS}
    chosen = keys or list(by_key)
    unknown = [k for k in chosen if k not in by_key]
    if unknown:
        raise PromptFileError(f"no built-in prompt {unknown[0]!r} (known: {', '.join(by_key)})")
    if len(set(chosen)) != len(chosen):
        raise PromptFileError("a built-in prompt is listed twice")
    return tuple(
        ComparePrompt(
            key=key,
            text=by_key[key].text,
            n_predict=n_predict or by_key[key].n_predict,
            check=BUILTIN_CHECKS.get(key),
        )
        for key in chosen
    )


def _read_entries(path: Path) -> list[Any]:
    raw = read_bytes(path, "prompt file", PromptFileError)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise PromptFileError(f"prompt file {path} is not UTF-8 text") from None
    suffix = path.suffix.lower()
    if suffix == ".toml":
        try:
            document = tomllib.loads(text)
        except tomllib.TOMLDecodeError as error:
            raise PromptFileError(f"prompt file {path} is not valid TOML: {error}") from None
        entries = document.get("prompts", document.get("prompt"))
        if not isinstance(entries, list):
            raise PromptFileError(
                f"prompt file {path} has no [[prompts]] tables (see `spectui compare --help`)"
            )
        return entries
    if suffix in (".jsonl", ".ndjson"):
        entries = []
        # Lines end at "\n" only: str.splitlines() would also cut at U+2028, U+0085, ... which
        # JSON allows raw inside a string (a recorded prompt may hold them).
        for number, line in enumerate(text.split("\n"), 1):
            if not line.strip():
                continue
            try:
                entries.append(_well_formed(json.loads(line)))
            except json.JSONDecodeError as error:
                raise PromptFileError(
                    f"prompt file {path}, line {number}: not JSON ({error.msg})"
                ) from None
        return entries
    raise PromptFileError(
        f"prompt file {path}: use a .toml or .jsonl file (see `spectui compare --help`)"
    )


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def _well_formed(value: Any) -> Any:
    """``value`` with each lone surrogate in its strings (JSON allows ``"\\ud800"``; UTF-8 and
    llama-server do not) replaced by U+FFFD."""
    if isinstance(value, str):
        return _LONE_SURROGATE.sub("\ufffd", value)
    if isinstance(value, list):
        return [_well_formed(item) for item in value]
    if isinstance(value, dict):
        return {_well_formed(k): _well_formed(v) for k, v in value.items()}
    return value


def _where(error: ValidationError) -> str:
    first = error.errors()[0]
    field = ".".join(str(part) for part in first["loc"]) or "entry"
    message = str(first["msg"]).removeprefix("Value error, ")
    return f"{field}: {message}"


def load_prompt_file(path: Path, n_predict: int | None) -> tuple[ComparePrompt, ...]:
    """Prompts (with checkers) from a TOML or JSONL file; one clear line when it is unusable."""
    prompts: list[ComparePrompt] = []
    for index, raw in enumerate(_read_entries(path), 1):
        try:
            entry = _Entry.model_validate(raw)
        except ValidationError as error:
            raise PromptFileError(f"prompt file {path}, prompt {index}: {_where(error)}") from None
        key = entry.key or f"p{index}"
        if any(p.key == key for p in prompts):
            raise PromptFileError(f"prompt file {path}: key {key!r} is used twice")
        check = entry.check if entry.check is not None and not entry.check.empty else None
        prompts.append(
            ComparePrompt(
                key=key,
                text=entry.text,
                n_predict=n_predict or entry.n_predict or DEFAULT_N_PREDICT,
                check=check,
                arrival_s=entry.arrival_s,
            )
        )
    if not prompts:
        raise PromptFileError(f"prompt file {path} holds no prompts")
    return tuple(prompts)


def load_prompts(source: str, n_predict: int | None = None) -> tuple[ComparePrompt, ...]:
    """``builtin``, ``builtin:KEY,KEY``, or a path to a .toml/.jsonl prompt file."""
    if source == "builtin":
        return builtin_prompts(None, n_predict)
    if source.startswith("builtin:"):
        keys = [k.strip() for k in source.removeprefix("builtin:").split(",") if k.strip()]
        return builtin_prompts(keys, n_predict)
    return load_prompt_file(Path(source).expanduser(), n_predict)
