"""An engine with scripted answers for the compare and tune tests, and the `CompareSetup`
stand-in that hands them out: no server, no clock."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from helpers.sse import FIXTURES
from spectui.core.compare.store import BinaryInfo, ModelInfo, ServerOptions
from spectui.core.engine.base import LiveServerSource, ServerInfo
from spectui.core.events import (
    ErrorEvent,
    EventStream,
    RunMetrics,
    ServerState,
    ServerStateEvent,
    SummaryEvent,
    TokenEvent,
    TokenOrigin,
)
from spectui.core.llama.binary import Capabilities, parse_help
from spectui.core.llama.specconfig import SpecConfig
from spectui.core.request import GenerationRequest


def words(text: str) -> list[str]:
    """Split into tokens that keep their trailing space."""
    out: list[str] = []
    for word in text.split(" "):
        out.append(word + " ")
    out[-1] = out[-1][:-1]
    return [t for t in out if t]


@dataclass
class ScriptedEngine(LiveServerSource):
    """An `Engine` with scripted answers: per spec type, a text and a speed; counts servers."""

    spec: SpecConfig = field(default_factory=SpecConfig)
    answers: dict[str, str] = field(default_factory=dict)
    """Spec type -> answer text (default: the same for all)."""
    speeds: dict[str, float] = field(default_factory=dict)
    """Spec type -> total ms of a run (default 1000)."""
    fail_types: set[str] = field(default_factory=set)
    """Spec types whose server never starts."""
    cancel_on_runs: set[int] = field(default_factory=set)
    """Run numbers that end 'cancelled' half-way (the engine closing under the run)."""
    die_on_runs: set[int] = field(default_factory=set)
    """Run numbers (0-based, over the engine's life) during which the server dies."""
    log: list[tuple[str, str, str]] = field(default_factory=list)
    """('start'|'switch'|'run', spec type, prompt)."""
    running: int = 0
    max_running: int = 0
    closed: bool = False
    runs_done: int = 0

    @property
    def info(self) -> ServerInfo:
        return ServerInfo(mode="launched", url="http://127.0.0.1:1", spec=self.spec)

    @property
    def spec_types(self) -> tuple[str, ...]:
        return ("none", "ngram-simple", "ngram-mod", "draft-simple")

    def log_tail(self, lines: int = 50) -> list[str]:
        return ["fake log"]

    def _kind(self, spec: SpecConfig) -> str:
        return ",".join(spec.types)

    async def _launch(self, spec: SpecConfig, how: str) -> EventStream:
        self.log.append((how, self._kind(spec), ""))
        self.running = 0  # the old one is gone before the new one starts
        if self._kind(spec) in self.fail_types:
            yield ServerStateEvent(state=ServerState.FAILED, detail="cannot load", log_tail=["x"])
            return
        self.running += 1
        self.max_running = max(self.max_running, self.running)
        self.spec = spec
        yield ServerStateEvent(state=ServerState.READY, detail="ready")

    def start(self) -> EventStream:
        return self._launch(self.spec, "start")

    def switch_spec(self, spec: SpecConfig, *, adopt: bool = False) -> EventStream:
        return self._launch(spec, "switch")

    async def run(self, request: GenerationRequest) -> EventStream:
        kind = self._kind(self.spec)
        prompt = request.prompt.removeprefix("prompt ")
        self.log.append(("run", kind, prompt))
        number = self.runs_done
        self.runs_done += 1
        text = self.answers.get(kind, f"answer to {prompt} is forty two")
        tokens = words(text)
        for index, token in enumerate(tokens):
            yield TokenEvent(index=index, text=token, origin=TokenOrigin.TARGET, t=index * 0.01)
            if number in self.cancel_on_runs and index == 1:
                metrics = RunMetrics(tokens=2, total_ms=20.0)
                yield SummaryEvent(
                    metrics=metrics, text="".join(tokens[:2]), stop_reason="cancelled"
                )
                yield ServerStateEvent(state=ServerState.READY)
                return
            if number in self.die_on_runs and index == 1:
                self.running = 0
                yield ErrorEvent(message="connection broke", kind="connection")
                yield ServerStateEvent(state=ServerState.FAILED, detail="llama-server exited")
                return
        total = self.speeds.get(kind, 1000.0)
        metrics = RunMetrics(
            tokens=len(tokens),
            drafted=4 if kind != "none" else 0,
            accepted=3 if kind != "none" else 0,
            steps=1 if kind != "none" else 0,
            ttft_ms=50.0,
            total_ms=total,
            tokens_per_second=len(tokens) / (total / 1000),
            peak_rss_bytes=400 * 2**20,
        )
        yield SummaryEvent(metrics=metrics, text=text, stop_reason="limit")
        yield ServerStateEvent(state=ServerState.READY)

    def cancel_run(self) -> None:
        pass

    async def aclose(self) -> None:
        self.closed = True
        self.running = 0


@dataclass
class FakeSetup:
    """Stands in for `CompareSetup` (the same binary and model as `document`): its engines are
    `ScriptedEngine`s, so `spectui compare` runs without a server."""

    engines: list[ScriptedEngine] = field(default_factory=list)
    """Every engine handed out."""
    binary_info: BinaryInfo = field(
        default_factory=lambda: BinaryInfo(path="/opt/llama-server", version="b1")
    )
    model_info: ModelInfo = field(
        default_factory=lambda: ModelInfo(path="/models/m.gguf", size_bytes=123)
    )
    server: ServerOptions = field(default_factory=lambda: ServerOptions(ctx_size=4096))
    model: Path = Path("/models/m.gguf")
    """The model path (`model_info`'s), which configs are checked against."""
    parallel: int = 1
    """Server slots (`with_slots`)."""

    def with_slots(self, levels: tuple[int, ...]) -> FakeSetup:
        """A slot per stream of the largest level (nothing to refuse: no server arguments)."""
        self.parallel = max(levels)
        return self

    @property
    def caps(self) -> Capabilities:
        return parse_help((FIXTURES / "help.txt").read_text())

    def engine(self, spec: SpecConfig) -> ScriptedEngine:
        self.engines.append(ScriptedEngine(spec=spec))
        return self.engines[-1]
