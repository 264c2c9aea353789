"""How spectui ends: one way for the TUI and every headless command.

Whatever ends the process — the body returning, an error, Ctrl-C, SIGTERM, or SIGHUP when an SSH
session drops — the engine is closed on the event loop, so a server spectui launched never
outlives it. SIGHUP and SIGTERM end with the shell's 128+N status. If a signalled shutdown hangs
(a dead terminal can block Textual's driver for good), a watchdog thread stops every launched
server without the loop and ends the process after `EXIT_GRACE_S`.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import threading
from collections.abc import Callable, Coroutine, Iterator
from types import FrameType
from typing import TYPE_CHECKING, Any

from spectui.core.engine.base import RunSource
from spectui.core.llama import procs

if TYPE_CHECKING:
    from textual.app import App

EXIT_SIGNALS = {signal.SIGHUP: 129, signal.SIGTERM: 143}
"""Signals that end spectui cleanly, with the shell's 128+N exit status."""

EXIT_GRACE_S = 15.0
"""After an exit signal, how long a clean shutdown (closing the engine included) may take before
the process stops every server it launched synchronously and ends itself."""

SignalHandler = Callable[[int, FrameType | None], Any] | int | None


class Watchdog:
    """Ends the process if a signalled shutdown hangs.

    When the terminal disappears, Textual's driver can block while it restores the terminal (its
    writer thread cannot write, its queue fills, and the event loop waits on it), so no
    ``finally`` ever runs. After `EXIT_GRACE_S` this stops every server spectui launched without
    the loop (`spectui.core.llama.procs.kill_all_sync`) and exits.
    """

    def __init__(self) -> None:
        self._timer: threading.Timer | None = None

    def arm(self, code: int) -> None:
        """Start the countdown (once)."""
        if self._timer is None:
            self._timer = threading.Timer(EXIT_GRACE_S, hard_exit, (code,))
            self._timer.daemon = True
            self._timer.start()

    def cancel(self) -> None:
        """The shutdown finished: no hard exit."""
        if self._timer is not None:
            self._timer.cancel()


def hard_exit(code: int) -> None:
    """Stop every launched server synchronously, then end the process at once."""
    procs.kill_all_sync()
    os._exit(code)


def detach_terminal() -> None:
    """Point stdout and stderr at /dev/null once the terminal has hung up.

    Writes to a hung-up terminal fail, and Textual's output thread dies on the first failure,
    after which its queue fills and shutdown blocks; writes to /dev/null always succeed.
    """
    with contextlib.suppress(OSError):
        sink = os.open(os.devnull, os.O_WRONLY)
        for fd in (1, 2):
            if os.isatty(fd):
                os.dup2(sink, fd)
        os.close(sink)


@contextlib.contextmanager
def exit_signals(on_exit: Callable[[int], object]) -> Iterator[None]:
    """While inside: SIGHUP / SIGTERM call ``on_exit(status)`` on the running loop and arm the
    watchdog. The previous handlers are put back, and the watchdog disarmed, on the way out."""
    loop = asyncio.get_running_loop()
    watchdog = Watchdog()

    def handler(signum: int, _frame: FrameType | None) -> None:
        code = EXIT_SIGNALS[signal.Signals(signum)]
        watchdog.arm(code)
        if signum == signal.SIGHUP:
            # The terminal is gone, and the kernel sends SIGCONT right behind SIGHUP; Textual's
            # driver answers SIGCONT by re-entering application mode on the dead terminal, whose
            # failed writes then block the exit. Python runs pending handlers in signal-number
            # order, so this one (1) gets to disarm that (18) first.
            signal.signal(signal.SIGCONT, signal.SIG_DFL)
            detach_terminal()
        loop.call_soon_threadsafe(on_exit, code)

    previous: dict[signal.Signals, SignalHandler] = {}
    for exit_signal in EXIT_SIGNALS:
        try:
            previous[exit_signal] = signal.signal(exit_signal, handler)
        except ValueError:  # not the main thread: whoever runs us handles signals
            break
    try:
        yield
    finally:
        for exit_signal, before in previous.items():
            signal.signal(exit_signal, signal.SIG_DFL if before is None else before)
        watchdog.cancel()


async def run_guarded(engine: RunSource, body: Coroutine[Any, Any, int]) -> int:
    """A headless command: await ``body``; an exit signal cancels it and becomes the status; the
    engine is closed in every case."""
    task = asyncio.ensure_future(body)
    received: list[int] = []

    def on_exit(code: int) -> None:
        received.append(code)
        task.cancel()

    with exit_signals(on_exit):
        try:
            return await task
        except asyncio.CancelledError:
            if not received:
                raise
            return received[0]
        finally:
            await asyncio.shield(engine.aclose())


async def run_app(app: App[Any], engine: RunSource | None, *, headless: bool = False) -> int:
    """The TUI: run ``app`` on this loop; an exit signal makes it exit with the signal's status;
    ``engine`` is closed on this loop afterwards, however the app ended."""

    def on_exit(code: int) -> None:
        app.exit(return_code=code)

    with exit_signals(on_exit):
        try:
            await app.run_async(headless=headless)
        finally:
            if engine is not None:
                await engine.aclose()
    return app.return_code or 0
