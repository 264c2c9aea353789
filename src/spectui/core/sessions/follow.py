"""The run source a follower's TUI draws from: the presenter's server as its session header
names it, and its runs as the presenter's session files grow. It has no capability to run,
stop, switch or restart anything (there is no server here), so it offers none."""

from __future__ import annotations

from pathlib import Path

from spectui.core.engine.base import ServerInfo
from spectui.core.sessions.replay import recorded_server_info
from spectui.core.sessions.tail import SessionFollower


def short_path(path: Path) -> str:
    """``path`` with the home folder as ``~``, for banners."""
    try:
        return "~/" + str(path.resolve().relative_to(Path.home().resolve()))
    except (ValueError, RuntimeError, OSError):
        return str(path)


class FollowEngine:
    """A `RunSource` over a follower: the presenter's server as recorded, and its runs through
    `following` (`SessionFollower.runs`)."""

    def __init__(self, follower: SessionFollower) -> None:
        self.follower = follower

    @property
    def info(self) -> ServerInfo:
        """The server the followed run's header names (the folder, before any run)."""
        run = self.follower.current
        if run is None:
            return ServerInfo(mode="follow", url=f"follow://{short_path(self.follower.target)}")
        server = run.header.server
        mode = server.mode if server.mode in ("launched", "attached") else "follow"
        return recorded_server_info(
            server, mode=mode, url=server.url or f"follow://{run.path.name}"
        )

    @property
    def server_control(self) -> None:
        """None: the presenter's server is not ours to start, switch or restart."""
        return None

    @property
    def recorder(self) -> None:
        """None: the presenter records; a follower reads what it writes."""
        return None

    @property
    def following(self) -> SessionFollower:
        """The presenter's session files."""
        return self.follower

    def ready_detail(self) -> str:
        """What the server bar says once the follower is open."""
        return f"following {short_path(self.follower.target)}"

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

    async def aclose(self) -> None:
        """Let go of the file being followed."""
        run = self.follower.current
        if run is not None:
            run.tail.close()
