"""Run a command's body so that the server spectui launched is stopped on every way out:
normal end, error, Ctrl-C, SIGTERM and SIGHUP (an SSH session dropping)."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Coroutine
from typing import Any

from spectui.core.engine import Engine

_EXIT_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


async def run_guarded(engine: Engine, body: Coroutine[Any, Any, int]) -> int:
    """Await ``body``; a terminating signal cancels it; the engine is closed in every case."""
    loop = asyncio.get_running_loop()
    task = asyncio.ensure_future(body)
    received: list[int] = []

    def on_signal(signum: int) -> None:
        received.append(signum)
        task.cancel()

    for signum in _EXIT_SIGNALS:
        loop.add_signal_handler(signum, on_signal, signum)
    try:
        return await task
    except asyncio.CancelledError:
        if not received:
            raise
        return 128 + received[0]
    finally:
        for signum in _EXIT_SIGNALS:
            loop.remove_signal_handler(signum)
        await asyncio.shield(engine.aclose())
