"""From the engine's async iterators to Textual messages: batching, coalescing, ordering.

Tokens are not replaceable, so they are *batched*: buffered and handed over at most every
``interval`` seconds (20 Hz by default) and at once when the stream goes quiet, so the last tokens
of a burst never wait for the next event. Snapshots that supersede each other (metrics, memory,
prompt progress) *coalesce*: only the newest one in a batch is posted. Lifecycle events (server
state, summary, error) flush what is pending first, so the UI sees everything in stream order.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

from textual.message import Message

from spectui.core.events import (
    EngineEvent,
    ErrorEvent,
    EventStream,
    MemoryEvent,
    MetricsEvent,
    PromptProgressEvent,
    ServerStateEvent,
    StepEvent,
    SummaryEvent,
    TokenEvent,
)
from spectui.core.stream.run import READ_GAP_S
from spectui.ui.messages import (
    MemorySampled,
    MetricsUpdated,
    PromptProgressed,
    RunEnded,
    RunFailed,
    ServerStateChanged,
    TokensArrived,
)

FLUSH_INTERVAL_S = 0.05
"""A busy stream's batches reach the screen at most this often (20 Hz): smooth, and cheap over
SSH; at thousands of tokens a second the screen stays within ~100 ms of the stream."""

QUIET_FLUSH_INTERVAL_S = READ_GAP_S
"""A stream of a few tokens a batch is drawn at most this often (3 Hz): at the tens of tokens a
second a CPU server makes, each batch cost more than the tokens it showed (a frame, the messages
and the wake-ups: ~3 ms of the app's CPU in a real terminal), and the text still reads as a
stream. It is the pace a run reads its stream at (`core.stream.run.READ_GAP_S`), by definition:
a shorter interval would only draw the same batches, a longer one would hold tokens read."""

FOLLOW_FLUSH_INTERVAL_S = 0.15
"""A follower's quiet interval: a session file is polled every 25 ms, not read at the stream's
pace, so this is all the batching a follower's thin stream gets; at `READ_GAP_S` its lag behind
the file (goal: p95 <= 250 ms at 50 tok/s) would be the whole interval more."""

BUSY_BATCH = 32
"""Tokens waiting that make a batch busy: it goes out at the fast interval."""

Post = Callable[[Message], object]


class EventBatcher:
    """Turns engine events into messages; knows nothing about time or asyncio."""

    def __init__(self) -> None:
        self._tokens: list[TokenEvent] = []
        self._steps: list[StepEvent] = []
        self._progress: PromptProgressEvent | None = None
        self._metrics: MetricsEvent | None = None
        self._memory: MemoryEvent | None = None
        self.terminal_seen = False
        """Whether a summary or an error ended the stream."""

    @property
    def waiting_tokens(self) -> int:
        """Tokens buffered since the last flush."""
        return len(self._tokens)

    @property
    def pending(self) -> bool:
        """Whether a flush would post anything."""
        return bool(self._tokens or self._steps or self._progress or self._metrics or self._memory)

    def add(self, event: EngineEvent) -> list[Message]:
        """Buffer ``event``; return what must be posted right away (in order)."""
        if isinstance(event, TokenEvent):
            self._tokens.append(event)
        elif isinstance(event, StepEvent):
            self._steps.append(event)
        elif isinstance(event, PromptProgressEvent):
            self._progress = event
        elif isinstance(event, MetricsEvent):
            self._metrics = event
        elif isinstance(event, MemoryEvent):
            self._memory = event
        elif isinstance(event, ServerStateEvent):
            return [*self.flush(), ServerStateChanged(event)]
        elif isinstance(event, SummaryEvent):
            self.terminal_seen = True
            return [*self.flush(), RunEnded(event)]
        elif isinstance(event, ErrorEvent):
            self.terminal_seen = True
            return [*self.flush(), RunFailed(event)]
        return []

    def flush(self) -> list[Message]:
        """Everything buffered, as messages: tokens first, then the newest snapshots."""
        out: list[Message] = []
        if self._tokens or self._steps:
            out.append(TokensArrived(tuple(self._tokens), tuple(self._steps)))
            self._tokens, self._steps = [], []
        if self._progress is not None:
            out.append(PromptProgressed(self._progress))
        if self._metrics is not None:
            out.append(MetricsUpdated(self._metrics))
        if self._memory is not None:
            out.append(MemorySampled(self._memory))
        self._progress = self._metrics = self._memory = None
        return out


async def pump(
    events: EventStream,
    post: Post,
    *,
    interval: float = FLUSH_INTERVAL_S,
    quiet_interval: float = QUIET_FLUSH_INTERVAL_S,
) -> bool:
    """Iterate ``events`` to the end, posting messages; True when a summary or error ended it.

    Cancelling the caller (the user pressed stop, or a spec switch needs the server) cancels the
    pending read, which the engine sees as a cancellation inside its iterator, and closes it.
    The iterator runs in the caller's task. The frame rate follows the token rate: a batch goes
    out after ``quiet_interval``, or after ``interval`` once `BUSY_BATCH` tokens wait (and after
    a busy batch), never in the middle of one read's events.
    """
    batcher = EventBatcher()
    loop = asyncio.get_running_loop()
    last_flush = loop.time()
    # A quiet stream is flushed by a timer, one per flush period, armed by the first event
    # left pending. (Reading each event in a task of its own, to time out the wait instead,
    # cost a task and two loop turns per token: a third of the app's CPU at 5,000 tokens/s.)
    timer: asyncio.Handle | None = None
    timer_at = 0.0
    # Whether the latest flush was a busy one: the tokens after it go out at the fast interval
    # too (at the quiet one, a fast stream's remainder waited for the next busy batch).
    busy = False

    def flush() -> None:
        nonlocal last_flush, timer, busy
        if timer is not None:
            timer.cancel()
            timer = None
        busy = batcher.waiting_tokens >= BUSY_BATCH
        for message in batcher.flush():
            post(message)
        last_flush = loop.time()

    try:
        async for event in events:
            for message in batcher.add(event):
                post(message)
            if not batcher.pending:
                continue
            fast = busy or batcher.waiting_tokens >= BUSY_BATCH
            due = last_flush + (interval if fast else quiet_interval)
            if timer is not None and timer_at <= due:
                continue
            if timer is not None:  # (armed for the quiet interval; the stream is busy now)
                timer.cancel()
            # Soon, not now: the events of one read are all queued already, and the pump takes
            # them without waiting; flushing on the first busy one left the rest of the read
            # (most of it, at thousands of tokens a second) for the next flush.
            now = loop.time()
            timer_at = max(due, now)
            timer = loop.call_at(due, flush) if due > now else loop.call_soon(flush)
    finally:
        flush()
        with contextlib.suppress(RuntimeError):  # already running: it is closing itself
            await events.aclose()
    return batcher.terminal_seen
