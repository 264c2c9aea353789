"""`spectui proxy` as a command against real llama-servers: keys (a 401 passes through, no key
in any output or file), an upstream that dies, `--record` then `compare --prompts`, bad input."""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
from pathlib import Path

import httpx
import psutil
import pytest

from helpers.cli import one_clear_line, spectui
from spectui.core.llama.server import free_port
from spectui.core.proxy.models import RequestStatus

from .outside import outside_server, wait_healthy
from .proxy_helpers import proxy_process, running_proxy

pytestmark = pytest.mark.server

KEY = "sk-upstream-0123456789-secret"
CLIENT_KEY = "sk-proxy-abcdef-secret"


def test_keys_401_record_and_compare(llama_binary: Path, gemma_model: Path, tmp_path: Path) -> None:
    record = tmp_path / "rec"
    prompt = "Count: 1, 2, 3, 4, 5, 1, 2, 3, 4, 5, 1, 2,"
    with outside_server(
        llama_binary, gemma_model, "--api-key", KEY, "--spec-type", "ngram-mod"
    ) as (
        upstream,
        _pid,
    ):
        wait_healthy(upstream, 120)  # /health needs no key
        with proxy_process(
            "--url",
            upstream,
            "--record",
            str(record),
            env={"SPECTUI_PROXY_API_KEY": CLIENT_KEY, "SPECTUI_API_KEY": KEY},
        ) as (url, proc):
            with httpx.Client(timeout=120) as http:
                body = {"prompt": prompt, "n_predict": 24, "stream": True, "temperature": 0}
                assert http.post(url + "/completion", json=body).status_code == 401
                ok = http.post(url + "/completion", json=body, headers={"x-api-key": CLIENT_KEY})
                assert ok.status_code == 200 and b'"content"' in ok.content
                chat = {
                    "messages": [{"role": "user", "content": "Say hi"}],
                    "max_tokens": 16, "stream": True, "temperature": 0,
                }  # fmt: skip
                auth = {"Authorization": f"Bearer {CLIENT_KEY}"}
                assert http.post(url + "/v1/chat/completions", json=chat, headers=auth).is_success
            proc.send_signal(signal.SIGTERM)
            out, err = proc.communicate(timeout=30)
        assert proc.returncode == 143, err
        # Without the proxy's key for upstream, upstream's own 401 reaches the client as 401.
        with proxy_process("--url", upstream) as (url, proc), httpx.Client(timeout=60) as http:
            denied = http.post(url + "/completion", json={"prompt": "x", "n_predict": 4})
            direct = httpx.post(upstream + "/completion", json={"prompt": "x", "n_predict": 4})
            assert denied.status_code == direct.status_code == 401
            assert denied.content == direct.content
            passed = http.post(
                url + "/completion", json={"prompt": "x", "n_predict": 4},
                headers={"Authorization": f"Bearer {KEY}"},
            )  # fmt: skip
            assert passed.status_code == 200
    records = [json.loads(line) for line in out.splitlines()]
    assert [r["endpoint"] for r in records] == ["/completion", "/v1/chat/completions"]
    assert all(r["type"] == "request" and r["status"] == "done" for r in records)
    assert records[0]["tokens"] == 24 and records[0]["client"].startswith("127.0.0.1:")
    assert "steps" in records[0] and "mean_acceptance_length" in records[0]
    # No key anywhere: output, log lines, recorded files.
    files = sorted(record.iterdir())
    assert {f.name for f in files} >= {"workload.jsonl"} and len(files) == 3
    for text in [out, err, *(f.read_text() for f in files)]:
        assert KEY not in text and CLIENT_KEY not in text
    assert oct(files[0].stat().st_mode & 0o777) == "0o600"
    sessions = [f for f in files if f.name != "workload.jsonl"]
    replayed = spectui("replay", str(sessions[0]), "--summary")
    assert replayed.returncode == 0, replayed.stderr
    assert json.loads(replayed.stdout)["tokens"] in (24, 16)
    # The workload is a prompt file compare runs.
    workload = [json.loads(line) for line in (record / "workload.jsonl").read_text().splitlines()]
    assert workload[0]["text"] == prompt and workload[1]["text"] == "Say hi"
    compared = spectui(
        "compare", "--model", str(gemma_model), "--config", "ngram-simple",
        "--prompts", str(record / "workload.jsonl"), "--reps", "1", "--n-predict", "8",
        "--no-chart", "--json", str(tmp_path / "c.json"), timeout=600,
    )  # fmt: skip
    assert compared.returncode == 0, compared.stderr
    document = json.loads((tmp_path / "c.json").read_text())
    assert {w["key"] for w in workload} <= set(json.dumps(document).split('"')), "prompts ran"


async def test_upstream_death_reaches_the_client_and_the_proxy_keeps_serving(
    llama_binary: Path, gemma_model: Path
) -> None:
    with outside_server(llama_binary, gemma_model) as (upstream, pid):
        await asyncio.to_thread(wait_healthy, upstream, 120)
        async with running_proxy(upstream) as (url, _proxy, collected):
            body = {"prompt": "Tell a long story.", "n_predict": 2000, "stream": True}
            async with httpx.AsyncClient(timeout=60) as http:
                async with http.stream("POST", url + "/completion", json=body) as response:
                    lines = []
                    async for line in response.aiter_lines():
                        lines.append(line)
                        if len(lines) == 4:
                            psutil.Process(pid).kill()
                assert "error" in lines[-2] or "error" in lines[-1], lines[-3:]
                (record,) = await collected.wait_for(1)
                assert record.status is RequestStatus.ERROR and record.error
                # Still serving: a dead upstream is a 502 with a JSON error, not a dead proxy.
                after = await http.get(url + "/health")
                assert after.status_code == 502
                assert after.json()["error"]["type"] == "unavailable_error"
                assert (await http.get(url + "/spectui/metrics")).status_code == 200


def test_bad_input_is_one_clear_line(tmp_path: Path) -> None:
    assert "--listen" in one_clear_line(
        spectui("proxy", "--listen", "here:port", "--format", "jsonl")
    )
    busy = free_port()
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", busy))
        sock.listen()
        line = one_clear_line(
            spectui("proxy", "--url", "http://127.0.0.1:9", "--listen", f"127.0.0.1:{busy}",
                    "--format", "jsonl")
        )  # fmt: skip
    assert "cannot listen" in line
    line = one_clear_line(
        spectui("proxy", "--url", "http://127.0.0.1:9", "--format", "jsonl",
                "--listen", "127.0.0.1:0")
    )  # fmt: skip
    assert "127.0.0.1:9" in line


def test_jsonl_into_a_closed_pipe_stops_the_proxy(llama_binary: Path, gemma_model: Path) -> None:
    """`spectui proxy --format jsonl | head -1`: once the reader is gone, the proxy ends (141)
    and its port closes."""
    with outside_server(llama_binary, gemma_model) as (upstream, _pid):
        wait_healthy(upstream, 120)
        with proxy_process("--url", upstream) as (url, proc), httpx.Client(timeout=60) as http:
            body = {"prompt": "Hello", "n_predict": 4, "stream": True}
            assert http.post(url + "/completion", json=body).is_success
            assert proc.stdout is not None
            assert json.loads(proc.stdout.readline())["tokens"] == 4
            proc.stdout.close()  # `head -1` has what it wanted
            with contextlib.suppress(httpx.TransportError):
                http.post(url + "/completion", json=body)
            assert proc.wait(timeout=20) == 141
            with pytest.raises(httpx.ConnectError):
                http.get(url + "/health")


def test_another_interface_only_with_a_warning() -> None:
    port = free_port()
    result = spectui(
        "proxy", "--url", "http://127.0.0.1:9", "--listen", f"0.0.0.0:{port}", "--format", "jsonl"
    )
    assert result.returncode != 0 and "Traceback" not in result.stderr
    assert "warning: listening on 0.0.0.0" in result.stderr and "no --api-key" in result.stderr


def test_record_folder_that_cannot_be_written_is_one_clear_line(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    line = one_clear_line(
        spectui("proxy", "--url", "http://127.0.0.1:9", "--format", "jsonl",
                "--listen", "127.0.0.1:0", "--record", str(blocker / "sub"))
    )  # fmt: skip
    assert "cannot record to" in line
