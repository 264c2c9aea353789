"""LiveEngine attached to a llama-server started outside spectui: read, run, adopt on request."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

import httpx
import psutil
import pytest

from helpers.wait import await_async
from spectui.core.engine.live import LiveEngine
from spectui.core.events import EngineEvent, ServerState, ServerStateEvent, SummaryEvent
from spectui.core.llama.specconfig import SpecConfig
from spectui.core.prompts import builtin_prompt
from spectui.core.request import GenerationRequest

from .outside import outside_server

pytestmark = pytest.mark.server


@pytest.fixture
def outside(llama_binary: Path, gemma_model: Path) -> Iterator[tuple[str, int]]:
    with outside_server(llama_binary, gemma_model, "--metrics", "--slots") as server:
        yield server


async def ready(engine_states: Sequence[object]) -> None:
    last = engine_states[-1]
    assert isinstance(last, ServerStateEvent)
    assert last.state is ServerState.READY, last.detail


async def test_attach_run_then_adopt(outside: tuple[str, int]) -> None:
    url, pid = outside
    engine = LiveEngine.attached(url)
    try:
        # The outside server may still be loading: retry the attach until it is ready.
        async def attached() -> list[EngineEvent] | None:
            states = [e async for e in engine.start()]
            last = states[-1]
            ok = isinstance(last, ServerStateEvent) and last.state is ServerState.READY
            return states if ok else None

        states = await await_async(attached, "the attach found the server ready", interval=0.2)
        await ready(states)
        info = engine.info
        assert (info.mode, info.pid, info.needs_adopt) == ("attached", pid, True)
        assert "ngram-simple" in engine.spec_types

        events = [e async for e in engine.run(GenerationRequest(prompt="Hello", n_predict=8))]
        summary = next(e for e in events if isinstance(e, SummaryEvent))
        assert summary.metrics.tokens == 8
        assert summary.metrics.peak_rss_bytes  # the local process was found for memory

        spec = SpecConfig(types=("ngram-simple",))
        refused = [e async for e in engine.switch_spec(spec)]
        assert isinstance(refused[-1], ServerStateEvent)
        assert refused[-1].state is ServerState.FAILED
        assert psutil.pid_exists(pid)  # nothing restarted without the user's confirmation

        adopted = [e async for e in engine.switch_spec(spec, adopt=True)]
        await ready(adopted)
        assert engine.info.mode == "launched"
        new_pid = engine.info.pid
        assert new_pid is not None and new_pid != pid
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
        async with httpx.AsyncClient() as http:
            slots = (await http.get(engine.info.url + "/slots")).json()
        assert slots[0]["speculative"] is True
        prompt = builtin_prompt("code-edit").text
        events = [e async for e in engine.run(GenerationRequest(prompt=prompt, n_predict=64))]
        assert next(e for e in events if isinstance(e, SummaryEvent)).metrics.drafted > 0
    finally:
        await engine.aclose()
    assert (
        not psutil.pid_exists(new_pid) or psutil.Process(new_pid).status() == psutil.STATUS_ZOMBIE
    )
