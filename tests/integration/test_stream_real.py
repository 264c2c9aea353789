"""`spectui stream` against the real llama-server: output formats, a server dying mid-run, and a
draft model the server rejects."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.cli import one_clear_line, spectui
from spectui.app_setup import build_engine
from spectui.config import Settings
from spectui.core.events import ErrorEvent, ServerState, ServerStateEvent, TokenEvent
from spectui.core.request import GenerationRequest

from .outside import CODE_PROMPT, launched_servers

pytestmark = pytest.mark.server


def stream_code(gemma_model: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    """`spectui stream` of the code prompt: ngram-simple, 48 tokens, then ``extra``."""
    return spectui(
        "stream",
        "--model",
        str(gemma_model),
        "--spec-type",
        "ngram-simple",
        "--prompt",
        CODE_PROMPT,
        "--n-predict",
        "48",
        *extra,
    )


def test_jsonl_records(gemma_model: Path) -> None:
    result = stream_code(gemma_model, "--format", "jsonl")
    assert result.returncode == 0, result.stderr
    records = [json.loads(line) for line in result.stdout.splitlines()]
    tokens = [r for r in records if r["type"] == "token"]
    steps = [r for r in records if r["type"] == "step"]
    summary = records[-1]
    assert summary["type"] == "summary"
    assert [t["index"] for t in tokens] == list(range(summary["tokens"]))
    assert {t["origin"] for t in tokens} <= {"draft", "target"}
    assert all(t["step"] is None or isinstance(t["step"], int) for t in tokens)
    assert [s["index"] for s in steps] == list(range(summary["steps"]))
    assert sum(s["accepted"] for s in steps) == summary["accepted"]
    assert sum(s["drafted"] for s in steps) == summary["drafted"]
    assert sum(t["origin"] == "draft" for t in tokens) == summary["accepted"]
    for key in (
        "accepted_per_position",
        "ttft_ms",
        "tokens_per_second",
        "peak_rss_bytes",
        "server_timings",
    ):
        assert key in summary
    assert summary["server_timings"]["predicted_n"] == summary["tokens"]


def test_text_without_tty_brackets_drafted_spans(gemma_model: Path) -> None:
    result = stream_code(gemma_model)
    assert result.returncode == 0, result.stderr
    assert "\x1b[" not in result.stdout
    assert "[" in result.stdout and "]" in result.stdout
    assert "tokens" in result.stderr and "tok/s" in result.stderr


async def test_server_killed_mid_stream_is_reported(gemma_model: Path) -> None:
    engine = build_engine(Settings(model=gemma_model, spec_type="none"))
    try:
        states = [e async for e in engine.start()]
        assert isinstance(states[-1], ServerStateEvent) and states[-1].state is ServerState.READY
        pid = engine.info.pid
        assert pid is not None
        events = []
        async for event in engine.run(GenerationRequest(prompt=CODE_PROMPT, n_predict=4000)):
            events.append(event)
            if isinstance(event, TokenEvent) and event.index == 3:
                os.kill(pid, signal.SIGKILL)
        errors = [e for e in events if isinstance(e, ErrorEvent)]
        assert errors and errors[0].kind == "connection"
        final = events[-1]
        assert isinstance(final, ServerStateEvent)
        assert final.state is ServerState.FAILED
        assert "exited" in final.detail
        assert engine.info.pid is None
    finally:
        await asyncio.wait_for(engine.aclose(), 30)


def test_draft_model_with_another_vocabulary(gemma_model: Path, smollm_model: Path) -> None:
    result = spectui(
        "stream",
        "--model",
        str(gemma_model),
        "--spec-type",
        "draft-simple",
        "--draft-model",
        str(smollm_model),
        "--prompt",
        "hi",
    )
    line = one_clear_line(result)
    # The server's own words about the mismatch reach the user.
    assert "vocab" in line.lower() or "draft" in line.lower(), line


@pytest.mark.parametrize("output", ["text", "jsonl"])
def test_reader_going_away_ends_the_run_quietly(gemma_model: Path, output: str) -> None:
    """`spectui stream | head -n 1`: the pipe closes mid-run; spectui stops generating, says
    nothing and exits 141 like `cat` would, and its server is gone."""
    argv = [sys.executable, "-m", "spectui.cli", "stream", "--model", str(gemma_model)]
    argv += ["--prompt", CODE_PROMPT, "--n-predict", "2000", "--format", output]
    with subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL
    ) as proc:
        assert proc.stdout is not None and proc.stderr is not None
        first = proc.stdout.read(1)  # the first token (or record) arrived...
        proc.stdout.close()  # ...and the reader goes away, as `head` does
        status = proc.wait(timeout=120)
        stderr = proc.stderr.read().decode()
    assert first
    assert status == 141, stderr
    assert stderr.strip() == "", stderr  # no error, no traceback, no crash report
    assert launched_servers() == []


def test_synthetic_acceptance_sets_the_acceptance_length(gemma_model: Path) -> None:
    """The demo aid: `--spec-synth-len 4` forces ~4 tokens per verification step (and spectui's
    attribution counts what the server did, whatever made it)."""
    result = spectui(
        "stream",
        "--model",
        str(gemma_model),
        "--spec-type",
        "draft-simple --spec-synth-len 4",
        "--draft-model",
        str(gemma_model),
        "--builtin",
        "essay",
        "--n-predict",
        "120",
        "--format",
        "jsonl",
    )
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout.splitlines()[-1])
    assert summary["tokens"] == 120
    assert 3.0 <= summary["mean_acceptance_length"] <= 5.0, summary
