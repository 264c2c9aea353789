"""Per-run metrics computed from the engine's events, on the client's clock.

Rates divide by *measured* intervals between token arrivals, never by nominal ones, so a burst of
accepted drafts arriving together counts for what it is. The same tracker recomputes a recorded
session's numbers on replay, so live and replayed summaries agree by construction.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from spectui.core.events import (
    DrafterStats,
    MemoryEvent,
    RunMetrics,
    StepEvent,
    TokenEvent,
    TokenOrigin,
)
from spectui.core.llama.protocol import Timings

ROLLING_WINDOW_S = 2.0
"""Width of the window behind 'tokens/s now'."""


@dataclass(slots=True)
class MetricsTracker:
    """Accumulates one run's events; `snapshot()` gives the numbers at any moment."""

    tokens: int = 0
    draft_tokens: int = 0
    drafted: int = 0
    accepted: int = 0
    steps: int = 0
    accepted_per_position: list[int] = field(default_factory=list)
    steps_maybe_fewer: int = 0
    steps_maybe_more: int = 0
    steps_unsplit: int = 0
    accepted_unplaced: int = 0
    origin_unknown_tokens: int = 0
    first_token_t: float | None = None
    last_token_t: float | None = None
    prompt_tokens: int | None = None
    prompt_tokens_per_second: float | None = None
    peak_rss: int | None = None
    peak_rss_minus_shared: int | None = None
    peak_gpu: int | None = None
    _cpu_samples: int = 0
    _client_cpu_sum: float = 0.0
    _server_cpu_sum: float = 0.0
    attribution_anomalies: int = 0
    """Set by whoever attributes the tokens (the counter lives in the `Attributor`), read here
    only when a snapshot is made; replay sets it from the recording."""
    _window: deque[tuple[float, int]] = field(default_factory=deque)
    by_drafter: dict[str, list[int]] = field(default_factory=dict)
    """Drafter -> [drafted, accepted, steps] of the steps named for it (`on_drafter`)."""

    def on_token(self, token: TokenEvent) -> None:
        """Count a token and when it arrived."""
        t = token.t
        self.tokens += 1
        origin = token.origin
        if origin is TokenOrigin.DRAFT:
            self.draft_tokens += 1
        elif origin is TokenOrigin.UNKNOWN:
            self.origin_unknown_tokens += 1
        if self.first_token_t is None:
            self.first_token_t = t
        self.last_token_t = t
        window = self._window
        window.append((t, self.tokens))
        horizon = t - ROLLING_WINDOW_S
        while window[0][0] < horizon:  # (never empties: the newest entry is inside)
            window.popleft()

    def on_attributed(self, events: list[TokenEvent | StepEvent]) -> None:
        """Count what the attributor made of one chunk (tokens and steps, in order)."""
        for event in events:
            if isinstance(event, TokenEvent):
                self.on_token(event)
            else:
                self.on_step(event)

    def on_step(self, step: StepEvent) -> None:
        """Count a verification step (or the several one event stands for) and, where its
        split is known, its per-position acceptance."""
        if step.drafter is not None:
            self.on_drafter(step)
        self.steps += step.steps
        self.drafted += step.drafted
        self.accepted += step.accepted
        # (the range as of the latest step: a later chunk can narrow it)
        self.steps_maybe_fewer, self.steps_maybe_more = (
            step.steps_maybe_fewer,
            step.steps_maybe_more,
        )
        if not step.split_known:
            self.steps_unsplit += step.steps
            self.accepted_unplaced += step.accepted
            return
        # A known split: the accepted drafts (if any) are one step's, positions 0.. (see
        # `StepEvent.split_known`).
        missing = step.accepted - len(self.accepted_per_position)
        if missing > 0:
            self.accepted_per_position.extend([0] * missing)
        for position in range(step.accepted):
            self.accepted_per_position[position] += 1

    def on_drafter(self, step: StepEvent) -> None:
        """Count a step for the drafter named on it (`stream.naming`; the stream cannot tell
        which drafter of a chain made a step, so it is named beside the counts)."""
        counts = self.by_drafter.setdefault(step.drafter or "", [0, 0, 0])
        counts[0] += step.drafted
        counts[1] += step.accepted
        counts[2] += step.steps  # (an event may stand for several steps)

    def drafter_stats(self) -> dict[str, DrafterStats]:
        """`RunMetrics.by_drafter` of the steps counted so far."""
        return {
            name: DrafterStats(drafted=d, accepted=a, steps=n)
            for name, (d, a, n) in self.by_drafter.items()
        }

    def on_timings(self, timings: Timings) -> None:
        """Take the prompt numbers from the server's timings (the client cannot see them)."""
        if timings.prompt_n:
            self.prompt_tokens = timings.prompt_n
            self.prompt_tokens_per_second = timings.prompt_per_second or None

    def on_memory(self, sample: MemoryEvent) -> None:
        """Track peak memory."""
        self.peak_rss = max(self.peak_rss or 0, sample.rss_bytes)
        self.peak_rss_minus_shared = max(
            self.peak_rss_minus_shared or 0, sample.rss_minus_shared_bytes
        )
        if sample.gpu_bytes is not None:
            self.peak_gpu = max(self.peak_gpu or 0, sample.gpu_bytes)
        if sample.client_cpu_percent is not None and sample.server_cpu_percent is not None:
            self._cpu_samples += 1
            self._client_cpu_sum += sample.client_cpu_percent
            self._server_cpu_sum += sample.server_cpu_percent

    def _cpu_mean(self, total: float) -> float | None:
        return round(total / self._cpu_samples, 1) if self._cpu_samples else None

    def decode_rate(self) -> float | None:
        """Tokens after the first / time from first to last token."""
        if self.first_token_t is None or self.last_token_t is None or self.tokens < 2:
            return None
        elapsed = self.last_token_t - self.first_token_t
        return (self.tokens - 1) / elapsed if elapsed > 0 else None

    def rolling_rate(self) -> float | None:
        """Tokens/s over the last window, divided by the window's measured span."""
        if len(self._window) < 2:
            return None
        (t_old, n_old), (t_new, n_new) = self._window[0], self._window[-1]
        return (n_new - n_old) / (t_new - t_old) if t_new > t_old else None

    def snapshot(self, now: float | None = None) -> RunMetrics:
        """The numbers so far; ``now`` (seconds since the request) extends total time while live."""
        end = now if now is not None else self.last_token_t
        return RunMetrics(
            tokens=self.tokens,
            draft_tokens=self.draft_tokens,
            drafted=self.drafted,
            accepted=self.accepted,
            steps=self.steps,
            accepted_per_position=list(self.accepted_per_position),
            ttft_ms=None if self.first_token_t is None else self.first_token_t * 1000,
            total_ms=None if end is None else end * 1000,
            tokens_per_second=self.decode_rate(),
            tokens_per_second_now=self.rolling_rate(),
            prompt_tokens=self.prompt_tokens,
            prompt_tokens_per_second=self.prompt_tokens_per_second,
            peak_rss_bytes=self.peak_rss,
            peak_rss_minus_shared_bytes=self.peak_rss_minus_shared,
            peak_gpu_bytes=self.peak_gpu,
            client_cpu_percent=self._cpu_mean(self._client_cpu_sum),
            server_cpu_percent=self._cpu_mean(self._server_cpu_sum),
            attribution_anomalies=self.attribution_anomalies,
            steps_maybe_fewer=self.steps_maybe_fewer,
            steps_maybe_more=self.steps_maybe_more,
            steps_unsplit=self.steps_unsplit,
            accepted_unplaced=self.accepted_unplaced,
            origin_unknown_tokens=self.origin_unknown_tokens,
            by_drafter=self.drafter_stats(),
        )
