"""The engine's face to a UI or a headless command: a source of runs and what else it can do.

`RunSource` is what every source offers (info, a log view, close); `Runner` (run a request),
`ServerControl` (start, switch, restart), `Recorder` (record runs) and `Following` (a
presenter's session files) are capabilities a source has or lacks, and a UI asks for them by
attribute, never by class. `Engine` is a live server, a source that runs and whose server
spectui controls: `spectui.core.engine.live.LiveEngine` over a real llama-server (launched or
attached), `RecordingEngine` around it (which also records). A replay is a source that runs; a
follower one that follows; tests use fakes of the same shapes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal, Protocol, Self

from pydantic import BaseModel, ConfigDict

from spectui.core.events import EventStream
from spectui.core.llama.specconfig import SpecConfig
from spectui.core.request import GenerationRequest


class EngineDirs(BaseModel):
    """Where an engine keeps files: the app passes its own folders, tests temporary ones."""

    model_config = ConfigDict(frozen=True)

    caps_cache: Path | None = None
    """Cache of probed ``llama-server --help`` capabilities (None: probe every time)."""
    logs: Path | None = None
    """Where each launched server's log file goes (None: logs kept in memory only)."""


class ServerInfo(BaseModel):
    """What the server pane shows about the server."""

    model_config = ConfigDict(frozen=True)

    mode: Literal["launched", "attached", "replay", "follow"]
    """Whether spectui started the server, attached to one, replays a recorded session, or
    follows a presenter's session files (before the first run names the presenter's server)."""
    url: str
    """Base URL, e.g. http://127.0.0.1:8080."""
    binary: Path | None = None
    """The llama-server executable (None when attached to a process spectui cannot see)."""
    version: str | None = None
    """`llama-server --version` of that binary."""
    model: str | None = None
    """Model path or alias."""
    spec: SpecConfig | None = None
    """Spec configuration in effect (None when unknown, e.g. attached to a remote server)."""
    pid: int | None = None
    """Server process id, when it runs on this machine."""
    can_switch: bool = False
    """Whether spec switching is possible (launched, or a local server that may be adopted)."""
    needs_adopt: bool = False
    """Switching would restart a process spectui did not start: ask the user first."""
    owner: str | None = None
    """The user an attached server's process runs as, when it is not spectui's own user (only
    root may adopt it, after a question naming the owner and the executable)."""
    dropped_env: tuple[str, ...] = ()
    """The attached process's code-injection variables (LD_PRELOAD, ...) an adoption would not
    carry over."""
    synthetic_acceptance: bool = False
    """The binary lists ``--spec-synth-len``: acceptance can be forced for a demonstration."""


class RunSource(Protocol):
    """What every source of runs offers the UI: a description, a log view and a close; the rest
    are capabilities it has or lacks (None).

    A UI asks for a capability by attribute (``if (ctl := source.server_control) is not None``),
    never by the engine's class: a read-only source (a replay, a follower) simply has none of
    those it cannot honour, rather than methods that refuse."""

    @property
    def info(self) -> ServerInfo:
        """Current description of the server (the recorded one for a replay or a follower)."""
        ...

    def log_tail(self, lines: int = 50) -> list[str]:
        """What the log view shows: the server's most recent log lines, or what a replay or a
        follower knows about the server it draws (every source has something to say there)."""
        ...

    async def aclose(self) -> None:
        """Stop everything the source started; idempotent."""
        ...

    @property
    def server_control(self) -> ServerControl | None:
        """Starting, switching and restarting the server (None: there is no server of ours)."""
        ...

    @property
    def recorder(self) -> Recorder | None:
        """Recording runs to session files (None: this source cannot record)."""
        ...

    @property
    def following(self) -> Following | None:
        """The presenter's session files this source follows (None: it follows nothing)."""
        ...


class Runner(Protocol):
    """Runs a request and streams it (a live server, or a replay of a recorded one)."""

    def run(self, request: GenerationRequest) -> EventStream:
        """Stream one generation: tokens, steps, metrics snapshots, memory, then summary/error."""
        ...

    def cancel_run(self) -> None:
        """Stop the run in progress; its iterator ends with a 'cancelled' summary."""
        ...


class ServerControl(Protocol):
    """A server spectui can start, switch to another spec config and restart."""

    @property
    def spec_types(self) -> tuple[str, ...]:
        """Spec types this binary's --help lists (empty when unknown, e.g. remote attach)."""
        ...

    def start(self) -> EventStream:
        """Launch (or connect to) the server; yields state events until ready or failed."""
        ...

    def switch_spec(self, spec: SpecConfig, *, adopt: bool = False) -> EventStream:
        """Restart the server with another spec config (a restart is a switch to the same one);
        yields state events until ready or failed."""
        ...


class Recorder(Protocol):
    """A source that can record its runs to session files (`spectui.core.sessions.recording`)."""

    @property
    def recording(self) -> bool:
        """Whether the next run is recorded."""
        ...

    def toggle_recording(self) -> bool:
        """Switch recording on or off; returns whether it is now on."""
        ...

    @property
    def writing(self) -> Path | None:
        """The session file the run in progress goes to (None: no run is being recorded)."""
        ...

    @property
    def last_path(self) -> Path | None:
        """The last session file started."""
        ...

    @property
    def problem(self) -> str | None:
        """The last write that failed, in one line (None: none did)."""
        ...

    @property
    def sessions_dir(self) -> Path:
        """Where the session files go."""
        ...


class Following(Protocol):
    """A source that follows a presenter's session files as they are written
    (`spectui.core.sessions.tail.SessionFollower`)."""

    @property
    def folder(self) -> Path:
        """The folder whose session files are followed (the file's own, for one file)."""
        ...


class LiveServerSource:
    """The capabilities of an engine that runs and controls a server: control is the engine
    itself; it records nothing (`RecordingEngine` wraps one to) and follows nothing. Mixed into
    `LiveEngine` and into the engines that stand in for one (bench and test fakes)."""

    @property
    def server_control(self) -> Self:
        """This engine: it starts, switches and restarts its server."""
        return self

    @property
    def recorder(self) -> None:
        """None: recording is `RecordingEngine`'s, around this one."""
        return None

    @property
    def following(self) -> None:
        """None: a live server follows nothing."""
        return None


class Engine(RunSource, Runner, ServerControl, Protocol):
    """A live server: a run source that runs requests and whose server spectui controls (what the
    live screen, compare and tune drive)."""
