"""The parts of `gpu_rates.py` that look inside the clients: a relay that stamps when the server
wrote each byte, the TUI run in tmux with `tui.PaintLog` installed in its own process, and the
lags read from both (one CLOCK_MONOTONIC for every process on the machine).

    python bench/gpu_rates_tap.py relay PORT UPSTREAM_PORT DUMPS   (used by Relay)
    python bench/gpu_rates_tap.py tui-child OUT SPECTUI-ARGS...     (used by Tmux)
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import re
import shlex
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
from common import until
from tui import SIZE

from spectui.core.llama.server import free_port

HERE = Path(__file__).resolve().parent


def wait_up(url: str, give_up_s: float = 120) -> None:
    deadline = time.monotonic() + give_up_s
    while time.monotonic() < deadline:
        with contextlib.suppress(httpx.TransportError):
            if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                return
        time.sleep(0.1)
    raise SystemExit(f"gpu_rates.py: nothing healthy at {url} after {give_up_s:.0f} s")


@contextlib.contextmanager
def process(argv: list[str], url: str | None = None) -> Iterator[subprocess.Popen[bytes]]:
    """A child process (stopped on the way out), after ``url``/health answers when given."""
    proc = subprocess.Popen(
        argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        if url is not None:
            wait_up(url)
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


class Tmux:
    """A tmux server of this run's own (``-L``), so other sessions on the machine are not
    touched; every TUI runs in a 120x36 window of it."""

    def __init__(self, scratch: Path) -> None:
        self.socket = f"spectui-gpu-rates-{os.getpid()}"
        self.scratch = scratch
        self.count = 0
        # A session that outlives every TUI's: a tmux server exits with its last session, and
        # the next new-session would race with it going away ("server exited unexpectedly").
        self.tmux("new-session", "-d", "-s", "keep", "sleep 86400")

    def tmux(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["tmux", "-L", self.socket, *args], capture_output=True, text=True)

    def tui(
        self, url: str, prompt: str, n_predict: int, *extra: str, src: Path | None = None
    ) -> dict[str, Any]:
        """One run of the TUI (`spectui --url URL --run`) in tmux, its process wrapped by
        `rates_parts.tui_child_main`: what it drew when, and the run's summary. ``src``: run
        spectui from that source tree (a before/after in one run)."""
        self.count += 1
        out = self.scratch / f"tui-{self.count}.json"
        args = ["--url", url, "--prompt", prompt, "--n-predict", str(n_predict), "--run", *extra]
        env = {
            "SPECTUI_CONFIG": str(self.scratch / "config.toml"),
            "XDG_STATE_HOME": str(self.scratch / "state"),
            "XDG_CACHE_HOME": str(self.scratch / "cache"),
            "SPECTUI_THEME": "spectui-dark",
        }
        if src is not None:
            env["PYTHONPATH"] = str(src)
        command = " ".join(
            [f"cd {shlex.quote(str(HERE))} &&", *(f"{k}={shlex.quote(v)}" for k, v in env.items())]
            + ["exec", shlex.quote(sys.executable), "gpu_rates_tap.py", "tui-child", str(out)]
            + [shlex.quote(arg) for arg in args]
        )
        session = f"tui{self.count}"
        started = self.tmux(
            "new-session", "-d", "-s", session, "-x", str(SIZE[0]), "-y", str(SIZE[1]), command
        )
        if started.returncode != 0:
            raise SystemExit(f"gpu_rates.py: tmux did not start: {started.stderr.strip()}")
        try:
            deadline = time.monotonic() + 120
            while not out.exists() and time.monotonic() < deadline:
                if self.tmux("has-session", "-t", session).returncode != 0:
                    raise SystemExit("gpu_rates.py: the TUI ended without a result (see tmux)")
                time.sleep(0.05)
            if not out.exists():
                raise SystemExit("gpu_rates.py: the TUI's run did not end in 120 s")
            while self.tmux("has-session", "-t", session).returncode == 0:
                if time.monotonic() > deadline + 30:
                    break
                time.sleep(0.05)
        finally:
            self.tmux("kill-session", "-t", session)
        result: dict[str, Any] = json.loads(out.read_text())
        return result

    def close(self) -> None:
        self.tmux("kill-server")


class Relay:
    """A TCP relay in a process of its own (`gpu_rates.py relay`) between a client and the
    server: it forwards every byte at once and stamps each read from the server with
    CLOCK_MONOTONIC (one clock for every process). ``collect()`` takes the stamps so far."""

    def __init__(self, upstream: str) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.upstream = upstream
        self.dumps = Path(tempfile.mkdtemp(prefix="spectui-relay-"))
        self.taken = 0

    def __enter__(self) -> Relay:
        upstream_port = self.upstream.rsplit(":", 1)[1]
        argv = [sys.executable, str(HERE / "gpu_rates_tap.py"), "relay", str(self.port)]
        self._context = process([*argv, upstream_port, str(self.dumps)], self.url)
        self.proc = self._context.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._context.__exit__(None, None, None)
        shutil.rmtree(self.dumps, ignore_errors=True)

    def collect(self) -> list[tuple[int, float, bytes]]:
        """(connection, when, bytes) of every read from the server since the last collect."""
        self.taken += 1
        path = self.dumps / f"{self.taken}.json"
        self.proc.send_signal(signal.SIGUSR1)
        deadline = time.monotonic() + 30
        while not path.exists():
            if time.monotonic() > deadline:
                raise SystemExit("gpu_rates.py: the relay does not answer")
            time.sleep(0.01)
        return [(c, t, data.encode("latin-1")) for c, t, data in json.loads(path.read_text())]

    def reset(self) -> None:
        self.collect()


def relay_main(port: int, upstream_port: int, dumps: Path) -> None:
    log: list[tuple[int, float, str]] = []
    dumped = 0

    def pipe(source: socket.socket, sink: socket.socket, conn: int | None) -> None:
        with contextlib.suppress(OSError):
            while data := source.recv(65536):
                if conn is not None:
                    log.append((conn, time.monotonic(), data.decode("latin-1")))
                sink.sendall(data)
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_WR)

    def serve() -> None:
        listener = socket.create_server(("127.0.0.1", port))
        for conn in itertools.count():
            client, _ = listener.accept()
            server = socket.create_connection(("127.0.0.1", upstream_port))
            for sock in (client, server):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            threading.Thread(target=pipe, args=(client, server, None), daemon=True).start()
            threading.Thread(target=pipe, args=(server, client, conn), daemon=True).start()

    def dump(*_: object) -> None:
        nonlocal dumped
        taken = log[:]
        del log[: len(taken)]
        dumped += 1
        (dumps / f"{dumped}.tmp").write_text(json.dumps(taken))
        (dumps / f"{dumped}.tmp").rename(dumps / f"{dumped}.json")

    signal.signal(signal.SIGUSR1, dump)
    threading.Thread(target=serve, daemon=True).start()
    while True:
        signal.pause()


_PREDICTED = re.compile(rb'"tokens_predicted":(\d+)')


def written_times(reads: list[tuple[int, float, bytes]]) -> list[float]:
    """When each generated token's event had wholly left the server: for token k, the first
    read completing an event whose tokens_predicted reached k + 1 (the streaming connection)."""
    best: list[float] = []
    for conn in {c for c, _, _ in reads}:
        mine = [(t, data) for c, t, data in reads if c == conn]
        ends, offset = [], 0
        for t, data in mine:
            offset += len(data)
            ends.append((offset, t))
        stream = b"".join(data for _, data in mine)
        times: list[float] = []
        for match in _PREDICTED.finditer(stream):
            end = stream.find(b"\n\n", match.end())
            end = len(stream) if end < 0 else end + 2
            when = next(t for offset, t in ends if offset >= end)
            times += [when] * (int(match[1]) - len(times))
        best = max(best, times, key=len)
    return best


def lags_ms(lags: list[float]) -> dict[str, float]:
    ordered = sorted(lags)
    return {
        "p50_ms": 1000 * statistics.median(ordered),
        "p95_ms": 1000 * ordered[int(0.95 * (len(ordered) - 1))],
        "max_ms": 1000 * ordered[-1],
        "tokens": float(len(ordered)),
    }


def tui_child_main(out: Path, args: list[str]) -> int:
    """`spectui ARGS` as a user runs it, with `tui.PaintLog` installed; once its run has ended
    and been drawn, writes what it drew when and the server's rate to ``out`` and quits."""
    from tui import PaintLog

    from spectui.cli import main as spectui_main
    from spectui.core.events import SummaryEvent
    from spectui.ui.widgets.run_display import RunDisplay

    log = PaintLog().__enter__()
    original, original_begin = RunDisplay.finished, RunDisplay.begin
    pending: list[asyncio.Task[None]] = []
    began: list[float] = []

    def begin(display: RunDisplay, prompt_label: str, spec_label: str) -> None:
        began.append(time.process_time())
        original_begin(display, prompt_label, spec_label)

    async def report(display: RunDisplay, summary: SummaryEvent) -> None:
        tokens = summary.metrics.tokens
        with contextlib.suppress(RuntimeError):
            await until(lambda: bool(log.painted) and log.painted[-1][1] >= tokens, give_up_s=5)
        rate = summary.server_timings.get("predicted_per_second", 0.0)
        got = {"painted": log.painted, "tokens": tokens, "predicted_per_second": rate,
               "run_cpu_s": time.process_time() - began[0]}  # fmt: skip
        out.with_suffix(".tmp").write_text(json.dumps(got))
        out.with_suffix(".tmp").rename(out)
        display.answer.app.exit()

    def finished(display: RunDisplay, summary: SummaryEvent) -> None:
        original(display, summary)
        pending.append(asyncio.get_running_loop().create_task(report(display, summary)))

    RunDisplay.finished = finished  # type: ignore[method-assign,assignment]
    RunDisplay.begin = begin  # type: ignore[method-assign,assignment]
    return spectui_main(args)


def written_lags(shown: dict[str, Any], written: list[float], n: int) -> list[float]:
    from tui import PaintLog

    log = PaintLog()
    log.painted = [(float(t), int(c)) for t, c in shown["painted"]]
    return log.lags(written[:n])


if __name__ == "__main__":
    if len(sys.argv) > 4 and sys.argv[1] == "relay":
        relay_main(int(sys.argv[2]), int(sys.argv[3]), Path(sys.argv[4]))
    elif len(sys.argv) > 2 and sys.argv[1] == "tui-child":
        sys.exit(tui_child_main(Path(sys.argv[2]), sys.argv[3:]))
    else:
        sys.exit(__doc__)
