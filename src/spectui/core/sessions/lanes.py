"""The newest session files of a folder, several at once: what a follower's slots view draws.

`SessionFollower` follows one run at a time (the newest). The slots view wants every run that is
going on, one lane each: `RecentSessions` keeps up to ``lanes`` session files of the folder open
and reads each one's new lines (`LineTail`, as the follower does). A new file takes an idle
lane, else the lane of the run that ended longest ago, else of the run that grew longest ago.
Runs written whole when they end (`proxy --record`) fill their lane at once; runs written as
they stream (the presenter's `--broadcast`) grow in it.

Cheap by construction: one ``stat`` of the folder per poll (listed again only when it changed,
or once a second), one ``fstat`` per open file.
"""

from __future__ import annotations

import itertools
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from spectui.core.events import EngineEvent, MetricsEvent, RunMetrics, SummaryEvent
from spectui.core.sessions.file import SessionError, SessionHeader, parse_header
from spectui.core.sessions.recording import SUFFIX
from spectui.core.sessions.tail import RESCAN_S, LineTail, looks_like_session, parse_event


@dataclass
class LaneRun:
    """One session file in a lane: its header and its events so far."""

    path: Path
    key: int
    """A number of its own (a lane whose key changed shows another run)."""
    tail: LineTail
    header: SessionHeader | None = None
    """Set once its first line is read."""
    events: list[EngineEvent] = field(default_factory=list)
    """Its events so far, in file order."""
    metrics: RunMetrics | None = None
    """The latest numbers it carries (a metrics snapshot, then the summary's)."""
    ended: bool = False
    """Whether its summary was read."""
    touched: float = 0.0
    """When it last grew (the poll's clock)."""

    @property
    def label(self) -> str:
        """Its header's label, else its file name."""
        if self.header is not None and self.header.label:
            return self.header.label
        return self.path.stem

    def read(self, now: float) -> None:
        """Its lines written since the last read (damaged or unknown ones are left out)."""
        lines = self.tail.read()
        if not lines:
            return
        self.touched = now
        for line in lines:
            if self.header is None:
                try:
                    self.header = parse_header(self.path.name, line)
                except SessionError:
                    self.ended = True  # no session after all: never read again
                    return
                continue
            if not line.strip():
                continue
            event = parse_event(line)
            if event is None or isinstance(event, str):
                continue
            self.events.append(event)
            if isinstance(event, MetricsEvent):
                self.metrics = event.snapshot
            elif isinstance(event, SummaryEvent):
                self.metrics, self.ended = event.metrics, True
        if self.ended:
            self.tail.close()


class RecentSessions:
    """Up to ``lanes`` of the newest session files in ``folder``, each read as it grows."""

    def __init__(
        self, folder: Path, lanes: int, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.folder = folder
        self.lanes: list[LaneRun | None] = [None] * lanes
        """What each lane holds."""
        self._clock = clock
        self._seen: set[Path] = set()
        self._stamp: int | None = None
        self._scanned_at = -RESCAN_S
        self._keys = itertools.count(1)
        self._first = True

    def poll(self) -> list[LaneRun | None]:
        """Take in new files, read new lines; the lanes."""
        now = self._clock()
        for path in self._new_files(now):
            self._place(path, now)
        for run in self.lanes:
            if run is not None and not run.ended:
                run.read(now)
        return self.lanes

    def close(self) -> None:
        """Let go of the open files."""
        for run in self.lanes:
            if run is not None:
                run.tail.close()

    def _new_files(self, now: float) -> list[Path]:
        """Session files not seen before, oldest first (at the first poll: the newest lanes)."""
        try:
            stamp = os.stat(self.folder).st_mtime_ns
        except OSError:
            return []
        if stamp == self._stamp and now - self._scanned_at < RESCAN_S:
            return []
        self._stamp, self._scanned_at = stamp, now
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
            return []
        found.sort()
        fresh = []
        for _mtime, _name, path in found:
            if looks_like_session(path) is None:
                continue  # too little written yet: looked at again next time
            self._seen.add(path)
            if looks_like_session(path):
                fresh.append(path)
        if self._first:  # older runs are history: only as many as there are lanes
            self._first = False
            fresh = fresh[-len(self.lanes) :]
        return fresh

    def _place(self, path: Path, now: float) -> None:
        run = LaneRun(path, next(self._keys), LineTail(path), touched=now)
        lanes = self.lanes
        held = [(i, lane) for i, lane in enumerate(lanes) if lane is not None]
        if len(held) < len(lanes):
            index = next(i for i, lane in enumerate(lanes) if lane is None)
        else:
            pool = [(i, lane) for i, lane in held if lane.ended] or held
            index, old = min(pool, key=lambda pair: pair[1].touched)
            old.tail.close()
        lanes[index] = run
