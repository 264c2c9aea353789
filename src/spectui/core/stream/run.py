"""Stream one generation from llama-server and turn it into typed, attributed events.

`ChunkProcessor` is the pure part (SSE data -> events); `StreamRun` adds the network: httpx with
no read timeout on the open stream, a stall watchdog instead, memory samples at <= 2 Hz, metric
snapshots at ~10 Hz, and a `cancel()` that ends the run with a summary instead of an exception.
The reader runs in its own task and hands events over through a queue, so a slow consumer never
trips the stall watchdog and a timeout never fires inside the consumer's code. Over spectui's
asyncio transport the stream is read paced after the first token (`READ_GAP_S`), and tokens read
together are stamped with their estimated arrival (`ChunkProcessor._arrival`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import time
from collections.abc import AsyncIterator, Callable

import httpx
from httpx_sse import aconnect_sse

from spectui.core.drafters.chain import ChainNamer
from spectui.core.errors import AuthError, StreamError
from spectui.core.events import (
    EngineEvent,
    ErrorEvent,
    MemoryEvent,
    MetricsEvent,
    PromptProgressEvent,
    RunMetrics,
    SummaryEvent,
)
from spectui.core.llama.client import safe_url
from spectui.core.llama.memory import MemorySampler
from spectui.core.llama.protocol import Timings
from spectui.core.llama.transport import AsyncioStream
from spectui.core.net.per_read import PER_READ
from spectui.core.request import GenerationRequest
from spectui.core.stream import DEFAULT_STALL_TIMEOUT_S
from spectui.core.stream.attribution import Attributor, ChunkCounters
from spectui.core.stream.dialects import EndpointKind, reported_error, typed_chunk
from spectui.core.stream.metrics import MetricsTracker
from spectui.core.stream.naming import RunNaming


class ChunkProcessor:
    """SSE `data:` payloads in, attributed events out; also keeps the run's metrics and text."""

    def __init__(
        self, *, chat: bool, naming: RunNaming | None = None, limit: int | None = None
    ) -> None:
        self.chat = chat
        self.naming = naming
        """Names each step's drafter (`stream.naming`); None: the spec is not known."""
        self.kind = EndpointKind.OAI_CHAT if chat else EndpointKind.NATIVE
        # ``limit``: the request's n_predict; the server drafts nothing for the last token, which
        # settles some chunks that carry several steps (`Attributor.limit`).
        self.attributor = Attributor(limit=limit)
        self.tracker = MetricsTracker()
        self.text_parts: list[str] = []
        self.token_ids: list[int] = []
        self.last_timings: Timings | None = None
        self.stop_reason = ""
        self._server_offset = math.inf

    def feed(self, data: str, t: float, *, earliest: float | None = None) -> list[EngineEvent]:
        """Process one payload read at ``t``; raises StreamError for an error payload or
        unparsable data. ``earliest``: the payload is known to have arrived after it (the
        previous read), and its tokens are stamped with their estimated arrival (`_arrival`)."""
        text, predicted, timings, progress, stop, ids = typed_chunk(self.kind, data)
        if ids and predicted is not None:
            # Prompt-progress chunks carry a placeholder id (0) and no new token.
            self.token_ids += ids[: max(predicted - len(self.token_ids), 0)]
        if stop:
            self.stop_reason = stop
        events: list[EngineEvent] = []
        if progress is not None:
            events.append(
                PromptProgressEvent(
                    t=t, processed=progress.processed, total=progress.total, cached=progress.cache
                )
            )
        if timings is None:
            # Chat's first chunk (role only) and progress-only chunks carry no token.
            return events
        self.last_timings = timings
        if earliest is not None and timings.predicted_ms:
            t = self._arrival(t, earliest, timings.predicted_ms / 1000)
        tracker = self.tracker
        tracker.on_timings(timings)  # (the prompt's numbers can still change after token one)
        counters = ChunkCounters(text, predicted, timings.draft_n, timings.draft_n_accepted)
        attributed = self.attributor.feed(counters, t)
        if self.naming is not None:
            attributed = self.naming.stamp(attributed, self.token_ids)
        tracker.on_attributed(attributed)
        if text:
            self.text_parts.append(text)
        events.extend(attributed)
        return events

    def _arrival(self, read_t: float, earliest: float, server_t: float) -> float:
        """When a payload read at ``read_t`` most likely arrived, on the run's clock.

        A reader that takes several payloads in one read (a paced stream) knows only that each
        arrived between the previous read and this one. The server stamps every payload with
        its own clock (`predicted_ms`, cumulative from the first token); the smallest difference
        seen between reading and that stamp is the server's clock on ours (the payload read the
        moment it arrived, the first token at the latest). The estimate is kept inside what is
        known: after the previous read and the previous token, not after this read.
        """
        self._server_offset = min(self._server_offset, read_t - server_t)
        low = earliest
        if (last := self.tracker.last_token_t) is not None and last > low:
            low = last
        return min(read_t, max(low, server_t + self._server_offset))

    def snapshot(self, now: float | None = None) -> RunMetrics:
        """The run's numbers so far (see `MetricsTracker.snapshot`), with the attribution's
        anomaly count: read here, at snapshot rate, rather than copied on every token."""
        tracker = self.tracker
        tracker.attribution_anomalies = self.attributor.anomalies
        return tracker.snapshot(now)

    def summary(self, t: float, stop_reason: str | None = None) -> SummaryEvent:
        """The run's final event."""
        if self.naming is not None and stop_reason in ("cancelled", "error"):
            self.naming.cut_short()
        return SummaryEvent(
            t=t,
            metrics=self.snapshot(),
            stop_reason=stop_reason or self.stop_reason,
            server_timings=self.last_timings.as_floats() if self.last_timings else {},
            text="".join(self.text_parts),
            token_ids=self.token_ids,
        )


_DONE = object()

TOKENIZE_TIMEOUT_S = 10.0
"""How long a run waits for ``/tokenize`` (a chain's naming only) before naming without it."""

MEMORY_INTERVAL_S = 1.0
"""How often a run samples the server's memory (and spectui's own CPU) by default: as often as
the panes that show them redraw (`ui.widgets.metrics`, `ui.widgets.server`); each sample walks
/proc in a thread and costs the TUI a message. A comparison samples faster for its peaks
(`core.compare.setup.PEAK_INTERVAL_S`)."""

READ_GAP_S = 1 / 3
"""How often a run reads a thin stream after the first token (see `AsyncioStream.read_gap`; a
busy one is read every `FAST_GAP_S`): as often as the screen draws a batch of tokens when tokens
are few (`ui.bridge`), so nothing shows later for it. Each batch costs the TUI a frame, the
messages and the wake-ups whatever it carries: at 50 tok/s, three batches a second against four
(0.25 s) cost the TUI ~6 % less CPU (bench/README.md, client CPU), for up to 0.08 s more before
a thin stream's tokens show; text still arrives a line or so at a time."""


class StreamRun:
    """One streamed generation. Iterate it once; `cancel()` stops it early with a summary.

    ``namer``: the server start's (`stream.naming.namer_for`), to name each step's drafter.

    ``stall_timeout_s`` is the client's watchdog: seconds without a byte from the server before
    the run ends with a 'stall' error. It is how long this client waits, not what it asks for, so
    it is the runner's, not the request's.
    """

    def __init__(
        self,
        http: httpx.AsyncClient,
        base_url: str,
        request: GenerationRequest,
        *,
        memory: MemorySampler | None = None,
        stall_timeout_s: float = DEFAULT_STALL_TIMEOUT_S,
        clock: Callable[[], float] = time.monotonic,
        metrics_interval_s: float = 0.1,
        memory_interval_s: float = MEMORY_INTERVAL_S,
        read_gap_s: float = READ_GAP_S,
        namer: ChainNamer | None = None,
    ) -> None:
        self._http = http
        self._base_url = base_url.rstrip("/")
        self._url = self._base_url + request.endpoint
        self._namer = namer
        self._request = request
        self._memory = memory
        self._stall = stall_timeout_s
        self._clock = clock
        self._metrics_interval = metrics_interval_s
        self._memory_interval = memory_interval_s
        self._read_gap = read_gap_s
        self._queue: asyncio.Queue[EngineEvent | object] = asyncio.Queue()
        self._cancel_requested = False
        self._reader: asyncio.Task[None] | None = None
        self.processor = ChunkProcessor(chat=request.chat, limit=request.n_predict)
        self._t0 = 0.0
        self._last_memory_t = -1e9

    def cancel(self) -> None:
        """Stop generating; the run ends with a summary whose stop_reason is 'cancelled'."""
        self._cancel_requested = True
        if self._reader is not None:
            self._reader.cancel()

    def _now(self) -> float:
        return self._clock() - self._t0

    async def _prompt_tokens(self) -> list[int] | None:
        """The prompt's token ids as ``/completion`` reads it (BOS included), or None."""
        body = {"content": self._request.prompt, "add_special": True}
        try:
            response = await self._http.post(
                self._base_url + "/tokenize", json=body, timeout=TOKENIZE_TIMEOUT_S
            )
            tokens = response.json().get("tokens") if response.status_code == 200 else None
        except (httpx.HTTPError, ValueError, AttributeError):
            return None
        if not isinstance(tokens, list) or not all(isinstance(t, int) for t in tokens):
            return None
        return tokens

    async def _start_naming(self) -> None:
        """Give the namer this run's prompt (a chain's n-gram members read the token ids; chat
        returns none, so its steps stay unknown) before the clock starts."""
        namer = self._namer
        if namer is None:
            return
        prompt = None
        if namer.needs_tokens and not self._request.chat:
            prompt = await self._prompt_tokens()
        self.processor.naming = RunNaming(namer, prompt, self._request.n_predict)

    async def __aiter__(self) -> AsyncIterator[EngineEvent]:
        await self._start_naming()
        self._t0 = self._clock()
        self._reader = asyncio.create_task(self._read())
        try:
            while True:
                item = await self._queue.get()
                if item is _DONE:
                    break
                yield item  # type: ignore[misc]
        finally:
            if not self._reader.done():
                self._cancel_requested = True
                self._reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reader

    async def _read(self) -> None:
        put = self._queue.put_nowait
        try:
            self._sample_memory(put)
            await self._stream(put)
        except asyncio.CancelledError:
            if not self._cancel_requested:
                raise
            self._finish(put, "cancelled")
        except TimeoutError:
            self._fail(
                put,
                f"the server sent nothing for {self._stall:g} s (stalled stream)",
                "stall",
            )
        except AuthError as error:
            self._fail(put, str(error), "auth")
        except StreamError as error:
            self._fail(put, str(error), "http")
        except httpx.ConnectError:
            self._fail(
                put,
                f"cannot connect to {safe_url(self._url)} (is the server running?)",
                "connection",
            )
        except httpx.TransportError as error:
            self._fail(
                put,
                f"the connection to the server broke mid-stream ({type(error).__name__}); "
                "did the server crash?",
                "connection",
            )
        else:
            self._finish(put, None)
        finally:
            put(_DONE)

    async def _stream(self, put: Callable[[EngineEvent | object], None]) -> None:
        timeout = httpx.Timeout(connect=10.0, read=None, write=10.0, pool=10.0)
        stall = self._stall
        # Moving the watchdog costs a timer handle; per chunk that was a fifth of the pipeline.
        # It moves at most every `slack` seconds, to `slack` past the stall limit, so it never
        # fires before `stall` seconds of silence and at most `slack` after.
        slack = min(1.0, stall / 4)
        loop = asyncio.get_running_loop()
        last_metrics = -math.inf
        moved = loop.time()
        mem_interval = self._memory_interval
        async with asyncio.timeout(stall + slack) as watchdog:
            async with aconnect_sse(
                self._http,
                "POST",
                self._url,
                json=self._request.payload(),
                timeout=timeout,
                # Over spectui's transport the body comes whole per socket read, not per SSE
                # chunk (`core.net.per_read`); httpx's own transport ignores it.
                extensions={PER_READ: True},
            ) as source:
                response = source.response
                if response.status_code != 200:
                    body = (await response.aread()).decode(errors="replace")
                    raise _http_error(response.status_code, body)
                paced = response.extensions.get("network_stream")
                if not isinstance(paced, AsyncioStream):
                    paced = None  # (httpx's own transport, or a test's: read as it comes)
                # The loop's clock on the run's: the stream notes its reads on the former.
                shift = self._clock() - self._t0 - loop.time()
                try:
                    async for sse in source.aiter_sse():
                        if (arrived := loop.time()) - moved >= slack:
                            watchdog.reschedule(arrived + stall + slack)
                            moved = arrived
                        if sse.data == "[DONE]":
                            break
                        if sse.event == "error":
                            raise StreamError(reported_error(_json_or_text(sse.data)))
                        now = self._now()
                        if paced is None:
                            events = self.processor.feed(sse.data, now)
                        else:
                            events = self.processor.feed(
                                sse.data,
                                paced.last_read_t + shift,
                                earliest=paced.previous_read_t + shift,
                            )
                            # From the first token on (TTFT is read the moment it arrives).
                            if not paced.read_gap and self.processor.tracker.tokens:
                                paced.read_gap = self._read_gap
                        for event in events:
                            put(event)
                        if self._memory is not None and now - self._last_memory_t >= mem_interval:
                            await self._sample_memory_due(put)  # (a coroutine only when due)
                        if now - last_metrics >= self._metrics_interval:
                            last_metrics = now
                            put(MetricsEvent(t=now, snapshot=self.processor.snapshot(now)))
                finally:
                    if paced is not None:
                        paced.read_gap = 0.0  # (the connection goes back to the pool)

    def _sample_memory(self, put: Callable[[EngineEvent | object], None]) -> None:
        """A run's first and last sample, taken at once."""
        if self._memory is not None:
            now = self._now()
            self._record_memory(put, now, self._memory.sample(now))

    async def _sample_memory_due(self, put: Callable[[EngineEvent | object], None]) -> None:
        """The periodic sample, in a thread: psutil walks /proc to find the process tree, which
        would stall the event loop (and the UI on it) with every sample."""
        now = self._now()
        if self._memory is None or now - self._last_memory_t < self._memory_interval:
            return
        self._record_memory(put, now, await asyncio.to_thread(self._memory.sample, now))

    def _record_memory(
        self, put: Callable[[EngineEvent | object], None], now: float, sample: MemoryEvent | None
    ) -> None:
        self._last_memory_t = now
        if sample is not None:
            self.processor.tracker.on_memory(sample)
            put(sample)

    def _finish(self, put: Callable[[EngineEvent | object], None], reason: str | None) -> None:
        self._sample_memory(put)
        put(self.processor.summary(self._now(), reason))

    def _fail(self, put: Callable[[EngineEvent | object], None], message: str, kind: str) -> None:
        put(ErrorEvent(t=self._now(), message=message, kind=kind))
        self._finish(put, "error")


def _json_or_text(data: str) -> dict[str, object]:
    try:
        parsed = json.loads(data)
    except json.JSONDecodeError:
        return {"error": {"message": data}}
    return parsed if isinstance(parsed, dict) else {"error": {"message": data}}


def _http_error(status: int, body: str) -> StreamError | AuthError:
    if status == 401:
        return AuthError(
            "the server rejected the request (401): give its API key with --api-key or "
            "SPECTUI_API_KEY"
        )
    message = reported_error(_json_or_text(body)) if body else f"HTTP {status}"
    return StreamError(f"{message} (HTTP {status})")


__all__ = ["ChunkProcessor", "StreamRun"]
