"""The output of a llama-server process: a bounded ring of lines, mirrored to a rotated log file.

Also reads the few things spectui wants from that output: the loading progress line, the cause of
a failed start, and how long the model took to load.
"""

from __future__ import annotations

import asyncio
import codecs
import os
import re
import time
from collections import deque
from pathlib import Path
from typing import TextIO

from spectui.core.files import ensure_private_dir, open_append

MAX_LINES = 2000
"""Lines kept in memory per server."""
KEEP_LOG_FILES = 20
"""Log files kept in the logs folder; every launch (restarts too) writes a new one."""

# llama-server's log prefix with timestamps on (the default): 'M.SS.mmm.uuu L ', L the level.
_STAMPED = re.compile(r"^(\d+)\.(\d{2})\.(\d{3})\.(\d{3}) ([IWEDT]) (.*)$")
_LOAD_START = re.compile(r"load_model: loading model")
_LOAD_DONE = re.compile(r"model loaded")
_BIND = re.compile(r"couldn't bind|could not bind|address already in use", re.IGNORECASE)
# An argument error is printed before any logging starts, without a prefix, then the usage.
_ARG_ERROR = re.compile(r"^error\b", re.IGNORECASE)
_USAGE = re.compile(r"^usage:")


def _seconds(match: re.Match[str]) -> float:
    minutes, seconds, millis, micros = (int(match.group(i)) for i in range(1, 5))
    return minutes * 60 + seconds + millis / 1e3 + micros / 1e6


class ServerLog:
    """Lines of one server process, fed raw bytes as they arrive."""

    def __init__(self, file: Path | None = None, max_lines: int = MAX_LINES) -> None:
        self.lines: deque[str] = deque(maxlen=max_lines)
        """The most recent complete lines."""
        self.path = file
        """The log file mirrored to (None: memory only)."""
        self.load_time_s: float | None = None
        """Seconds from 'loading model' to 'model loaded' by the server's own clock."""
        self.bind_failed = False
        """The server said it could not bind its port."""
        self.first_error: str | None = None
        """The first unprefixed 'error: ...' line (bad command-line arguments)."""
        self.last_error: str | None = None
        """The latest error-level log line, other than the final 'exiting due to ...'."""
        self._partial = ""
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._load_started: float | None = None
        self._file: TextIO | None = None
        if file is not None:
            # Owner-only (0700 folder, 0600 file, no symlink followed): a server's log holds
            # prompts, paths and sometimes its own command line.
            ensure_private_dir(file.parent)
            self._file = os.fdopen(open_append(file), "a", encoding="utf-8", buffering=1)

    def note(self, text: str) -> None:
        """Write a line of spectui's own (the command line, an exit status) to the file only."""
        if self._file is not None:
            self._file.write(f"# spectui {time.strftime('%Y-%m-%d %H:%M:%S')}: {text}\n")

    def feed(self, data: bytes) -> list[str]:
        """Take a chunk of output; returns the lines it completed."""
        new = self._decoder.decode(data)
        if self._file is not None:
            self._file.write(new)
        text = self._partial + new
        *complete, self._partial = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
        for line in complete:
            self._add(line)
        return complete

    def close(self) -> None:
        """End of output: keep the unterminated last line and close the file."""
        tail = self._decoder.decode(b"", final=True)
        rest = self._partial + tail
        self._partial = ""
        if self._file is not None:
            self._file.write(tail + ("\n" if rest else ""))
        if rest:
            self._add(rest)
        if self._file is not None:
            self._file.close()
            self._file = None

    def _add(self, line: str) -> None:
        line = line.rstrip()
        if not line:
            return
        self.lines.append(line)
        stamped = _STAMPED.match(line)
        message = stamped.group(6) if stamped else line
        if _BIND.search(message):
            self.bind_failed = True
        if stamped is None:
            if self.first_error is None and _ARG_ERROR.match(line):
                self.first_error = line
            return
        if stamped.group(5) == "E" and "exiting due to" not in message:
            self.last_error = message.strip()
        if _LOAD_START.search(message):
            self._load_started = _seconds(stamped)
        elif _LOAD_DONE.search(message) and self._load_started is not None:
            self.load_time_s = round(_seconds(stamped) - self._load_started, 3)

    def tail(self, n: int = 50) -> list[str]:
        """The last ``n`` lines, the unterminated one included."""
        lines = list(self.lines)
        if self._partial.strip():
            lines.append(self._partial.rstrip())
        return lines[-n:] if n > 0 else []

    @property
    def progress(self) -> str:
        """The latest info line without its timestamp prefix: what the server is doing now.

        Warnings are skipped: a model's harmless complaints are not progress.
        """
        for line in reversed(self.tail(20)):
            stamped = _STAMPED.match(line)
            if stamped is not None and stamped.group(5) != "I":
                continue
            text = " ".join((stamped.group(6) if stamped else line).split())
            if text:
                return text[:120]
        return ""

    def failure_tail(self, n: int = 20) -> list[str]:
        """The last lines before the usage text an argument error prints, else the last lines."""
        lines = list(self.lines)
        for i, line in enumerate(lines):
            if _USAGE.match(line):
                lines = lines[:i]
                break
        return lines[-n:]

    @property
    def failure(self) -> str | None:
        """The line that best says why the server failed, if it said."""
        return self.first_error or self.last_error

    def exit_message(self, code: int | None, host: str, port: int) -> str:
        """One line saying why a server exited while loading."""
        if self.bind_failed:
            return f"port {port} on {host} is already in use (llama-server could not bind it)"
        cause = self.failure or (self.tail(1) or ["no output"])[0]
        return f"llama-server exited (code {code}) while loading: {cause}"


async def drain(stream: asyncio.StreamReader, log: ServerLog) -> None:
    """Copy a process's output into ``log`` until EOF, then close the log.

    Reads chunks, not lines: a very long line must neither raise nor stall the pipe.
    """
    try:
        while chunk := await stream.read(65536):
            log.feed(chunk)
    finally:
        log.close()


def new_log_file(folder: Path, keep: int = KEEP_LOG_FILES) -> Path:
    """A fresh file name in ``folder`` for one launch; deletes the oldest beyond ``keep``."""
    ensure_private_dir(folder)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    path = folder / f"llama-server-{stamp}.log"
    n = 1
    while path.exists():
        n += 1
        path = folder / f"llama-server-{stamp}-{n}.log"
    old = sorted(folder.glob("llama-server-*.log"), key=lambda p: p.stat().st_mtime)
    for stale in old[: max(0, len(old) - (keep - 1))]:
        stale.unlink(missing_ok=True)
    return path
