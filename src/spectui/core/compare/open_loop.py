"""`compare --arrivals recorded`: a comparison on the user's own traffic shape.

A workload recorded by `spectui proxy --record` keeps each request's arrival time. Replayed, each
config's block of a round sends the recorded requests open loop (`arrivals.replay_open_loop`) at
their recorded offsets ÷ ``--speed``, whatever the server did with the earlier ones, on a server
with ``--concurrency N`` slots (default `DEFAULT_SLOTS`): requests beyond the slots queue in the
server, as they did in production. The block is one concurrency level's (`levels`), so its
aggregate tok/s, TTFT and latency percentiles and its queueing are judged by the one rule, round
paired with round.

A recording with no arrival times (made before they were kept) is refused with ``--arrivals``
in one line (a closed-loop compare would answer another question than the one asked); without
``--arrivals`` it loads as a plain prompt set, with one line saying so.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path

from spectui.core.compare.arrivals import ArrivalsError, check_arrivals, replay_open_loop
from spectui.core.compare.models import CompareJob, ComparePlan, ComparePrompt
from spectui.core.compare.records import RunRecord

DEFAULT_SLOTS = 4
"""Server slots of a replay when ``--concurrency`` gives none (llama-server's own default)."""


def recorded_source(source: str) -> str:
    """The prompt file ``--prompts`` names: a recorded folder means its ``workload.jsonl``."""
    path = Path(source).expanduser()
    return str(path / "workload.jsonl") if path.is_dir() else source


def replay_prompts(prompts: Sequence[ComparePrompt], source: str) -> tuple[ComparePrompt, ...]:
    """``prompts`` checked for a replay: every one has its arrival time, none negative, in
    order; one clear line otherwise."""
    offsets = check_arrivals([p.arrival_s for p in prompts], source)
    if offsets is None:
        raise ArrivalsError(
            f"--arrivals recorded: {source} has no arrival times (recorded before spectui kept "
            "them); drop --arrivals to compare its prompts as a plain prompt set"
        )
    return tuple(prompts)


def plain_note(prompts: Sequence[ComparePrompt], source: str) -> str | None:
    """The line that says a recorded workload with no arrival times runs as a plain prompt set
    (None: not a recording, or it has them)."""
    if not source.endswith("workload.jsonl") or any(p.arrival_s is not None for p in prompts):
        return None
    return f"{source} has no arrival times (an older recording): its prompts run as a plain set"


def replay_line(plan: ComparePlan) -> str | None:
    """The report's line on how the comparison sent its requests (None: closed loop)."""
    if plan.arrivals is None:
        return None
    last = max((p.arrival_s or 0.0) for p in plan.prompts)
    slots = plan.slots
    return (
        f"Arrivals: the recorded workload ({len(plan.prompts)} requests over {last:g} s) "
        f"replayed open loop at {plan.speed:g}x its recorded rate, on {slots} server "
        f"slot{'s' if slots != 1 else ''}; requests beyond them queued in the server."
    )


async def replay_block(
    block: Sequence[CompareJob],
    plan: ComparePlan,
    send: Callable[[CompareJob], Awaitable[RunRecord | None]],
    *,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
) -> None:
    """Send ``block``'s runs (one config's round, in recorded order) at their prompts'
    recorded offsets ÷ the plan's speed, open loop."""
    offsets = [plan.prompt(job.prompt).arrival_s or 0.0 for job in block]
    await replay_open_loop(block, offsets, send, speed=plan.speed, clock=clock, sleep=sleep)
