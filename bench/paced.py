"""An `Engine` whose runs replay a recorded stream at a fixed rate, through the real client code.

Each run is a `StreamRun` (the code a live run uses: httpx, httpx-sse, parsing, attribution,
metrics, the stall watchdog) over an in-memory transport instead of a socket. The transport hands
over the SSE bytes of the recorded capture, repeated (`streams.long_payloads`), on the schedule
of a server producing ``rate`` tokens/s: whatever is due, as one read, at most every millisecond.
It notes when each token's bytes were handed over, so a benchmark can compare that with when the
screen drew the token.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterator

import httpx
from streams import long_payloads

from spectui.core.engine.base import LiveServerSource, ServerInfo
from spectui.core.events import EngineEvent, ServerState, ServerStateEvent
from spectui.core.llama.specconfig import SpecConfig
from spectui.core.request import GenerationRequest
from spectui.core.stream.run import StreamRun

TICK_S = 0.001


class PacedEngine(LiveServerSource):
    """Implements `spectui.core.engine.base.Engine`; every run replays the same stream."""

    def __init__(self, tokens: int, rate: float) -> None:
        self.rate = rate
        payloads = long_payloads(tokens)
        # One token per payload in the capture; the final chunk closes the response.
        self.chunks = [f"data: {p}\n\n".encode() for p in payloads[:-1]]
        self.final = f"data: {payloads[-1]}\n\n".encode()
        self.tokens = len(self.chunks)
        """Tokens per run: ``tokens`` rounded up to whole copies of the capture."""
        self.handed: list[float] = []
        """Loop time at which each token's bytes were handed to the client (latest run)."""
        self._current: StreamRun | None = None

    @property
    def info(self) -> ServerInfo:
        return ServerInfo(
            mode="launched",
            url="http://127.0.0.1:1",
            model="recorded stream",
            spec=SpecConfig(types=("ngram-simple",)),
            can_switch=False,
        )

    @property
    def spec_types(self) -> tuple[str, ...]:
        return ()

    async def start(self) -> AsyncGenerator[EngineEvent, None]:
        yield ServerStateEvent(state=ServerState.READY, detail="recorded stream")

    async def switch_spec(
        self, spec: SpecConfig, *, adopt: bool = False
    ) -> AsyncGenerator[EngineEvent, None]:
        yield ServerStateEvent(state=ServerState.FAILED, detail="no switching in a benchmark")

    def cancel_run(self) -> None:
        if self._current is not None:
            self._current.cancel()

    def log_tail(self, lines: int = 50) -> list[str]:
        return []

    async def aclose(self) -> None:
        self.cancel_run()

    async def _body(self) -> AsyncIterator[bytes]:
        loop = asyncio.get_running_loop()
        self.handed = []
        t0 = loop.time()
        sent = 0
        while sent < len(self.chunks):
            now = loop.time()
            due = min(len(self.chunks), int((now - t0) * self.rate) + 1)
            if due > sent:
                data = b"".join(self.chunks[sent:due])
                self.handed.extend([now] * (due - sent))
                sent = due
                yield data
            # Until the next token is due, but at least a tick: a socket read returns what
            # has arrived since the last one.
            await asyncio.sleep(max(TICK_S, t0 + sent / self.rate - loop.time()))
        yield self.final

    async def run(self, request: GenerationRequest) -> AsyncGenerator[EngineEvent, None]:
        def handler(_: httpx.Request) -> httpx.Response:
            return httpx.Response(
                200, headers={"content-type": "text/event-stream"}, content=self._body()
            )

        async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as http:
            self._current = StreamRun(http, "http://127.0.0.1:1", request)
            yield ServerStateEvent(state=ServerState.GENERATING)
            try:
                async for event in self._current:
                    yield event
            finally:
                self._current = None
        yield ServerStateEvent(state=ServerState.READY)
