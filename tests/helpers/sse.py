"""Helpers to replay recorded SSE captures through the engine without a network."""

from __future__ import annotations

from pathlib import Path

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


def sse_payloads(name: str) -> list[str]:
    """The `data:` payloads of a capture, in order (the chat terminator `[DONE]` excluded)."""
    payloads = []
    for line in (FIXTURES / name).read_text().splitlines():
        if line.startswith("data: ") and line[6:].strip() != "[DONE]":
            payloads.append(line[6:])
    return payloads
