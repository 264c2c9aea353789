"""Launch command lines, the server log reader and the orphan safety net, without a server."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import psutil
import pytest
from pydantic import SecretStr

from spectui.core.errors import ServerStartError, SpecConfigError
from spectui.core.llama import procs
from spectui.core.llama.binary import Capabilities, parse_help
from spectui.core.llama.launch import LaunchConfig, host_for_url, redacted
from spectui.core.llama.logbuffer import ServerLog, new_log_file
from spectui.core.llama.specconfig import SpecConfig

FIXTURES = Path(__file__).parent.parent / "fixtures"
BIN = Path("/opt/llama/llama-server")
MODEL = Path("/models/gemma.gguf")


@pytest.fixture(scope="module")
def caps() -> Capabilities:
    return parse_help((FIXTURES / "help.txt").read_text())


def config(**fields: object) -> LaunchConfig:
    return LaunchConfig.model_validate({"binary": BIN, "model": MODEL, "port": 8081, **fields})


def test_argv(caps: Capabilities) -> None:
    argv = config(spec=SpecConfig(types=("ngram-simple",)), extra_args=("-t", "2")).argv(caps)
    assert argv == [
        str(BIN),
        *("-m", str(MODEL), "--host", "127.0.0.1", "--port", "8081"),
        *("--ctx-size", "4096", "--parallel", "1", "--metrics", "--slots"),
        *("--spec-type", "ngram-simple", "-t", "2"),
    ]


def test_argv_port_override_and_switches(caps: Capabilities) -> None:
    argv = config(metrics=False, slots=False).argv(caps, port=9000)
    assert argv[argv.index("--port") + 1] == "9000"
    assert "--metrics" not in argv
    assert "--no-slots" in argv


def test_removed_extra_flag_is_refused_with_advice(caps: Capabilities) -> None:
    with pytest.raises(SpecConfigError, match=r"--draft-max has been removed.*--spec-draft-n-max"):
        config(extra_args=("--draft-max", "4")).argv(caps)


@pytest.mark.parametrize("flag", ["--port", "-m", "--host=0.0.0.0", "--api-key"])
def test_extra_args_may_not_override_spectuis_own(caps: Capabilities, flag: str) -> None:
    with pytest.raises(ServerStartError, match="override"):
        config(extra_args=(flag, "x")).argv(caps)


def test_api_key_goes_to_env_never_argv(
    caps: Capabilities, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LLAMA_ARG_SPEC_TYPE", "ngram-mod")  # would silently change the launch
    monkeypatch.setenv("LLAMA_API_KEY", "inherited")
    launch = config(api_key=SecretStr("s3cret"))
    assert "s3cret" not in " ".join(launch.argv(caps))
    assert "s3cret" not in repr(launch)
    env = launch.child_env(caps)
    assert env["LLAMA_API_KEY"] == "s3cret"
    assert "LLAMA_ARG_SPEC_TYPE" not in env
    assert config().child_env(caps).get("LLAMA_API_KEY") is None


def test_adopted_command_line_keeps_everything_but_spec(caps: Capabilities) -> None:
    base = (str(BIN), "-m", "m.gguf", "--port", "8080", "--draft-max", "8", "-t", "4")
    launch = config(base_argv=base, spec=SpecConfig(types=("ngram-simple",)), env={"A": "1"})
    argv = launch.argv(caps)
    assert argv[:7] == [str(BIN), "-m", "m.gguf", "--port", "8080", "-t", "4"]
    assert argv[7:] == ["--spec-type", "ngram-simple"]
    assert "env" not in launch.model_dump()
    assert launch.child_env(caps)["A"] == "1"


def test_redacted_and_url_host() -> None:
    assert redacted(["x", "--api-key", "k", "--api-key=k2"]) == "x --api-key *** --api-key=***"
    assert host_for_url("0.0.0.0") == "127.0.0.1"
    assert host_for_url("::1") == "[::1]"
    assert host_for_url("example.org") == "example.org"


LOG = """0.00.000.933 I srv  llama_server: initializing ...
0.00.004.184 I srv    load_model: loading model '/m/gemmä.gguf'
0.00.720.491 W load: control-looking token:    212 '</s>' was not control-type
0.03.977.027 I srv    load_model: initializing, n_slots = 1
0.03.981.401 I srv  llama_server: model loaded
""".encode()


def test_server_log_reads_progress_and_load_time(tmp_path: Path) -> None:
    log = ServerLog(tmp_path / "server.log", max_lines=3)
    for start in range(0, len(LOG), 7):  # chunks that cut lines (and the UTF-8) anywhere
        log.feed(LOG[start : start + 7])
    assert log.progress == "srv llama_server: model loaded"
    assert log.load_time_s == pytest.approx(3.977, abs=1e-3)
    assert len(log.tail(10)) == 3
    log.close()
    assert (tmp_path / "server.log").read_bytes() == LOG


def test_server_log_failures() -> None:
    log = ServerLog()
    log.feed(b"error: invalid argument: --nope\n\nusage:\n-h, --help  print usage\n")
    log.close()
    assert log.failure == "error: invalid argument: --nope"
    assert log.failure_tail() == ["error: invalid argument: --nope"]
    bind = ServerLog()
    bind.feed(b"0.00.006.402 E srv  start: couldn't bind HTTP server socket, port: 8080\n")
    bind.feed(b"0.00.006.470 E srv  llama_server: exiting due to HTTP server error")
    bind.close()
    assert bind.bind_failed
    assert bind.failure == "srv  start: couldn't bind HTTP server socket, port: 8080"
    assert bind.tail(1) == ["0.00.006.470 E srv  llama_server: exiting due to HTTP server error"]


def test_log_files_rotate(tmp_path: Path) -> None:
    for index in range(5):
        path = new_log_file(tmp_path, keep=3)
        path.write_text(str(index))
        os.utime(path, (index, index))  # distinct ages without sleeping
    assert len(list(tmp_path.glob("llama-server-*.log"))) == 3


def test_kill_all_sync_kills_registered_groups() -> None:
    # (a sleeper: a process that runs until it is killed, as a server does)
    child = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True
    )
    procs.register(child.pid)
    try:
        assert child.pid in procs.live_pids()
        assert procs.kill_all_sync(grace_s=5) == [child.pid]
        child.wait()
        assert procs.live_pids() == []
        assert not psutil.pid_exists(child.pid)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


# A child Python that launches a sleeper the way ManagedServer launches llama-server, registers
# it, and runs a command body under `spectui.lifecycle.run_guarded` (what `stream` and `compare`
# run) with an engine whose close stops the registered servers, then exits with its status.
_PARENT = """
import asyncio, subprocess, sys
from spectui.core.llama import procs
from spectui.lifecycle import run_guarded
sleeper = subprocess.Popen(
    [sys.executable, "-c", "import time; time.sleep(600)"],
    start_new_session=True, preexec_fn=procs.die_with_parent,
)
procs.register(sleeper.pid)

class Engine:
    async def aclose(self):
        await asyncio.to_thread(procs.kill_all_sync)

async def body():
    print(sleeper.pid, flush=True)
    await asyncio.sleep(600)
    return 0

sys.exit(asyncio.run(run_guarded(Engine(), body())))
"""


def _parent_and_sleeper() -> tuple[subprocess.Popen[str], psutil.Process]:
    parent = subprocess.Popen([sys.executable, "-c", _PARENT], stdout=subprocess.PIPE, text=True)
    assert parent.stdout is not None
    return parent, psutil.Process(int(parent.stdout.readline()))


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_signal_handlers_kill_servers_then_exit(sig: signal.Signals) -> None:
    parent, sleeper = _parent_and_sleeper()
    parent.send_signal(sig)
    assert parent.wait(timeout=30) == 128 + sig
    _, alive = psutil.wait_procs([sleeper], timeout=30)
    assert not alive


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_server_dies_with_a_killed_spectui() -> None:
    parent, sleeper = _parent_and_sleeper()
    parent.kill()  # no atexit, no handler: only the kernel's parent-death signal is left
    parent.wait()
    _, alive = psutil.wait_procs([sleeper], timeout=30)
    for proc in alive:
        proc.kill()
    assert not alive
