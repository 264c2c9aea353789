"""Recording runs: a pass-through generator and an `Engine` wrapper that writes session files.

`recorded` sits between an engine's run and its consumer and writes every event before handing
it on, so recording changes nothing the consumer sees. `RecordingEngine` wraps any `Engine`
(LiveEngine unchanged) and records each run to its own file while recording is on; the TUI
toggles it with a key, `spectui stream --record FILE` and the ``record`` setting switch it on.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

from spectui.core.engine.base import Engine, ServerInfo
from spectui.core.events import EventStream
from spectui.core.llama.client import safe_url
from spectui.core.llama.specconfig import SpecConfig
from spectui.core.prompts import BUILTIN_PROMPTS
from spectui.core.request import GenerationRequest
from spectui.core.sessions.file import (
    SessionHeader,
    SessionServer,
    SessionWriter,
    redact_flags,
)

SUFFIX = ".jsonl"


async def recorded(events: EventStream, writer: SessionWriter) -> EventStream:
    """Yield ``events`` unchanged, writing each one first; the writer is closed at the end."""
    try:
        async for event in events:
            writer.write(event)
            yield event
    finally:
        writer.close()
        # The consumer may stop early (a stopped run): close the engine's iterator now, on this
        # task, rather than whenever it is garbage-collected.
        with contextlib.suppress(RuntimeError):  # already running: it is closing itself
            await events.aclose()


def label_for(request: GenerationRequest) -> str:
    """The built-in prompt's key when the request runs one, else 'custom'."""
    for prompt in BUILTIN_PROMPTS:
        if prompt.text == request.prompt:
            return prompt.key
    return "custom"


def header_for(
    info: ServerInfo,
    request: GenerationRequest,
    *,
    flags: Sequence[str] = (),
    label: str | None = None,
) -> SessionHeader:
    """A session header for ``request`` run on the server ``info`` describes."""
    server = SessionServer(
        mode=info.mode,
        url=safe_url(info.url),
        binary=str(info.binary) if info.binary else None,
        binary_version=info.version,
        model=info.model,
        spec=info.spec,
        flags=redact_flags(flags),
    )
    return SessionHeader(label=label or label_for(request), server=server, request=request)


def session_path(folder: Path, label: str, spec: SpecConfig | None, when: datetime) -> Path:
    """The name for a session in ``folder``, by time, prompt and spec. Open it with
    ``SessionWriter.open(..., unique=True)``: a name already taken gets ``-2``, ``-3``, ...
    at the moment the file is created (no check-then-create race)."""
    spec_name = ",".join(spec.types) if spec is not None else "unknown"
    stem = _slug(f"{when:%Y%m%d-%H%M%S}-{label}-{spec_name}")
    return folder / f"{stem}{SUFFIX}"


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_") or "session"


class RecordingEngine:
    """An `Engine` that records each run to a session file while `recording` is on.

    With ``path``, the first run goes to that file and later ones next to it (``-2``, ``-3``);
    without, each run gets a new file in ``sessions_dir``. Everything else is the wrapped
    engine's.
    """

    def __init__(
        self,
        inner: Engine,
        *,
        sessions_dir: Path,
        path: Path | None = None,
        recording: bool = True,
        flags: Sequence[str] = (),
        secrets: Sequence[str] = (),
    ) -> None:
        self.inner = inner
        self.sessions_dir = sessions_dir
        self._path = path
        self._recording = recording
        self._flags = list(flags)
        self._secrets = list(secrets)
        self._writer: SessionWriter | None = None
        self.paths: list[Path] = []
        """Every session file this engine has started, oldest first."""
        self.problem: str | None = None
        """Why the last recording failed or stopped early, or None."""

    # -- recording switch ----------------------------------------------------------------------

    @property
    def recording(self) -> bool:
        """Whether runs are being recorded."""
        return self._recording

    def set_recording(self, on: bool) -> None:
        """Turn recording on (from the next run) or off (the current file ends here)."""
        self._recording = on
        if not on and self._writer is not None:
            self._writer.close()

    def toggle_recording(self) -> bool:
        """Flip recording; returns the new state."""
        self.set_recording(not self._recording)
        return self._recording

    @property
    def writing(self) -> Path | None:
        """The file a run is being recorded to right now, or None."""
        writer = self._writer
        return writer.path if writer is not None and writer.active else None

    @property
    def last_path(self) -> Path | None:
        """The most recent session file."""
        return self.paths[-1] if self.paths else None

    def _next_path(self, label: str, spec: SpecConfig | None) -> tuple[Path, bool]:
        """Where the next run goes, and whether that file may be rewritten (the file the user
        named, for the first run) rather than only created."""
        if self._path is not None:
            if not self.paths:
                return self._path, True
            stem, suffix = self._path.stem, self._path.suffix
            return self._path.with_name(f"{stem}-{len(self.paths) + 1}{suffix}"), False
        return session_path(self.sessions_dir, label, spec, datetime.now()), False

    # -- the Engine protocol -------------------------------------------------------------------

    @property
    def info(self) -> ServerInfo:
        """The wrapped engine's."""
        return self.inner.info

    @property
    def spec_types(self) -> tuple[str, ...]:
        """The wrapped engine's."""
        return self.inner.spec_types

    @property
    def server_control(self) -> RecordingEngine:
        """This engine: it starts and switches the wrapped engine's server."""
        return self

    @property
    def recorder(self) -> RecordingEngine:
        """This engine: it records runs."""
        return self

    @property
    def following(self) -> None:
        """None: a live server follows nothing."""
        return None

    def start(self) -> EventStream:
        """The wrapped engine's (server start-up is not part of a session)."""
        return self.inner.start()

    def switch_spec(self, spec: SpecConfig, *, adopt: bool = False) -> EventStream:
        """The wrapped engine's; the next run's header carries the new spec."""
        return self.inner.switch_spec(spec, adopt=adopt)

    def run(self, request: GenerationRequest) -> EventStream:
        """The wrapped run, recorded to a new session file while recording is on."""
        events = self.inner.run(request)
        if not self._recording:
            return events
        header = header_for(self.inner.info, request, flags=self._flags)
        path, replace = self._next_path(header.label, header.server.spec)
        self.problem = None
        try:
            self._writer = SessionWriter.open(
                path, header, secrets=self._secrets, unique=not replace, replace=replace
            )
        except Exception as error:  # a recording problem must never stop the run itself
            self.paths.append(path)
            self.problem = str(error)
            self._writer = None
            return events
        self.paths.append(self._writer.path)
        return self._recorded(events, self._writer)

    async def _recorded(self, events: EventStream, writer: SessionWriter) -> EventStream:
        inner = recorded(events, writer)
        try:
            async for event in inner:
                yield event
        finally:
            await inner.aclose()  # closes the file and the engine's iterator now, not at GC
            if writer.problem is not None:
                self.problem = writer.problem
            if self._writer is writer:
                self._writer = None

    def log_tail(self, lines: int = 50) -> list[str]:
        """The wrapped engine's."""
        return self.inner.log_tail(lines)

    async def aclose(self) -> None:
        """Close the file being written, then the wrapped engine."""
        if self._writer is not None:
            self._writer.close()
        await self.inner.aclose()

    def cancel_run(self) -> None:
        """The wrapped engine's."""
        self.inner.cancel_run()


def recording_notes(engine: Engine) -> list[str]:
    """Lines for the user about what ``engine`` recorded (where to, what went wrong)."""
    if not isinstance(engine, RecordingEngine):
        return []
    notes = [f"recorded to {path}" for path in engine.paths if path.exists()]
    if engine.problem:
        notes.append(engine.problem)
    return notes
