"""Attribution on real captures reproduces the numbers the server itself counted."""

from __future__ import annotations

import json

import pytest

from spectui.core.events import StepEvent, TokenEvent, TokenOrigin
from spectui.core.llama.protocol import ServerMetrics
from spectui.core.stream.attribution import Attributor, ChunkCounters
from spectui.core.stream.run import ChunkProcessor

from .sse import FIXTURES, sse_payloads


def completion(text: str, n: int, drafted: int = 0, accepted: int = 0) -> str:
    """A `/completion` chunk's payload with cumulative counters."""
    timings = {"predicted_n": n, "draft_n": drafted, "draft_n_accepted": accepted}
    return json.dumps({"content": text, "tokens_predicted": n, "timings": timings})


def process(name: str, *, chat: bool = False) -> tuple[ChunkProcessor, list[TokenEvent]]:
    processor = ChunkProcessor(chat=chat)
    tokens: list[TokenEvent] = []
    for i, payload in enumerate(sse_payloads(name)):
        tokens += [e for e in processor.feed(payload, t=i * 0.01) if isinstance(e, TokenEvent)]
    return processor, tokens


@pytest.mark.parametrize(
    ("capture", "chat", "tokens", "drafted", "accepted", "steps", "histogram"),
    [
        ("completion-ngram-simple.sse", False, 120, 155, 46, 20, [14, 10, 5, 5, 5, 4, 2, 1]),
        ("completion-ngram-simple-2.sse", False, 120, 155, 46, 20, [14, 10, 5, 5, 5, 4, 2, 1]),
        ("completion-draft-simple.sse", False, 60, 47, 47, 12, [12, 12, 12, 11]),
        ("chat-ngram-simple.sse", True, 80, 74, 68, 10, [9, 9, 9, 9, 8, 8, 8, 8]),
    ],
)
def test_captures_reproduce_server_counters(
    capture: str,
    chat: bool,
    tokens: int,
    drafted: int,
    accepted: int,
    steps: int,
    histogram: list[int],
) -> None:
    processor, token_events = process(capture, chat=chat)
    summary = processor.summary(t=1.0).metrics
    assert len(token_events) == summary.tokens == tokens
    assert (summary.drafted, summary.accepted, summary.steps) == (drafted, accepted, steps)
    assert summary.accepted_per_position == histogram
    assert summary.attribution_anomalies == 0  # real captures fit the model
    # Every accepted draft shows up as exactly one draft-origin token.
    assert sum(t.origin is TokenOrigin.DRAFT for t in token_events) == accepted
    assert [t.index for t in token_events] == list(range(tokens))
    # The final server timings agree with the client's totals.
    assert processor.last_timings is not None
    assert processor.last_timings.draft_n == drafted
    assert processor.last_timings.draft_n_accepted == accepted


def test_fresh_server_capture_matches_its_metrics_exactly() -> None:
    processor, _ = process("completion-ngram-simple-2.sse")
    metrics = ServerMetrics.parse((FIXTURES / "metrics-after-ngram-simple-2.prom").read_text())
    summary = processor.summary(t=1.0).metrics
    assert summary.steps == metrics.spec_steps == 20
    assert summary.accepted_per_position == metrics.accepted_per_position
    assert summary.drafted == metrics.spec_drafted
    assert summary.accepted == metrics.spec_accepted


def test_text_is_reassembled_exactly() -> None:
    processor, token_events = process("completion-ngram-simple.sse")
    assert "".join(t.text for t in token_events) == processor.summary(t=0).text
    assert processor.summary(t=0).text.startswith("# add(a, b) ->")
    assert processor.summary(t=0).stop_reason == "limit"


def test_first_step_of_capture_is_attributed_as_documented() -> None:
    # Chunk 5 of the capture jumps to draft_n=8, accepted=2: tokens 4 and 5 (0-based) are accepted
    # drafts, token 6 is the target's and replaced 6 rejected drafts.
    _, token_events = process("completion-ngram-simple.sse")
    origins = [t.origin for t in token_events[:8]]
    assert origins == [TokenOrigin.TARGET] * 4 + [TokenOrigin.DRAFT] * 2 + [TokenOrigin.TARGET] * 2
    assert token_events[6].rejected_before == 6
    assert token_events[6].step == 0
    assert token_events[3].step is None
    assert token_events[7].rejected_before == 0


def counters(text: str, n: int, drafted: int = 0, accepted: int = 0) -> ChunkCounters:
    return ChunkCounters(text=text, predicted_n=n, draft_n=drafted, draft_accepted=accepted)


def test_step_with_nothing_accepted_marks_the_target_token() -> None:
    attributor = Attributor()
    attributor.feed(counters("a", 1))
    events = attributor.feed(counters("b", 2, drafted=4, accepted=0))
    step, token = events
    assert isinstance(step, StepEvent)
    assert (step.drafted, step.accepted, step.rejected, step.first_token) == (4, 0, 4, 1)
    assert isinstance(token, TokenEvent)
    assert token.origin is TokenOrigin.TARGET
    assert token.rejected_before == 4
    assert token.step == 0
    assert attributor.accepted_per_position == []


def test_merged_chunk_counts_tokens_not_chunks() -> None:
    # Held-back UTF-8: one chunk releases the text of three tokens (two drafts and the target).
    attributor = Attributor()
    attributor.feed(counters("x", 1))
    events = attributor.feed(counters("é!", 4, drafted=3, accepted=2))
    tokens = [e for e in events if isinstance(e, TokenEvent)]
    assert [t.origin for t in tokens] == [TokenOrigin.DRAFT, TokenOrigin.DRAFT, TokenOrigin.TARGET]
    assert [t.text for t in tokens] == ["", "", "é!"]
    assert tokens[-1].rejected_before == 1
    assert attributor.tokens == 4


def test_chunk_without_new_tokens_emits_nothing() -> None:
    attributor = Attributor()
    attributor.feed(counters("a", 1))
    assert attributor.feed(counters("", 1)) == []


def test_counters_that_do_not_fit_are_counted_into_the_numbers() -> None:
    # A step that accepts 3 drafts releases them over this chunk and the next two; a second
    # step reported one chunk later does not fit (two of the first step's drafts never came).
    processor = ChunkProcessor(chat=False)
    processor.feed(completion("a", 1), t=0.0)
    processor.feed(completion("b", 2, drafted=4, accepted=3), t=0.1)
    assert processor.snapshot(0.1).attribution_anomalies == 0
    processor.feed(completion("c", 3, drafted=8, accepted=5), t=0.2)
    assert processor.attributor.anomalies == 1
    assert processor.snapshot(0.2).attribution_anomalies == 1
    processor.feed(completion("d", 4, drafted=12, accepted=8), t=0.3)
    summary = processor.summary(t=0.4).metrics
    assert summary.attribution_anomalies == 2
    assert (summary.tokens, summary.steps, summary.drafted, summary.accepted) == (4, 3, 12, 8)
