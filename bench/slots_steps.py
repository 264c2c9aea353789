"""What each step of the slots view costs, in-process: `spectui proxy`'s TUI (`ProxyApp`, headless,
120x36 or `--size`) with `s` pressed and four requests fed RATE chunks a second each from the
bench's long stream (`streams.long_payloads`) straight into the hub, as the relay would (no
sockets, no terminal). Over the window, the CPU time (`time.process_time`) spent in each step
of drawing: frames (`Screen._on_timer_update`), the lanes' own lines (`LaneView._line`;
`render_line` in older trees), every widget's lines with Textual's styles
(`Widget.render_lines`: the lanes' too in trees where Textual padded them), the lanes' padded
lines (`LaneView.render_lines`), pulls (`SlotsScreen.pull`) and, within them, counting the
queued lines (`StreamAttribution.settle`) and appending to the lanes (`LaneView.add`).

The whole process in tmux (`slots_view.py`) moves by ~10 % from run to run on a loaded machine;
a step's own time moves less, so a change to one step shows here first. `--src` measures other
source trees too (a child process each, rounds alternating); medians of `--reps`.

    python bench/slots_steps.py [--rate 50] [--reps 3] [--window 8] [--size 120x36]
                                [--src DIR=LABEL ...]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from client_cpu import PYTHON, ROOT
from common import median, write_result

STEPS = (
    ("frame", "textual.screen", "Screen", "_on_timer_update"),
    ("lane lines", "spectui.ui.widgets.lane_view", "LaneView", "_line"),
    ("styled lines", "textual.widget", "Widget", "render_lines"),
    ("  the lanes'", "spectui.ui.widgets.lane_view", "LaneView", "render_lines"),
    ("pull", "spectui.ui.screens.slots", "SlotsScreen", "pull"),
    ("  counting", "spectui.core.proxy.chunks", "StreamAttribution", "settle"),
    ("  lane add", "spectui.ui.widgets.lane_view", "LaneView", "add"),
)
"""name, module, class, method: the steps timed (a step's time includes the steps it calls)."""


def timed(spent: dict[str, float], name: str, owner: Any, method: str) -> None:
    """Wrap ``owner.method`` so that its CPU time adds to ``spent[name]``."""
    original: Callable[..., Any] | None = getattr(owner, method, None)
    if original is None:
        # An older tree (before a lane padded its own lines): they were `render_line`.
        original = owner.render_line
        method = "render_line"

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        start = time.process_time()
        try:
            return original(*args, **kwargs)
        finally:
            spent[name] += time.process_time() - start

    setattr(owner, method, wrapper)


async def measure(rate: float, window: float, size: tuple[int, int]) -> dict[str, float]:
    """ms of CPU a second in each step, and the whole process's % of a core."""
    import importlib

    from streams import long_payloads

    from spectui.config import Settings
    from spectui.core.proxy.chunks import PreparedBody
    from spectui.core.proxy.hub import ProxyHub
    from spectui.core.proxy.models import EndpointKind
    from spectui.ui.apps.proxy import ProxyApp

    spent: dict[str, float] = defaultdict(float)
    for name, module, owner, method in STEPS:
        timed(spent, name, getattr(importlib.import_module(module), owner), method)
    hub = ProxyHub(keep_events=True)
    app = ProxyApp(None, Settings(), hub=hub)
    lines = [f"data: {p}\n\n".encode() for p in long_payloads(int(rate * (window + 6)))]
    async with app.run_test(size=size) as pilot:
        await pilot.press("s")
        body = PreparedBody(upstream=b"", streamed=True, strip=True, prompt="x")
        lives = [
            hub.start("/completion", EndpointKind.NATIVE, "127.0.0.1:1", body) for _ in range(4)
        ]
        loop = asyncio.get_running_loop()

        async def stream(offset: float, attribution: Any) -> None:
            start = loop.time() + offset
            for n, line in enumerate(lines):  # paced on the clock, as fake_server.py
                await asyncio.sleep(max(0.0, start + n / rate - loop.time()))
                attribution.line(line, loop.time() - start)

        feeders = [
            asyncio.create_task(stream(i / (4 * rate), live.attribution))
            for i, live in enumerate(lives)
        ]
        await asyncio.sleep(3.0)  # (the lanes fill and start wrapping)
        spent.clear()
        cpu, start = time.process_time(), time.monotonic()
        await asyncio.sleep(window)
        elapsed = time.monotonic() - start
        figures = {name: spent[name] / elapsed * 1000 for name, *_ in STEPS}
        figures["process %"] = (time.process_time() - cpu) / elapsed * 100
        for feeder in feeders:
            feeder.cancel()
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=float, default=50.0, help="chunks per second per stream")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--window", type=float, default=8.0, help="seconds measured per run")
    parser.add_argument("--size", default="120x36", help="COLUMNSxROWS (80x24: lanes stack)")
    parser.add_argument("--src", action="append", default=[], metavar="DIR=LABEL")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        columns, rows = (int(n) for n in args.size.split("x"))
        print(json.dumps(asyncio.run(measure(args.rate, args.window, (columns, rows)))))
        return
    sources = [(ROOT / "src", "now")]
    for spec in args.src:
        folder, _, label = spec.partition("=")
        if not (Path(folder) / "spectui").is_dir():
            sys.exit(f"slots_steps: --src {folder}: no spectui package there")
        sources.append((Path(folder), label or folder))
    load_before = os.getloadavg()
    runs: dict[str, dict[str, list[float]]] = {}
    for _ in range(args.reps):
        for src, label in sources:
            child = [PYTHON, __file__, "--child", "--rate", str(args.rate)]
            child += ["--window", str(args.window), "--size", args.size]
            env = {**os.environ, "PYTHONPATH": str(src)}
            done = subprocess.run(child, env=env, cwd=ROOT / "bench", capture_output=True,
                                  text=True, check=False)  # fmt: skip
            if done.returncode != 0:
                sys.exit(f"slots_steps: the run from {src} failed:\n{done.stderr[-2000:]}")
            figures = json.loads(done.stdout.strip().splitlines()[-1])
            for name, value in figures.items():
                runs.setdefault(label, {}).setdefault(name, []).append(value)
            print(f"{label}: " + " · ".join(f"{k} {v:.2f}" for k, v in figures.items()), flush=True)
    load_after = os.getloadavg()
    medians = {
        label: {name: round(median(values), 2) for name, values in steps.items()}
        for label, steps in runs.items()
    }
    for label, steps in medians.items():
        print(f"{label} (medians, ms/s): " + " · ".join(f"{k} {v}" for k, v in steps.items()))
    print(f"load {load_before[0]:.1f} -> {load_after[0]:.1f}")
    write_result(
        "slots_steps",
        {
            "rate": args.rate,
            "window_s": args.window,
            "size": args.size,
            "sources": {label: str(src) for src, label in sources},
            "median_ms_per_s": medians,
            "load_1min": [load_before[0], load_after[0]],
            "runs": runs,
        },
    )


if __name__ == "__main__":
    main()
