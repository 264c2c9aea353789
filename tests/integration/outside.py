"""Real llama-servers the tests start themselves (not spectui), and counting spectui's servers."""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
from collections.abc import Collection, Iterator
from pathlib import Path

import httpx
import psutil

from spectui.core.llama.procs import die_with_parent
from spectui.core.llama.server import free_port

ONE_THREAD = ("--threads", "1")
"""Every test server computes on one thread. ggml's threads meet at a barrier after each op, so
two of them on a machine with a core kept busy by something else wait on the scheduler at every
op (seen: ~80x slower, tests at their hang guard); one thread only runs slower in proportion."""

FAST = ("--no-warmup", *ONE_THREAD)
"""The tests need a server, not a fast one: skip the warm-up run, one thread (`ONE_THREAD`)."""


def launched_servers(exclude: Collection[int] = ()) -> list[psutil.Process]:
    """Running llama-servers among this test process's descendants (minus ``exclude``)."""
    found = []
    for proc in psutil.Process().children(recursive=True):
        with contextlib.suppress(psutil.Error):
            if proc.pid in exclude:
                continue
            if proc.name() == "llama-server" and proc.status() != psutil.STATUS_ZOMBIE:
                found.append(proc)
    return found


def wait_healthy(url: str, give_up_s: float) -> None:
    """Until the server at ``url`` answers /health with 200 (it may still be loading), or the
    time is up (the test then fails on what it finds)."""
    deadline = time.monotonic() + give_up_s
    while time.monotonic() < deadline:
        with contextlib.suppress(httpx.TransportError):
            if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                return
        time.sleep(0.2)


@contextlib.contextmanager
def outside_server(
    binary: Path, model: Path, *args: str, env: dict[str, str] | None = None
) -> Iterator[tuple[str, int]]:
    """A llama-server started outside spectui on a free port: yields (url, pid); always reaped."""
    port = free_port()
    proc = subprocess.Popen(
        [str(binary), "-m", str(model), "--port", str(port), "--ctx-size", "1024", *args, *FAST],
        env={**os.environ, **(env or {})},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        # A test run killed outright (a hang guard, Ctrl-C twice) must not leave it running.
        preexec_fn=die_with_parent,
    )
    try:
        yield f"http://127.0.0.1:{port}", proc.pid
    finally:
        if proc.poll() is None:
            proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
