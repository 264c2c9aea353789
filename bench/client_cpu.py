"""What watching costs: CPU of `spectui stream`, of `spectui proxy` (a `curl -N` client streaming
through it) and of the TUI in a real terminal (tmux), at a steady token rate, against a paced
stand-in server (`fake_server.py`) so only the client's own work is measured.

Each client streams a long response at RATE tokens/s; after a warm-up its CPU (user + system,
all threads, from /proc) is read over a window mid-run, as a share of one core. Rounds alternate
the clients. The TUI runs in a tmux session of 120x40, attached with `--url`, so every frame is
composed *and* written to a terminal as escape codes; the bytes it writes per second are counted
from tmux's pipe-pane. The window starts WARMUP_S after the stream is seen flowing (its first
output; the TUI's server bar saying `generating`), not after a fixed start-up time: on a loaded
machine start-up alone can take longer than any fixed warm-up.

    python bench/client_cpu.py [--rate 50] [--reps 3] [--window 10] [--src DIR=LABEL ...]
                               [--clients stream,proxy,tui] [--server paced|gemma]

`--src` runs the clients from another source tree (e.g. an older checkout) for a before/after
in the same run. `--server gemma` streams from the real llama-server instead (Gemma 3 270M,
`--spec-type none`, one thread, a long prose prompt at temperature 0.8): the rate is then the
server's own, printed with the figures, and `--rate` only sizes the request.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from common import gemma_model, llama_binary, median, write_result

from spectui.core.llama.server import free_port

ROOT = Path(__file__).resolve().parent.parent
PYTHON = sys.executable
TICKS = os.sysconf("SC_CLK_TCK")
WARMUP_S = 2.0
"""Seconds between the stream flowing and the measured window."""
START_S = 60.0
"""Longest wait for a client to start streaming."""
SIZE = (120, 40)
"""The TUI's terminal (tmux), columns x rows."""
PROSE = (
    "Write a long, detailed story about a lighthouse keeper and the sailors she saved, "
    "chapter by chapter.\n\n"
)
"""The real server's prompt: prose, so the run is long and every token a new one."""
SAMPLING = ("--temperature", "0.8", "--seed", "7")
"""Sampled, not greedy, for the real server: greedy prose settles into a loop."""


def cpu_ticks(pid: int) -> int:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime + stime of the whole process


@contextlib.contextmanager
def fake_server(rate: float) -> Iterator[str]:
    port = free_port("127.0.0.1")
    proc = subprocess.Popen(
        [PYTHON, str(ROOT / "bench" / "fake_server.py"), str(port), str(rate)],
        cwd=ROOT / "bench",
    )
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(100):
            with contextlib.suppress(subprocess.CalledProcessError):
                subprocess.run(["curl", "-sf", f"{url}/health"], check=True, capture_output=True)
                break
            time.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        proc.wait()


@contextlib.contextmanager
def gemma_server() -> Iterator[str]:
    """The real llama-server: Gemma 3 270M, no speculation, one thread (on a loaded machine
    llama.cpp's spinning threads collapse: two of them on two busy cores made 0.5 tok/s)."""
    port = free_port("127.0.0.1")
    argv = [str(llama_binary()), "-m", str(gemma_model()), "--host", "127.0.0.1",
            "--port", str(port), "--ctx-size", "8192", "--parallel", "1", "--metrics",
            "--slots", "--spec-type", "none", "--threads", "1"]  # fmt: skip
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(600):
            with contextlib.suppress(subprocess.CalledProcessError):
                subprocess.run(["curl", "-sf", f"{url}/health"], check=True, capture_output=True)
                break
            if proc.poll() is not None:
                raise SystemExit("client_cpu: the llama-server exited at start-up")
            time.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        proc.wait()


def server_rate(url: str) -> float:
    """The real server's own tokens/s over 64 tokens of the prompt."""
    body = (f'{{"prompt": {json.dumps(PROSE)}, "n_predict": 64, "temperature": 0.8, '
            f'"seed": 7, "cache_prompt": false}}')  # fmt: skip
    done = subprocess.run(["curl", "-s", f"{url}/completion", "-d", body], capture_output=True,
                          text=True, check=True)  # fmt: skip
    return float(json.loads(done.stdout)["timings"]["predicted_per_second"])


def window_cpu(pid: int, window: float) -> float:
    """Share of one core the process used over ``window`` seconds."""
    before, start = cpu_ticks(pid), time.monotonic()
    time.sleep(window)
    return (cpu_ticks(pid) - before) / TICKS / (time.monotonic() - start) * 100


def env_for(src: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    """The client's environment: ``src`` first on the path, ``extra`` (e.g. SPECTUI_STOCK) set."""
    env = {**os.environ, "PYTHONPATH": str(src), "NO_COLOR": ""}
    env.pop("SPECTUI_STOCK", None)
    return {**env, **(extra or {})}


def await_true(ready: Callable[[], bool], what: str) -> None:
    """Poll ``ready`` until it holds; exit in one line after START_S."""
    deadline = time.monotonic() + START_S
    while not ready():
        if time.monotonic() > deadline:
            raise SystemExit(f"client_cpu: {what} did not start streaming in {START_S:.0f} s")
        time.sleep(0.1)


def grows(path: Path) -> Callable[[], bool]:
    return lambda: path.exists() and path.stat().st_size > 0


def flowing(path: Path, gap: float = 0.5, least: int = 1_000) -> Callable[[], bool]:
    """Whether more than ``least`` bytes were added to ``path`` within ``gap`` seconds: the TUI
    drawing a stream (it says `generating` before the first token, and an idle TUI writes
    nothing)."""

    def ready() -> bool:
        before = path.stat().st_size if path.exists() else 0
        time.sleep(gap)
        return path.exists() and path.stat().st_size - before > least

    return ready


def prompt_args(real: bool, tokens: int) -> list[str]:
    """The request's options: the prose prompt, sampled, for the real server."""
    if real:
        return ["--prompt", PROSE, "--n-predict", str(tokens), *SAMPLING]
    return ["--prompt", "x", "--n-predict", str(tokens)]


def stream_cpu(
    url: str,
    src: Path,
    tokens: int,
    window: float,
    extra: dict[str, str] | None = None,
    real: bool = False,
) -> float:
    argv = [PYTHON, "-m", "spectui.cli", "stream", "--url", url, *prompt_args(real, tokens),
            "--format", "jsonl"]  # fmt: skip
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "stream.jsonl"
        with out.open("wb") as sink:
            proc = subprocess.Popen(argv, env=env_for(src, extra), stdout=sink)
        try:
            await_true(grows(out), "spectui stream")
            time.sleep(WARMUP_S)
            return window_cpu(proc.pid, window)
        finally:
            proc.terminate()
            proc.wait()


def proxy_cpu(
    url: str, src: Path, tokens: int, window: float, extra: dict[str, str] | None = None
) -> float:
    """CPU of `spectui proxy --format jsonl` while a `curl -N` client streams through it."""
    port = free_port("127.0.0.1")
    argv = [PYTHON, "-m", "spectui.cli", "proxy", "--url", url, "--listen", f"127.0.0.1:{port}",
            "--format", "jsonl"]  # fmt: skip
    proc = subprocess.Popen(argv, env=env_for(src, extra), stdout=subprocess.DEVNULL)
    body = f'{{"prompt": "x", "n_predict": {tokens}, "stream": true}}'
    client: subprocess.Popen[bytes] | None = None
    folder = tempfile.TemporaryDirectory()
    received = Path(folder.name) / "curl.out"
    try:
        for _ in range(100):
            with contextlib.suppress(subprocess.CalledProcessError):
                subprocess.run(["curl", "-sfm", "2", f"http://127.0.0.1:{port}/health"], check=True,
                               capture_output=True)  # fmt: skip
                break
            time.sleep(0.1)
        with received.open("wb") as sink:
            client = subprocess.Popen(
                ["curl", "-sN", f"http://127.0.0.1:{port}/completion", "-d", body], stdout=sink
            )
        await_true(grows(received), "spectui proxy")
        time.sleep(WARMUP_S)
        return window_cpu(proc.pid, window)
    finally:
        for running in (client, proc):
            if running is not None:
                running.terminate()
                running.wait()
        folder.cleanup()


def tui_cpu(
    url: str,
    src: Path,
    tokens: int,
    window: float,
    extra: dict[str, str] | None = None,
    size: tuple[int, int] = SIZE,
    real: bool = False,
) -> tuple[float, float]:
    """(CPU %, bytes written to the terminal per second) of the TUI in tmux of ``size``."""
    session = f"spectui-bench-{os.getpid()}"
    log = Path(f"/tmp/{session}.out")
    env = " ".join(f"{name}={shlex.quote(value)}" for name, value in (extra or {}).items())
    request = shlex.join(prompt_args(real, tokens))
    command = (f"cd {ROOT} && env -u SPECTUI_STOCK {env} PYTHONPATH={src} {PYTHON} -m spectui.cli"
               f" --url {url} {request} --run")  # fmt: skip
    columns, rows = (str(n) for n in size)
    subprocess.run(["tmux", "new-session", "-d", "-s", session, "-x", columns, "-y", rows, command],
                   check=True)  # fmt: skip
    try:
        subprocess.run(["tmux", "pipe-pane", "-t", session, f"cat > {log}"], check=True)
        await_true(lambda: "generating" in _screen(session), "the TUI")
        await_true(flowing(log), "the TUI")
        time.sleep(WARMUP_S)
        pane_pid = int(subprocess.run(
            ["tmux", "display", "-p", "-t", session, "#{pane_pid}"],
            check=True, capture_output=True, text=True,
        ).stdout)  # fmt: skip
        pid = _python_child(pane_pid)
        written = log.stat().st_size
        start = time.monotonic()
        cpu = window_cpu(pid, window)
        rate = (log.stat().st_size - written) / (time.monotonic() - start)
        return cpu, rate
    finally:
        subprocess.run(["tmux", "kill-session", "-t", session], check=False)
        time.sleep(1.0)  # the TUI closes on SIGHUP
        log.unlink(missing_ok=True)


def _screen(session: str) -> str:
    """What the tmux pane shows now."""
    shown = subprocess.run(["tmux", "capture-pane", "-p", "-t", session], capture_output=True,
                           text=True, check=False)  # fmt: skip
    return shown.stdout


def _python_child(pid: int) -> int:
    """The spectui process: the pane's shell itself after `exec`, or its python child."""
    if "python" in Path(f"/proc/{pid}/comm").read_text():
        return pid
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    return int(children[0])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=float, default=50.0, help="tokens per second (50)")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--window", type=float, default=10.0, help="seconds measured per run")
    parser.add_argument("--src", action="append", default=[], metavar="DIR=LABEL")
    parser.add_argument("--clients", default="stream,proxy,tui", help="which clients, in order")
    parser.add_argument("--server", choices=("paced", "gemma"), default="paced")
    args = parser.parse_args()
    if shutil.which("tmux") is None:
        sys.exit("client_cpu: needs tmux")
    clients = [name.strip() for name in args.clients.split(",") if name.strip()]
    if unknown := set(clients) - {"stream", "proxy", "tui"}:
        sys.exit(f"client_cpu: unknown client(s) {', '.join(sorted(unknown))}")
    sources = [(ROOT / "src", "now")]
    for spec in args.src:
        folder, _, label = spec.partition("=")
        sources.append((Path(folder), label or folder))
    tokens = int(args.rate * (WARMUP_S + args.window + 30))
    real = args.server == "gemma"
    runs: dict[str, list[float]] = {}
    with gemma_server() if real else fake_server(args.rate) as url:
        if real:
            runs["server tok/s"] = [server_rate(url)]
            print(f"the real server: {runs['server tok/s'][0]:.1f} tok/s", flush=True)
        for _ in range(args.reps):
            for src, label in sources:
                shown = []
                for client in clients:
                    if client == "tui":
                        cpu, written = tui_cpu(url, src, tokens, args.window, real=real)
                        runs.setdefault(f"tui {label} bytes/s", []).append(written)
                        shown.append(f"tui {cpu:.1f} % ({written / 1000:.1f} kB/s)")
                    elif client == "stream":
                        cpu = stream_cpu(url, src, tokens, args.window, real=real)
                        shown.append(f"stream {cpu:.1f} %")
                    else:
                        cpu = proxy_cpu(url, src, tokens, args.window)
                        shown.append(f"proxy {cpu:.1f} %")
                    runs.setdefault(f"{client} {label}", []).append(cpu)
                print(f"{label}: " + " · ".join(shown) + f" · load {os.getloadavg()[0]:.1f}",
                      flush=True)  # fmt: skip
    figures = {name: round(median(values), 2) for name, values in runs.items()}
    for name, value in figures.items():
        print(f"{name:>24}: {value}")
    write_result("client_cpu", {"rate": args.rate, "server": args.server, "window_s": args.window,
                                "median": figures, "runs": runs})  # fmt: skip


if __name__ == "__main__":
    main()
