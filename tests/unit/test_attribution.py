"""Attribution on real captures reproduces the numbers the server itself counted."""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers.sse import FIXTURES, sse_payloads
from spectui.core.events import (
    EngineEvent,
    RunMetrics,
    StepEvent,
    TokenEvent,
    TokenOrigin,
    engine_event_adapter,
)
from spectui.core.llama.protocol import ServerMetrics
from spectui.core.proxy.aggregate import aggregate
from spectui.core.proxy.chunks import StreamAttribution
from spectui.core.proxy.models import ProxyRecord, RequestInfo, RequestStatus
from spectui.core.proxy.prom import ProxyMetrics
from spectui.core.request import GenerationRequest
from spectui.core.sessions.file import Session, SessionHeader
from spectui.core.sessions.replay import recompute
from spectui.core.stream.attribution import Attributor, ChunkCounters
from spectui.core.stream.dialects import EndpointKind
from spectui.core.stream.metrics import MetricsTracker
from spectui.core.stream.run import ChunkProcessor


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
    assert [t.text for t in tokens] == ["", "", "é!"]
    assert tokens[-1].rejected_before == 1
    assert attributor.tokens == 4
    # Two drafts then the target, or a draftless decode then a step still owing its target, or
    # two steps: only what every reading agrees on is said.
    assert [t.origin for t in tokens] == [TokenOrigin.UNKNOWN] * 3
    (step,) = [e for e in events if isinstance(e, StepEvent)]
    assert (step.steps, step.steps_maybe_fewer, step.split_known) == (1, 0, False)


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


# --- Chunks that carry several verification steps (held-back UTF-8) ---------------------------


def test_two_steps_in_one_chunk_nothing_accepted() -> None:
    # The reported case: predicted_n +2 with draft_n +4 and nothing accepted (a random MTP head,
    # n-max 2): two steps whose target tokens came in one chunk.
    attributor = Attributor()
    attributor.feed(counters("a", 1))
    attributor.feed(counters("b", 2, drafted=2))
    events = attributor.feed(counters("\u00e9", 4, drafted=6))
    step, *tokens = events
    assert isinstance(step, StepEvent)
    assert (step.index, step.steps, step.drafted, step.accepted) == (1, 2, 4, 0)
    assert step.split_known
    assert [t.origin for t in tokens if isinstance(t, TokenEvent)] == [TokenOrigin.TARGET] * 2
    assert attributor.steps == 3
    assert attributor.accepted_per_position == []


def random_mtp_chunks() -> list[ChunkCounters]:
    """40 tokens of a random-weights MTP head (n-max 2, 0 % acceptance), as the server makes
    them: token 0 from the prompt, 37 steps drafting 2, one drafting 1 (n_remaining - 1), the last
    token without a draft; 7 tokens held back into the next chunk (byte-fallback UTF-8)."""
    drafts = [0] + [2] * 37 + [1] + [0]
    held = {3, 8, 9, 15, 22, 30, 38}  # sent with the token after them (38: with the last one)
    chunks: list[ChunkCounters] = []
    drafted = 0
    for index, size in enumerate(drafts):
        drafted += size
        if index not in held:
            chunks.append(counters("x", index + 1, drafted=drafted))
    return chunks


@pytest.mark.parametrize("limit", [40, None])
def test_random_mtp_head_with_held_back_tokens_counts_every_step(limit: int | None) -> None:
    chunks = random_mtp_chunks()
    assert sum(b.draft_n > a.draft_n for a, b in itertools.pairwise(chunks)) < 38
    tracker = MetricsTracker()
    attributor = Attributor(limit=limit)
    for chunk in chunks:
        tracker.on_attributed(attributor.feed(chunk))
    metrics = tracker.snapshot()
    assert (metrics.tokens, metrics.drafted, metrics.accepted) == (40, 75, 0)
    assert metrics.steps_unsplit == metrics.accepted_unplaced == metrics.origin_unknown_tokens == 0
    assert metrics.steps == 38  # = /metrics' spec_decode_num_drafts_total
    # Each merged chunk of two 2-token drafts could, by the counters alone, be one step of 4 and
    # a draftless decode: counted as tokens - accepted, and said to be unproven. The last chunk
    # (a step drafting 1, then the draftless last token) is proven either way: 1 draft, 1 step.
    assert (metrics.steps_maybe_fewer, metrics.steps_maybe_more) == (6, 0)
    assert attributor.anomalies == 0


def test_one_step_whose_chunk_ends_inside_it() -> None:
    # A step drafts 3 and accepts 3; two tokens come in one chunk (the first ended inside a
    # character). 3 drafts can be one step only, so its split is known; but the first token may
    # also be a draftless decode before it, so only the second is surely a draft.
    attributor = Attributor()
    attributor.feed(counters("a", 1))
    step, *tokens = attributor.feed(counters("\u4e2d", 3, drafted=3, accepted=3))
    assert isinstance(step, StepEvent)
    assert (step.steps, step.steps_maybe_fewer, step.split_known) == (1, 0, True)
    origins = [t.origin for t in tokens if isinstance(t, TokenEvent)]
    assert origins == [TokenOrigin.UNKNOWN, TokenOrigin.DRAFT]
    rest = attributor.feed(counters("b", 4, drafted=3, accepted=3))
    assert [t.origin for t in rest if isinstance(t, TokenEvent)] == [TokenOrigin.DRAFT]
    assert attributor.accepted_per_position == [1, 1, 1]
    # The next step's single-token chunk settles what the old step still owed.
    events = attributor.feed(counters("cd", 7, drafted=5, accepted=4))
    assert attributor.anomalies == 0
    assert [e.origin for e in events if isinstance(e, TokenEvent)][-1] is not None


def test_previous_steps_rest_comes_first() -> None:
    # Step 0 accepts 2 drafts and releases only its first; the next chunk holds its other draft
    # and target (held back) and the first token of step 1: attributed without an anomaly.
    attributor = Attributor()
    attributor.feed(counters("a", 1))
    attributor.feed(counters("b", 2, drafted=3, accepted=2))
    events = attributor.feed(counters("cd", 5, drafted=6, accepted=2))
    tokens = [e for e in events if isinstance(e, TokenEvent)]
    steps = [e for e in events if isinstance(e, StepEvent)]
    assert [t.origin for t in tokens] == [TokenOrigin.DRAFT, TokenOrigin.TARGET, TokenOrigin.TARGET]
    assert [t.step for t in tokens] == [0, 0, 1]
    assert (steps[0].steps, steps[0].first_token) == (1, 4)
    assert attributor.anomalies == 0
    assert attributor.accepted_per_position == [1, 1]


def test_several_steps_with_accepted_drafts_are_unsplit() -> None:
    # 4 tokens, 6 drafted, 2 accepted in one chunk: one step of 2 accepted + a draftless decode,
    # or two steps (2+0, 1+1, 0+2 ...): the split is unknown and said so.
    tracker = MetricsTracker()
    attributor = Attributor()
    tracker.on_attributed(attributor.feed(counters("a", 1)))
    tracker.on_attributed(attributor.feed(counters("\U0001f600", 5, drafted=6, accepted=2)))
    metrics = tracker.snapshot()
    assert metrics.steps == 2  # tokens - accepted
    assert (metrics.steps_maybe_fewer, metrics.steps_maybe_more) == (1, 2)
    assert (metrics.steps_unsplit, metrics.accepted_unplaced) == (2, 2)
    assert metrics.accepted_per_position == []
    assert metrics.origin_unknown_tokens == 4  # (the last may be a draft of a step still open)


# --- A simulated server --------------------------------------------------------------------------


@dataclass
class Simulated:
    chunks: list[ChunkCounters]
    origins: list[TokenOrigin]
    steps: int
    drafted: int
    accepted: int
    per_position: list[int]


@st.composite
def simulated_server(draw: st.DrawFn) -> Simulated:
    """A response as llama-server streams it: draftless decodes (the prompt's token, empty
    drafts, the last token before the limit), steps that draft up to n-max and accept a prefix,
    and tokens held back into the next chunk."""
    limit = draw(st.integers(2, 40))
    n_max = draw(st.integers(1, 5))
    empty = draw(st.booleans())
    hold = draw(st.floats(0.0, 0.7))
    origins = [TokenOrigin.TARGET]
    counts = [(0, 0)]  # cumulative (drafted, accepted) as each token is sent
    steps = drafted = accepted = 0
    per_position: list[int] = []
    while len(origins) < limit:
        room = limit - len(origins) - 1  # the server drafts at most n_remaining - 1
        if room < 1 or (empty and draw(st.booleans())):
            origins.append(TokenOrigin.TARGET)
            counts.append((drafted, accepted))
            continue
        size = draw(st.integers(1, min(n_max, room)))
        took = draw(st.integers(0, size))
        steps, drafted, accepted = steps + 1, drafted + size, accepted + took
        per_position += [0] * (took - len(per_position))
        for position in range(took):
            per_position[position] += 1
        origins += [TokenOrigin.DRAFT] * took + [TokenOrigin.TARGET]
        counts += [(drafted, accepted)] * (took + 1)
    chunks = [
        counters("x", index + 1, drafted=d, accepted=a)
        for index, (d, a) in enumerate(counts)
        if index == len(counts) - 1 or draw(st.floats(0, 1)) >= hold
    ]
    return Simulated(chunks, origins, steps, drafted, accepted, per_position)


@settings(max_examples=400, deadline=None)
@given(sim=simulated_server(), knows_limit=st.booleans())
def test_simulated_server_is_attributed_exactly_where_it_can_be(
    sim: Simulated, knows_limit: bool
) -> None:
    attributor = Attributor(limit=len(sim.origins) if knows_limit else None)
    tracker = MetricsTracker()
    tokens: list[TokenEvent] = []
    for chunk in sim.chunks:
        events = attributor.feed(chunk)
        tracker.on_attributed(events)
        tokens += [e for e in events if isinstance(e, TokenEvent)]
    metrics = tracker.snapshot()
    assert attributor.anomalies == 0
    assert [t.index for t in tokens] == list(range(len(sim.origins)))
    assert (metrics.drafted, metrics.accepted) == (sim.drafted, sim.accepted)
    # Steps: within the range that fits the counters; exact where that range is one count.
    fewer, more = metrics.steps_maybe_fewer, metrics.steps_maybe_more
    assert metrics.steps - fewer <= sim.steps <= metrics.steps + more
    # Known origins are right; unknown ones are counted.
    for token, truth in zip(tokens, sim.origins, strict=True):
        assert token.origin in (truth, TokenOrigin.UNKNOWN)
    unknown = sum(t.origin is TokenOrigin.UNKNOWN for t in tokens)
    assert metrics.origin_unknown_tokens == unknown
    # Per position: the known part is a part of the truth; the rest is the unplaced drafts.
    known = metrics.accepted_per_position
    assert all(n <= m for n, m in zip(known, sim.per_position, strict=False))
    assert len(known) <= len(sim.per_position)
    assert sum(known) + metrics.accepted_unplaced == sim.accepted
    if metrics.steps_unsplit == 0:
        assert known == sim.per_position
    if len(sim.chunks) == len(sim.origins):  # nothing held back: everything is known
        assert metrics.steps == sim.steps
        assert fewer == more == metrics.steps_unsplit == unknown == 0


MULTI_STEP = [("a", 1, 0, 0), ("b", 2, 2, 1), ("", 3, 2, 1), ("\U0001f600", 7, 6, 2)]
MULTI_STEP += [("c", 9, 8, 4), ("", 10, 8, 4), ("d", 12, 10, 4)]


def test_the_proxy_attributes_multi_step_chunks_as_the_stream_does() -> None:
    processor = ChunkProcessor(chat=False, limit=12)
    proxied = StreamAttribution(EndpointKind.NATIVE, strip=False, keep_events=True, limit=12)
    for i, (text, n, drafted, accepted) in enumerate(MULTI_STEP):
        processor.feed(completion(text, n, drafted, accepted), t=i * 0.01)
        proxied.line(b"data: " + completion(text, n, drafted, accepted).encode() + b"\n", i * 0.01)
    proxied.settle()
    assert proxied.tracker.snapshot() == processor.tracker.snapshot()
    assert proxied.attributor.steps_range == processor.attributor.steps_range


def test_a_recording_replays_the_multi_step_numbers() -> None:
    # Through the session file's JSON and replay's recomputation: the same steps, ranges,
    # unsplit steps and unknown origins as live.
    processor = ChunkProcessor(chat=False, limit=12)
    events: list[EngineEvent] = []
    for i, (text, n, drafted, accepted) in enumerate(MULTI_STEP):
        events += processor.feed(completion(text, n, drafted, accepted), t=i * 0.01)
    live = processor.summary(t=1.0)
    events.append(live)
    assert live.metrics.steps_unsplit and live.metrics.origin_unknown_tokens
    written = [engine_event_adapter.validate_json(e.model_dump_json()) for e in events]
    header = SessionHeader(request=GenerationRequest(prompt="p", n_predict=12))
    replayed = recompute(Session(Path("run.spectui"), header, written)).summary.metrics
    fields = "steps steps_maybe_fewer steps_maybe_more steps_unsplit accepted_unplaced"
    fields += " origin_unknown_tokens accepted_per_position"
    names = fields.split()
    assert {f: getattr(replayed, f) for f in names} == {f: getattr(live.metrics, f) for f in names}


def test_proxy_totals_leave_unsplit_steps_out_of_the_position_rates() -> None:
    info = RequestInfo(
        id=1, started=datetime(2026, 1, 1, tzinfo=UTC), client="c", endpoint="/completion",
        kind=EndpointKind.NATIVE, model="m", streamed=True, per_token=True,
    )  # fmt: skip
    metrics = RunMetrics(
        tokens=12, drafted=10, accepted=4, steps=4, accepted_per_position=[1, 1],
        steps_unsplit=2, accepted_unplaced=2,
    )  # fmt: skip
    record = ProxyRecord(
        info=info, status=RequestStatus.DONE, http_status=200, metrics=metrics, tokens=12,
        drafted=10, accepted=4,
    )  # fmt: skip
    total = aggregate([record, record])
    assert (total.steps, total.steps_unsplit) == (8, 4)
    assert total.position_rates == [0.5, 0.5]  # 2 of the 4 steps with a known split
    exported = ProxyMetrics()
    exported.request_finished(None, record)  # type: ignore[arg-type]  # unused by the counter
    text = exported.exposition().decode()
    assert 'spectui_proxy_steps_unsplit_total{endpoint="/completion",model="m"} 2.0' in text
    assert 'spectui_proxy_accepted_unplaced_total{endpoint="/completion",model="m"} 2.0' in text


def test_compare_records_keep_what_attribution_could_not_place() -> None:
    # A compare run's record takes RunMetrics' fields by name: the multi-step ones included.
    from spectui.core.compare.attempt import _SHARED_METRICS
    from spectui.core.compare.export import CSV_FIELDS

    multi_step = {"steps_unsplit", "accepted_unplaced", "steps_maybe_fewer", "steps_maybe_more"}
    multi_step.add("origin_unknown_tokens")
    assert multi_step <= _SHARED_METRICS
    assert multi_step <= set(CSV_FIELDS)
