"""Replaying sessions: numbers recomputed by the live code equal the recorded ones; the replay
clock keeps recorded timing (never early), pauses, steps token by token and shares time."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from helpers.engines import REQUEST, CaptureEngine, record_capture
from spectui.core.events import (
    EngineEvent,
    ErrorEvent,
    MetricsEvent,
    ServerState,
    ServerStateEvent,
    SummaryEvent,
    TokenEvent,
    TokenOrigin,
)
from spectui.core.sessions.file import Session, read_session
from spectui.core.sessions.recording import header_for
from spectui.core.sessions.replay import INCOMPLETE, ReplayClock, ReplayEngine, recompute


@pytest.mark.parametrize("capture", ["completion-ngram-simple.sse", "chat-ngram-simple.sse"])
async def test_recomputed_summary_equals_the_live_one(tmp_path: Path, capture: str) -> None:
    path = tmp_path / "run.jsonl"
    await record_capture(path, capture=capture)
    session = read_session(path)
    live = session.summary
    assert live is not None
    again = recompute(session).summary
    assert again == live
    assert again.metrics.prompt_tokens is not None
    assert again.metrics.peak_rss_bytes is not None


async def test_recomputed_snapshots_equal_the_live_ones(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    await record_capture(path)
    session = read_session(path)
    recorded = [e for e in session.events if isinstance(e, MetricsEvent)]
    replayed = [e for e in recompute(session).events if isinstance(e, MetricsEvent)]
    assert len(recorded) > 3
    assert replayed == recorded


def misfit_stream(tokens: int = 30) -> bytes:
    """A /completion stream whose counters do not fit attribution: every other token starts a
    step that accepted 3 drafts, so each step begins before the last one's drafts all came."""
    lines = []
    drafted = accepted = 0
    for n in range(1, tokens + 1):
        if n % 2 == 0:
            drafted, accepted = drafted + 4, accepted + 3
        timings = {
            "prompt_n": 7,
            "predicted_n": n,
            "draft_n": drafted,
            "draft_n_accepted": accepted,
        }
        chunk = {"content": f"t{n} ", "tokens_predicted": n, "timings": timings}
        if n == tokens:
            chunk |= {"stop": True, "stop_type": "limit"}
        lines.append(f"data: {json.dumps(chunk)}\n\n")
    return "".join(lines).encode()


async def test_attribution_anomalies_are_recorded_and_replayed(tmp_path: Path) -> None:
    # Chunks are not recorded, so replay cannot recount the anomalies: it keeps the live count.
    path = tmp_path / "run.jsonl"
    live = await record_capture(path, body=misfit_stream())
    summary = next(e for e in live if isinstance(e, SummaryEvent))
    assert summary.metrics.attribution_anomalies == 14
    snapshots = [e.snapshot for e in live if isinstance(e, MetricsEvent)]
    assert snapshots and snapshots[-1].attribution_anomalies > 0
    session = read_session(path)
    assert session.summary is not None
    assert session.summary.metrics.attribution_anomalies == 14
    again = recompute(session)
    assert again.summary == session.summary
    assert [e for e in again.events if isinstance(e, MetricsEvent)] == [
        e for e in session.events if isinstance(e, MetricsEvent)
    ]

    # A recording cut short keeps the count of its last snapshot.
    data = path.read_bytes()
    path.write_bytes(data[: len(data) * 2 // 3])
    cut = read_session(path)
    last = [e.snapshot for e in cut.events if isinstance(e, MetricsEvent)][-1]
    assert recompute(cut).summary.metrics.attribution_anomalies == last.attribution_anomalies


async def test_truncated_session_gets_an_incomplete_summary(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    await record_capture(path)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) * 2 // 3])
    session = read_session(path)
    result = recompute(session)
    tokens = [e for e in session.events if isinstance(e, TokenEvent)]
    assert result.summary.stop_reason == INCOMPLETE
    assert result.summary.metrics.tokens == len(tokens)
    assert result.summary.text == "".join(t.text for t in tokens)

    engine = ReplayEngine(session, clock=ReplayClock(None))
    events = [e async for e in engine.run()]
    error = events[-2]
    assert isinstance(error, ErrorEvent) and error.kind == "incomplete"
    assert session.problem is not None and session.problem in error.message
    assert isinstance(events[-1], SummaryEvent)


async def test_replay_engine_plays_every_event_then_can_play_again(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    await record_capture(path)
    session = read_session(path)
    engine = ReplayEngine(session, clock=ReplayClock(None))
    assert "replay of run.jsonl" in engine.ready_detail()
    first = [e async for e in engine.run(REQUEST)]
    assert engine.finished
    assert first == recompute(session).events
    assert [e async for e in engine.run(REQUEST)] == first
    assert engine.info.mode == "replay"
    assert not engine.info.can_switch
    # A replay lacks the capabilities it cannot honour (no methods that refuse).
    assert engine.server_control is None and engine.recorder is None and engine.following is None
    assert not hasattr(engine, "switch_spec") and not hasattr(engine, "start")
    assert any("ngram-simple" in line for line in engine.log_tail())


def _session(tmp_path: Path, times: list[float]) -> Session:
    header = header_for(CaptureEngine().info, REQUEST)
    events: list[EngineEvent] = [ServerStateEvent(state=ServerState.GENERATING)]
    for index, t in enumerate(times):
        events.append(TokenEvent(index=index, text=f"t{index}", origin=TokenOrigin.TARGET, t=t))
    return Session(tmp_path / "made.jsonl", header, events)


async def _drain(turns: int = 50) -> None:
    for _ in range(turns):
        await asyncio.sleep(0)


async def test_events_are_never_early_at_the_chosen_speed(tmp_path: Path) -> None:
    session = _session(tmp_path, [0.02, 0.04, 0.06])
    engine = ReplayEngine(session, clock=ReplayClock(2.0))
    loop = asyncio.get_running_loop()
    started = loop.time()
    arrivals = []
    async for event in engine.run():
        arrivals.append((event.t, loop.time() - started))
    assert len(arrivals) == 6  # + the error and summary that end a summary-less session
    for t, elapsed in arrivals:
        assert elapsed >= t / 2


async def test_pause_holds_and_step_plays_one_token(tmp_path: Path) -> None:
    session = _session(tmp_path, [5.0, 10.0, 15.0])  # far apart: only a step can reach them
    engine = ReplayEngine(session)
    engine.clock.pause()
    seen: list[EngineEvent] = []

    async def consume() -> None:
        async for event in engine.run():
            seen.append(event)

    task = asyncio.create_task(consume())
    await _drain()
    assert [e.type for e in seen] == ["server_state"]  # t=0 is reached even while paused
    engine.step()
    await _drain()
    assert [getattr(e, "index", None) for e in seen[1:]] == [0]
    engine.step()
    await _drain()
    assert [getattr(e, "index", None) for e in seen[1:]] == [0, 1]
    assert engine.clock.paused
    engine.clock.set_speed(None)
    assert engine.toggle_pause() is False
    await asyncio.wait_for(task, 5)
    assert len(seen) == 6  # three tokens, then the error and summary a summary-less run ends with


async def test_shared_clock_steps_both_sessions_on_one_time_scale(tmp_path: Path) -> None:
    a = _session(tmp_path, [1.0, 3.0])
    b = _session(tmp_path, [2.0, 4.0])
    engines = ReplayEngine.pair([a, b], speed=1.0)
    assert engines[0].clock is engines[1].clock
    clock = engines[0].clock
    clock.pause()
    clock.restart()
    order: list[tuple[str, int]] = []

    async def consume(name: str, engine: ReplayEngine) -> None:
        async for event in engine.run():
            if isinstance(event, TokenEvent):
                order.append((name, event.index))

    tasks = [asyncio.create_task(consume(n, e)) for n, e in zip("ab", engines, strict=True)]
    await _drain()  # both are waiting for their first token
    for expected in ([("a", 0)], [("a", 0), ("b", 0)], [("a", 0), ("b", 0), ("a", 1)]):
        clock.step()
        await _drain()
        assert order == expected
    clock.set_speed(None)
    clock.resume()
    await asyncio.wait_for(asyncio.gather(*tasks), 5)
    assert order[-1] == ("b", 1)


def test_bad_speed_is_refused() -> None:
    with pytest.raises(ValueError, match="speed"):
        ReplayClock(0)


async def test_a_step_before_the_run_plays_its_first_token(tmp_path: Path) -> None:
    engine = ReplayEngine(_session(tmp_path, [5.0, 10.0]))
    engine.step()  # nothing waits yet: the run that starts next takes the step
    seen: list[EngineEvent] = []

    async def consume() -> None:
        async for event in engine.run():
            seen.append(event)

    task = asyncio.create_task(consume())
    await _drain()
    assert [e.type for e in seen] == ["server_state", "token"]
    task.cancel()
