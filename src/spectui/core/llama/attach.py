"""Attach to a llama-server spectui did not start, and (only when asked) adopt it.

Attaching only reads: /props, /slots and /metrics, each optional. When the server runs on this
machine, its process is found by the port it listens on, which gives its command line; adopting
then stops that process and relaunches the same command line with other spec flags as a
`ManagedServer`, which spectui owns from then on.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import socket
from pathlib import Path
from urllib.parse import urlsplit

import psutil
from pydantic import SecretStr

from spectui.core.errors import ServerConnectionError, ServerStartError
from spectui.core.llama.binary import Capabilities, probe_capabilities
from spectui.core.llama.client import ServerClient
from spectui.core.llama.launch import LaunchConfig, port_is_free
from spectui.core.llama.protocol import Props, ServerMetrics, Slot
from spectui.core.llama.server import START_TIMEOUT_S, STOP_GRACE_S, ManagedServer
from spectui.core.llama.specconfig import SpecConfig, replace_spec_args

_WILDCARDS = {"0.0.0.0", "::", ""}


def _is_this_machine(host: str) -> bool:
    """Whether ``host`` names this machine (loopback, one of its addresses, or its name)."""
    host = host.strip("[]")
    if host in ("localhost", socket.gethostname(), socket.getfqdn()):
        return True
    try:
        addresses = {str(info[4][0]) for info in socket.getaddrinfo(host, None)}
    except (socket.gaierror, UnicodeError):
        return False
    own = {a.address.split("%")[0] for nic in psutil.net_if_addrs().values() for a in nic}
    for address in addresses:
        with contextlib.suppress(ValueError):
            if ipaddress.ip_address(address.split("%")[0]).is_loopback:
                return True
        if address in own:
            return True
    return False


def _listens_on(status: str, laddr: object, port: int) -> bool:
    return status == psutil.CONN_LISTEN and getattr(laddr, "port", None) == port


def _listening_pid(port: int) -> int | None:
    """The process listening on TCP ``port`` here, if this user may see it."""
    try:
        connections = psutil.net_connections(kind="tcp")
    except psutil.AccessDenied:
        connections = []  # some systems only show other users' sockets to root
    for conn in connections:
        if conn.pid is not None and _listens_on(conn.status, conn.laddr, port):
            return conn.pid
    # Fallback: look at the sockets of every process we may inspect.
    for proc in psutil.process_iter():
        with contextlib.suppress(psutil.Error):
            if any(_listens_on(c.status, c.laddr, port) for c in proc.net_connections(kind="tcp")):
                return proc.pid
    return None


def _host_port(url: str) -> tuple[str, int]:
    parts = urlsplit(url)
    return parts.hostname or "127.0.0.1", parts.port or (443 if parts.scheme == "https" else 80)


def find_local_pid(url: str) -> int | None:
    """The pid of the process serving ``url`` when that is this machine and it can be seen.

    Blocking (it scans sockets): call it in a thread from async code.
    """
    host, port = _host_port(url)
    return _listening_pid(port) if _is_this_machine(host) else None


class AttachedServer:
    """A running llama-server spectui reads from but does not own (until `adopt`)."""

    def __init__(self, client: ServerClient, props: Props) -> None:
        self.client = client
        """Client for the server (API key set); reuse it for streaming."""
        self.props = props
        """What /props said at attach time."""
        self.slots: list[Slot] | None = None
        """Latest /slots (None: the endpoint is disabled)."""
        self.metrics: ServerMetrics | None = None
        """Latest /metrics (None: started without --metrics)."""
        self.local = False
        """Whether the server runs on this machine."""
        self.pid: int | None = None
        """Its process id, when it runs here and this user may see it."""
        self.cmdline: list[str] | None = None
        """Its command line (argv[0] first), when known."""
        self.exe: Path | None = None
        """Its executable, when known."""
        self._cwd: Path | None = None
        self._environ: dict[str, str] = {}

    @property
    def url(self) -> str:
        """Base URL of the server."""
        return self.client.base_url

    @property
    def spec(self) -> SpecConfig | None:
        """The spec config on its command line (None when the command line is unknown)."""
        if self.cmdline is None:
            return None
        return SpecConfig.from_args(self.cmdline[1:]) or SpecConfig()

    @property
    def can_adopt(self) -> bool:
        """Whether `adopt` can relaunch it (its process and command line are known here)."""
        return self.pid is not None and self.cmdline is not None and self.exe is not None

    async def refresh(self) -> None:
        """Re-read /slots and /metrics (each None when the server disables it)."""
        self.slots = await self.client.slots()
        self.metrics = await self.client.metrics()

    def _find_process(self) -> None:
        host, port = _host_port(self.url)
        self.local = _is_this_machine(host)
        pid = _listening_pid(port) if self.local else None
        if pid is None:
            return
        try:
            proc = psutil.Process(pid)
            self.cmdline = proc.cmdline()
            self.exe = Path(proc.exe())
            self._cwd = Path(proc.cwd())
        except psutil.Error:
            self.cmdline = self.exe = self._cwd = None
        else:
            self.pid = pid
            with contextlib.suppress(psutil.Error):
                # All of it: LLAMA_ARG_* are settings, and a wrapper may have set the library path.
                self._environ = proc.environ()

    def adopt_argv(self, spec: SpecConfig, caps: Capabilities) -> list[str]:
        """The server's own command line with its spec flags replaced by ``spec``'s.

        Raises SpecConfigError when the binary cannot run ``spec``, ServerConnectionError when
        the process is not known here.
        """
        if self.cmdline is None or self.exe is None:
            raise ServerConnectionError(
                f"the process behind {self.client.shown_url} is not visible from here, "
                "so it cannot be adopted"
            )
        return [str(self.exe), *replace_spec_args(self.cmdline[1:], spec, caps)]

    def _launch_config(self, spec: SpecConfig, caps: Capabilities) -> LaunchConfig:
        self.adopt_argv(spec, caps)  # the spec must run on this binary before anything stops
        host, port = _host_port(self.url)
        model: Path | None = None
        if self.props.model_path:
            candidate = Path(self.props.model_path)
            if not candidate.is_absolute() and self._cwd is not None:
                candidate = self._cwd / candidate
            model = candidate if candidate.is_file() else None
        key = self._environ.get("LLAMA_API_KEY")
        assert self.exe is not None  # adopt_argv checked both
        assert self.cmdline is not None
        return LaunchConfig(
            binary=self.exe,
            model=model,
            spec=spec,
            host=host,
            port=port,
            base_argv=(str(self.exe), *self.cmdline[1:]),
            env={k: v for k, v in self._environ.items() if k != "LLAMA_API_KEY"},
            api_key=SecretStr(key) if key else None,
            cwd=self._cwd,
        )

    async def adopt(
        self,
        spec: SpecConfig,
        caps: Capabilities | None = None,
        *,
        start_timeout_s: float = START_TIMEOUT_S,
        log_dir: Path | None = None,
    ) -> ManagedServer:
        """Stop the server's process and return an (unstarted) `ManagedServer` to relaunch it.

        Only on the user's explicit request: the process is not spectui's. Iterate the returned
        server's ``start()`` to launch it with ``spec``; spectui owns it from then on. The spec
        is checked before anything is stopped.
        """
        if self.exe is None or self.pid is None:
            raise ServerConnectionError(
                f"the process behind {self.client.shown_url} is not visible from here, "
                "so it cannot be adopted"
            )
        if caps is None:
            caps = await asyncio.to_thread(probe_capabilities, self.exe)
        config = self._launch_config(spec, caps)
        await self._stop_process(self.pid, config.host, config.port or 8080)
        await self.client.aclose()
        return ManagedServer(config, caps, start_timeout_s=start_timeout_s, log_dir=log_dir)

    @staticmethod
    async def _stop_process(pid: int, host: str, port: int) -> None:
        """SIGTERM the one process (its group may be the user's shell), SIGKILL if it lingers."""
        try:
            proc = psutil.Process(pid)
            proc.terminate()
            _, alive = await asyncio.to_thread(psutil.wait_procs, [proc], STOP_GRACE_S)
            for straggler in alive:
                straggler.kill()
            await asyncio.to_thread(psutil.wait_procs, alive, STOP_GRACE_S)
        except psutil.NoSuchProcess:
            pass
        except psutil.AccessDenied as error:
            raise ServerStartError(f"cannot stop pid {pid}: it belongs to another user") from error
        loop = asyncio.get_running_loop()
        deadline = loop.time() + STOP_GRACE_S
        while loop.time() < deadline:
            if port_is_free(host, port):
                return
            await asyncio.sleep(0.1)

    async def aclose(self) -> None:
        """Close the client; the server itself is left alone."""
        await self.client.aclose()


async def attach(url: str, api_key: SecretStr | str | None = None) -> AttachedServer:
    """Connect to the llama-server at ``url``: check it is one, read what it offers.

    Raises ServerConnectionError (unreachable, not a llama-server, still loading) or AuthError.
    """
    client = ServerClient(url, api_key)
    try:
        props = await client.probe()
        server = AttachedServer(client, props)
        await server.refresh()
        await asyncio.to_thread(server._find_process)
    except BaseException:
        await client.aclose()
        raise
    return server
