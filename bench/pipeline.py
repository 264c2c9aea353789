"""Pipeline throughput: SSE payloads -> parse -> attribution -> metrics, on one core.

Goal: >= 100,000 tokens/s. Replays the recorded ngram-simple capture many times.
"""

from __future__ import annotations

import time
from pathlib import Path

from common import median, write_result

from spectui.core.stream import ChunkProcessor

CAPTURE = (
    Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "completion-ngram-simple.sse"
)
GOAL = 100_000


def one_pass(payloads: list[str], copies: int) -> float:
    start = time.perf_counter()
    tokens = 0
    for _ in range(copies):
        processor = ChunkProcessor(chat=False)
        for i, payload in enumerate(payloads):
            processor.feed(payload, i * 1e-3)
        tokens += processor.tracker.tokens
    return tokens / (time.perf_counter() - start)


def main() -> None:
    payloads = [line[6:] for line in CAPTURE.read_text().splitlines() if line.startswith("data: ")]
    rates = [one_pass(payloads, 200) for _ in range(5)]
    result = {
        "tokens_per_second": median(rates),
        "runs": rates,
        "goal": GOAL,
        "met": median(rates) >= GOAL,
    }
    path = write_result("pipeline", result)
    print(f"pipeline: {result['tokens_per_second']:,.0f} tokens/s (goal {GOAL:,}) -> {path}")


if __name__ == "__main__":
    main()
