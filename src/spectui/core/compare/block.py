"""A concurrency level's block of a comparison: its runs sent at once, on one server start.

Closed loop (``--concurrency N``): N clients stream at once, each sending its runs one after
another, the next when the previous answer ends. Replaying recorded arrivals (`open_loop`): the
block's runs are sent open loop at their recorded offsets, each without waiting for the others.
Every client is stopped and awaited before the block ends, so none outlives it; the caller
checks the answers afterwards, so checking never delays a client's next request.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Awaitable, Callable
from dataclasses import dataclass

from spectui.core.compare.models import CompareJob, ComparePlan
from spectui.core.compare.open_loop import replay_block
from spectui.core.compare.progress import RunStarting
from spectui.core.compare.records import RunRecord

Outcome = tuple[RunRecord | None, bool]
"""A run's record (None: cancelled under it, the engine is closing) and whether the server died
under it."""
RunOne = Callable[[CompareJob, bool], Awaitable[Outcome]]
"""Runs one job, unchecked; its flag: every server slot was busy when it was sent."""


@dataclass(frozen=True)
class BlockDone:
    """The block's end: every run's outcome, by its ``seq``."""

    outcomes: dict[int, Outcome]
    """Job seq -> its outcome."""


async def run_block(
    block: list[CompareJob],
    plan: ComparePlan,
    run: RunOne,
    *,
    slots: int | None,
    clock: Callable[[], float],
    sleep: Callable[[float], Awaitable[object]],
) -> AsyncGenerator[RunStarting | BlockDone, None]:
    """Run ``block`` (one config's level in one round): RunStarting as runs begin, then one
    `BlockDone`. ``slots``: the server's slot count (None: not read), to tell the runs that
    queued for one; ``clock``/``sleep``: an arrivals replay's schedule (tests drive fake ones)."""
    events: asyncio.Queue[RunStarting | None] = asyncio.Queue()
    done: dict[int, Outcome] = {}
    in_flight = 0

    async def send(job: CompareJob) -> RunRecord | None:
        nonlocal in_flight
        # With a slot per stream this never holds; it does when slots are fewer.
        waited = slots is not None and in_flight >= slots
        in_flight += 1
        events.put_nowait(RunStarting(job=job))
        try:
            done[job.seq] = await run(job, waited)
        finally:
            in_flight -= 1
        return done[job.seq][0]

    async def client(jobs: list[CompareJob]) -> None:
        try:
            for job in jobs:
                if await send(job) is None:
                    return
        finally:
            events.put_nowait(None)  # this client is done (or stopped)

    async def replay() -> None:
        try:
            await replay_block(block, plan, send, clock=clock, sleep=sleep)
        finally:
            events.put_nowait(None)

    by_client = [[j for j in block if j.client == c] for c in sorted({j.client for j in block})]
    if plan.arrivals is not None:
        tasks = [asyncio.create_task(replay())]
    else:
        tasks = [asyncio.create_task(client(jobs)) for jobs in by_client]
    try:
        ended = 0
        while ended < len(tasks):
            if (event := await events.get()) is None:
                ended += 1
            else:
                yield event
        for task in tasks:
            task.result()  # a client's unexpected error, raised here
    finally:
        # Every client stopped and awaited, its outcome retrieved: nothing outlives the
        # block, and nothing is left for the loop to report at exit.
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    yield BlockDone(outcomes=done)
