"""One way to wait: until a condition holds, with a deadline that only guards against a hang.

No test may depend on how fast this machine is, so a wait never fails because something was
slow, only because it never happened: the deadline is minutes, and its message says what was
awaited. Poll intervals are short; the condition decides, not the clock.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")

GIVE_UP_S = 300.0
"""The default hang guard: far beyond any wait's normal length on a loaded 2-core machine."""


def _gave_up(what: str, give_up_s: float, show: Callable[[], str] | None) -> AssertionError:
    state = f"; last seen: {show()}" if show is not None else ""
    return AssertionError(f"never happened within the {give_up_s:.0f} s hang guard: {what}{state}")


def wait_until(
    check: Callable[[], T | None],
    what: str,
    *,
    give_up_s: float = GIVE_UP_S,
    interval: float = 0.05,
    ignore: tuple[type[BaseException], ...] = (),
    show: Callable[[], str] | None = None,
) -> T:
    """Call ``check`` until it returns something truthy, and return that; exceptions of the
    ``ignore`` types count as "not yet". Past ``give_up_s`` (a hang guard) fail saying ``what``,
    with ``show()``'s picture of the state if given."""
    deadline = time.monotonic() + give_up_s
    while True:
        try:
            value = check()
        except ignore:
            pass  # ("not yet")
        else:
            if value:
                return value
        if time.monotonic() > deadline:
            raise _gave_up(what, give_up_s, show)
        time.sleep(interval)  # (a poll's interval: the condition decides, not this)


async def await_until(
    check: Callable[[], T | None],
    what: str,
    *,
    give_up_s: float = GIVE_UP_S,
    interval: float = 0.01,
    pause: Callable[[], Awaitable[object]] | None = None,
    ignore: tuple[type[BaseException], ...] = (),
    show: Callable[[], str] | None = None,
) -> T:
    """`wait_until` for the event loop: between checks the loop runs (``pause()``, e.g. a
    Pilot's ``pilot.pause``, else ``asyncio.sleep(interval)``)."""
    deadline = time.monotonic() + give_up_s
    while True:
        try:
            value = check()
        except ignore:
            pass  # ("not yet")
        else:
            if value:
                return value
        if time.monotonic() > deadline:
            raise _gave_up(what, give_up_s, show)
        await (pause() if pause is not None else asyncio.sleep(interval))


async def await_async(
    check: Callable[[], Awaitable[T | None]],
    what: str,
    *,
    give_up_s: float = GIVE_UP_S,
    interval: float = 0.05,
    ignore: tuple[type[BaseException], ...] = (),
) -> T:
    """`await_until` for a check that is itself a coroutine (an HTTP request, say)."""
    deadline = time.monotonic() + give_up_s
    while True:
        try:
            value = await check()
        except ignore:
            pass  # ("not yet")
        else:
            if value:
                return value
        if time.monotonic() > deadline:
            raise _gave_up(what, give_up_s, None)
        await asyncio.sleep(interval)
