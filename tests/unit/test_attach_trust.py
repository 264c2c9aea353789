"""Attach and adopt trust: another user's process is never probed (its --help) nor adopted,
except as root after a question naming its owner and executable; a relaunch drops the
process's code-injection variables. psutil is faked: a test cannot own another user's server."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import ClassVar, TypeVar

import httpx
import psutil
import pytest
import respx

from spectui.core.engine.live import LiveEngine
from spectui.core.errors import ServerStartError
from spectui.core.events import ServerState, ServerStateEvent
from spectui.core.llama import attach as attach_module
from spectui.core.llama.attach import AttachedServer, attach, is_injection_var
from spectui.core.llama.binary import parse_help
from spectui.core.llama.specconfig import SpecConfig

FIXTURES = Path(__file__).parent.parent / "fixtures"
URL = "http://127.0.0.1:8080"
ME, OTHER, PID = 1000, 1001, 4242
T = TypeVar("T")
ENVIRON = {
    "LD_PRELOAD": "/tmp/evil.so",
    "LD_LIBRARY_PATH": "/tmp/evil",
    "PYTHONPATH": "/tmp/evil",
    "NODE_OPTIONS": "--require /tmp/evil.js",
    "LLAMA_ARG_CTX_SIZE": "2048",
    "CUDA_VISIBLE_DEVICES": "0",
    "PATH": "/usr/bin",
    "LLAMA_API_KEY": "sk-theirs",
}


class FakeProcess:
    """The one process listening on the port, owned by ``uid``."""

    uid = OTHER
    created = 100.0
    reads: ClassVar[list[str]] = []

    def __init__(self, pid: int) -> None:
        if pid != PID:
            raise psutil.NoSuchProcess(pid)

    def uids(self) -> tuple[int, int, int]:
        return (self.uid, self.uid, self.uid)

    def create_time(self) -> float:
        return self.created

    def username(self) -> str:
        return {ME: "me", OTHER: "mallory"}.get(self.uid, str(self.uid))

    def _read(self, what: str, value: T) -> T:
        FakeProcess.reads.append(what)
        return value

    def cmdline(self) -> list[str]:
        return self._read("cmdline", ["/opt/llama/llama-server", "-m", "m.gguf", "--port", "8080"])

    def exe(self) -> str:
        return self._read("exe", "/opt/llama/llama-server")

    def cwd(self) -> str:
        return self._read("cwd", "/opt/llama")

    def environ(self) -> dict[str, str]:
        return self._read("environ", dict(ENVIRON))


@pytest.fixture
def local_server(monkeypatch: pytest.MonkeyPatch) -> Callable[[int, int], None]:
    """A llama-server on this machine (respx) whose process is ``FakeProcess``."""
    FakeProcess.reads = []
    monkeypatch.setattr(psutil, "Process", FakeProcess)
    monkeypatch.setattr(attach_module, "_listening_pid", lambda port: PID)
    monkeypatch.setattr(attach_module, "_is_this_machine", lambda host: True)

    def set_up(owner: int, spectui_uid: int) -> None:
        FakeProcess.uid = owner
        monkeypatch.setattr(os, "geteuid", lambda: spectui_uid)

    return set_up


def _mock_endpoints() -> None:
    respx.get(f"{URL}/health").mock(return_value=httpx.Response(200, json={"status": "ok"}))
    props = (FIXTURES / "props.json").read_bytes()
    respx.get(f"{URL}/props").mock(return_value=httpx.Response(200, content=props))
    respx.get(f"{URL}/slots").mock(return_value=httpx.Response(501))
    respx.get(f"{URL}/metrics").mock(return_value=httpx.Response(501))


async def _attached_engine(monkeypatch: pytest.MonkeyPatch) -> tuple[LiveEngine, list[Path]]:
    probed: list[Path] = []

    def probe(binary: Path, cache: Path | None = None) -> object:
        probed.append(binary)
        return parse_help((FIXTURES / "help.txt").read_text())

    monkeypatch.setattr("spectui.core.engine.live.probe_capabilities", probe)
    engine = LiveEngine.attached(URL)
    events = [event async for event in engine.start()]
    assert isinstance(events[-1], ServerStateEvent) and events[-1].state is ServerState.READY
    return engine, probed


@respx.mock
async def test_another_users_process_is_not_read_probed_or_adoptable(
    local_server: Callable[[int, int], None], monkeypatch: pytest.MonkeyPatch
) -> None:
    _mock_endpoints()
    local_server(OTHER, ME)
    engine, probed = await _attached_engine(monkeypatch)
    try:
        assert probed == []  # its --help never ran
        assert FakeProcess.reads == []  # nor was its command line or environment read
        info = engine.info
        assert info.pid == PID and info.owner == "mallory"
        assert not info.can_switch and not info.needs_adopt
        events = [e async for e in engine.switch_spec(SpecConfig(), adopt=True)]
        assert isinstance(events[-1], ServerStateEvent)
        assert events[-1].state is ServerState.FAILED and "mallory" in events[-1].detail
        assert probed == []
    finally:
        await engine.aclose()


@respx.mock
async def test_own_process_is_probed_and_adoptable(
    local_server: Callable[[int, int], None], monkeypatch: pytest.MonkeyPatch
) -> None:
    _mock_endpoints()
    local_server(ME, ME)
    engine, probed = await _attached_engine(monkeypatch)
    try:
        assert probed == [Path("/opt/llama/llama-server")]
        info = engine.info
        assert info.needs_adopt and info.owner is None
        assert info.dropped_env == ("LD_LIBRARY_PATH", "LD_PRELOAD", "NODE_OPTIONS", "PYTHONPATH")
    finally:
        await engine.aclose()


@respx.mock
async def test_as_root_another_users_process_waits_for_the_confirmation(
    local_server: Callable[[int, int], None], monkeypatch: pytest.MonkeyPatch
) -> None:
    _mock_endpoints()
    local_server(OTHER, 0)
    engine, probed = await _attached_engine(monkeypatch)
    try:
        assert probed == []  # not before the user confirmed
        info = engine.info
        assert info.needs_adopt and info.owner == "mallory"
        assert info.binary == Path("/opt/llama/llama-server")  # named in the question
        refused = [e async for e in engine.switch_spec(SpecConfig(), adopt=False)]
        assert isinstance(refused[-1], ServerStateEvent) and refused[-1].refused
        assert probed == []
    finally:
        await engine.aclose()


@respx.mock
async def test_relaunch_environment_drops_injection_variables(
    local_server: Callable[[int, int], None],
) -> None:
    _mock_endpoints()
    local_server(ME, ME)
    server = await attach(URL)
    try:
        caps = parse_help((FIXTURES / "help.txt").read_text())
        config = server._launch_config(SpecConfig(), caps)
        assert config.env == {
            "LLAMA_ARG_CTX_SIZE": "2048",
            "CUDA_VISIBLE_DEVICES": "0",
            "PATH": "/usr/bin",
        }
        assert config.api_key is not None and config.api_key.get_secret_value() == "sk-theirs"
        child = config.child_env(caps)
        assert child.get("LD_PRELOAD") != "/tmp/evil.so"
        assert child.get("PYTHONPATH") != "/tmp/evil"
        kept = server._launch_config(SpecConfig(), caps, keep_env=True).env
        assert kept["LD_PRELOAD"] == "/tmp/evil.so"  # only when the caller asks
    finally:
        await server.aclose()


@respx.mock
async def test_a_pid_reused_before_adoption_is_not_stopped(
    local_server: Callable[[int, int], None],
) -> None:
    _mock_endpoints()
    local_server(ME, ME)
    server: AttachedServer = await attach(URL)
    try:
        server.check_still_adoptable()
        FakeProcess.created = 200.0  # another process got the pid meanwhile
        with pytest.raises(ServerStartError, match="no longer the server"):
            await server.adopt(SpecConfig(), parse_help((FIXTURES / "help.txt").read_text()))
    finally:
        FakeProcess.created = 100.0
        await server.aclose()


def test_injection_variables() -> None:
    for name in ("LD_PRELOAD", "LD_AUDIT", "DYLD_INSERT_LIBRARIES", "PYTHONSTARTUP", "BASH_ENV"):
        assert is_injection_var(name)
    for name in ("PATH", "HOME", "LLAMA_ARG_THREADS", "CUDA_VISIBLE_DEVICES", "HF_TOKEN"):
        assert not is_injection_var(name)
