"""An engine that streams a real capture through `StreamRun` (mock transport, a deterministic
clock, a fake memory sampler), and recording one of its runs to a session file."""

from __future__ import annotations

from pathlib import Path

import httpx

from helpers.sse import FIXTURES
from spectui.core.engine.base import LiveServerSource, ServerInfo
from spectui.core.events import EngineEvent, EventStream, MemoryEvent, ServerState, ServerStateEvent
from spectui.core.llama.memory import MemorySampler
from spectui.core.llama.specconfig import SpecConfig
from spectui.core.request import GenerationRequest
from spectui.core.sessions.recording import RecordingEngine
from spectui.core.stream.run import StreamRun

BASE = "http://127.0.0.1:9"


class StepClock:
    """A monotonic clock that moves by an awkward step per read (floats that do not round)."""

    def __init__(self, step: float = 0.0137) -> None:
        self.now = 1000.0
        self.step = step

    def __call__(self) -> float:
        self.now += self.step
        return self.now


class FakeMemory(MemorySampler):
    """Growing memory samples without a process."""

    def __init__(self) -> None:
        super().__init__(pid=0, use_gpu=False)
        self.calls = 0

    def sample(self, t: float = 0.0) -> MemoryEvent | None:
        self.calls += 1
        return MemoryEvent(
            t=t, rss_bytes=100_000 + 7 * self.calls, rss_minus_shared_bytes=50_000 + self.calls
        )


class CaptureEngine(LiveServerSource):
    """The `Engine` protocol over a recorded SSE capture (no server, no network)."""

    def __init__(self, capture: str = "completion-ngram-simple.sse", body: bytes = b"") -> None:
        self.capture = capture
        self.body = body
        """The SSE stream to send instead of the capture's (a hand-made one)."""
        self.runs = 0

    @property
    def info(self) -> ServerInfo:
        return ServerInfo(
            mode="attached",
            url="http://user:hunter2@127.0.0.1:9/?token=abc",
            version="b9999",
            model="gemma.gguf",
            spec=SpecConfig(types=("ngram-simple",)),
        )

    @property
    def spec_types(self) -> tuple[str, ...]:
        return ("ngram-simple",)

    async def start(self) -> EventStream:
        yield ServerStateEvent(state=ServerState.READY)

    async def switch_spec(self, spec: SpecConfig, *, adopt: bool = False) -> EventStream:
        yield ServerStateEvent(state=ServerState.READY)

    async def run(self, request: GenerationRequest) -> EventStream:
        self.runs += 1
        body = self.body or (FIXTURES / self.capture).read_bytes()

        def handler(_: httpx.Request) -> httpx.Response:
            return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=body)

        yield ServerStateEvent(state=ServerState.GENERATING)
        async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as http:
            run = StreamRun(
                http,
                BASE,
                request,
                memory=FakeMemory(),
                clock=StepClock(),
                metrics_interval_s=0.05,
                memory_interval_s=0.2,
            )
            async for event in run:
                yield event
        yield ServerStateEvent(state=ServerState.READY)

    def cancel_run(self) -> None:
        """Nothing to cancel: a run is the capture, replayed to its end."""

    def log_tail(self, lines: int = 50) -> list[str]:
        return []

    async def aclose(self) -> None:
        return None


REQUEST = GenerationRequest(prompt="def add(a, b):", n_predict=120)


async def record_capture(
    path: Path,
    *,
    capture: str = "completion-ngram-simple.sse",
    secrets: tuple[str, ...] = (),
    body: bytes = b"",
) -> list[EngineEvent]:
    """Record one run of ``capture`` (or of the SSE ``body``) to ``path``; returns the events the
    consumer saw."""
    engine = RecordingEngine(
        CaptureEngine(capture, body), sessions_dir=path.parent, path=path, secrets=secrets
    )
    return [event async for event in engine.run(REQUEST)]
