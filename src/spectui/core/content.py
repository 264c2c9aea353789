"""Where speculation pays, by what is asked: a cheap local content class and prompt-length bucket.

Speculation's payoff follows the text: an n-gram drafter wins where the answer repeats the
prompt (code edits, JSON rewrites, tables) and a model drafter where the answer is predictable.
So requests are grouped by what they hold, with rules a reader can check by eye — no model, no
network, a few microseconds per prompt. A request takes its answer's class when the answer is code
or JSON (what is generated is what gets drafted), else its prompt's. A text's class:

1. **json**: the text, or a fenced block of it, parses as a JSON object or array; or at least a
   third of its non-blank lines look like JSON members (``"key": value``, maybe after ``{``/``[``).
2. **code**: a fenced code block (other than JSON), or at least a third of its non-blank lines
   (and at least two) look like code: they start with a keyword of a common language or end in
   ``{``, ``}``, ``;``, ``:`` after a statement, or are indented under such a line.
3. **prose**: at least 30 characters and 70 % of its characters letters, spaces or sentence
   punctuation.
4. **other**: everything else — tables (a third of the lines are ``| … |`` rows), logs, numbers,
   prompts too short to tell.

The classes are a fixed, bounded set, and so are the length buckets: both can label Prometheus
series without growing them.
"""

from __future__ import annotations

import json
import re
from enum import StrEnum


class ContentClass(StrEnum):
    """What a prompt mostly holds."""

    CODE = "code"
    """Source code."""
    JSON = "json"
    """A JSON document (or a prompt made mostly of one)."""
    PROSE = "prose"
    """Natural-language text."""
    OTHER = "other"
    """Anything else: tables, logs, numbers, a prompt too short to tell."""


class LengthBucket(StrEnum):
    """A prompt's length in tokens, in five bounded buckets."""

    XS = "<128"
    """Under 128 tokens."""
    S = "128-511"
    """128 to 511 tokens."""
    M = "512-2047"
    """512 to 2,047 tokens."""
    L = "2048-8191"
    """2,048 to 8,191 tokens."""
    XL = ">=8192"
    """8,192 tokens or more."""
    UNKNOWN = "unknown"
    """The server did not say how long the prompt was."""


_BUCKET_EDGES = (
    (128, LengthBucket.XS),
    (512, LengthBucket.S),
    (2048, LengthBucket.M),
    (8192, LengthBucket.L),
)


def length_bucket(prompt_tokens: int | None) -> LengthBucket:
    """The bucket of a prompt of ``prompt_tokens`` tokens (None: unknown)."""
    if prompt_tokens is None or prompt_tokens < 0:
        return LengthBucket.UNKNOWN
    for edge, bucket in _BUCKET_EDGES:
        if prompt_tokens < edge:
            return bucket
    return LengthBucket.XL


_FENCE = re.compile(r"```([A-Za-z0-9_+-]*)[^\n]*\n(.*?)(?:```|\Z)", re.DOTALL)
_JSON_MEMBER = re.compile(r'^\s*[\[{]?\s*"[^"\n]{1,80}"\s*:\s*\S')
_CODE_START = re.compile(
    r"^\s*(def|class|import|from \S+ import|return|if|elif|else|for|while|try|except|with|"
    r"function|const|let|var|public|private|static|fn|pub|impl|struct|enum|package|func|"
    r"#include|#define|SELECT|INSERT|UPDATE|CREATE|async|await|@\w+)\b"
)
_TABLE_ROW = re.compile(r"^\s*\|.*\|\s*$")
_CODE_END = re.compile(r"[{};]\s*$|\)\s*:\s*$|^\s*[})\]]+[;,]?\s*$")
_PROSE_CHARS = re.compile(r"[^\W\d_]|[\s.,;:!?'\"()\-]")
_MIN_PROSE_CHARS = 30
_SHARE = 1 / 3
_PROSE_SHARE = 0.7


def _is_json(text: str) -> bool:
    stripped = text.strip()
    if not stripped or stripped[0] not in "[{":
        return False
    try:
        return isinstance(json.loads(stripped), dict | list)
    except ValueError:
        return False


def _code_lines(lines: list[str]) -> int:
    count, previous_opened = 0, False
    for line in lines:
        code = bool(_CODE_START.match(line) or _CODE_END.search(line))
        # A line indented under a line that opened a block is part of that block.
        if not code and previous_opened and line[:1] in (" ", "\t"):
            code = True
        count += code
        previous_opened = code and line.rstrip().endswith(("{", ":"))
    return count


SAMPLE_CHARS = 16_384
"""Characters of each text the rules read (its start): a prompt may be megabytes, and its class
shows in its first pages; the cost per request stays bounded."""


def classify(prompt: str, answer: str = "") -> ContentClass:
    """The content class of a request: its answer's, when the answer is code or JSON (what is
    generated is what gets drafted: "rewrite this list as JSON" is a JSON request), else its
    prompt's (a prompt, or a chat's last user message)."""
    prompt, answer = prompt[:SAMPLE_CHARS], answer[:SAMPLE_CHARS]
    if answer:
        generated = classify_text(answer)
        if generated in (ContentClass.CODE, ContentClass.JSON):
            return generated
    return classify_text(prompt)


def classify_text(text: str) -> ContentClass:
    """The content class of one text, by the rules above."""
    fences = _FENCE.findall(text)
    for language, body in fences:
        if language.lower() == "json" or _is_json(body):
            return ContentClass.JSON
    if _is_json(text):
        return ContentClass.JSON
    lines = [line for line in text.splitlines() if line.strip()]
    if lines and sum(bool(_JSON_MEMBER.match(line)) for line in lines) >= _SHARE * len(lines):
        return ContentClass.JSON
    if fences:
        return ContentClass.CODE
    if lines and sum(bool(_TABLE_ROW.match(line)) for line in lines) >= _SHARE * len(lines):
        return ContentClass.OTHER  # a table: its cells are words, but it is not prose
    code = _code_lines(lines)
    if code >= 2 and code >= _SHARE * len(lines):
        return ContentClass.CODE
    if len(text) >= _MIN_PROSE_CHARS:
        prose = len(_PROSE_CHARS.findall(text))
        if prose >= _PROSE_SHARE * len(text):
            return ContentClass.PROSE
    return ContentClass.OTHER
