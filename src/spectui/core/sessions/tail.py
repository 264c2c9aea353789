"""Following session files while they are written: `spectui follow` and `spectui share`.

A presenter's spectui (or `proxy --record`) writes each run to a session file, one flushed line
per event. `SessionFollower` turns a folder of such files (or one file) into runs a UI can draw
live: it follows the newest file, and moves to the next run's file when one appears.

Cheap by construction, so following costs the presenter nothing but its own writes: one
``fstat`` of the open file per poll (`POLL_S`), reading only the bytes added since the last
read, and one ``stat`` of the folder, which is rescanned only when its entries changed. A
partial last line is kept until its newline arrives; a damaged line is skipped with a note;
a line of an event type this spectui does not know (a newer writer's) is left out quietly, as
`read_session` does.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import IO

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from spectui.core.events import EngineEvent, EventStream, SummaryEvent, engine_event_adapter
from spectui.core.sessions.file import SessionError, SessionHeader, parse_header
from spectui.core.sessions.recording import SUFFIX
from spectui.core.sessions.silence import STOPPED_AFTER_S, WAITING_AFTER_S

POLL_S = 0.025
"""How often the file being followed (and its folder) is looked at: a draw follows at most this
long after a write, and 40 ``fstat`` calls a second cost next to nothing."""

RESCAN_S = 1.0
"""The folder is listed when its entries changed, and at least this often anyway: two files made
within one tick of its timestamp would not change it twice."""


class FollowState(StrEnum):
    """Where the followed run stands, for the banner."""

    IDLE = "idle"
    """No session file yet: waiting for the presenter's first run."""
    LIVE = "live"
    """The file is growing."""
    WAITING = "waiting"
    """It has not grown for `WAITING_AFTER_S`, and has no summary."""
    STOPPED = "stopped"
    """It has not grown for `STOPPED_AFTER_S`: the presenter is gone (or hung)."""
    FINISHED = "finished"
    """The run ended with its summary; the next run's file is awaited."""


class FollowOptions(BaseModel):
    """What `spectui follow` follows, and how patiently."""

    model_config = ConfigDict(frozen=True)

    target: Path
    """A folder (its newest session file, then each next one) or one session file."""
    poll_s: float = Field(default=POLL_S, gt=0)
    """How often the file and its folder are looked at."""
    waiting_after_s: float = Field(default=WAITING_AFTER_S, gt=0)
    """A run that has not grown for this long shows 'waiting…'."""
    stopped_after_s: float = Field(default=STOPPED_AFTER_S, gt=0)
    """... and after this long 'presenter stopped'."""


Notify = Callable[[str], object]
"""Where the follower's notes go (a skipped line, a file it cannot read)."""


class LineTail:
    """The new complete lines of one growing file, reading only bytes not read before."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._file: IO[bytes] | None = None
        self._offset = 0
        self._partial = b""
        self.lines = 0
        """Complete lines handed out so far (a line's number is its index + 1)."""

    @property
    def partial(self) -> bytes:
        """The bytes after the last newline (a line still being written, or a cut-off one)."""
        return self._partial

    def read(self) -> list[bytes]:
        """Lines completed since the last call (empty when the file has not grown)."""
        if self._file is None:
            try:
                self._file = open(self.path, "rb")  # noqa: SIM115 (kept open between polls)
            except FileNotFoundError:
                return []
        size = os.fstat(self._file.fileno()).st_size
        if size < self._offset:
            # Truncated in place (rewritten): start again from its first byte.
            self._offset, self._partial, self.lines = 0, b"", 0
        if size == self._offset:
            return []
        self._file.seek(self._offset)
        data = self._file.read(size - self._offset)
        self._offset += len(data)
        *lines, self._partial = (self._partial + data).split(b"\n")
        self.lines += len(lines)
        return lines

    def close(self) -> None:
        """Let go of the file; idempotent."""
        if self._file is not None:
            self._file.close()
            self._file = None


HEADER_START = b'{"type":"header"'
"""How every session file begins (the header's first field is its type)."""


def looks_like_session(path: Path) -> bool | None:
    """Whether ``path`` begins as a session file; None while too little of it is written."""
    try:
        with open(path, "rb") as file:
            start = file.read(len(HEADER_START))
    except OSError:
        return None
    if len(start) < len(HEADER_START):
        return None if HEADER_START.startswith(start) else False
    return start == HEADER_START


def parse_event(line: bytes) -> EngineEvent | str | None:
    """An event line: the event, None for an unknown event type, or why it is damaged."""
    try:
        return engine_event_adapter.validate_json(line)
    except ValidationError as error:
        first = error.errors()[0]
        if first["type"] == "union_tag_invalid":
            return None
        if first["type"] == "json_invalid":
            return "not valid JSON"
        where = ".".join(str(p) for p in first["loc"])
        return f"{where}: {first['msg']}" if where else str(first["msg"])


@dataclass
class FollowedRun:
    """One session file being followed: its header, and its events as they are written."""

    path: Path
    header: SessionHeader
    number: int
    """1 for the first run this follower saw, then 2, 3, ..."""
    tail: LineTail
    follower: SessionFollower
    ended: bool = False
    """Whether its summary was read."""
    skipped: int = 0
    """Lines left out (damaged, or of an unknown event type)."""
    kept: list[bytes] = field(default_factory=list)
    """Event lines read with the header, handed out first."""

    def events(self) -> EventStream:
        """The file's events from its second line on, ending at its summary or when a newer
        run's file appears (without a summary: the UI shows it as stopped)."""
        return self.follower._events(self)


class SessionFollower:
    """The newest session file in ``target`` (a folder) as it is written, then the next one;
    or one file, when ``target`` is a file."""

    def __init__(
        self,
        target: Path,
        *,
        on_note: Notify = lambda _: None,
        on_state: Callable[[FollowState], object] = lambda _: None,
        poll_s: float = POLL_S,
        waiting_after_s: float = WAITING_AFTER_S,
        stopped_after_s: float = STOPPED_AFTER_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.target = target
        self.single = target.is_file()
        """Following one named file: no folder to watch for a next run."""
        self.folder = target.parent if self.single else target
        self.on_note = on_note
        self.on_state = on_state
        self.poll_s = poll_s
        self.waiting_after_s = waiting_after_s
        self.stopped_after_s = stopped_after_s
        self._clock = clock
        self.state = FollowState.IDLE
        self.current: FollowedRun | None = None
        self._seen: set[Path] = set()
        """Files followed, skipped as older, or found not to be sessions: never picked again."""
        self._folder_stamp: int | None = None
        self._scanned_at = -RESCAN_S
        self._candidates: list[Path] = []
        self._runs = 0

    @classmethod
    def from_options(cls, options: FollowOptions) -> SessionFollower:
        """A follower for ``options`` (notes and states go nowhere until a UI wires them)."""
        return cls(
            options.target,
            poll_s=options.poll_s,
            waiting_after_s=options.waiting_after_s,
            stopped_after_s=options.stopped_after_s,
        )

    # -- the folder ---------------------------------------------------------------------------

    def _set_state(self, state: FollowState) -> None:
        if state is not self.state:
            self.state = state
            self.on_state(state)

    def _rescan(self) -> None:
        """Unseen session-like files, newest first; only when the folder's entries changed."""
        try:
            stamp = os.stat(self.folder).st_mtime_ns
        except OSError:
            stamp = None
        now = self._clock()
        if stamp == self._folder_stamp and now - self._scanned_at < RESCAN_S:
            return
        self._folder_stamp, self._scanned_at = stamp, now
        found: list[tuple[int, str, Path]] = []
        try:
            with os.scandir(self.folder) as entries:
                for entry in entries:
                    path = Path(entry.path)
                    if path in self._seen or not entry.name.endswith(SUFFIX):
                        continue
                    try:
                        if entry.is_file():
                            found.append((entry.stat().st_mtime_ns, entry.name, path))
                    except OSError:
                        continue  # gone meanwhile
        except OSError:
            found = []
        self._candidates = [path for *_, path in sorted(found, reverse=True)]

    def _newer(self) -> Path | None:
        """The newest unseen session file, if there is one (files that are no session, such as
        the proxy's workload.jsonl beside its sessions, are passed over for good)."""
        if self.single:
            return None
        self._rescan()
        while self._candidates:
            path = self._candidates[0]
            if looks_like_session(path) is not False:
                return path
            self._seen.add(path)
            self._candidates.pop(0)
        return None

    async def runs(self) -> AsyncIterator[FollowedRun]:
        """Each run to follow, as its header arrives; the caller reads its `events` in turn."""
        if self.single:
            run = await self._open(self.target)
            if run is not None:
                yield run
            return
        while True:
            path = self._newer()
            if path is None:
                await asyncio.sleep(self.poll_s)
                continue
            self._seen.update(self._candidates)  # the newest wins; older ones are history
            self._candidates = []
            run = await self._open(path)
            if run is not None:
                yield run

    async def _open(self, path: Path) -> FollowedRun | None:
        """Wait for ``path``'s header; None when it is no session or a newer file came first."""
        tail = LineTail(path)
        while True:
            lines = tail.read()
            if lines:
                break
            if self._newer() is not None:
                tail.close()
                return None
            await asyncio.sleep(self.poll_s)
        try:
            header = parse_header(path.name, lines[0])
        except SessionError as error:
            tail.close()
            self.on_note(str(error))
            return None
        self._runs += 1
        run = FollowedRun(path, header, self._runs, tail, self)
        run.kept = lines[1:]
        self.current = run
        self._set_state(FollowState.LIVE)
        return run

    # -- one file -----------------------------------------------------------------------------

    async def _events(self, run: FollowedRun) -> EventStream:
        tail = run.tail
        pending = run.kept
        run.kept = []
        first_line = tail.lines - len(pending) + 1
        quiet_since = self._clock()
        try:
            while True:
                lines = pending or tail.read()
                start = first_line if pending else tail.lines - len(lines) + 1
                pending = []
                if lines:
                    quiet_since = self._clock()
                    self._set_state(FollowState.LIVE)
                    for number, line in enumerate(lines, start=start):
                        event = self._event(run, number, line)
                        if event is None:
                            continue
                        yield event
                        if isinstance(event, SummaryEvent):
                            run.ended = True
                            self._set_state(FollowState.FINISHED)
                            return
                elif self._newer() is not None:
                    # The next run began: what this file holds has been read.
                    return
                else:
                    self._idle(run, self._clock() - quiet_since)
                await asyncio.sleep(self.poll_s)
        finally:
            tail.close()

    def _event(self, run: FollowedRun, number: int, line: bytes) -> EngineEvent | None:
        if not line.strip():
            return None
        parsed = parse_event(line)
        if isinstance(parsed, str):
            run.skipped += 1
            self.on_note(f"{run.path.name}: skipped damaged line {number} ({parsed})")
            return None
        if parsed is None:
            run.skipped += 1
        return parsed

    def _idle(self, run: FollowedRun, quiet_s: float) -> None:
        # Always through 'waiting…' on the way to 'stopped', however late this poll came.
        if self.state is FollowState.LIVE and quiet_s >= self.waiting_after_s:
            self._set_state(FollowState.WAITING)
        if self.state is FollowState.WAITING and quiet_s >= self.stopped_after_s:
            if run.tail.partial:
                self.on_note(f"{run.path.name}: its last line is cut off (left out)")
            self._set_state(FollowState.STOPPED)
