"""A run as a step-cost point, with what the other slots put in the same batches.

llama-server decodes every active slot in one batch per step: each generating slot adds its
sampled token and its draft, and a draft-model type runs its drafter for each slot in turn. So
at N streams a run's steps cost what the whole batch holds, not what the run alone verified.
Each run's point therefore carries, besides its own decodes, steps and drafted tokens, the other
slots' contribution over its steps (`CostPoint.others`, ``other_steps``, ``other_drafted``).

Which slots shared its steps is read from the runs' times: a run decodes from its first token
(``sent_at + ttft_ms``) to its last (``sent_at + total_ms``), and another run of the same
session and level overlapping a share ``o`` of that span is counted in ``o`` of its steps, at
its own per-decode rates (one sampled token, ``steps / decodes`` verifications and
``drafted / decodes`` drafted tokens per step). A new request's prompt is processed in the same
batches: another run's prompt pass (from when a slot began it, ``sent_at + queue_ms``, to its
first token) overlapping a share of the run's span adds that share of its prompt tokens
(``timings.prompt_n``). A run without times counts alone.

A run's time is the server's own (``timings.predicted_ms``: first token to last, on the
server's clock) where the response carried it, else the client's decode time: the server's
excludes the stream's delivery and whatever the client's machine did meanwhile.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace
from datetime import datetime, timedelta

from spectui.core.compare.costfit import CostPoint
from spectui.core.compare.records import RunRecord


def run_ms(record: RunRecord) -> float | None:
    """The run's decode time after its first token (ms): the server's, else the client's."""
    server = record.server_timings.get("predicted_ms")
    if server and server > 0 and record.server_timings.get("predicted_n") == record.tokens:
        return server
    if not record.tokens_per_second:
        return None
    return (record.tokens - 1) / record.tokens_per_second * 1000


def run_point(record: RunRecord, group: str | None) -> CostPoint | None:
    """A finished run alone as a point (None: no usable decode time)."""
    if not record.ok or record.tokens < 2:
        return None
    decodes = record.tokens - 1 - record.accepted
    ms = run_ms(record)
    if decodes <= 0 or ms is None or ms <= 0:
        return None
    steps = min(record.steps, decodes) if record.drafted else 0
    return CostPoint(decodes, record.drafted, group, ms, record.round, steps)


def _span(record: RunRecord) -> tuple[datetime, datetime] | None:
    if record.sent_at is None or record.ttft_ms is None or record.total_ms is None:
        return None
    start = record.sent_at + timedelta(milliseconds=record.ttft_ms)
    end = record.sent_at + timedelta(milliseconds=record.total_ms)
    return (start, end) if end > start else None


def _prompt_span(record: RunRecord) -> tuple[datetime, datetime, float] | None:
    """When the server processed the run's prompt, and how many tokens it processed."""
    tokens = record.server_timings.get("prompt_n")
    if record.sent_at is None or record.ttft_ms is None or not tokens:
        return None
    start = record.sent_at + timedelta(milliseconds=record.queue_ms or 0.0)
    end = record.sent_at + timedelta(milliseconds=record.ttft_ms)
    return (start, end, tokens) if end > start else None


def batch_points(
    records: Iterable[RunRecord], groups: dict[str, str | None]
) -> dict[int, CostPoint]:
    """Run seq -> its point with the other slots' share of its batches (see the module
    docstring); runs of unknown configs and runs with no usable time are left out."""
    runs = [r for r in records if r.config in groups]
    alone = {r.seq: p for r in runs if (p := run_point(r, groups[r.config])) is not None}
    out: dict[int, CostPoint] = {}
    neighbours: dict[tuple[int, int], list[RunRecord]] = {}
    for r in runs:
        if r.seq in alone:
            neighbours.setdefault((r.session, r.level), []).append(r)
    for key, mine in neighbours.items():
        spans = {r.seq: s for r in mine if (s := _span(r)) is not None}
        ordered = sorted((r for r in mine if r.seq in spans), key=lambda r: spans[r.seq][0])
        same = [r for r in runs if (r.session, r.level) == key]
        prompts = [(r.seq, q) for r in same if (q := _prompt_span(r)) is not None]
        for r in mine:
            point = alone[r.seq]
            if key[1] > 1 and r.seq in spans:
                point = _with_others(point, spans[r.seq], ordered, spans, alone, r.seq)
                point = replace(point, other_prompt=_prompt_tokens(spans[r.seq], prompts, r.seq))
            out[r.seq] = point
    return out


def _with_others(
    point: CostPoint,
    span: tuple[datetime, datetime],
    ordered: Sequence[RunRecord],
    spans: dict[int, tuple[datetime, datetime]],
    alone: dict[int, CostPoint],
    seq: int,
) -> CostPoint:
    start, end = span
    length = (end - start).total_seconds()
    slots = steps = drafted = 0.0
    for other in ordered:
        low, high = spans[other.seq]
        if low >= end:
            break  # (sorted by start: no later one overlaps)
        if other.seq == seq or high <= start:
            continue
        share = (min(end, high) - max(start, low)).total_seconds() / length
        q = alone[other.seq]
        slots += share
        steps += share * q.steps / q.decodes
        drafted += share * q.drafted / q.decodes
    d = point.decodes
    return replace(point, others=slots * d, other_steps=steps * d, other_drafted=drafted * d)


def _prompt_tokens(
    span: tuple[datetime, datetime],
    prompts: Sequence[tuple[int, tuple[datetime, datetime, float]]],
    seq: int,
) -> float:
    """Other runs' prompt tokens processed while ``span`` decoded (each its overlapping share)."""
    start, end = span
    total = 0.0
    for other, (low, high, tokens) in prompts:
        if other != seq and low < end and high > start:
            share = (min(end, high) - max(start, low)) / (high - low)
            total += share * tokens
    return total
