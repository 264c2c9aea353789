"""The heart, against the real llama-server: attribution equals the server's own counters."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from helpers.servers import ONE_THREAD
from spectui.app_setup import build_engine
from spectui.config import Settings
from spectui.core.engine.live import LiveEngine
from spectui.core.events import (
    EngineEvent,
    ServerState,
    ServerStateEvent,
    StepEvent,
    SummaryEvent,
    TokenEvent,
    TokenOrigin,
)
from spectui.core.llama.protocol import ServerMetrics
from spectui.core.prompts import builtin_prompt
from spectui.core.request import GenerationRequest

pytestmark = pytest.mark.server


async def started(settings: Settings) -> LiveEngine:
    engine = build_engine(settings)
    states = [e async for e in engine.start()]
    assert isinstance(states[-1], ServerStateEvent)
    assert states[-1].state is ServerState.READY, states[-1].detail
    return engine


@pytest.fixture
async def engine_for(gemma_model: Path) -> AsyncIterator[object]:
    engines: list[LiveEngine] = []

    async def make(spec_type: str, **settings: Any) -> LiveEngine:  # Settings fields
        # One thread, as every test server: a test's own server_args replace the environment's.
        settings["server_args"] = [*ONE_THREAD, *settings.get("server_args", [])]
        engine = await started(Settings(model=gemma_model, spec_type=spec_type, **settings))
        engines.append(engine)
        return engine

    yield make
    for engine in engines:
        await engine.aclose()


async def run_all(engine: LiveEngine, request: GenerationRequest) -> list[EngineEvent]:
    return [event async for event in engine.run(request)]


def summary_of(events: list[EngineEvent]) -> SummaryEvent:
    summaries = [e for e in events if isinstance(e, SummaryEvent)]
    assert len(summaries) == 1
    assert summaries[0].stop_reason in {"limit", "eos", "word"}, events[-3:]
    return summaries[0]


CODE = builtin_prompt("code-edit")


@pytest.mark.parametrize("spec_type", ["ngram-simple", "ngram-mod"])
async def test_steps_and_histogram_equal_server_metrics(engine_for, spec_type: str) -> None:
    extra = {"server_args": ["--spec-ngram-mod-n-min", "4", "--spec-ngram-mod-n-match", "8"]}
    engine = await engine_for(spec_type, **(extra if spec_type == "ngram-mod" else {}))
    # (80 tokens: the code prompt's repeats draft early; every equality holds at any length)
    events = await run_all(engine, GenerationRequest(prompt=CODE.text, n_predict=80))
    summary = summary_of(events)
    async with httpx.AsyncClient() as http:
        metrics = ServerMetrics.parse((await http.get(engine.info.url + "/metrics")).text)
    steps = [e for e in events if isinstance(e, StepEvent)]
    assert summary.metrics.steps == len(steps) == metrics.spec_steps
    assert summary.metrics.steps > 0, "the repetitive code prompt should draft something"
    assert summary.metrics.accepted_per_position == metrics.accepted_per_position
    assert summary.metrics.drafted == metrics.spec_drafted
    assert summary.metrics.accepted == metrics.spec_accepted
    tokens = [e for e in events if isinstance(e, TokenEvent)]
    assert len(tokens) == summary.metrics.tokens == summary.server_timings["predicted_n"]
    assert sum(t.origin is TokenOrigin.DRAFT for t in tokens) == summary.metrics.accepted
    assert "".join(t.text for t in tokens) == summary.text


async def test_none_drafts_nothing(engine_for) -> None:
    engine = await engine_for("none")
    events = await run_all(engine, GenerationRequest(prompt=CODE.text, n_predict=20))
    summary = summary_of(events)
    assert summary.metrics.tokens == 20
    assert (summary.metrics.drafted, summary.metrics.steps) == (0, 0)
    assert all(e.origin is TokenOrigin.TARGET for e in events if isinstance(e, TokenEvent))


async def test_self_draft_accepts_everything(engine_for, gemma_model: Path) -> None:
    engine = await engine_for("draft-simple", draft_model=gemma_model, draft_n_max=4)
    prompt = "Write the numbers from 1 to 30 separated by commas:"
    summary = summary_of(await run_all(engine, GenerationRequest(prompt=prompt, n_predict=30)))
    assert summary.metrics.drafted > 0
    assert summary.metrics.accepted == summary.metrics.drafted


async def test_client_rate_agrees_with_server(engine_for) -> None:
    engine = await engine_for("none")
    events = await run_all(engine, GenerationRequest(prompt=CODE.text, n_predict=120))
    summary = summary_of(events)
    client = summary.metrics.tokens_per_second
    server = summary.server_timings["predicted_per_second"]
    assert client is not None
    # Same tokens, same interval (first -> last token), two clocks: they must agree closely.
    assert abs(client / server - 1) < 0.05, (client, server)
    assert summary.metrics.ttft_ms is not None
    assert summary.metrics.peak_rss_bytes and summary.metrics.peak_rss_bytes > 50 * 2**20


async def test_chat_endpoint_streams_attributed_tokens(engine_for) -> None:
    engine = await engine_for("ngram-simple")
    request = GenerationRequest(
        prompt="Repeat: a b c d e f g a b c d e f g", chat=True, n_predict=40
    )
    summary = summary_of(await run_all(engine, request))
    assert summary.metrics.tokens == summary.server_timings["predicted_n"] > 0


async def test_restart_switches_spec_type_in_effect(engine_for) -> None:
    engine = await engine_for("none")
    request = GenerationRequest(prompt=CODE.text, n_predict=40)  # (ngram-simple drafts within it)
    before = summary_of(await run_all(engine, request))
    assert before.metrics.drafted == 0
    old_pid = engine.info.pid
    states = [
        e
        async for e in engine.switch_spec(
            engine.info.spec.model_copy(update={"types": ("ngram-simple",)})
        )
    ]
    assert states[-1].state is ServerState.READY
    assert engine.info.pid != old_pid
    after = summary_of(await run_all(engine, request))
    assert after.metrics.drafted > 0


# Prompts whose continuation is characters Gemma writes as byte-fallback tokens (4 bytes each):
# the server holds back the tokens that end inside a character, so chunks carry several steps.
BYTE_FALLBACK = {
    "linear-b": "Linear B: 𐀀 𐀁 𐀂 𐀃 𐀄 𐀅 𐀆 𐀇 𐀈 𐀉 𐀊 𐀋 𐀍 𐀎 𐀏 𐀐",
    "cjk-ext-b": "古文：𠀀𠀁𠀂𠀃𠀄𠀅𠀆𠀇𠀈𠀉𠀊𠀋𠀌𠀍𠀎𠀏",
}
HELD_BACK_SPECS: dict[str, dict[str, object]] = {
    "draft-simple": {"draft_n_max": 4},
    "ngram-mod": {"server_args": ["--spec-ngram-mod-n-min", "2", "--spec-ngram-mod-n-match", "4"]},
}


@pytest.mark.parametrize("prompt", sorted(BYTE_FALLBACK))
@pytest.mark.parametrize("spec_type", sorted(HELD_BACK_SPECS))
async def test_chunks_of_several_steps_equal_server_metrics(
    engine_for: Callable[..., Awaitable[LiveEngine]], gemma_model: Path, spec_type: str, prompt: str
) -> None:
    settings: dict[str, object] = dict(HELD_BACK_SPECS[spec_type])
    if spec_type == "draft-simple":
        settings["draft_model"] = gemma_model  # Gemma drafting for itself: drafts never empty
    engine = await engine_for(spec_type, **settings)
    async with httpx.AsyncClient() as http:
        before = ServerMetrics.parse((await http.get(engine.info.url + "/metrics")).text)
        events = await run_all(
            engine, GenerationRequest(prompt=BYTE_FALLBACK[prompt], n_predict=64)
        )
        after = ServerMetrics.parse((await http.get(engine.info.url + "/metrics")).text)
    summary = summary_of(events)
    m = summary.metrics
    tokens = [e for e in events if isinstance(e, TokenEvent)]
    steps = [e for e in events if isinstance(e, StepEvent)]
    server_steps = after.spec_steps - before.spec_steps
    server_positions = [
        n - (before.accepted_per_position[i] if i < len(before.accepted_per_position) else 0)
        for i, n in enumerate(after.accepted_per_position)
    ]
    # The case under test happened: chunks carried several tokens, some with a step's start.
    assert any(t.text == "" for t in tokens)  # (every token but a chunk's last has no text)
    several = (s.steps > 1 or not s.split_known or s.steps_maybe_more for s in steps)
    assert any(several) or m.origin_unknown_tokens
    assert (m.drafted, m.accepted) == (
        after.spec_drafted - before.spec_drafted,
        after.spec_accepted - before.spec_accepted,
    )
    assert m.steps == sum(s.steps for s in steps) == server_steps
    assert m.steps - m.steps_maybe_fewer <= server_steps <= m.steps + m.steps_maybe_more
    # Per position: what is placed is part of the server's count; the rest is said unplaced.
    assert all(n <= server_positions[i] for i, n in enumerate(m.accepted_per_position))
    assert sum(m.accepted_per_position) + m.accepted_unplaced == m.accepted
    # Origins: every known draft is an accepted draft; the unknown ones are counted.
    drafts = sum(t.origin is TokenOrigin.DRAFT for t in tokens)
    unknown = sum(t.origin is TokenOrigin.UNKNOWN for t in tokens)
    assert unknown == m.origin_unknown_tokens
    assert drafts <= m.accepted <= drafts + unknown
    assert len(tokens) == m.tokens == summary.server_timings["predicted_n"]
    assert "".join(t.text for t in tokens) == summary.text
