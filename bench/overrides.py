"""What each of the TUI's private-API overrides buys over the stock path it falls back to.

One process, the overrides switched by name through SPECTUI_STOCK (spectui.core.overrides), the
two modes alternating round by round so that a busy machine weighs on both alike; the figure of
each is the ratio stock / override of medians taken in this run.

* lean-compositor: the live TUI (headless, 160×48) fed a recorded stream (at each pace of
  `PACES`) through the real client code (`paced.PacedEngine`). Per frame: CPU of the
  compositor's `render_update` plus the escape sequences for a terminal (thread time), and the
  process's CPU over the run divided by the frames drawn.
* strip-sparkline: a redraw of the tokens/s sparkline in place (new data, then every line
  through the widget's `render_lines`, as a frame does), its own strips vs Textual's. (The
  wide layout shows the plot instead: the sparkline is shown beside it for the measurement.)
* lean-plot: a redraw of the tokens/s plot in place (replot, then every line), `ansi_text` vs
  `Text.from_ansi`.

    python bench/overrides.py [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import psutil
from common import until, write_result
from paced import PacedEngine
from textual._compositor import Compositor, CompositorUpdate
from textual.geometry import Region
from textual.widget import Widget

from spectui.config import Settings
from spectui.core import overrides
from spectui.core.events import ServerState
from spectui.core.overrides import STOCK_ENV
from spectui.ui.apps.live import SpectuiApp
from spectui.ui.lean_compositor import LeanCompositor
from spectui.ui.screens.main import MainScreen
from spectui.ui.widgets.plot import LeanPlotextPlot, lean_plot_enabled
from spectui.ui.widgets.sparkline import StripSparkline, strip_sparkline_enabled

SIZE = (160, 48)
PACES = {"100 tok/s": (1_000, 100.0), "1,000 tok/s": (6_000, 1_000.0)}
"""Stream (tokens, tokens/s): one line changes per frame at the first, the pane scrolls at the
second (the lean compositor's gain depends on how much of the screen a frame changes)."""
REDRAWS = 200
WORTH = 1.10
"""An override earns its keep when the stock path costs at least this much more."""


@contextmanager
def stock(*names: str) -> Iterator[None]:
    """The named overrides off (their stock paths), decided afresh; all on again afterwards."""
    os.environ[STOCK_ENV] = ",".join(names)
    overrides.reset()
    try:
        yield
    finally:
        os.environ.pop(STOCK_ENV, None)
        overrides.reset()


class FrameLog:
    """CPU of each frame: the compositor's `render_update` and the escape sequences a terminal
    would be sent (headless Textual skips making those; this makes them, and throws them away)."""

    def __init__(self) -> None:
        self.frames = 0
        self.cpu_s = 0.0
        self._originals: tuple[Any, Any] | None = None

    def __enter__(self) -> FrameLog:
        update, display = self._originals = Compositor.render_update, SpectuiApp._display

        def render_update(compositor: Compositor, *args: Any, **kwargs: Any) -> Any:
            started = time.thread_time()
            try:
                return update(compositor, *args, **kwargs)
            finally:
                self.cpu_s += time.thread_time() - started

        def terminal(app: SpectuiApp, screen: Any, renderable: Any) -> None:
            if isinstance(renderable, CompositorUpdate):
                started = time.thread_time()
                renderable.render_segments(app.console)
                self.cpu_s += time.thread_time() - started
                self.frames += 1
            display(app, screen, renderable)

        Compositor.render_update = render_update  # type: ignore[method-assign,assignment]
        SpectuiApp._display = terminal  # type: ignore[method-assign,assignment]
        return self

    def __exit__(self, *_exc: object) -> None:
        assert self._originals is not None
        Compositor.render_update, SpectuiApp._display = self._originals  # type: ignore[method-assign]


def main_screen(app: SpectuiApp) -> MainScreen:
    screen = app.main_screen
    assert screen is not None
    return screen


async def tui_run(lean: bool, tokens: int, rate: float) -> dict[str, float]:
    """One paced run of the TUI; per frame: compositor CPU and process CPU (ms)."""
    engine = PacedEngine(tokens, rate)
    app = SpectuiApp(engine, Settings(n_predict=tokens), prompt="recorded stream")
    with FrameLog() as log:
        async with app.run_test(size=SIZE):
            screen = main_screen(app)
            await until(lambda: screen.state is ServerState.READY)
            assert isinstance(screen._compositor, LeanCompositor) is lean
            me = psutil.Process()
            frames0, compositor0 = log.frames, log.cpu_s
            cpu0 = me.cpu_times()
            screen.action_run()
            await until(lambda: screen.running)
            await until(lambda: not screen.running)
            cpu1 = me.cpu_times()
            frames, compositor = log.frames - frames0, log.cpu_s - compositor0
    busy = (cpu1.user - cpu0.user) + (cpu1.system - cpu0.system)
    return {
        "frames": frames,
        "compositor_ms_per_frame": 1000 * compositor / frames,
        "process_ms_per_frame": 1000 * busy / frames,
    }


def redraw_ms(widget: Widget, change: Callable[[int], None]) -> float:
    """Median CPU (ms) of one redraw: ``change(i)``, then every line as a frame would ask."""
    region = Region(0, 0, *widget.size)
    times = []
    for index in range(REDRAWS):
        change(index)
        widget.refresh()
        started = time.thread_time()
        widget.render_lines(region)
        times.append(time.thread_time() - started)
    return 1000 * statistics.median(times)


async def widget_redraws(rounds: int) -> dict[str, dict[str, list[float]]]:
    """Redraws of the step sparkline and the tokens/s plot, in place after a run, both modes."""
    engine = PacedEngine(2_000, 4_000.0)
    app = SpectuiApp(engine, Settings(n_predict=2_000), prompt="recorded stream")
    out: dict[str, dict[str, list[float]]] = {
        name: {"override": [], "stock": []} for name in ("strip-sparkline", "lean-plot")
    }
    async with app.run_test(size=SIZE) as pilot:
        screen = main_screen(app)
        await until(lambda: screen.state is ServerState.READY)
        screen.action_run()
        await until(lambda: screen.running)
        await until(lambda: not screen.running)
        spark = screen.query_one("#tps-spark", StripSparkline)
        spark.display = True  # (hidden where the plot is shown)
        await pilot.pause()
        screen.charts.replot()
        await pilot.pause()
        plot = screen.query_one("#tps-plot", LeanPlotextPlot)
        assert spark.display and plot.display and spark.size.area and plot.size.area
        steps = list(spark.data or [1.0, 2.0])

        def new_steps(index: int) -> None:
            spark.data = steps[index % 7 :] + steps[: index % 7]  # (new data, same shape)

        def new_plot(index: int) -> None:
            screen.charts.replot()

        for _ in range(rounds):
            for mode in ("override", "stock"):
                names = ("strip-sparkline", "lean-plot") if mode == "stock" else ()
                with stock(*names):
                    assert strip_sparkline_enabled() is (mode == "override")
                    assert lean_plot_enabled() is (mode == "override")
                    out["strip-sparkline"][mode].append(redraw_ms(spark, new_steps))
                    out["lean-plot"][mode].append(redraw_ms(plot, new_plot))
        await app.action_quit()
    return out


def figure(override: list[float], stock_path: list[float], judged: bool = True) -> dict[str, Any]:
    """Medians and their ratio; ``judged``: the thing the override speeds (else context only)."""
    lean, plain = statistics.median(override), statistics.median(stock_path)
    return {
        "override_ms": lean,
        "stock_ms": plain,
        "stock_over_override": plain / lean,
        "earns_its_keep": plain / lean >= WORTH if judged else None,
        "rounds": {"override": override, "stock": stock_path},
    }


def main(rounds: int) -> dict[str, Any]:
    result: dict[str, Any] = {"size": list(SIZE), "paces": PACES}
    for pace, (tokens, rate) in PACES.items():
        tui: dict[str, list[dict[str, float]]] = {"override": [], "stock": []}
        for _ in range(rounds):
            tui["override"].append(asyncio.run(tui_run(True, tokens, rate)))
            with stock("lean-compositor"):
                tui["stock"].append(asyncio.run(tui_run(False, tokens, rate)))
        for key in ("compositor_ms_per_frame", "process_ms_per_frame"):
            per = {mode: [run[key] for run in runs] for mode, runs in tui.items()}
            judged = key == "compositor_ms_per_frame"
            result[f"lean-compositor {pace} {key}"] = figure(per["override"], per["stock"], judged)
        result[f"lean-compositor {pace} frames"] = {
            mode: [run["frames"] for run in runs] for mode, runs in tui.items()
        }
    for name, modes in asyncio.run(widget_redraws(rounds)).items():
        result[f"{name} redraw"] = figure(modes["override"], modes["stock"])
    result["machine"] = {"cpus": os.cpu_count(), "load_1min": os.getloadavg()[0]}
    path = write_result("overrides", result)
    for key, value in result.items():
        if isinstance(value, dict) and "stock_over_override" in value:
            print(
                f"{key}: override {value['override_ms']:.3f} ms, stock {value['stock_ms']:.3f} ms,"
                f" stock/override {value['stock_over_override']:.2f}"
                + {True: " (keep)", False: " (does not earn its keep)", None: ""}[
                    value["earns_its_keep"]
                ]
            )
    print(f"-> {path}")
    return result


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=3)
    main(parser.parse_args().rounds)
