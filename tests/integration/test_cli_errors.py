"""Every bad input to `spectui stream`: one clear line, exit != 0, no traceback, nothing left."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from helpers.cli import one_clear_line, spectui

from .fakes import serve
from .outside import outside_server, wait_healthy

pytestmark = pytest.mark.server

PROMPT = ["--prompt", "def add(a, b):\n    return a + b\n"]


def test_model_missing(tmp_path: Path) -> None:
    line = one_clear_line(spectui("stream", "--model", str(tmp_path / "nope.gguf"), *PROMPT))
    assert "nope.gguf" in line


def test_model_not_a_gguf(tmp_path: Path) -> None:
    fake = tmp_path / "model.gguf"
    fake.write_text("hello, I am text")
    line = one_clear_line(spectui("stream", "--model", str(fake), *PROMPT))
    assert "GGUF" in line


def test_binary_missing(tmp_path: Path, gemma_model: Path) -> None:
    result = spectui(
        "stream",
        "--server-bin",
        str(tmp_path / "llama-server"),
        "--model",
        str(gemma_model),
        *PROMPT,
    )
    assert result.returncode == 2
    assert "llama-server" in one_clear_line(result)


def test_spec_type_not_in_binary(gemma_model: Path) -> None:
    line = one_clear_line(
        spectui("stream", "--model", str(gemma_model), "--spec-type", "ngram-magic", *PROMPT)
    )
    assert "ngram-magic" in line and "ngram-simple" in line


def test_draft_type_without_draft_model(gemma_model: Path) -> None:
    line = one_clear_line(
        spectui("stream", "--model", str(gemma_model), "--spec-type", "draft-simple", *PROMPT)
    )
    assert "draft model" in line


def test_removed_alias_in_extra_args(gemma_model: Path) -> None:
    line = one_clear_line(
        spectui("stream", "--model", str(gemma_model), *PROMPT, "--", "--draft-max", "4")
    )
    assert "--draft-max" in line


def test_no_prompt(gemma_model: Path) -> None:
    assert "prompt" in one_clear_line(spectui("stream", "--model", str(gemma_model)))


def test_prompt_file_unreadable(gemma_model: Path, tmp_path: Path) -> None:
    line = one_clear_line(
        spectui(
            "stream", "--model", str(gemma_model), "--prompt-file", str(tmp_path / "missing.txt")
        )
    )
    assert "missing.txt" in line


def test_port_in_use(gemma_model: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        line = one_clear_line(
            spectui("stream", "--model", str(gemma_model), "--port", str(port), *PROMPT)
        )
    assert str(port) in line


def test_server_exits_while_loading(tmp_path: Path) -> None:
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"GGUF" + b"\x03\x00\x00\x00" + os.urandom(256))
    line = one_clear_line(spectui("stream", "--model", str(broken), *PROMPT))
    assert "llama-server" in line or "load" in line


def test_url_that_is_not_a_llama_server() -> None:
    with serve("not-llama") as url:
        line = one_clear_line(spectui("stream", "--url", url, *PROMPT))
    assert "not a llama-server" in line


def test_stalled_stream() -> None:
    with serve("stall") as url:
        result = spectui("stream", "--url", url, *PROMPT, env={"SPECTUI_STALL_TIMEOUT_S": "1"})
    assert result.returncode == 1
    assert "stalled" in result.stderr
    assert "Traceback" not in result.stderr


def test_stalled_stream_jsonl_ends_with_error_line() -> None:
    import json

    with serve("stall") as url:
        result = spectui(
            "stream",
            "--url",
            url,
            *PROMPT,
            "--format",
            "jsonl",
            env={"SPECTUI_STALL_TIMEOUT_S": "1"},
        )
    assert result.returncode == 1
    records = [json.loads(line) for line in result.stdout.splitlines()]
    assert records[0]["type"] == "token"
    assert any(r["type"] == "error" and "stalled" in r["message"] for r in records)


def test_api_key_required_and_never_printed(llama_binary: Path, gemma_model: Path) -> None:
    key = ("--api-key", "sekrit-123")
    with outside_server(llama_binary, gemma_model, *key) as (url, _):
        wait_healthy(url, 240)  # (/health needs no key)
        probe = spectui("stream", "--url", url, *key, *PROMPT, "--n-predict", "4")
        assert probe.returncode == 0, probe.stderr
        no_key = one_clear_line(spectui("stream", "--url", url, *PROMPT))
        assert "--api-key" in no_key
        wrong = spectui("stream", "--url", url, "--api-key", "wrong-key-456", *PROMPT)
        line = one_clear_line(wrong)
        assert "wrong-key-456" not in wrong.stderr + wrong.stdout
        assert "api" in line.lower()


def test_sigterm_mid_stream_stops_the_server(gemma_model: Path) -> None:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "spectui.cli",
            "stream",
            "--model",
            str(gemma_model),
            "--spec-type",
            "none",
            *PROMPT,
            "--n-predict",
            "4000",
            "--format",
            "jsonl",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
    )
    assert proc.stdout is not None
    first = proc.stdout.readline()  # a token: the server is up and generating
    assert '"type": "token"' in first, proc.stderr.read() if proc.stderr else ""
    servers = [
        p for p in psutil.Process(proc.pid).children(recursive=True) if p.name() == "llama-server"
    ]
    assert len(servers) == 1
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=30)
    assert proc.returncode != 0
    _, alive = psutil.wait_procs(servers, timeout=5)
    assert not alive
    assert "Traceback" not in (proc.stderr.read() if proc.stderr else "")


def test_proxy_slots_is_a_tui_view_not_a_jsonl_one() -> None:
    result = spectui("proxy", "--url", "http://127.0.0.1:9", "--format", "jsonl", "--slots")
    line = one_clear_line(result)
    assert line == "spectui: --slots is a view of the proxy TUI: not with --format jsonl"
    assert result.returncode == 2
