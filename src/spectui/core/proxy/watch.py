"""`spectui watch`: poll a llama-server's /slots and /metrics, send nothing else.

Per slot: busy or idle, task id, tokens decoded, and tokens/s from ``n_decoded`` deltas divided by
the *measured* time between polls. Server-wide: acceptance, mean acceptance length and
per-position acceptance as windowed deltas of the speculative counters (which llama-server
moves only when a request ends), prompt and generation throughput, and memory when the server
runs on this machine. A disabled endpoint is a clear line, not an error.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from datetime import UTC, datetime

import httpx
from pydantic import BaseModel, ConfigDict, Field, SecretStr, TypeAdapter, ValidationError

from spectui.core.llama.attach import find_local_pid
from spectui.core.llama.client import ServerClient
from spectui.core.llama.memory import MemorySampler
from spectui.core.llama.protocol import ServerMetrics

METRICS_OFF = "/metrics is off: start llama-server with --metrics to see acceptance"
"""The line shown when the server does not serve /metrics."""

SLOTS_OFF = "/slots is disabled (the server runs with --no-slots): no per-slot view"
"""The line shown when the server does not serve /slots."""


class _Payload(BaseModel):
    model_config = ConfigDict(extra="ignore")


class NextToken(_Payload):
    """`next_token[0]` of a slot."""

    n_decoded: int = 0
    """Tokens generated so far by the slot's current (or last) task."""
    n_remain: int = -1
    """Tokens left before n_predict (-1: no limit)."""


class SlotPayload(_Payload):
    """One entry of `GET /slots`, the fields watch reads."""

    id: int
    """Slot id."""
    is_processing: bool = False
    """Generating (or processing a prompt) now."""
    id_task: int | None = None
    """The slot's current or last task."""
    speculative: bool = False
    """Speculative decoding active in this slot."""
    params: dict[str, object] = Field(default_factory=dict)
    """The task's parameters (``timings_per_token`` among them)."""
    next_token: list[NextToken] = Field(default_factory=list)
    """Generation progress."""


_slots = TypeAdapter(list[SlotPayload])


class SlotView(BaseModel):
    """One slot as watch shows it."""

    model_config = ConfigDict(frozen=True)

    id: int
    """Slot id."""
    busy: bool
    """Generating or processing a prompt now."""
    task: int | None
    """Task id (llama-server's request number)."""
    decoded: int
    """Tokens the task has generated so far."""
    tokens_per_second: float | None
    """``decoded`` delta over the measured poll interval (None on the first poll or when the
    task changed)."""
    speculative: bool
    """Speculative decoding active in the slot."""


class SpecCounters(BaseModel):
    """Speculative counters: since server start, or their delta over a window."""

    model_config = ConfigDict(frozen=True)

    steps: int = 0
    """Verification steps (``spec_decode_num_drafts_total``)."""
    drafted: int = 0
    """Draft tokens proposed."""
    accepted: int = 0
    """Draft tokens accepted."""
    accepted_per_position: list[int] = Field(default_factory=list)
    """Steps that accepted a draft token at each position."""

    @property
    def acceptance_rate(self) -> float | None:
        """Accepted / drafted."""
        return self.accepted / self.drafted if self.drafted else None

    @property
    def mean_acceptance_length(self) -> float | None:
        """Tokens per verification step: 1 + accepted / steps."""
        return 1 + self.accepted / self.steps if self.steps else None

    @classmethod
    def of(cls, metrics: ServerMetrics) -> SpecCounters:
        """The counters a /metrics exposition holds."""
        return cls(
            steps=metrics.spec_steps,
            drafted=metrics.spec_drafted,
            accepted=metrics.spec_accepted,
            accepted_per_position=metrics.accepted_per_position,
        )

    def minus(self, before: SpecCounters) -> SpecCounters:
        """The delta since ``before`` (the totals themselves when the server restarted between:
        its counters started again from zero)."""
        if self.steps < before.steps or self.drafted < before.drafted:
            return self
        old = before.accepted_per_position
        histogram = [
            n - (old[i] if i < len(old) else 0) for i, n in enumerate(self.accepted_per_position)
        ]
        while histogram and histogram[-1] == 0:
            histogram.pop()
        return SpecCounters(
            steps=self.steps - before.steps,
            drafted=self.drafted - before.drafted,
            accepted=self.accepted - before.accepted,
            accepted_per_position=histogram,
        )


class ServerView(BaseModel):
    """One poll of one server."""

    model_config = ConfigDict(frozen=True)

    url: str
    """The server (credentials removed)."""
    time: datetime
    """When the poll ended (UTC)."""
    interval_s: float | None
    """Measured time since the previous poll (None on the first)."""
    reachable: bool = True
    """Whether the server answered at all."""
    problem: str | None = None
    """One line when it did not (unreachable, wrong key)."""
    slots: list[SlotView] | None = None
    """Per slot; None when /slots is disabled."""
    slots_note: str | None = None
    """Why there are no slots."""
    metrics_note: str | None = None
    """Why there are no server-wide numbers."""
    spec_total: SpecCounters | None = None
    """Speculative counters since the server started."""
    spec_window: SpecCounters | None = None
    """Their delta since the previous poll (they move only when a request ends)."""
    generation_tokens_per_second: float | None = None
    """Sum of the busy slots' rates (live)."""
    prompt_tokens_per_second: float | None = None
    """Prompt tokens processed per second over the window (moves when requests end)."""
    requests_processing: int | None = None
    """Requests being processed (/metrics)."""
    requests_deferred: int | None = None
    """Requests waiting for a slot (/metrics)."""
    rss_bytes: int | None = None
    """Resident memory of the server's process tree, when it runs on this machine."""


class ServerWatcher:
    """Polls one server; each `poll()` returns a `ServerView` with deltas since the last."""

    def __init__(
        self,
        url: str,
        api_key: SecretStr | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.client = ServerClient(url, api_key, timeout=httpx.Timeout(5.0, connect=3.0))
        self._clock = clock
        self._last_t: float | None = None
        self._last_slots: dict[int, tuple[int | None, int]] = {}
        self._last_spec: SpecCounters | None = None
        self._last_prompt: float | None = None
        self._memory: MemorySampler | None = None
        self._pid_checked = False

    async def aclose(self) -> None:
        """Close the connections."""
        await self.client.aclose()

    async def poll(self) -> ServerView:
        """One poll of /slots and /metrics (concurrently)."""
        url = self.client.shown_url
        try:
            slots_r, metrics_r = await asyncio.gather(
                self.client.http.get("/slots"), self.client.http.get("/metrics")
            )
        except httpx.HTTPError as error:
            self._last_t = None
            return ServerView(
                url=url,
                time=datetime.now(UTC),
                interval_s=None,
                reachable=False,
                problem=f"cannot reach {url} ({type(error).__name__})",
            )
        now = self._clock()
        interval = None if self._last_t is None else now - self._last_t
        self._last_t = now
        if 401 in (slots_r.status_code, metrics_r.status_code):
            return ServerView(
                url=url,
                time=datetime.now(UTC),
                interval_s=interval,
                reachable=True,
                problem=f"{url} wants an API key: pass it with --api-key or SPECTUI_API_KEY",
            )
        fields: dict[str, object] = {}
        fields.update(self._slot_fields(slots_r, interval))
        fields.update(self._metric_fields(metrics_r, interval))
        fields["rss_bytes"] = await self._rss()
        return ServerView(url=url, time=datetime.now(UTC), interval_s=interval, **fields)

    def _slot_fields(self, response: httpx.Response, interval: float | None) -> dict[str, object]:
        if response.status_code != 200:
            return {
                "slots_note": SLOTS_OFF
                if response.status_code in (404, 501)
                else f"/slots answered HTTP {response.status_code}"
            }
        try:
            payloads = _slots.validate_json(response.content)
        except ValidationError:
            return {"slots_note": "/slots answered something unexpected"}
        views = []
        seen: dict[int, tuple[int | None, int]] = {}
        total_rate = 0.0
        for slot in payloads:
            decoded = slot.next_token[0].n_decoded if slot.next_token else 0
            previous = self._last_slots.get(slot.id)
            rate = None
            if slot.is_processing and interval and previous and previous[0] == slot.id_task:
                rate = max(decoded - previous[1], 0) / interval
                total_rate += rate
            seen[slot.id] = (slot.id_task, decoded)
            views.append(
                SlotView(
                    id=slot.id,
                    busy=slot.is_processing,
                    task=slot.id_task,
                    decoded=decoded,
                    tokens_per_second=rate,
                    speculative=slot.speculative,
                )
            )
        self._last_slots = seen
        return {"slots": views, "generation_tokens_per_second": total_rate if interval else None}

    def _metric_fields(self, response: httpx.Response, interval: float | None) -> dict[str, object]:
        if response.status_code != 200:
            return {
                "metrics_note": METRICS_OFF
                if response.status_code in (404, 501)
                else f"/metrics answered HTTP {response.status_code}"
            }
        metrics = ServerMetrics.parse(response.text)
        spec = SpecCounters.of(metrics)
        prompt = metrics.value("llamacpp:prompt_tokens_total")
        fields: dict[str, object] = {
            "spec_total": spec,
            "requests_processing": int(metrics.value("llamacpp:requests_processing")),
            "requests_deferred": int(metrics.value("llamacpp:requests_deferred")),
        }
        if self._last_spec is not None and interval:
            fields["spec_window"] = spec.minus(self._last_spec)
            if self._last_prompt is not None:
                fields["prompt_tokens_per_second"] = max(prompt - self._last_prompt, 0) / interval
        self._last_spec = spec
        self._last_prompt = prompt
        return fields

    async def _rss(self) -> int | None:
        if not self._pid_checked:
            self._pid_checked = True
            pid = await asyncio.to_thread(find_local_pid, self.client.base_url)
            if pid is not None:
                self._memory = MemorySampler(pid, use_gpu=False)
        if self._memory is None:
            return None
        sample = await asyncio.to_thread(self._memory.sample, 0.0)
        return sample.rss_bytes if sample is not None else None


async def snapshot_once(
    urls: list[str], api_key: SecretStr | None, interval_s: float
) -> list[ServerView]:
    """Two polls ``interval_s`` apart (rates and deltas need two), the second returned."""
    watchers = [ServerWatcher(url, api_key) for url in urls]
    try:
        await asyncio.gather(*(w.poll() for w in watchers))
        await asyncio.sleep(interval_s)
        return list(await asyncio.gather(*(w.poll() for w in watchers)))
    finally:
        await asyncio.gather(*(w.aclose() for w in watchers))


__all__ = [
    "METRICS_OFF",
    "SLOTS_OFF",
    "ServerView",
    "ServerWatcher",
    "SlotView",
    "SpecCounters",
    "snapshot_once",
]
