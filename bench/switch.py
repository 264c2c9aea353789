"""Spec switch: the key that confirms a new spec type, to the new server being ready on screen,
minus the server's own model load time from its log (`ManagedServer.load_time_s`).
Goal: <= 0.5 s.

The TUI runs under Pilot with a launched server (Gemma 3 270M, default context, as `spectui`
launches it) and switches ngram-simple <-> ngram-mod; the time runs from posting the ``enter``
that confirms the picker to the READY state message reaching the main screen. Where the rest goes
is broken down: stopping the old server, its successor's start until it begins loading the model
(by the server's own log clock), and what follows the load until spectui reports ready.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import time
from dataclasses import dataclass, field

from common import gemma_model, median, until, write_result
from textual import events
from textual.message import Message
from textual.widgets import OptionList

from spectui.app_setup import build_engine, recorder
from spectui.config import Settings
from spectui.core.events import ServerState
from spectui.core.llama import server as server_module
from spectui.ui.apps.live import SpectuiApp
from spectui.ui.messages import ServerStateChanged
from spectui.ui.screens.spec_picker import SpecPickerScreen

GOAL_S = 0.5
_STAMP = re.compile(r"^(\d+)\.(\d{2})\.(\d{3})\.(\d{3}) ")


@dataclass
class Clock:
    """When things happened during one switch (monotonic seconds)."""

    ready: list[float] = field(default_factory=list)
    stop_began: float = 0.0
    stop_ended: float = 0.0
    spawned: float = 0.0


def server_clock(line: str) -> float | None:
    """Seconds since the server started, from its log prefix."""
    m = _STAMP.match(line)
    if m is None:
        return None
    minutes, seconds, millis, micros = (int(g) for g in m.groups())
    return minutes * 60 + seconds + millis / 1e3 + micros / 1e6


def instrument(clock: Clock) -> None:
    """Note when the old server's stop begins and ends and when the new one is spawned."""
    original_stop = server_module.ManagedServer._stop_process
    original_spawn = asyncio.create_subprocess_exec

    async def stop(self: server_module.ManagedServer) -> None:
        clock.stop_began = time.monotonic()
        await original_stop(self)
        clock.stop_ended = time.monotonic()

    async def spawn(*args: object, **kwargs: object) -> object:
        clock.spawned = time.monotonic()
        return await original_spawn(*args, **kwargs)  # type: ignore[arg-type]

    server_module.ManagedServer._stop_process = stop  # type: ignore[method-assign]
    asyncio.create_subprocess_exec = spawn  # type: ignore[assignment]  # (the module the server uses)


def post_keys(app: SpectuiApp, keys: tuple[str, ...]) -> None:
    for key in keys:
        event = events.Key(key, key if len(key) == 1 else None)
        event.set_sender(app)
        app.post_message(event)


async def run(reps: int) -> list[dict[str, float]]:
    clock = Clock()
    instrument(clock)
    settings = Settings(model=gemma_model(), spec_type="ngram-simple", n_predict=16)
    live = build_engine(settings)
    engine = recorder(live, settings, recording=False)

    def hook(message: Message) -> None:
        if isinstance(message, ServerStateChanged) and message.event.state is ServerState.READY:
            clock.ready.append(time.monotonic())

    app = SpectuiApp(engine, settings, prompt="Hello")
    records: list[dict[str, float]] = []
    try:
        async with app.run_test(size=(120, 36), message_hook=hook):
            screen = app.main_screen
            assert screen is not None and live.server is not None
            types = live.spec_types

            async def settled() -> None:
                await until(lambda: screen.operation is None and not screen.running)
                assert screen.state is ServerState.READY, screen.state

            await settled()
            for rep in range(reps):
                target = "ngram-mod" if rep % 2 == 0 else "ngram-simple"
                post_keys(app, ("t", "home", *["down"] * types.index(target)))

                def picked(index: int = types.index(target)) -> bool:
                    picker = app.screen
                    return (
                        isinstance(picker, SpecPickerScreen)
                        and picker.query_one("#spec-types", OptionList).highlighted == index
                    )

                await until(picked, every=0.01)
                await asyncio.sleep(0.2)  # let the picker settle; the clock starts at the key
                clock.ready.clear()
                pressed = time.monotonic()
                post_keys(app, ("enter",))
                await until(lambda: bool(clock.ready), every=0.005)
                ready = clock.ready[0]
                await settled()  # the switch re-runs the prompt; let it finish first
                spec = live.info.spec
                assert spec is not None and spec.label == target, spec
                load = live.server.load_time_s
                assert load is not None
                stamps = [server_clock(line) for line in live.server.log_tail(2000)]
                loading = next(
                    (s for s, line in zip(stamps, live.server.log_tail(2000), strict=True)
                     if s is not None and "load_model: loading model" in line),
                    None,
                )  # fmt: skip
                total = ready - pressed
                records.append(
                    {
                        "total_s": total,
                        "load_s": load,
                        "overhead_s": total - load,
                        "key_to_stop_s": clock.stop_began - pressed,
                        "stop_s": clock.stop_ended - clock.stop_began,
                        "stopped_to_spawn_s": clock.spawned - clock.stop_ended,
                        "spawn_to_loading_s": loading if loading is not None else float("nan"),
                        "after_load_s": ready - clock.spawned - (loading or 0.0) - load,
                    }
                )
                print(
                    f"switch to {target}: {total:.3f} s, model load {load:.3f} s, "
                    f"rest {total - load:.3f} s"
                )
    finally:
        await engine.aclose()
    return records


def main(reps: int = 5) -> dict[str, object]:
    records = asyncio.run(run(reps))
    figures = {key: median([r[key] for r in records]) for key in records[0]}
    result: dict[str, object] = {
        **figures,
        "runs": records,
        "goal_s": GOAL_S,
        "met": figures["overhead_s"] <= GOAL_S,
    }
    path = write_result("switch", result)
    print(
        f"switch: {figures['total_s']:.3f} s key to ready, model load {figures['load_s']:.3f} s, "
        f"the rest {figures['overhead_s']:.3f} s (goal <= {GOAL_S}): stop "
        f"{figures['stop_s']:.3f}, server start to loading {figures['spawn_to_loading_s']:.3f}, "
        f"after the load {figures['after_load_s']:.3f} -> {path}"
    )
    return result


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--reps", type=int, default=5)
    main(parser.parse_args().reps)
