"""What the slots view costs: `spectui proxy`'s TUI in a real terminal (tmux) with four clients
streaming through it at RATE tokens/s each, the slots view open (`s`: four lanes) against the
proxy screen alone, from a paced stand-in server (`fake_server.py`) so only spectui's own work
is measured. A fourth mode, the proxy with `--format jsonl` and no TUI, is the proxy's own work;
the slots view's drawing is its CPU minus that. A fifth, `relay_floor.py`'s bare relay, is the
machine's own speed in that round: the same streams through a relay that only forwards bytes.

Each run starts the proxy's TUI in a tmux session (120x36 or 80x24), presses `s` (checked on
the pane: the lanes' line must show), starts four `curl -N` clients through the proxy, and after
a warm-up reads the spectui process's CPU (user + system, all threads, /proc) over a window, as a
share of one core, and the bytes it wrote to the terminal (tmux pipe-pane). Rounds alternate the
modes; medians of `--reps`. Goal (#30): the slots view with 4 lanes at 50 tok/s each <= 5 % of a
core.

    python bench/slots_view.py [--rate 50] [--reps 3] [--window 10] [--modes M,...]
                               [--src DIR=LABEL ...]

`--src` runs the proxy from another source tree too (an older checkout: `git archive`), every
mode of each source in the same rounds, for a before/after paired in one run. Compare the bytes
written only between runs from the same folder: a copy of this very tree run from elsewhere
wrote ~20 % more (its CPU the same). On a loaded machine a run's CPU moves by ~10 %;
`slots_steps.py` times each step of the view in-process, where one step's change shows.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from client_cpu import PYTHON, ROOT, _python_child, fake_server, window_cpu
from common import healthy, median, write_result
from relay_floor import one_run as floor_run

from spectui.core.llama.server import free_port

WARMUP_S = 4.0
"""Seconds before the window: the lanes fill and start scrolling."""

GOAL = 5.0
"""Percent of one core: the slots view, 4 lanes at 50 tok/s each, in tmux."""

STREAMS = 4
FLOOR = "bare relay"
SLOTS_LINE = "one per concurrent request"
"""What the slots view's aggregate line says (the pane is checked for it)."""

MODES: dict[str, tuple[int, int, bool | None]] = {
    "slots 120x36": (120, 36, True),
    "proxy screen 120x36": (120, 36, False),
    "slots 80x24": (80, 24, True),
    "proxy jsonl": (120, 36, None),
    FLOOR: (0, 0, None),
}
"""name: (columns, rows, whether `s` is pressed; None: no TUI, `--format jsonl` to /dev/null,
the proxy's own work without drawing). `FLOOR` is `relay_floor.py`'s bare relay, whatever the
source tree: what the machine charges for the same four streams in that very round (its speed
moves 1.5-2x between windows, the proxy's share of a core with it)."""


def tmux(*args: str, capture: bool = False) -> str:
    done = subprocess.run(["tmux", *args], check=True, capture_output=capture, text=True)
    return done.stdout if capture else ""


def wait_for(check: object, give_up_s: float = 20.0) -> bool:
    deadline = time.monotonic() + give_up_s
    while time.monotonic() < deadline:
        if check():  # type: ignore[operator]
            return True
        time.sleep(0.1)
    return False


def one_run(
    upstream: str, mode: str, tokens: int, window: float, src: Path = ROOT / "src"
) -> tuple[float, float]:
    """(CPU %, bytes written to the terminal per second) of the proxy's TUI in ``mode``, run
    from the source tree ``src``."""
    columns, rows, slots = MODES[mode]
    session = f"spectui-slots-bench-{os.getpid()}"
    log = Path(f"/tmp/{session}.out")
    port = free_port("127.0.0.1")
    proxy = f"http://127.0.0.1:{port}"
    command = (f"cd {ROOT} && exec env -u SPECTUI_STOCK PYTHONPATH={src} {PYTHON} "
               f"-m spectui.cli proxy "
               f"--url {upstream} --listen 127.0.0.1:{port}")  # fmt: skip
    if slots is None:
        command += " --format jsonl > /dev/null"
    tmux("new-session", "-d", "-s", session, "-x", str(columns), "-y", str(rows), command)
    clients: list[subprocess.Popen[bytes]] = []
    try:
        tmux("pipe-pane", "-t", session, f"cat > {log}")
        if not wait_for(lambda: healthy(proxy)):
            raise SystemExit(f"slots_view: the proxy at {proxy} never answered")
        if slots:
            tmux("send-keys", "-t", session, "s")
            shown = wait_for(lambda: SLOTS_LINE in tmux("capture-pane", "-p", "-t", session,
                                                        capture=True))  # fmt: skip
            if not shown:
                raise SystemExit("slots_view: `s` did not open the slots view")
        body = f'{{"prompt": "x", "n_predict": {tokens}, "stream": true}}'
        for _ in range(STREAMS):
            clients.append(
                subprocess.Popen(
                    ["curl", "-sN", f"{proxy}/completion", "-d", body], stdout=subprocess.DEVNULL
                )
            )
        time.sleep(WARMUP_S)
        pane_pid = int(tmux("display", "-p", "-t", session, "#{pane_pid}", capture=True))
        pid = _python_child(pane_pid)
        written, start = log.stat().st_size, time.monotonic()
        cpu = window_cpu(pid, window)
        rate = (log.stat().st_size - written) / (time.monotonic() - start)
        if slots:  # still the slots view, and still four streaming
            pane = tmux("capture-pane", "-p", "-t", session, capture=True)
            if f"{STREAMS} streaming" not in pane:
                raise SystemExit(f"slots_view: expected {STREAMS} streaming lanes:\n{pane}")
        return cpu, rate
    finally:
        for client in clients:
            client.terminate()
            client.wait()
        subprocess.run(["tmux", "kill-session", "-t", session], check=False)
        time.sleep(1.0)  # the TUI closes on SIGHUP
        with contextlib.suppress(FileNotFoundError):
            log.unlink()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=float, default=50.0, help="tokens per second per stream")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--window", type=float, default=10.0, help="seconds measured per run")
    parser.add_argument("--modes", default=",".join(MODES), help="which modes, in order")
    parser.add_argument("--src", action="append", default=[], metavar="DIR=LABEL")
    args = parser.parse_args()
    if shutil.which("tmux") is None or shutil.which("curl") is None:
        sys.exit("slots_view: needs tmux and curl")
    modes = [mode.strip() for mode in args.modes.split(",") if mode.strip()]
    if unknown := [mode for mode in modes if mode not in MODES]:
        sys.exit(f"slots_view: unknown mode {unknown[0]!r} (modes: {', '.join(MODES)})")
    sources = [(ROOT / "src", "now")]
    for spec in args.src:
        folder, _, label = spec.partition("=")
        if not (Path(folder) / "spectui").is_dir():
            sys.exit(f"slots_view: --src {folder}: no spectui package there")
        sources.append((Path(folder), label or folder))
    tokens = int(args.rate * (WARMUP_S + args.window + 15))
    load_before = os.getloadavg()
    runs: dict[str, list[float]] = {}
    with fake_server(args.rate) as url:
        for _ in range(args.reps):
            for mode in modes:
                for src, label in sources:
                    if mode == FLOOR and label != "now":
                        continue  # (no spectui in it: one per round)
                    name = mode if label == "now" else f"{label}: {mode}"
                    if mode == FLOOR:
                        cpu, written = floor_run("bare", url, STREAMS, args.window), 0.0
                    else:
                        cpu, written = one_run(url, mode, tokens, args.window, src)
                    runs.setdefault(name, []).append(cpu)
                    runs.setdefault(f"{name} bytes/s", []).append(written)
                    print(f"{name}: {cpu:.1f} % of a core · {written / 1000:.1f} kB/s", flush=True)
    load_after = os.getloadavg()
    figures = {name: round(median(values), 2) for name, values in runs.items()}
    for name, value in figures.items():
        print(f"{name:>32}: {value}")
    result: dict[str, object] = {
        "rate": args.rate,
        "streams": STREAMS,
        "window_s": args.window,
        "goal_percent": GOAL,
        "sources": {label: str(src) for src, label in sources},
        "median": figures,
        "load_1min": [load_before[0], load_after[0]],
        "runs": runs,
    }
    if "slots 120x36" in figures:
        slots = figures["slots 120x36"]
        verdict = "met" if slots <= GOAL else "NOT met"
        line = (f"slots view 120x36, {STREAMS} lanes at {args.rate:g} tok/s: {slots:.1f} % of a "
                f"core (goal <= {GOAL:g} %: {verdict})")  # fmt: skip
        if figures.get("proxy screen 120x36"):
            result["slots_over_proxy_screen"] = round(slots / figures["proxy screen 120x36"], 3)
            line += f"; ÷ proxy screen {result['slots_over_proxy_screen']}"
        if floor := figures.get(FLOOR):
            result["slots_over_floor"] = round(slots / floor, 2)
            line += f"; the bare relay {floor:.2f} % (slots ÷ it {result['slots_over_floor']})"
        if "proxy jsonl" in figures:
            result["drawing_percent"] = round(slots - figures["proxy jsonl"], 2)
            line += f"; its drawing (minus the proxy alone) {result['drawing_percent']:.1f} %"
        for _src, label in sources[1:]:
            if before := figures.get(f"{label}: slots 120x36"):
                line += f"; {label} {before:.1f} % (now ÷ {label} {slots / before:.2f})"
        print(f"{line}; load {load_before[0]:.1f} -> {load_after[0]:.1f}")
    write_result("slots_view", result)


if __name__ == "__main__":
    main()
