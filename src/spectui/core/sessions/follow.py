"""The `Engine` a follower's TUI draws from: the presenter's server as its session header names
it, and nothing that could run, stop, switch or restart anything."""

from __future__ import annotations

from pathlib import Path

from spectui.core.engine.base import ServerInfo
from spectui.core.events import ErrorEvent, EventStream, ServerState, ServerStateEvent
from spectui.core.llama.specconfig import SpecConfig
from spectui.core.request import GenerationRequest
from spectui.core.sessions.replay import recorded_server_info
from spectui.core.sessions.tail import SessionFollower


def short_path(path: Path) -> str:
    """``path`` with the home folder as ``~``, for banners."""
    try:
        return "~/" + str(path.resolve().relative_to(Path.home().resolve()))
    except (ValueError, RuntimeError, OSError):
        return str(path)


class FollowEngine:
    """The `Engine` protocol over a follower: the presenter's server as recorded, and nothing
    that could run, stop, switch or restart anything (there is no server here)."""

    def __init__(self, follower: SessionFollower) -> None:
        self.follower = follower

    @property
    def info(self) -> ServerInfo:
        """The server the followed run's header names (the folder, before any run)."""
        run = self.follower.current
        if run is None:
            return ServerInfo(mode="replay", url=f"follow://{short_path(self.follower.target)}")
        server = run.header.server
        mode = server.mode if server.mode in ("launched", "attached") else "replay"
        return recorded_server_info(
            server, mode=mode, url=server.url or f"follow://{run.path.name}"
        )

    @property
    def spec_types(self) -> tuple[str, ...]:
        """None: a follower cannot switch."""
        return ()

    async def start(self) -> EventStream:
        """Ready at once: the presenter's server is not ours."""
        yield ServerStateEvent(
            state=ServerState.READY, detail=f"following {short_path(self.follower.target)}"
        )

    async def switch_spec(self, spec: SpecConfig, *, adopt: bool = False) -> EventStream:
        """Refused: a follower only watches."""
        yield ServerStateEvent(
            state=ServerState.FAILED, detail="a follower cannot switch spec types", refused=True
        )

    async def run(self, request: GenerationRequest | None = None) -> EventStream:
        """Refused: the presenter runs; a follower draws what it writes."""
        yield ErrorEvent(message="a follower cannot run anything", kind="refused")

    def log_tail(self, lines: int = 50) -> list[str]:
        """What is being followed, in place of a server log."""
        follower = self.follower
        out = [f"following {follower.target} ({follower.state.value})"]
        run = follower.current
        if run is not None:
            header, server = run.header, run.header.server
            out += [
                f"run {run.number}: {run.path.name}",
                f"started {header.created:%Y-%m-%d %H:%M:%S} UTC "
                f"by spectui {header.spectui_version}",
                f"llama-server {server.binary_version or '(version unknown)'} · {server.mode}",
                f"model {server.model or '(unknown)'} · spec {server.spec_label}",
            ]
            if run.skipped:
                out.append(f"{run.skipped} lines left out (damaged or unknown)")
        return out[-lines:]

    def cancel_run(self) -> None:
        """Nothing to cancel: the presenter's run is not ours."""

    async def aclose(self) -> None:
        """Let go of the file being followed."""
        run = self.follower.current
        if run is not None:
            run.tail.close()
