"""A deterministic stand-in for `spectui.core.engine.base.Engine`, for Pilot tests and tmux tries.

Runs are generated from a seeded RNG: the same seed, spec and prompt always give the same tokens,
steps, times and memory numbers (times are synthetic, from the event data, never the clock). The
hot path only yields to the loop (``asyncio.sleep(delay)``, 0 by default).
"""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass, field
from pathlib import Path

from spectui.core.engine.base import LiveServerSource, ServerInfo
from spectui.core.errors import ServerStartError
from spectui.core.events import (
    ErrorEvent,
    EventStream,
    MemoryEvent,
    MetricsEvent,
    PromptProgressEvent,
    RunMetrics,
    ServerState,
    ServerStateEvent,
    StepEvent,
    SummaryEvent,
    TokenEvent,
    TokenOrigin,
)
from spectui.core.llama.specconfig import SpecConfig
from spectui.core.request import GenerationRequest

SPEC_TYPES = ("none", "draft-simple", "draft-mtp", "ngram-simple", "ngram-mod")

PASSAGE = (
    "| id | name | role | city |\n|----|------|------|------|\n"
    "| 1 | Alice | engineer | Lisbon |\n| 2 | Bob | designer | Oslo |\n"
    "| 3 | Chen | manager | Taipei |\n| 4 | Dana | engineer | Nairobi |\n"
    "| 5 | Emil | analyst | Prague |\n| 6 | Farah | engineer | Dublin |\n\n"
    "The new row for Farah follows the same columns as the others, so the table stays "
    "aligned and every city keeps its own cell. "
)

LOG_LINES = [
    "main: build = 9999 (fake)",
    "llama_model_loader: loaded meta data with 36 key-value pairs",
    "srv  load_model: speculative decoding enabled",
    "main: server is listening on http://127.0.0.1:8080",
]

ACCEPT_PROBABILITY = {"none": 0.0, "ngram-simple": 0.62, "ngram-mod": 0.78}
"""Chance that each drafted token is accepted; draft-* types use 0.7."""


def split_tokens(text: str) -> list[str]:
    """Words and the whitespace after them, like a tokenizer would roughly do."""
    tokens: list[str] = []
    current = ""
    for char in text:
        if char in " \n|" and current.strip():
            tokens.append(current)
            current = ""
        current += char
    if current:
        tokens.append(current)
    return tokens


@dataclass
class FakeEngine(LiveServerSource):
    """Implements the `Engine` protocol with seeded, synthetic runs."""

    seed: int = 7
    spec: SpecConfig = field(default_factory=lambda: SpecConfig(types=("ngram-simple",)))
    types: tuple[str, ...] = SPEC_TYPES
    mode: str = "launched"
    needs_adopt: bool = False
    can_switch: bool = True
    synthetic: bool = False
    """Whether the binary offers synthetic acceptance (``--spec-synth-len``)."""
    fail_starts: int = 0
    """The first N start() calls fail: a FAILED state event, or raising (`raise_on_fail`)."""
    raise_on_fail: bool = False
    crash_after: int | None = None
    """The next run's server dies after this many tokens (once)."""
    delay: float = 0.0
    """Seconds awaited per token (0: just yield to the loop)."""
    switch_gate: asyncio.Event | None = None
    """When set, switch_spec waits for this event before reporting ready."""
    refuse_switch: str | None = None
    """When set, switch_spec refuses with this detail before changing anything."""
    run_gate: asyncio.Event | None = None
    """When set, a run pauses after `hold_after` tokens until this event is set."""
    hold_after: int = 10
    honour_cancel: bool = True
    """Whether cancel_run ends the run (a stuck server would not)."""

    start_calls: int = 0
    switch_calls: list[tuple[SpecConfig, bool]] = field(default_factory=list)
    runs: list[GenerationRequest] = field(default_factory=list)
    emitted: list[TokenEvent] = field(default_factory=list)
    """Tokens of the latest run, as sent."""
    close_calls: int = 0
    active: int = 0
    """Server operations and runs in flight right now."""
    max_active_switches: int = 0
    max_active: int = 0
    _active_switches: int = 0
    cancel_calls: int = 0
    _cancel: asyncio.Event | None = None

    @property
    def info(self) -> ServerInfo:
        return ServerInfo(
            mode="attached" if self.mode == "attached" else "launched",
            url="http://127.0.0.1:8080",
            binary=Path("/opt/llama.cpp/bin/llama-server"),
            version="b9999",
            model="/models/gemma-3-270m-it-Q4_K_M.gguf",
            spec=self.spec,
            pid=4242,
            can_switch=self.can_switch,
            needs_adopt=self.needs_adopt,
            synthetic_acceptance=self.synthetic,
        )

    @property
    def spec_types(self) -> tuple[str, ...]:
        return self.types

    def _enter(self) -> None:
        self.active += 1
        self.max_active = max(self.max_active, self.active)

    async def start(self) -> EventStream:
        self.start_calls += 1
        self._enter()
        try:
            yield ServerStateEvent(state=ServerState.STARTING, detail="launching llama-server")
            await asyncio.sleep(0)
            yield ServerStateEvent(state=ServerState.LOADING, detail="loading gemma-3-270m")
            await asyncio.sleep(0)
            if self.start_calls <= self.fail_starts:
                lines = [*LOG_LINES[:2], "llama_model_load: error loading model: bad magic"]
                if self.raise_on_fail:
                    raise ServerStartError("llama-server exited while loading (code 1)", lines)
                yield ServerStateEvent(
                    state=ServerState.FAILED, detail="exited while loading (code 1)", log_tail=lines
                )
                return
            yield ServerStateEvent(state=ServerState.READY, detail="")
        finally:
            self.active -= 1

    async def switch_spec(self, spec: SpecConfig, *, adopt: bool = False) -> EventStream:
        self.switch_calls.append((spec, adopt))
        if self.refuse_switch is not None:
            yield ServerStateEvent(
                state=ServerState.FAILED, detail=self.refuse_switch, refused=True
            )
            return
        self._enter()
        self._active_switches += 1
        self.max_active_switches = max(self.max_active_switches, self._active_switches)
        try:
            yield ServerStateEvent(
                state=ServerState.RESTARTING, detail=f"switching to {spec.label}"
            )
            await asyncio.sleep(0)
            if self.switch_gate is not None:
                await self.switch_gate.wait()
            self.spec = spec
            self.mode, self.needs_adopt = "launched", False
            yield ServerStateEvent(state=ServerState.LOADING, detail="loading gemma-3-270m")
            await asyncio.sleep(0)
            yield ServerStateEvent(state=ServerState.READY)
        finally:
            self._active_switches -= 1
            self.active -= 1

    def cancel_run(self) -> None:
        self.cancel_calls += 1
        if self._cancel is not None and self.honour_cancel:
            self._cancel.set()

    async def _hold(self, gate: asyncio.Event, cancel: asyncio.Event) -> None:
        """Wait for the test to open the gate, or for cancel_run."""
        waits = {asyncio.ensure_future(gate.wait()), asyncio.ensure_future(cancel.wait())}
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for wait in waits:
                wait.cancel()

    def log_tail(self, lines: int = 50) -> list[str]:
        return LOG_LINES[-lines:]

    async def aclose(self) -> None:
        self.close_calls += 1

    async def run(self, request: GenerationRequest) -> EventStream:
        self.runs.append(request)
        self.emitted = []
        self._cancel = asyncio.Event()
        self._enter()
        try:
            async for event in self._generate(request, self._cancel):
                if isinstance(event, TokenEvent):
                    self.emitted.append(event)
                yield event
        finally:
            self._cancel = None
            self.active -= 1

    async def _generate(self, request: GenerationRequest, cancel: asyncio.Event) -> EventStream:
        rng = random.Random(f"{self.seed}|{self.spec.label}|{request.prompt}")
        kind = self.spec.types[0] if self.spec.types else "none"
        p_accept = ACCEPT_PROBABILITY.get(kind, 0.7)
        n_max = self.spec.draft_n_max or 4
        passage = split_tokens(PASSAGE)
        total = request.n_predict
        texts = [passage[i % len(passage)] for i in range(total)]
        prompt_tokens = 96
        yield PromptProgressEvent(t=0.01, processed=48, total=prompt_tokens)
        yield PromptProgressEvent(t=0.02, processed=prompt_tokens, total=prompt_tokens)
        t = ttft = 0.08
        index = steps = drafted = accepted = 0
        per_position = [0] * n_max
        window: list[tuple[float, int]] = []
        crash_after, self.crash_after = self.crash_after, None
        stop_reason = "limit"
        while index < total:
            if cancel.is_set():
                stop_reason = "cancelled"
                break
            if crash_after is not None and index >= crash_after:
                yield ServerStateEvent(
                    t=t, state=ServerState.FAILED, detail="llama-server exited (signal 9)",
                    log_tail=[*LOG_LINES, "Killed"],
                )  # fmt: skip
                yield ErrorEvent(t=t, message="llama-server exited mid-stream", kind="server_exit")
                return
            batch: list[TokenEvent] = []
            if kind == "none" or index == 0:
                t += 0.030 if index else 0.0
                batch.append(
                    TokenEvent(t=t, index=index, text=texts[index], origin=TokenOrigin.TARGET)
                )
            else:
                n_draft = rng.randint(1, n_max)
                n_ok = 0
                while n_ok < n_draft and rng.random() < p_accept:
                    n_ok += 1
                n_ok = min(n_ok, total - index - 1)
                t += 0.034 + 0.004 * n_draft
                yield StepEvent(t=t, index=steps, drafted=n_draft, accepted=n_ok, first_token=index)
                for position in range(n_ok):
                    per_position[position] += 1
                for offset in range(n_ok):
                    batch.append(TokenEvent(t=t, index=index + offset, text=texts[index + offset],
                                            origin=TokenOrigin.DRAFT, step=steps))  # fmt: skip
                batch.append(TokenEvent(t=t, index=index + n_ok, text=texts[index + n_ok],
                                        origin=TokenOrigin.TARGET, step=steps,
                                        rejected_before=n_draft - n_ok))  # fmt: skip
                steps, drafted, accepted = steps + 1, drafted + n_draft, accepted + n_ok
            for token in batch:
                yield token
                await asyncio.sleep(self.delay)  # (the behaviour: a token rate; 0 in tests)
            if self.run_gate is not None and index < self.hold_after <= index + len(batch):
                await self._hold(self.run_gate, cancel)
            index += len(batch)
            window = [*window, (t, index)][-8:]
            if index % 8 < len(batch) or index >= total:
                metrics = _metrics(index, drafted, accepted, steps, per_position, ttft, t, window)
                yield MetricsEvent(t=t, snapshot=metrics)
            if index % 16 < len(batch):
                rss = 412 * 2**20 + index * 4096
                yield MemoryEvent(t=t, rss_bytes=rss, rss_minus_shared_bytes=rss - 260 * 2**20)
        final = _metrics(index, drafted, accepted, steps, per_position, ttft, t, window)
        text = "".join(texts[:index])
        yield SummaryEvent(t=t, metrics=final, stop_reason=stop_reason, text=text)


def _metrics(
    tokens: int,
    drafted: int,
    accepted: int,
    steps: int,
    per_position: list[int],
    ttft: float,
    t: float,
    window: list[tuple[float, int]],
) -> RunMetrics:
    decode = t - ttft
    (t0, n0), (t1, n1) = window[0], window[-1]
    return RunMetrics(
        tokens=tokens,
        drafted=drafted,
        accepted=accepted,
        steps=steps,
        accepted_per_position=list(per_position),
        draft_tokens=accepted,
        ttft_ms=ttft * 1000,
        total_ms=t * 1000,
        tokens_per_second=(tokens - 1) / decode if decode > 0 else None,
        tokens_per_second_now=(n1 - n0) / (t1 - t0) if t1 > t0 else None,
        prompt_tokens=96,
        prompt_tokens_per_second=1200.0,
        peak_rss_bytes=412 * 2**20 + tokens * 4096,
        peak_rss_minus_shared_bytes=152 * 2**20 + tokens * 4096,
    )
