"""ManagedServer, attach and adopt against the real llama-server with Gemma 3 270M."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import httpx
import psutil
import pytest

from helpers.wait import await_async
from spectui.core.errors import BinaryNotFoundError, ServerStartError, SpecConfigError
from spectui.core.events import ServerState, ServerStateEvent
from spectui.core.llama import procs
from spectui.core.llama.attach import attach
from spectui.core.llama.binary import Capabilities
from spectui.core.llama.server import LaunchConfig, ManagedServer, port_is_free
from spectui.core.llama.specconfig import SpecConfig

from .outside import launched_servers, outside_server

pytestmark = pytest.mark.server

NONE = SpecConfig()
NGRAM = SpecConfig(types=("ngram-simple",))
NGRAM_MOD = SpecConfig(types=("ngram-mod",))
# Small context and no warm-up run: the tests need a server, not a fast one.
FAST = ("--no-warmup",)

MakeServer = Callable[..., ManagedServer]


async def drain(events: AsyncIterator[ServerStateEvent]) -> list[ServerStateEvent]:
    return [event async for event in events]


def running_servers() -> list[psutil.Process]:
    """llama-server processes this test process started that still run."""
    return launched_servers()


def gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


@pytest.fixture
def make_server(
    llama_binary: Path, gemma_model: Path, caps: Capabilities, tmp_path: Path
) -> Iterator[MakeServer]:
    made: list[ManagedServer] = []

    def make(spec: SpecConfig = NONE, **overrides: object) -> ManagedServer:
        fields: dict[str, object] = {
            "binary": llama_binary,
            "model": gemma_model,
            "spec": spec,
            "ctx_size": 512,
            "extra_args": FAST,
        }
        fields.update(overrides)
        server = ManagedServer(LaunchConfig.model_validate(fields), caps, log_dir=tmp_path / "logs")
        made.append(server)
        return server

    yield make
    # Whatever a test left running is killed here, and the test is not passed silently.
    leftover = procs.kill_all_sync()
    assert not leftover, f"test left servers running: {leftover}"


async def test_start_ready_stop(make_server: MakeServer) -> None:
    server = make_server()
    events = await drain(server.start())
    states = [e.state for e in events]
    assert states[0] is ServerState.STARTING
    assert states[-1] is ServerState.READY
    assert server.state is ServerState.READY
    pid = server.pid
    assert pid is not None
    async with httpx.AsyncClient() as http:
        assert (await http.get(f"{server.url}/health")).status_code == 200
    assert server.load_time_s is not None
    assert server.load_time_s > 0
    assert any("model loaded" in line for line in server.log_tail(100))
    assert server.log_file is not None
    assert "model loaded" in server.log_file.read_text()

    await server.stop()
    assert server.pid is None
    state_after: ServerState = server.state
    assert state_after is ServerState.STOPPED
    assert gone(pid)
    assert port_is_free("127.0.0.1", server.port)
    assert procs.live_pids() == []
    assert running_servers() == []


async def test_restart_none_to_ngram(make_server: MakeServer) -> None:
    server = make_server(NONE)
    await drain(server.start())
    old_pid = server.pid
    assert old_pid is not None
    events = await drain(server.restart(NGRAM))
    assert events[0].state is ServerState.RESTARTING
    assert events[-1].state is ServerState.READY
    assert gone(old_pid)
    assert [p.pid for p in running_servers()] == [server.pid]
    assert server.config.spec == NGRAM
    async with httpx.AsyncClient() as http:
        slots = (await http.get(f"{server.url}/slots")).json()
    assert slots[0]["speculative"] is True
    await server.stop()


async def test_two_rapid_restarts_latest_wins(make_server: MakeServer) -> None:
    server = make_server(NONE)
    await drain(server.start())
    first = server.restart(NGRAM)
    assert (await anext(first)).state is ServerState.RESTARTING
    second = await drain(server.restart(NGRAM_MOD))
    rest_of_first = await drain(first)
    assert ServerState.READY not in [e.state for e in rest_of_first]
    assert second[-1].state is ServerState.READY
    assert server.config.spec == NGRAM_MOD
    servers = running_servers()
    assert [p.pid for p in servers] == [server.pid]
    cmdline = servers[0].cmdline()
    assert cmdline[cmdline.index("--spec-type") + 1] == "ngram-mod"
    await server.stop()


async def test_abandoned_start_leaves_no_process(make_server: MakeServer) -> None:
    server = make_server()
    events = server.start()
    first = await anext(events)
    assert first.state is ServerState.STARTING
    await events.aclose()  # the consumer gives up while the model loads
    assert server.pid is None
    assert procs.live_pids() == []


async def test_bad_argument_exits_during_load(make_server: MakeServer) -> None:
    server = make_server(extra_args=("--no-such-flag",))
    with pytest.raises(ServerStartError, match="invalid argument: --no-such-flag") as info:
        await drain(server.start())
    assert info.value.log_tail
    assert server.state is ServerState.FAILED
    assert procs.live_pids() == []


async def test_truncated_model_exits_during_load(
    make_server: MakeServer, gemma_model: Path, tmp_path: Path
) -> None:
    broken = tmp_path / "truncated.gguf"
    with gemma_model.open("rb") as source:
        broken.write_bytes(source.read(1 << 20))  # a valid header, then nothing
    server = make_server(model=broken)
    with pytest.raises(ServerStartError, match=r"exited .* while loading") as info:
        await drain(server.start())
    assert any("failed to load model" in line for line in info.value.log_tail)


async def test_port_in_use(make_server: MakeServer) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        server = make_server(port=port)
        with pytest.raises(ServerStartError, match=rf"port {port} .* already in use"):
            await drain(server.start())
    assert server.log_file is None  # refused before any launch


async def test_missing_binary(make_server: MakeServer, tmp_path: Path) -> None:
    server = make_server(binary=tmp_path / "no-llama-server")
    with pytest.raises(BinaryNotFoundError):
        await drain(server.start())


async def test_removed_flag_in_extra_args_is_refused(make_server: MakeServer) -> None:
    server = make_server(extra_args=("--draft-max", "4"))
    with pytest.raises(SpecConfigError, match="--draft-max has been removed"):
        await drain(server.start())
    assert server.log_file is None


@pytest.fixture
def external_server(llama_binary: Path, gemma_model: Path) -> Iterator[tuple[str, int]]:
    """A llama-server started outside spectui: (url, pid)."""
    with outside_server(llama_binary, gemma_model, "--metrics") as server:
        yield server


async def wait_ready(url: str) -> None:
    async with httpx.AsyncClient() as http:

        async def healthy() -> bool:
            return (await http.get(f"{url}/health")).status_code == 200

        await await_async(healthy, f"{url}/health answered 200", ignore=(httpx.TransportError,))


async def test_attach_reads_external_server(
    external_server: tuple[str, int], gemma_model: Path
) -> None:
    url, pid = external_server
    await wait_ready(url)
    attached = await attach(url)
    try:
        assert attached.props.model_path == str(gemma_model)
        assert attached.local
        assert attached.pid == pid
        assert attached.cmdline is not None
        assert str(gemma_model) in attached.cmdline
        assert attached.spec == NONE
        assert attached.slots is not None
        assert attached.metrics is not None
        assert attached.can_adopt
    finally:
        await attached.aclose()
    assert not gone(pid)  # attaching never touches the process


async def test_adopt_restarts_external_server(
    external_server: tuple[str, int], caps: Capabilities, tmp_path: Path
) -> None:
    url, old_pid = external_server
    await wait_ready(url)
    attached = await attach(url)
    assert "--spec-type" in attached.adopt_argv(NGRAM, caps)
    server = await attached.adopt(NGRAM, caps, log_dir=tmp_path / "logs")
    try:
        assert gone(old_pid)
        events = await drain(server.start())
        assert events[-1].state is ServerState.READY
        assert server.url == url
        assert server.pid not in (None, old_pid)
        assert [p.pid for p in running_servers()] == [server.pid]
        async with httpx.AsyncClient() as http:
            slots = (await http.get(f"{url}/slots")).json()
        assert slots[0]["speculative"] is True
    finally:
        await server.stop()
    assert procs.live_pids() == []
