"""What many streams cost spectui: `spectui proxy` carrying 8 concurrent `curl -N` clients at 50
tok/s each, against the same proxy carrying 1 client at 400 tok/s: the same total token rate,
from paced stand-in servers (`fake_server.py`), so only spectui's own work is measured.

A proxy in front of a shared llama-server is the spectui process that pays per stream: each
stream is a request of its own (its connection, relay task, attribution and record), where one
fast stream is the same work in one. Each run starts the proxy (`--clients jsonl`: headless,
`--format jsonl`; `tui`: its TUI in a tmux session of 120x36, the proxy screen), starts the
clients, waits until every client has received bytes, then after a warm-up reads the proxy's CPU
(user + system, all threads, /proc) over a window, as a share of one core, and the tokens the
clients received in that window (the total rate each shape was delivered at). Rounds alternate
the shapes; medians of `--reps`. Goal (#30): CPU at 8 × 50 tok/s <= 1.5 × CPU at 1 × 400 tok/s.

    python bench/concurrent_cpu.py [--streams 8] [--rate 50] [--reps 3] [--window 10]
                                   [--clients jsonl,tui] [--src DIR=LABEL ...]

`--src` runs the proxy from another source tree too (an older checkout), in the same rounds.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from subprocess import DEVNULL

from client_cpu import PYTHON, ROOT, _python_child, env_for, fake_server, window_cpu
from common import healthy, median, write_result

from spectui.core.llama.server import free_port

WARMUP_S = 3.0
"""Seconds between every client receiving bytes and the measured window."""

GOAL = 1.5
"""CPU with N streams at RATE each ÷ CPU with one stream at N × RATE."""

TUI_SIZE = (120, 36)
"""The proxy's TUI (`--client tui`): a tmux session this big, columns x rows."""

CLIENTS = ("jsonl", "tui")


def wait_until(check: object, what: str, give_up_s: float = 30.0) -> None:
    deadline = time.monotonic() + give_up_s
    while time.monotonic() < deadline:
        if check():  # type: ignore[operator]
            return
        time.sleep(0.1)
    raise SystemExit(f"concurrent_cpu: {what} did not happen within {give_up_s:g} s")


@contextlib.contextmanager
def clients(proxy: str, count: int, tokens: int) -> Iterator[list[Path]]:
    """``count`` `curl -N` clients streaming through ``proxy``; their output files."""
    body = f'{{"prompt": "x", "n_predict": {tokens}, "stream": true}}'
    folder = tempfile.TemporaryDirectory()
    outputs = [Path(folder.name) / f"client-{n}.out" for n in range(count)]
    running: list[subprocess.Popen[bytes]] = []
    try:
        for output in outputs:
            with output.open("wb") as sink:
                running.append(
                    subprocess.Popen(
                        ["curl", "-sN", f"{proxy}/completion", "-d", body], stdout=sink
                    )
                )
        yield outputs
    finally:
        for client in running:
            client.terminate()
            client.wait()
        folder.cleanup()


def chunks(outputs: list[Path]) -> int:
    """SSE events the clients have received so far (one per token from the stand-in)."""
    return sum(output.read_bytes().count(b"data: ") for output in outputs)


@contextlib.contextmanager
def proxy_process(upstream: str, port: int, src: Path, client: str) -> Iterator[Callable[[], int]]:
    """The proxy (``client`` 'jsonl': headless, records to /dev/null; 'tui': its TUI in a tmux
    session of `TUI_SIZE`, the proxy screen); yields how to find its pid (in tmux, once it
    answers: the pane runs a shell until its `exec`)."""
    argv = [
        PYTHON,
        "-m",
        "spectui.cli",
        "proxy",
        "--url",
        upstream,
        "--listen",
        f"127.0.0.1:{port}",
    ]
    if client == "jsonl":
        proc = subprocess.Popen([*argv, "--format", "jsonl"], env=env_for(src), stdout=DEVNULL)
        try:
            yield lambda: proc.pid
        finally:
            proc.terminate()
            proc.wait()
        return
    session = f"spectui-concurrent-{os.getpid()}"
    command = f"cd {ROOT} && exec env -u SPECTUI_STOCK PYTHONPATH={src} {shlex.join(argv)}"
    columns, rows = (str(n) for n in TUI_SIZE)
    subprocess.run(
        ["tmux", "new-session", "-d", "-s", session, "-x", columns, "-y", rows, command], check=True
    )

    def pid() -> int:
        pane = subprocess.run(
            ["tmux", "display", "-p", "-t", session, "#{pane_pid}"],
            check=True,
            capture_output=True,
            text=True,
        )
        return _python_child(int(pane.stdout))

    try:
        yield pid
    finally:
        subprocess.run(["tmux", "kill-session", "-t", session], check=False)
        time.sleep(1.0)  # (the TUI closes on SIGHUP)


def one_run(
    upstream: str, streams: int, tokens: int, window: float, src: Path, client: str
) -> tuple[float, float]:
    """The proxy's CPU (% of a core) while ``streams`` clients stream through it, and the token
    rate they received together over the same window (the shape was delivered as asked)."""
    port = free_port("127.0.0.1")
    proxy = f"http://127.0.0.1:{port}"
    with proxy_process(upstream, port, src, client) as find_pid:
        wait_until(lambda: healthy(proxy), f"the proxy at {proxy} answering")
        pid = find_pid()
        with clients(proxy, streams, tokens) as outputs:
            wait_until(
                lambda: all(o.exists() and o.stat().st_size > 0 for o in outputs),
                f"all {streams} clients receiving tokens",
            )
            time.sleep(WARMUP_S)
            if not Path(f"/proc/{pid}").exists():
                raise SystemExit("concurrent_cpu: the proxy exited mid-run")
            received, start = chunks(outputs), time.monotonic()
            cpu = window_cpu(pid, window)
            return cpu, (chunks(outputs) - received) / (time.monotonic() - start)


def prefix_of(label: str, kind: str) -> str:
    """'proxy jsonl: ' or 'before, proxy tui: ': the figures' names."""
    return ("" if label == "now" else f"{label}, ") + f"proxy {kind}: "


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", type=int, default=8, help="concurrent streams")
    parser.add_argument("--rate", type=float, default=50.0, help="tokens/s of each stream")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--window", type=float, default=10.0, help="seconds measured per run")
    parser.add_argument("--src", action="append", default=[], metavar="DIR=LABEL")
    parser.add_argument(
        "--clients", default="jsonl", help="jsonl (the headless proxy), tui (its TUI), or both"
    )
    args = parser.parse_args()
    kinds = [kind.strip() for kind in args.clients.split(",") if kind.strip()]
    if not kinds or any(kind not in CLIENTS for kind in kinds):
        sys.exit(f"concurrent_cpu: --clients takes {' and/or '.join(CLIENTS)}, comma-separated")
    if shutil.which("curl") is None or ("tui" in kinds and shutil.which("tmux") is None):
        sys.exit("concurrent_cpu: needs curl (and tmux for --clients tui)")
    if args.streams < 2 or args.rate <= 0 or args.reps < 1 or args.window <= 0:
        sys.exit("concurrent_cpu: --streams >= 2, --rate > 0, --reps >= 1, --window > 0")
    sources = [(ROOT / "src", "now")]
    for spec in args.src:
        folder, _, label = spec.partition("=")
        if not (Path(folder) / "spectui").is_dir():
            sys.exit(f"concurrent_cpu: --src {folder}: no spectui package there")
        sources.append((Path(folder), label or folder))
    total = args.streams * args.rate
    many, one = f"{args.streams} x {args.rate:g} tok/s", f"1 x {total:g} tok/s"
    # Long enough that no stream ends inside the window, at either rate.
    span = 30 + WARMUP_S + args.window
    load_before = os.getloadavg()
    runs: dict[str, list[float]] = {}
    with fake_server(args.rate) as slow, fake_server(total) as fast:
        for _ in range(args.reps):
            for (src, label), kind in itertools.product(sources, kinds):
                prefix = prefix_of(label, kind)
                for name, url, streams, rate in (
                    (many, slow, args.streams, args.rate),
                    (one, fast, 1, total),
                ):
                    cpu, delivered = one_run(url, streams, int(rate * span), args.window, src, kind)
                    runs.setdefault(prefix + name, []).append(cpu)
                    runs.setdefault(f"{prefix}{name} delivered tok/s", []).append(delivered)
                    print(
                        f"{prefix}{name}: {cpu:.1f} % of a core, {delivered:.0f} tok/s delivered",
                        flush=True,
                    )
    load_after = os.getloadavg()
    figures = {name: round(median(values), 2) for name, values in runs.items()}
    ratios: dict[str, float | None] = {}
    for (_src, label), kind in itertools.product(sources, kinds):
        prefix = prefix_of(label, kind)
        base = figures[prefix + one]
        ratios[prefix.rstrip(": ")] = round(figures[prefix + many] / base, 3) if base else None
    for name, value in figures.items():
        print(f"{name:>48}: {value}")
    for name, ratio in ratios.items():
        verdict = "met" if ratio is not None and ratio <= GOAL else "NOT met"
        print(f"{name}, {many} ÷ {one}: {ratio} (goal <= {GOAL:g}: {verdict})")
    print(f"load {load_before[0]:.1f} -> {load_after[0]:.1f}")
    write_result(
        "concurrent_cpu",
        {
            "streams": args.streams,
            "rate": args.rate,
            "window_s": args.window,
            "goal_ratio": GOAL,
            "sources": {label: str(src) for src, label in sources},
            "median": figures,
            "ratio": ratios,
            "load_1min": [load_before[0], load_after[0]],
            "runs": runs,
        },
    )


if __name__ == "__main__":
    main()
