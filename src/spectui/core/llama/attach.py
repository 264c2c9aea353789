"""Attach to a llama-server spectui did not start, and (only when asked) adopt it.

Attaching only reads: /props, /slots and /metrics, each optional. When the server runs on this
machine, its process is found by the port it listens on, which gives its command line; adopting
then stops that process and relaunches the same command line with other spec flags as a
`ManagedServer`, which spectui owns from then on.

Trust: only a process of spectui's own user is `trusted` — its ``--help`` may be run and it may be
adopted once the user confirms. Another user's process is never probed nor adopted, except when
spectui runs as root and the user confirmed a question naming its owner and executable. The
relaunch does not carry over the process's loader and interpreter injection variables
(`INJECTION_ENV`: ``LD_PRELOAD``, ``LD_LIBRARY_PATH``, ``PYTHONPATH``, ...): spectui's own
environment applies to them, so a user who needs one sets it for spectui (``keep_env`` keeps them).
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import os
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

INJECTION_ENV = frozenset(
    {
        "GLIBC_TUNABLES",
        "GCONV_PATH",
        "LOCPATH",
        "NLSPATH",
        "HOSTALIASES",
        "RESOLV_HOST_CONF",
        "PERL5LIB",
        "PERL5OPT",
        "PERLLIB",
        "RUBYLIB",
        "RUBYOPT",
        "NODE_OPTIONS",
        "NODE_PATH",
        "BASH_ENV",
        "ENV",
        "SHELLOPTS",
        "PS4",
    }
)
"""Variables that make a program load or run other code; with every ``LD_*``, ``DYLD_*`` and
``PYTHON*`` one, an adopted process's values are not carried over to its relaunch."""
_INJECTION_PREFIXES = ("LD_", "DYLD_", "PYTHON")


def is_injection_var(name: str) -> bool:
    """Whether ``name`` is a variable that injects code into a program (`INJECTION_ENV`)."""
    return name in INJECTION_ENV or name.startswith(_INJECTION_PREFIXES)


def running_as_root() -> bool:
    """Whether spectui runs with root's effective uid."""
    return os.geteuid() == 0


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
        self.owner_uid: int | None = None
        """The uid its process runs as (real and effective), when known."""
        self.owner: str | None = None
        """The name of that user (or ``uid N``)."""
        self._cwd: Path | None = None
        self._environ: dict[str, str] = {}
        self._created: float | None = None
        self._uids: tuple[int, int] | None = None

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
    def trusted(self) -> bool:
        """Whether its process is spectui's own user's: its ``--help`` may be run."""
        return self.pid is not None and self.owner_uid == os.geteuid()

    @property
    def foreign(self) -> bool:
        """Whether its process belongs to another user than spectui's."""
        return self.owner_uid is not None and self.owner_uid != os.geteuid()

    @property
    def can_adopt(self) -> bool:
        """Whether `adopt` can relaunch it, after the user confirms: its process and command
        line are known here and it is this user's (or spectui runs as root)."""
        known = self.pid is not None and self.cmdline is not None and self.exe is not None
        return known and (self.trusted or (self.foreign and running_as_root()))

    @property
    def dropped_env(self) -> tuple[str, ...]:
        """Its injection variables (`INJECTION_ENV`) that a relaunch would not carry over."""
        return tuple(sorted(name for name in self._environ if is_injection_var(name)))

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
            real, effective, _ = proc.uids()
            self._created = proc.create_time()
            self._uids = (real, effective)
        except psutil.Error:
            return
        self.owner_uid = real if real == effective else effective
        with contextlib.suppress(psutil.Error, KeyError):
            self.owner = proc.username()
        self.owner = self.owner or f"uid {self.owner_uid}"
        if real != effective:
            self.owner_uid = -1  # a setuid process: trusted by no one
        if self.owner_uid != os.geteuid() and not running_as_root():
            # Another user's: shown (pid, owner), never read further, probed or adopted.
            self.pid = pid
            return
        try:
            self.cmdline = proc.cmdline()
            self.exe = Path(proc.exe())
            self._cwd = Path(proc.cwd())
        except psutil.Error:
            self.cmdline = self.exe = self._cwd = None
        else:
            self.pid = pid
            with contextlib.suppress(psutil.Error):
                # All of it: LLAMA_ARG_* are settings (injection variables are dropped later).
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

    def relaunch_env(self, *, keep_env: bool = False) -> dict[str, str]:
        """Its environment for the relaunch: without its key (passed apart) and, unless
        ``keep_env``, without its injection variables (spectui's own values apply)."""
        return {
            key: value
            for key, value in self._environ.items()
            if key != "LLAMA_API_KEY" and (keep_env or not is_injection_var(key))
        }

    def _launch_config(
        self, spec: SpecConfig, caps: Capabilities, *, keep_env: bool = False
    ) -> LaunchConfig:
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
            env=self.relaunch_env(keep_env=keep_env),
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
        keep_env: bool = False,
    ) -> ManagedServer:
        """Stop the server's process and return an (unstarted) `ManagedServer` to relaunch it.

        Only on the user's explicit request: the process is not spectui's (for another user's,
        as root, after a question naming its owner and executable). Iterate the returned
        server's ``start()`` to launch it with ``spec``; spectui owns it from then on. The spec
        is checked before anything is stopped.
        """
        if self.exe is None or self.pid is None:
            raise ServerConnectionError(
                f"the process behind {self.client.shown_url} is not visible from here, "
                "so it cannot be adopted"
            )
        self.check_still_adoptable()
        if caps is None:
            caps = await asyncio.to_thread(probe_capabilities, self.exe)
        config = self._launch_config(spec, caps, keep_env=keep_env)
        await self._stop_process(self.pid, config.host, config.port or 8080)
        await self.client.aclose()
        return ManagedServer(config, caps, start_timeout_s=start_timeout_s, log_dir=log_dir)

    def check_still_adoptable(self) -> None:
        """ServerStartError unless the process may be adopted and is still the one attached to
        (same pid, start time and owner: a pid reused meanwhile is someone else's)."""
        if not self.can_adopt:
            raise ServerStartError(
                f"pid {self.pid} belongs to {self.owner or 'another user'}: spectui adopts only "
                "its own user's processes (or, running as root, after you confirm)"
            )
        try:
            proc = psutil.Process(self.pid)
            same = proc.create_time() == self._created and tuple(proc.uids()[:2]) == self._uids
        except psutil.Error:
            same = False
        if not same:
            raise ServerStartError(f"pid {self.pid} is no longer the server spectui attached to")

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
