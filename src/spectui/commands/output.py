"""Standard output for headless commands: flushed a few times a second, and a closed pipe ends
the command quietly.

Flushing after every token cost a write system call per token, and on a machine where the
server has every core, the reader woken by each write takes its time from the server: `stream`
measured 4 % off the server's tokens/s that way. Output is flushed at most every
``interval`` seconds instead, and at the latest ``interval`` after it was written (a timer), so
a slow stream still shows each token promptly.

``spectui stream | head`` closes the pipe early: like `cat`, spectui then stops quietly with
status 141 (128 + SIGPIPE) instead of reporting an error.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from typing import TextIO

FLUSH_INTERVAL_S = 0.05
"""At most 20 flushes a second: smooth to watch, and one system call per ~3 tokens at 50 tok/s."""

EXIT_PIPE_CLOSED = 128 + 13
"""Exit status when the reader went away (as a process killed by SIGPIPE reports it)."""


class OutputClosed(Exception):
    """Whoever read standard output has gone (a closed pipe)."""


class ThrottledOutput:
    """Writes text to ``out`` and flushes it at most every ``interval`` seconds.

    Call `flush()` at the end. Needs a running event loop (for the flush timer).
    """

    def __init__(self, out: TextIO, *, interval: float = FLUSH_INTERVAL_S) -> None:
        self.out = out
        self.interval = interval
        self.closed = False
        """True once a write or flush found the pipe closed."""
        self._last_flush = -interval
        self._timer: asyncio.TimerHandle | None = None

    def write(self, text: str) -> None:
        """Write ``text``; raises `OutputClosed` when the reader has gone."""
        if self.closed:
            raise OutputClosed
        try:
            self.out.write(text)
        except BrokenPipeError:
            self._closed()
            raise OutputClosed from None
        self._flush_soon()

    def _flush_soon(self) -> None:
        if self._timer is not None:
            return  # the flush already scheduled will carry this text too
        loop = asyncio.get_running_loop()
        due = self._last_flush + self.interval
        if loop.time() >= due:
            self.flush()
        else:
            self._timer = loop.call_at(due, self.flush)

    def flush(self) -> None:
        """Flush now. Never raises: a closed pipe is noted in `closed` (this runs from a timer)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        with contextlib.suppress(RuntimeError):  # no running loop: the command is ending
            self._last_flush = asyncio.get_running_loop().time()
        if self.closed:
            return
        try:
            self.out.flush()
        except BrokenPipeError:
            self._closed()

    def _closed(self) -> None:
        self.closed = True
        # Python flushes stdout once more at exit; pointing the descriptor at /dev/null keeps
        # that flush from failing too (the pending text is for a reader that has gone).
        with contextlib.suppress(OSError, ValueError):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, self.out.fileno())
            os.close(devnull)
