"""`spectui follow`: how far behind a follower draws, and what following costs the presenter.

    python bench/follow.py [lag|cpu|cost|all] [--quick]

* **lag** at 50 and 2,000 tok/s: a writer *process* records a paced stream (the real client code
  over the recorded capture, `paced.PacedEngine`, through `RecordingEngine`: the presenter's own
  recording path) into a folder, noting when each token's line was flushed; a follower in this
  process (the full `FollowApp`, headless) draws it. Lag of a token = when the token pane first
  drew it (`tui.PaintLog`) minus when its line was written. Both clocks are CLOCK_MONOTONIC, one
  clock for every process on the machine. Goals: p95 <= 250 ms at 50 tok/s, <= 500 ms at 2,000.
* **cost**: the presenter (the live TUI, headless, recording every run into the live folder, in
  this process) at 50 tok/s, with no follower and with five follower processes, alternating;
  its CPU over the run. Goal: equal within the noise of one pair. And each follower process's
  CPU over the same run against the presenter's.
* **cpu**: a follower's CPU against the live TUI's at 50 tok/s, both in this process, alternating
  (the live TUI includes its client; the follower reads the file). Goal: follower <= live TUI.

Headless Textual renders every frame but writes no escape sequences: a real terminal costs both
the presenter and the followers a little more.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
from common import median, until, write_result
from paced import PacedEngine
from tui import SIZE, PaintLog

from spectui.config import Settings
from spectui.core.events import EngineEvent, ServerState, TokenEvent
from spectui.core.request import GenerationRequest
from spectui.core.sessions.file import SessionWriter
from spectui.core.sessions.recording import RecordingEngine
from spectui.core.sessions.tail import FollowOptions, FollowState
from spectui.ui.apps.follow import FollowApp, follow_engine
from spectui.ui.apps.live import SpectuiApp
from spectui.ui.screens.follow import FollowScreen

HERE = Path(__file__).resolve().parent
LAG_GOALS_MS = {50: 250.0, 2000: 500.0}
FOLLOWERS = 5


# -- the writer process ---------------------------------------------------------------------------


async def write_paced(folder: Path, rate: float, tokens: int, times_out: Path) -> None:
    """Record one paced run into ``folder``, noting the monotonic time each token line hit the
    file (the writer flushes every line)."""
    written: list[float] = []
    original = SessionWriter.write

    def write(self: SessionWriter, event: EngineEvent) -> None:
        original(self, event)
        if isinstance(event, TokenEvent):
            written.append(time.monotonic())

    SessionWriter.write = write  # type: ignore[method-assign]
    engine = RecordingEngine(PacedEngine(tokens, rate), sessions_dir=folder)
    async for _ in engine.run(GenerationRequest(prompt="recorded stream", n_predict=tokens)):
        pass
    await asyncio.to_thread(times_out.write_text, json.dumps(written))


# -- a follower process ---------------------------------------------------------------------------


async def follower_process(folder: Path, ready: Path) -> None:
    """A headless follower until SIGTERM (what `spectui follow DIR` is, without a terminal);
    ``ready`` is created once it draws and follows."""
    app = FollowApp(follow_engine(FollowOptions(target=folder)), Settings())

    async def mark_ready() -> None:
        def following() -> bool:
            screen = app.main_screen
            return (
                isinstance(screen, FollowScreen)
                and screen.is_mounted
                and any(worker.group == "follow" for worker in app.workers)
            )

        await until(following, every=0.05)
        await asyncio.to_thread(ready.touch)

    marker = asyncio.create_task(mark_ready())
    await app.run_until_quit(headless=True)
    marker.cancel()


def spawn(*args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, str(HERE / "follow.py"), *args], cwd=HERE)


# -- lag ------------------------------------------------------------------------------------------


async def lag(rate: float, tokens: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        folder, times = Path(tmp) / "live", Path(tmp) / "times.json"
        folder.mkdir()
        app = FollowApp(follow_engine(FollowOptions(target=folder)), Settings())
        me = psutil.Process()
        with PaintLog() as log:
            async with app.run_test(size=SIZE):
                screen = app.main_screen
                assert isinstance(screen, FollowScreen)
                await until(lambda: screen.follower.state is FollowState.IDLE)
                writer = spawn("write", str(folder), str(rate), str(tokens), str(times))
                # CPU from the run's first line on (not the writer's start-up).
                await until(lambda: screen.follower.state is not FollowState.IDLE, every=0.005)
                cpu0, wall0 = me.cpu_times(), time.monotonic()
                await until(lambda: writer.poll() is not None)
                await until(lambda: screen.follower.state is FollowState.FINISHED)
                await until(lambda: not screen.running)
                count = len(json.loads(times.read_text()))
                with contextlib.suppress(RuntimeError):
                    await until(lambda: log.painted[-1][1] >= count, give_up_s=3)
                cpu1, wall1 = me.cpu_times(), time.monotonic()
                shown = screen.answer.view.model
                assert shown.dropped + len(shown.tokens) == count, "tokens went missing"
        lags = sorted(log.lags(json.loads(times.read_text())))
    busy = (cpu1.user - cpu0.user) + (cpu1.system - cpu0.system)
    return {
        "lag_p50_ms": 1000 * statistics.median(lags),
        "lag_p95_ms": 1000 * lags[int(0.95 * (len(lags) - 1))],
        "lag_max_ms": 1000 * lags[-1],
        "follower_cpu_fraction": busy / (wall1 - wall0),
        "tokens": float(len(lags)),
    }


def lag_main(quick: bool) -> dict[str, object]:
    result: dict[str, object] = {}
    for rate, tokens in ((50, 250 if quick else 500), (2000, 4000 if quick else 10_000)):
        runs = [asyncio.run(lag(rate, tokens)) for _ in range(1 if quick else 3)]
        figures = {key: median([r[key] for r in runs]) for key in runs[0]}
        goal = LAG_GOALS_MS[rate]
        result[f"rate_{rate}"] = {
            **figures, "runs": runs, "goal_p95_ms": goal, "met": figures["lag_p95_ms"] <= goal
        }  # fmt: skip
        print(
            f"follow lag at {rate} tok/s: p50 {figures['lag_p50_ms']:.0f} ms, p95 "
            f"{figures['lag_p95_ms']:.0f} ms, max {figures['lag_max_ms']:.0f} ms (goal p95 "
            f"{goal:.0f}); follower CPU {100 * figures['follower_cpu_fraction']:.1f}% of a core"
        )
    path = write_result("follow_lag", result)
    print(f"-> {path}")
    return result


# -- a follower's CPU against the live TUI's ---------------------------------------------------


def cpu_main(quick: bool) -> dict[str, object]:
    """The same 50 tok/s stream drawn by the live TUI (`tui.lag_and_cpu`: the client code and
    the app in one process) and by a follower (the app reading the file another process writes),
    alternating, each in this process: CPU over the run."""
    from tui import lag_and_cpu

    rate, tokens = 50.0, 250 if quick else 500
    live_runs: list[float] = []
    follower_runs: list[float] = []
    for pair in range(1 if quick else 3):
        steps = [("live", live_runs), ("follower", follower_runs)]
        for kind, runs in steps if pair % 2 == 0 else steps[::-1]:
            if kind == "live":
                runs.append(asyncio.run(lag_and_cpu(tokens, rate))["cpu_fraction"])
            else:
                runs.append(asyncio.run(lag(rate, tokens))["follower_cpu_fraction"])
    live, follower = median(live_runs), median(follower_runs)
    result: dict[str, object] = {
        "rate": rate,
        "tokens": tokens,
        "live_tui_cpu": live,
        "follower_cpu": follower,
        "follower_vs_live": follower / live,
        "met": follower <= live,
        "live_runs": live_runs,
        "follower_runs": follower_runs,
    }
    path = write_result("follow_cpu", result)
    print(
        f"at {rate:g} tok/s: live TUI {100 * live:.1f}% of a core, follower {100 * follower:.1f}%"
        f" (x{follower / live:.2f}) -> {path}"
    )
    return result


# -- cost to the presenter -----------------------------------------------------------------------


async def presenter_run(folder: Path, rate: float, tokens: int, followers: int) -> dict[str, float]:
    engine = RecordingEngine(PacedEngine(tokens, rate), sessions_dir=folder)
    app = SpectuiApp(engine, Settings(n_predict=tokens), prompt="recorded stream")
    ready = [folder.parent / f"{folder.name}-ready-{n}" for n in range(followers)]
    procs = [spawn("follower", str(folder), str(path)) for path in ready]
    log = PaintLog()
    try:
        watched = [psutil.Process(p.pid) for p in procs]
        async with app.run_test(size=SIZE):
            screen = app.main_screen
            assert screen is not None
            await until(lambda: screen.state is ServerState.READY and not screen.running)
            # Every follower up and following (on a busy machine that takes a while), and the
            # app past its first frames.
            await until(lambda: all(path.exists() for path in ready), give_up_s=300)
            await asyncio.sleep(2.0)
            me = psutil.Process()
            before = [w.cpu_times() for w in watched]
            cpu0, wall0 = me.cpu_times(), time.monotonic()
            with log:
                screen.action_run()
                await until(lambda: screen.running)
                await until(lambda: not screen.running)
                await asyncio.sleep(0.5)  # the followers draw the run's end
            cpu1, wall1 = me.cpu_times(), time.monotonic()
            after = [w.cpu_times() for w in watched]
    finally:
        for proc in procs:
            proc.send_signal(signal.SIGTERM)
        for proc in procs:
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
    wall = wall1 - wall0
    share = [
        ((a.user - b.user) + (a.system - b.system)) / wall
        for a, b in zip(after, before, strict=True)
    ]
    return {
        "presenter_cpu_fraction": ((cpu1.user - cpu0.user) + (cpu1.system - cpu0.system)) / wall,
        "follower_cpu_fraction": statistics.mean(share) if share else float("nan"),
        "wall_s": wall,
        # Frames in which the presenter's token pane drew new tokens.
        "token_frames": float(len(log.painted)),
    }


def cost_main(quick: bool) -> dict[str, object]:
    rate, tokens = 50.0, 250 if quick else 500
    none_runs: list[dict[str, float]] = []
    five_runs: list[dict[str, float]] = []
    with tempfile.TemporaryDirectory() as tmp:
        # A warm-up run first (imports, first plots: not counted), then pairs in ABBA order so
        # neither side always runs first.
        (Path(tmp) / "warm").mkdir()
        asyncio.run(presenter_run(Path(tmp) / "warm", rate, tokens // 2, 0))
        for pair in range(1 if quick else 3):
            order = ((0, none_runs), (FOLLOWERS, five_runs))
            for followers, runs in order if pair % 2 == 0 else order[::-1]:
                folder = Path(tmp) / f"live-{pair}-{followers}"
                folder.mkdir()
                runs.append(asyncio.run(presenter_run(folder, rate, tokens, followers)))
    none = median([r["presenter_cpu_fraction"] for r in none_runs])
    five = median([r["presenter_cpu_fraction"] for r in five_runs])
    follower = median([r["follower_cpu_fraction"] for r in five_runs])
    result: dict[str, object] = {
        "rate": rate,
        "tokens": tokens,
        "presenter_cpu_no_followers": none,
        "presenter_cpu_five_followers": five,
        "presenter_ratio_five_vs_none": five / none,
        "follower_cpu": follower,
        "follower_vs_presenter": follower / none,
        "follower_met": follower <= none,
        "runs_none": none_runs,
        "runs_five": five_runs,
    }
    path = write_result("follow_cost", result)
    print(
        f"presenter at {rate:g} tok/s: CPU {100 * none:.1f}% alone, {100 * five:.1f}% with "
        f"{FOLLOWERS} followers (x{five / none:.2f}); a follower {100 * follower:.1f}% "
        f"(x{follower / none:.2f} of the live TUI) -> {path}"
    )
    return result


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "write":
        folder, rate, tokens, out = sys.argv[2:6]
        asyncio.run(write_paced(Path(folder), float(rate), int(tokens), Path(out)))
        sys.exit(0)
    if len(sys.argv) > 1 and sys.argv[1] == "follower":
        asyncio.run(follower_process(Path(sys.argv[2]), Path(sys.argv[3])))
        sys.exit(0)
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("which", choices=["lag", "cpu", "cost", "all"], nargs="?", default="all")
    parser.add_argument("--quick", action="store_true", help="one short run of each")
    args = parser.parse_args()
    os.environ.setdefault("SPECTUI_THEME", "spectui-dark")
    if args.which in ("lag", "all"):
        lag_main(args.quick)
    if args.which in ("cpu", "all"):
        cpu_main(args.quick)
    if args.which in ("cost", "all"):
        cost_main(args.quick)
