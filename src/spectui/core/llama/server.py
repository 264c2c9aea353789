"""Launch, stop and restart the llama-server spectui owns.

One server at a time, process-wide: a second launch while a spectui-launched server is alive is
refused (`spectui.core.llama.procs` keeps the registry and the orphan safety net). The server
runs in its own process group with stdin closed; its merged stdout/stderr is drained continuously
into a `ServerLog` (ring buffer + rotated file) so a full pipe can never stall it.

Start and restart are async iterators of `ServerStateEvent`. The work itself runs in a task the
server owns, under a lock: a newer start/restart/stop cancels the one in flight (whose iterator
then just ends, without READY) and the final state is always the latest request's.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import AsyncGenerator, Awaitable, Callable
from pathlib import Path

import httpx

from spectui.core.errors import BinaryNotFoundError, ServerStartError
from spectui.core.events import ServerState, ServerStateEvent
from spectui.core.llama import procs
from spectui.core.llama.binary import Capabilities, probe_capabilities
from spectui.core.llama.client import HealthState, ServerClient
from spectui.core.llama.gguf import check_gguf
from spectui.core.llama.launch import LaunchConfig, free_port, host_for_url, port_is_free, redacted
from spectui.core.llama.logbuffer import ServerLog, drain, new_log_file
from spectui.core.llama.specconfig import SpecConfig

__all__ = ["LaunchConfig", "ManagedServer", "free_port", "port_is_free"]

START_TIMEOUT_S = 120.0
"""How long a launch may take to answer /health 200."""
STOP_GRACE_S = 5.0
"""How long a server gets to exit after SIGTERM before SIGKILL."""
PORT_FREE_WAIT_S = 5.0
"""How long stop() waits for the port to become bindable again."""
_POLL_S = 0.1
_HEALTH_TIMEOUT = httpx.Timeout(2.0, connect=1.0)


class ManagedServer:
    """A llama-server spectui launched and owns: start, stop, restart with another spec."""

    def __init__(
        self,
        config: LaunchConfig,
        caps: Capabilities | None = None,
        *,
        start_timeout_s: float = START_TIMEOUT_S,
        log_dir: Path | None = None,
    ) -> None:
        self._config = config
        self._caps = caps
        self.start_timeout_s = start_timeout_s
        """How long one launch may take to become ready."""
        self.log_dir = log_dir
        """Where each launch's log file goes (None: the log is kept in memory only)."""
        self._port = config.port if config.port is not None else free_port(config.host)
        self._port_given = config.port is not None
        self._proc: asyncio.subprocess.Process | None = None
        self._drain: asyncio.Task[None] | None = None
        self._log = ServerLog()
        self._state = ServerState.STOPPED
        self._lock = asyncio.Lock()
        self._op: asyncio.Task[None] | None = None
        self._generation = 0

    # -- what the UI reads ---------------------------------------------------------------------

    @property
    def config(self) -> LaunchConfig:
        """The configuration of the current (or last) launch; its spec follows restarts."""
        return self._config

    @property
    def caps(self) -> Capabilities | None:
        """The binary's capabilities (None until the first start probes them)."""
        return self._caps

    @property
    def pid(self) -> int | None:
        """The server process id while it runs."""
        proc = self._proc
        return proc.pid if proc is not None and proc.returncode is None else None

    @property
    def port(self) -> int:
        """The port the server listens on."""
        return self._port

    @property
    def url(self) -> str:
        """Base URL to reach the server."""
        return f"http://{host_for_url(self._config.host)}:{self._port}"

    @property
    def state(self) -> ServerState:
        """The lifecycle state now (FAILED once a running server has died on its own)."""
        proc = self._proc
        if proc is not None and proc.returncode is not None and self._state is ServerState.READY:
            return ServerState.FAILED
        return self._state

    @property
    def load_time_s(self) -> float | None:
        """Model load time the server logged for the current launch (None if it did not say)."""
        return self._log.load_time_s

    @property
    def log_file(self) -> Path | None:
        """The current launch's log file."""
        return self._log.path

    def log_tail(self, n: int = 50) -> list[str]:
        """The server's most recent output lines."""
        return self._log.tail(n)

    # -- lifecycle -----------------------------------------------------------------------------

    def start(self) -> AsyncGenerator[ServerStateEvent, None]:
        """Launch: STARTING, LOADING (with progress), READY; raises ServerStartError & co."""
        return self._operate(self._start_op)

    def restart(self, spec: SpecConfig) -> AsyncGenerator[ServerStateEvent, None]:
        """Stop and relaunch with ``spec``: RESTARTING, LOADING ..., READY.

        Supersedes a start or restart in flight: that one's iterator ends without READY.
        """

        async def op(emit: Callable[[ServerStateEvent], None]) -> None:
            # Check the new spec while the old server still runs: a typo must not cost the user
            # a working server.
            new_config = self._config.model_copy(update={"spec": spec})
            caps = await self._ensure_caps()
            new_config.spec.validate_for(caps)
            new_config.argv(caps, self._port)
            emit(
                ServerStateEvent(state=ServerState.RESTARTING, detail=f"switching to {spec.label}")
            )
            self._state = ServerState.RESTARTING
            await self._stop_fully()
            self._config = new_config
            await self._launch(emit, restarting=True)

        return self._operate(op)

    async def stop(self) -> None:
        """Stop the server (cancelling any start/restart in flight); idempotent."""
        self._generation += 1
        await self._cancel_op()
        async with self._lock:
            await self._stop_fully()

    async def aclose(self) -> None:
        """Alias of stop(), for `contextlib.aclosing`-style owners."""
        await self.stop()

    async def _cancel_op(self) -> None:
        op = self._op
        if op is not None and not op.done():
            op.cancel()
            await asyncio.wait({op})

    async def _operate(
        self, op: Callable[[Callable[[ServerStateEvent], None]], Awaitable[None]]
    ) -> AsyncGenerator[ServerStateEvent, None]:
        """Run ``op`` in an owned task (serialized, newest wins), relaying its events."""
        self._generation += 1
        generation = self._generation
        previous = self._op
        if previous is not None and not previous.done():
            previous.cancel()
        queue: asyncio.Queue[ServerStateEvent] = asyncio.Queue()

        async def locked() -> None:
            async with self._lock:
                if generation != self._generation:
                    return  # superseded before it began
                try:
                    await op(queue.put_nowait)
                except asyncio.CancelledError:
                    raise
                except BaseException:
                    if self.pid is None:
                        self._state = ServerState.FAILED
                    raise

        task = asyncio.create_task(locked())
        self._op = task
        getter: asyncio.Future[ServerStateEvent] | None = None
        try:
            while True:
                getter = asyncio.ensure_future(queue.get())
                await asyncio.wait({getter, task}, return_when=asyncio.FIRST_COMPLETED)
                if getter.done():
                    yield getter.result()
                    continue
                while not queue.empty():
                    yield queue.get_nowait()
                if not task.cancelled():
                    task.result()  # re-raises the launch's error
                return  # done, or superseded by a newer request
        finally:
            if getter is not None:
                getter.cancel()
            # The consumer went away (or was cancelled): do not leave a launch half done.
            if not task.done():
                task.cancel()
                await asyncio.wait({task})
            if not task.cancelled():
                task.exception()  # retrieved: an abandoned launch's error is not "unhandled"

    async def _start_op(self, emit: Callable[[ServerStateEvent], None]) -> None:
        if self.pid is not None:
            raise ServerStartError(f"this server is already running (pid {self.pid})")
        await self._launch(emit, restarting=False)

    async def _launch(self, emit: Callable[[ServerStateEvent], None], *, restarting: bool) -> None:
        caps = await self._prepare()
        try:
            await self._launch_once(emit, caps, restarting=restarting)
        except ServerStartError:
            # A port picked for us was taken between the pick and the bind: pick again, once.
            if self._port_given or not self._log.bind_failed:
                raise
            self._port = free_port(self._config.host)
            await self._launch_once(emit, caps, restarting=restarting)

    async def _prepare(self) -> Capabilities:
        """Everything checkable before a launch; each failure is one clear line."""
        config = self._config
        others = [pid for pid in procs.live_pids() if pid != self.pid]
        if others:
            raise ServerStartError(
                f"another llama-server launched by spectui is still running (pid {others[0]})"
            )
        caps = await self._ensure_caps()
        if config.model is not None:
            check_gguf(config.model)
        config.spec.validate_for(caps)
        config.argv(caps, self._port)  # removed/reserved extra args, before any launch
        if self._port_given and not port_is_free(config.host, self._port):
            raise ServerStartError(
                f"port {self._port} on {config.host} is already in use (another server?); "
                "choose another port or stop what uses it"
            )
        return caps

    async def _ensure_caps(self) -> Capabilities:
        if self._caps is None:
            # Probing runs `llama-server --help` (cached per build): keep the loop responsive.
            self._caps = await asyncio.to_thread(probe_capabilities, self._config.binary)
        return self._caps

    async def _launch_once(
        self, emit: Callable[[ServerStateEvent], None], caps: Capabilities, *, restarting: bool
    ) -> None:
        config = self._config
        argv = config.argv(caps, self._port)
        self._log = ServerLog(new_log_file(self.log_dir) if self.log_dir is not None else None)
        self._log.note(redacted(argv))
        self._state = ServerState.RESTARTING if restarting else ServerState.STARTING
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own group: stop() signals everything it spawned
                env=config.child_env(caps),
                cwd=config.cwd,
                preexec_fn=procs.die_with_parent if sys.platform.startswith("linux") else None,
            )
        except OSError as error:
            self._log.close()
            self._state = ServerState.FAILED
            raise BinaryNotFoundError(
                f"cannot run {config.binary}: {error.strerror or error}"
            ) from error
        procs.register(proc.pid)
        self._proc = proc
        assert proc.stdout is not None
        self._drain = asyncio.create_task(drain(proc.stdout, self._log))
        if not restarting:
            emit(
                ServerStateEvent(state=ServerState.STARTING, detail=f"{self.url} (pid {proc.pid})")
            )
        try:
            await self._wait_ready(emit, proc)
        except BaseException:
            # Failed, timed out or superseded: this launch must not outlive the attempt.
            await self._stop_fully()
            raise
        self._state = ServerState.READY
        model = config.model.name if config.model else "model"
        emit(
            ServerStateEvent(
                state=ServerState.READY, detail=f"{model} on {self.url} ({config.spec.label})"
            )
        )

    async def _wait_ready(
        self, emit: Callable[[ServerStateEvent], None], proc: asyncio.subprocess.Process
    ) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.start_timeout_s
        exited = asyncio.ensure_future(proc.wait())
        last_detail = ""
        async with ServerClient(self.url, self._config.api_key, timeout=_HEALTH_TIMEOUT) as client:
            try:
                while True:
                    if exited.done():
                        await self._raise_exited(proc)
                    health = await client.health()
                    if health.ok:
                        return
                    if health.state is HealthState.LOADING or self._log.progress:
                        detail = self._log.progress or health.detail
                        if detail != last_detail:
                            self._state = ServerState.LOADING
                            emit(ServerStateEvent(state=ServerState.LOADING, detail=detail))
                            last_detail = detail
                    if loop.time() > deadline:
                        raise ServerStartError(
                            "llama-server did not become ready within "
                            f"{self.start_timeout_s:.0f} s",
                            self._log.failure_tail(),
                        )
                    await asyncio.wait({exited}, timeout=_POLL_S)
            finally:
                exited.cancel()

    async def _raise_exited(self, proc: asyncio.subprocess.Process) -> None:
        # Let the drain read what the process wrote last: the cause is usually its final line.
        if self._drain is not None:
            await asyncio.wait({self._drain}, timeout=2.0)
        message = self._log.exit_message(proc.returncode, self._config.host, self._port)
        raise ServerStartError(message, self._log.failure_tail())

    async def _stop_fully(self) -> None:
        """`_stop_process`, carried to the end even if this task is cancelled meanwhile.

        Stopping half-way would leave a process nobody tracks; the cancellation is re-raised
        once the server is gone.
        """
        stopper = asyncio.ensure_future(self._stop_process())
        cancelled = False
        while not stopper.done():
            try:
                await asyncio.shield(stopper)
            except asyncio.CancelledError:
                cancelled = True
        stopper.result()
        if cancelled:
            raise asyncio.CancelledError

    async def _stop_process(self) -> None:
        """SIGTERM the group, SIGKILL after the grace period, reap, wait for the port."""
        proc = self._proc
        if proc is None:
            return
        if proc.returncode is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                await asyncio.wait_for(proc.wait(), STOP_GRACE_S)
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(proc.pid, signal.SIGKILL)
                await proc.wait()
        # Anything else left in its group (llama-server spawns nothing, but be certain).
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        procs.unregister(proc.pid)
        if self._drain is not None:
            await asyncio.wait({self._drain}, timeout=2.0)
        self._proc = None
        self._state = ServerState.STOPPED
        await self._wait_port_free()

    async def _wait_port_free(self) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + PORT_FREE_WAIT_S
        while loop.time() < deadline:
            if port_is_free(self._config.host, self._port):
                return
            await asyncio.sleep(_POLL_S)
