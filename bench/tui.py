"""The live TUI (headless, under Pilot) fed a recorded stream through the real client code.

* lag + CPU: a 20,000-token stream at 5,000 tokens/s. Lag of a token = when the token pane first
  drew it (its ``render_line`` ran with the token in the model) minus when its bytes reached the
  client. CPU = this process's CPU time over the run's wall time (all threads: the app, the
  client, the replaying transport). Goals: lag <= 100 ms (p95 judged; max reported), CPU <= 50 %
  of one core.
* memory: a 100,000-token stream at 5,000 tokens/s; RSS sampled every 0.2 s. Growth = peak RSS
  during the run minus RSS after a 2,000-token warm-up run. Goal <= 50 MB.

Headless Textual renders every frame (compositor, widgets' lines) but skips writing the escape
sequences to a terminal, so a real terminal costs a little more CPU than measured here.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import statistics
import time
from collections.abc import Callable

import psutil
from common import median, until, write_result
from paced import PacedEngine
from textual.pilot import Pilot
from textual.strip import Strip

from spectui.config import Settings
from spectui.core.events import ServerState
from spectui.ui.apps.live import SpectuiApp
from spectui.ui.screens.main import MainScreen
from spectui.ui.widgets.tokens import TokenView

LAG_GOAL_MS = 100.0
CPU_GOAL = 0.35  # #13: keep the 5,000 tok/s cost where it was
MEMORY_GOAL_MB = 50.0
SIZE = (120, 36)


class PaintLog:
    """When the token pane drew how many tokens (hooked into `TokenView.render_line`)."""

    def __init__(self) -> None:
        self.painted: list[tuple[float, int]] = []
        self._original: Callable[[TokenView, int], Strip] | None = None

    def __enter__(self) -> PaintLog:
        original = self._original = TokenView.render_line
        painted = self.painted

        def render_line(view: TokenView, y: int) -> Strip:
            count = view.model.dropped + len(view.model.tokens)
            if not painted or painted[-1][1] != count:
                painted.append((time.monotonic(), count))
            return original(view, y)

        TokenView.render_line = render_line  # type: ignore[method-assign,assignment]
        return self

    def __exit__(self, *_exc: object) -> None:
        assert self._original is not None
        TokenView.render_line = self._original  # type: ignore[method-assign,assignment]

    def lags(self, handed: list[float]) -> list[float]:
        """Per token: first paint showing it minus when it was handed over (seconds)."""
        out: list[float] = []
        paints = iter(self.painted)
        when, count = next(paints, (float("inf"), 0))
        for index, sent in enumerate(handed):
            while count <= index:
                when, count = next(paints, (float("inf"), 1 << 62))
            out.append(when - sent)
        return out


def main_screen(app: SpectuiApp) -> MainScreen:
    screen = app.main_screen
    assert screen is not None
    return screen


async def one_run(pilot: Pilot[None], app: SpectuiApp) -> None:
    screen = main_screen(app)
    await until(lambda: screen.state is ServerState.READY and not screen.running)
    screen.action_run()
    await until(lambda: screen.running)
    await until(lambda: not screen.running)


async def lag_and_cpu(tokens: int, rate: float) -> dict[str, float]:
    engine = PacedEngine(tokens, rate)
    app = SpectuiApp(engine, Settings(n_predict=tokens), prompt="recorded stream")
    with PaintLog() as log:
        async with app.run_test(size=SIZE) as pilot:
            await until(lambda: main_screen(app).state is ServerState.READY)
            me = psutil.Process()
            cpu0, wall0 = me.cpu_times(), time.monotonic()
            await one_run(pilot, app)
            cpu1, wall1 = me.cpu_times(), time.monotonic()
            shown = main_screen(app).answer.view.model
            assert shown.dropped + len(shown.tokens) == engine.tokens, "tokens went missing"
            # The run is over; its last tokens are drawn by the next frame.
            with contextlib.suppress(RuntimeError):
                await until(lambda: log.painted[-1][1] >= engine.tokens, give_up_s=3)
    lags = sorted(log.lags(engine.handed))
    busy = (cpu1.user - cpu0.user) + (cpu1.system - cpu0.system)
    return {
        "lag_p50_ms": 1000 * statistics.median(lags),
        "lag_p95_ms": 1000 * lags[int(0.95 * (len(lags) - 1))],
        "lag_max_ms": 1000 * lags[-1],
        "cpu_fraction": busy / (wall1 - wall0),
        "wall_s": wall1 - wall0,
        "stream_s": tokens / rate,
    }


async def memory_growth(tokens: int, rate: float) -> dict[str, float]:
    engine = PacedEngine(tokens, rate)  # the replayed bytes are allocated before the baseline
    warm = PacedEngine(2000, rate)
    app = SpectuiApp(warm, Settings(n_predict=tokens), prompt="recorded stream")
    me = psutil.Process()
    async with app.run_test(size=SIZE) as pilot:
        await one_run(pilot, app)  # warm-up: imports, caches, first plots
        gc.collect()
        await asyncio.sleep(0.5)
        baseline = me.memory_info().rss
        app.engine = engine
        main_screen(app).engine = engine
        peak = baseline
        sampling = True

        async def sample() -> None:
            nonlocal peak
            while sampling:
                peak = max(peak, me.memory_info().rss)
                await asyncio.sleep(0.2)

        sampler = asyncio.create_task(sample())
        await one_run(pilot, app)
        sampling = False
        await sampler
        gc.collect()
        end = me.memory_info().rss
    mb = 1 / 2**20
    return {
        "baseline_mb": baseline * mb,
        "peak_growth_mb": (peak - baseline) * mb,
        "end_growth_mb": (end - baseline) * mb,
    }


def lag_main(reps: int = 3) -> dict[str, object]:
    runs = [asyncio.run(lag_and_cpu(20_000, 5_000.0)) for _ in range(reps)]
    figures = {key: median([r[key] for r in runs]) for key in runs[0]}
    result: dict[str, object] = {
        **figures,
        "runs": runs,
        "tokens": 20_000,
        "rate": 5_000,
        "lag_goal_ms": LAG_GOAL_MS,
        "cpu_goal": CPU_GOAL,
        "lag_met": figures["lag_p95_ms"] <= LAG_GOAL_MS,
        "cpu_met": figures["cpu_fraction"] <= CPU_GOAL,
    }
    path = write_result("tui_lag_cpu", result)
    print(
        f"tui: lag p50 {figures['lag_p50_ms']:.0f} ms, p95 {figures['lag_p95_ms']:.0f} ms, "
        f"max {figures['lag_max_ms']:.0f} ms (goal {LAG_GOAL_MS:.0f}); CPU "
        f"{100 * figures['cpu_fraction']:.0f}% of a core (goal {100 * CPU_GOAL:.0f}%) -> {path}"
    )
    return result


def memory_main() -> dict[str, object]:
    figures = asyncio.run(memory_growth(100_000, 5_000.0))
    result: dict[str, object] = {
        **figures,
        "tokens": 100_000,
        "rate": 5_000,
        "goal_mb": MEMORY_GOAL_MB,
        "met": figures["peak_growth_mb"] <= MEMORY_GOAL_MB,
    }
    path = write_result("memory", result)
    print(
        f"memory: RSS grew {figures['peak_growth_mb']:.1f} MB at peak, "
        f"{figures['end_growth_mb']:.1f} MB at the end over 100,000 tokens "
        f"(goal {MEMORY_GOAL_MB:.0f} MB) -> {path}"
    )
    return result


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("which", choices=["lag", "memory", "both"], nargs="?", default="both")
    args = parser.parse_args()
    if args.which in ("lag", "both"):
        lag_main()
    if args.which in ("memory", "both"):
        memory_main()
