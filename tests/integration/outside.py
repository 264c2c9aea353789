"""Real llama-servers the tests start themselves (not spectui), counting spectui's servers, and
what the real-server tests share (a prompt, a key, an interrupted run)."""

from __future__ import annotations

import contextlib
import os
import subprocess
import threading
import time
from collections.abc import AsyncGenerator, Collection, Iterator
from pathlib import Path

import httpx
import psutil

from helpers.servers import ONE_THREAD
from helpers.wait import wait_until
from spectui.core.compare.runner import RunFinished
from spectui.core.engine.base import Engine
from spectui.core.llama.procs import die_with_parent
from spectui.core.llama.server import free_port

FAST = ("--no-warmup", *ONE_THREAD)
"""The tests need a server, not a fast one: skip the warm-up run, one thread (`ONE_THREAD`)."""

CODE_PROMPT = (
    "def add(a, b):\n    return a + b\n\ndef sub(a, b):\n    return a - b\n\n"
    "# The same two functions again:\n\n"
)
"""A prompt whose answer repeats it: ngram drafts pay from the first tokens."""

AUTH_KEY = "spectui-faults-key-7d2a9c"
"""The API key the `authed_server` fixture's server requires."""

OUTSIDE: set[int] = set()
"""llama-servers the tests started themselves (not spectui's), left out of the counts."""


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
    """Until the server at ``url`` answers /health with 200 (it may still be loading);
    ``give_up_s`` is a hang guard."""
    wait_until(
        lambda: httpx.get(f"{url}/health", timeout=2).status_code == 200,
        f"{url}/health answered 200",
        give_up_s=give_up_s,
        interval=0.2,
        ignore=(httpx.TransportError,),
    )


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


MARK = "PYTEST_SPECTUI_RUN"
"""Set by tests/conftest.py for the session; every server the tests start inherits it."""


class ServerWatch:
    """Counts this test session's live llama-server processes every 20 ms, in a thread."""

    def __init__(self) -> None:
        self.token = os.environ[MARK]
        self.most = 0
        """The most servers alive at once."""
        self.samples = 0
        """Samples that saw a server alive."""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def _alive(self) -> int:
        count = 0
        for proc in psutil.process_iter(["name", "status"]):
            if proc.info["name"] != "llama-server" or proc.info["status"] == psutil.STATUS_ZOMBIE:
                continue
            with contextlib.suppress(psutil.Error):
                if proc.environ().get(MARK) == self.token:
                    count += 1
        return count

    def _watch(self) -> None:
        while not self._stop.is_set():
            alive = self._alive()
            self.most = max(self.most, alive)
            self.samples += 1 if alive else 0
            time.sleep(0.02)  # (the sampling interval: a watch, not a wait)

    def __enter__(self) -> ServerWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


async def interrupt_after(events: AsyncGenerator[object, None], engine: Engine, runs: int) -> None:
    """Iterate a comparison's (or a tune's) events until ``runs`` runs finished, then stop as
    an interruption would: the iterator closed, the engine and its server closed."""
    finished = 0
    try:
        async with contextlib.aclosing(events) as stream:
            async for event in stream:
                if isinstance(event, RunFinished):
                    finished += 1
                    if finished == runs:
                        break
    finally:
        await engine.aclose()
