"""Long streams built from a recorded llama-server capture, for the benchmarks.

The capture (tests/fixtures/completion-ngram-simple.sse: ngram-simple on Gemma 3 270M, 120 tokens)
is repeated with its cumulative counters carried on, so a stream of any length has the real
chunk shapes, text, and drafted/accepted pattern. `sse_body` gives the raw bytes a server would
send.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

CAPTURE = (
    Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "completion-ngram-simple.sse"
)


def capture_payloads() -> list[str]:
    """The capture's `data:` payloads, in order (the last one is the final summary chunk)."""
    text = CAPTURE.read_text()
    return [line[6:] for line in text.splitlines() if line.startswith("data: ")]


def long_payloads(tokens: int) -> list[str]:
    """`data:` payloads of one response of (at least) ``tokens`` tokens, counters cumulative."""
    chunks: list[dict[str, Any]] = [json.loads(p) for p in capture_payloads()]
    body, final = chunks[:-1], chunks[-1]
    per_copy = body[-1]["tokens_predicted"]
    last = final["timings"]
    out: list[str] = []
    offset_n = offset_drafted = offset_accepted = 0
    copy = 0
    while offset_n < tokens:
        drafted = accepted = 0
        for chunk in body:
            timings = dict(chunk["timings"])
            drafted = timings.get("draft_n", drafted)
            accepted = timings.get("draft_n_accepted", accepted)
            timings["predicted_n"] += offset_n
            if copy or "draft_n" in chunk["timings"]:
                timings["draft_n"] = drafted + offset_drafted
                timings["draft_n_accepted"] = accepted + offset_accepted
            shifted = {**chunk, "tokens_predicted": chunk["tokens_predicted"] + offset_n}
            shifted["timings"] = timings
            out.append(json.dumps(shifted, separators=(",", ":")))
        offset_n += per_copy
        offset_drafted += last.get("draft_n", drafted)
        offset_accepted += last.get("draft_n_accepted", accepted)
        copy += 1
    end = dict(final)
    end["tokens_predicted"] = offset_n
    end["timings"] = {
        **last,
        "predicted_n": offset_n,
        "draft_n": offset_drafted,
        "draft_n_accepted": offset_accepted,
    }
    out.append(json.dumps(end, separators=(",", ":")))
    return out


def sse_body(payloads: list[str]) -> bytes:
    """The bytes of an SSE response carrying ``payloads``."""
    return "".join(f"data: {p}\n\n" for p in payloads).encode()
