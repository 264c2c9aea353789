"""Replaying a recorded traffic shape: requests sent open loop at their recorded arrival times.

Closed loop (a client sends its next prompt when its last one ends) measures a server under a
fixed number of users; a recorded workload says *when* each request came, whatever the server
did with the ones before it. Replayed open loop, a slower config makes requests queue for a slot
as they did in production, so latency and queueing are judged on the real mix and rate.

The clock and the sleep are parameters: unit tests drive the schedule with a fake clock; no
outcome depends on how fast the machine is.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from spectui.core.errors import SpectuiError

T = TypeVar("T")
R = TypeVar("R")


class ArrivalsError(SpectuiError):
    """Recorded arrival times that cannot be replayed."""

    title = "Arrival times problem"
    exit_code = 2


def check_arrivals(offsets: Sequence[float | None], source: str) -> tuple[float, ...] | None:
    """The offsets of a recorded workload, checked: None when no entry has one (an older
    recording: a plain prompt set); one clear line when some are missing, negative or out of
    order."""
    if all(offset is None for offset in offsets):
        return None
    checked: list[float] = []
    for line, offset in enumerate(offsets, start=1):
        if offset is None:
            raise ArrivalsError(f"{source}: entry {line} has no arrival_s (others have)")
        if offset < 0:
            raise ArrivalsError(f"{source}: entry {line} arrives at {offset:g} s, before 0")
        if checked and offset < checked[-1]:
            raise ArrivalsError(
                f"{source}: entry {line} arrives at {offset:g} s, before entry {line - 1} "
                f"({checked[-1]:g} s): arrival times must be sorted"
            )
        checked.append(offset)
    return tuple(checked)


@dataclass(frozen=True, slots=True)
class Sent(Generic[R]):
    """One request as the replay sent it."""

    index: int
    """Its place in the recording."""
    due_s: float
    """When it was due, seconds after the replay began (recorded offset / speed)."""
    sent_s: float
    """When it was sent, on the same clock (at or after ``due_s``)."""
    result: R
    """What sending it returned."""


async def replay_open_loop(
    requests: Sequence[T],
    offsets: Sequence[float],
    send: Callable[[T], Awaitable[R]],
    *,
    speed: float = 1.0,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
) -> list[Sent[R]]:
    """Send each request at its offset / ``speed`` after the start, without waiting for the
    earlier ones to end (open loop); returns every request's result in recorded order."""
    if len(requests) != len(offsets):
        raise ValueError("one offset per request")
    if speed <= 0:
        raise ArrivalsError(f"--speed must be above 0, not {speed:g}")
    start = clock()

    async def one(index: int, request: T, due: float, sent: float) -> Sent[R]:
        return Sent(index=index, due_s=due, sent_s=sent, result=await send(request))

    tasks: list[asyncio.Task[Sent[R]]] = []
    try:
        for index, (request, offset) in enumerate(zip(requests, offsets, strict=True)):
            due = offset / speed
            # A loop: an event loop may wake a timer a clock tick early; never send early.
            while (wait := due - (clock() - start)) > 0:
                await sleep(wait)
            # The task starts at the loop's next turn: the next request's wait yields to it.
            sent = clock() - start
            tasks.append(asyncio.create_task(one(index, request, due, sent)))
        return list(await asyncio.gather(*tasks))
    finally:
        for task in tasks:
            task.cancel()
