"""Sessions against the real llama-server: record a run, replay it headless, and check the
summary recomputed from the events equals the one computed live; the API key of an
authenticated server never reaches the file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import SecretStr

from helpers.cli import spectui
from spectui.app_setup import recorder
from spectui.cli import main
from spectui.config import Settings
from spectui.core.engine.live import LiveEngine
from spectui.core.events import MetricsEvent, ServerState, ServerStateEvent, TokenEvent
from spectui.core.llama.binary import Capabilities
from spectui.core.llama.server import LaunchConfig, ManagedServer
from spectui.core.llama.specconfig import SpecConfig
from spectui.core.request import GenerationRequest
from spectui.core.sessions.file import read_session
from spectui.core.sessions.replay import ReplayClock, ReplayEngine, recompute

from .outside import CODE_PROMPT, FAST

pytestmark = pytest.mark.server


def test_recorded_run_replays_to_the_live_summary(
    gemma_model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    session_file = tmp_path / "run.jsonl"
    live = spectui(
        "stream",
        "--model",
        str(gemma_model),
        "--spec-type",
        "ngram-simple",
        "--ctx-size",
        "512",
        "--prompt",
        CODE_PROMPT,
        "--n-predict",
        "48",
        "--format",
        "jsonl",
        "--record",
        str(session_file),
        "--",
        "--no-warmup",
    )
    assert live.returncode == 0, live.stderr
    assert f"recorded to {session_file}" in live.stderr
    live_records = [json.loads(line) for line in live.stdout.splitlines()]
    live_summary = live_records[-1]
    assert live_summary["type"] == "summary" and live_summary["tokens"] == 48

    session = read_session(session_file)
    assert session.problem is None
    header = session.header
    assert header.server.binary_version
    assert header.server.spec == SpecConfig(types=("ngram-simple",))
    assert header.server.flags[:2] == ["--ctx-size", "512"]
    assert header.request.prompt == CODE_PROMPT and header.request.n_predict == 48
    tokens = [e for e in session.events if isinstance(e, TokenEvent)]
    assert [t.text for t in tokens] == [r["text"] for r in live_records if r["type"] == "token"]

    # Headless replay: the summary recomputed by the live MetricsTracker equals the live one.
    assert main(["replay", str(session_file), "--summary"]) == 0
    assert json.loads(capsys.readouterr().out) == live_summary
    result = recompute(session)
    assert result.summary == session.summary
    recorded_snapshots = [e for e in session.events if isinstance(e, MetricsEvent)]
    assert [e for e in result.events if isinstance(e, MetricsEvent)] == recorded_snapshots

    for fmt in ("svg", "html", "ansi", "cast"):
        out = tmp_path / f"run.{fmt}"
        assert main(["export", str(session_file), "--to", fmt, "-o", str(out)]) == 0
        assert out.stat().st_size > 0


async def test_api_key_of_an_authenticated_server_is_never_recorded(
    llama_binary: Path, gemma_model: Path, caps: Capabilities, tmp_path: Path
) -> None:
    key = "spectui-test-key-5f0c1e"
    config = LaunchConfig(
        binary=llama_binary,
        model=gemma_model,
        spec=SpecConfig(types=("ngram-simple",)),
        ctx_size=512,
        extra_args=FAST,  # (one thread: two wait on each other on a busy machine)
        api_key=SecretStr(key),
    )
    server = ManagedServer(config, caps, log_dir=tmp_path / "logs")
    try:
        states = [event.state async for event in server.start()]
        assert states[-1] is ServerState.READY
        settings = Settings(url=server.url, api_key=key, sessions_dir=tmp_path / "sessions")
        engine = recorder(LiveEngine.attached(server.url, settings.api_key), settings)
        started = [e async for e in engine.start()][-1]
        assert isinstance(started, ServerStateEvent) and started.state is ServerState.READY
        request = GenerationRequest(prompt=f"Repeat after me: {key} {key}", n_predict=16)
        events = [event async for event in engine.run(request)]
        await engine.aclose()
    finally:
        await server.stop()
    assert sum(isinstance(e, TokenEvent) for e in events) == 16  # the key was accepted
    (path,) = engine.paths
    assert key.encode() not in path.read_bytes()
    session = read_session(path)
    assert session.summary is not None
    assert "[redacted]" in session.header.request.prompt
    replayed = [e async for e in ReplayEngine(session, clock=ReplayClock(None)).run()]
    assert recompute(session).summary == session.summary
    assert replayed[-2] == recompute(session).summary
