"""The engine's face to a UI or a headless command: one server, runs streamed as typed events.

`Engine` is the protocol the TUI programs against; `spectui.core.engine.live.LiveEngine`
implements it over a real llama-server (launched or attached) and tests use a fake with the
same shape.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal, Protocol

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

    mode: Literal["launched", "attached", "replay"]
    """Whether spectui started the server, attached to one, or replays a recorded session."""
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


class Engine(Protocol):
    """A server plus the ability to stream runs from it."""

    @property
    def info(self) -> ServerInfo:
        """Current description of the server."""
        ...

    @property
    def spec_types(self) -> tuple[str, ...]:
        """Spec types this binary's --help lists (empty when unknown, e.g. remote attach)."""
        ...

    def start(self) -> EventStream:
        """Launch (or connect to) the server; yields state events until ready or failed."""
        ...

    def switch_spec(self, spec: SpecConfig, *, adopt: bool = False) -> EventStream:
        """Restart the server with another spec config; yields state events until ready/failed."""
        ...

    def run(self, request: GenerationRequest) -> EventStream:
        """Stream one generation: tokens, steps, metrics snapshots, memory, then summary/error."""
        ...

    def cancel_run(self) -> None:
        """Stop the run in progress; its iterator ends with a 'cancelled' summary."""
        ...

    def log_tail(self, lines: int = 50) -> list[str]:
        """The server's most recent log lines (empty when attached to a remote server)."""
        ...

    async def aclose(self) -> None:
        """Stop everything spectui started; idempotent."""
        ...
