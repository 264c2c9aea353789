"""spectui as a process: bad input to the TUI command, and the TUI (in a pseudo-terminal) or a
headless stream being hung up on, terminated, killed or crashing mid-run. Whatever happens, the
llama-server it launched does not outlive it, and the API key is never written anywhere.

How soon the server goes is the machine's speed (spectui gives it
`core.llama.server.STOP_GRACE_S` after SIGTERM, and a loaded machine can take that long to run
either process), so these tests wait for it to be gone with a hang guard only, never a time
limit."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import struct
import subprocess
import sys
import termios
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import psutil
import pytest

from helpers.cli import one_clear_line, spectui
from helpers.wait import wait_until
from spectui.cli import main
from spectui.config import state_dir

from .outside import AUTH_KEY as KEY
from .outside import CODE_PROMPT

pytestmark = pytest.mark.server

GIVE_UP_S = 180.0
"""Only a guard against a hung test."""

LONG_RUN = ["--prompt", CODE_PROMPT, "--n-predict", "4000", "--ctx-size", "4096"]


# -- bad input to the TUI command: one line before any screen ----------------------------------


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--model", "{tmp}/nope.gguf"], "nope.gguf"),
        (["--model", "{tmp}/text.gguf"], "GGUF"),
        (["--model", "{gemma}", "--spec-type", "ngram-magic"], "ngram-magic"),
        (["--model", "{gemma}", "--spec-type", "draft-simple"], "draft model"),
        (["--model", "{gemma}", "--server-bin", "{tmp}/llama-server"], "llama-server"),
        (["--model", "{gemma}", "--", "--draft-max", "4"], "--draft-max"),
    ],
    ids=["model-missing", "not-gguf", "spec-type", "draft-no-model", "binary-missing", "alias"],
)
def test_tui_command_bad_input_is_one_line(
    args: list[str], says: str, tmp_path: Path, gemma_model: Path
) -> None:
    (tmp_path / "text.gguf").write_text("hello, I am text")
    argv = [a.format(tmp=tmp_path, gemma=gemma_model) for a in args]
    assert says in one_clear_line(spectui(*argv, timeout=60))


# -- the TUI in a pseudo-terminal ---------------------------------------------------------------


class Terminal:
    """A pseudo-terminal that spectui runs in as its controlling terminal, output drained."""

    def __init__(self, argv: list[str], env: dict[str, str] | None = None) -> None:
        master, slave = os.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 100, 0, 0))

        def controlling_tty() -> None:  # in the child: a new session whose terminal this is
            os.setsid()
            fcntl.ioctl(0, termios.TIOCSCTTY, 0)

        self.proc = subprocess.Popen(
            argv,
            stdin=slave,
            stdout=slave,
            stderr=slave,
            env={**os.environ, "TERM": "xterm-256color", **(env or {})},
            preexec_fn=controlling_tty,
            close_fds=True,
        )
        os.close(slave)
        self.master: int | None = master
        self.output = bytearray()
        self._reader = threading.Thread(target=self._drain, daemon=True)
        self._reader.start()

    def _drain(self) -> None:
        while self.master is not None:
            try:
                data = os.read(self.master, 65536)
            except OSError:
                return
            if not data:
                return
            self.output += data

    def hang_up(self) -> None:
        """Close the terminal's far end, as when an SSH connection drops."""
        master, self.master = self.master, None
        if master is not None:
            os.close(master)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.hang_up()


@contextlib.contextmanager
def tui(argv: list[str]) -> Iterator[Terminal]:
    terminal = Terminal(argv)
    try:
        yield terminal
    finally:
        terminal.close()


def spectui_argv(gemma_model: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "spectui.cli", "--model", str(gemma_model), *args]


def launched_server(spectui_pid: int) -> psutil.Process:
    """The llama-server spectui launched, once it is generating (its /slots say so)."""

    def generating() -> psutil.Process | None:
        servers = [
            p
            for p in psutil.Process(spectui_pid).children()
            if p.name() == "llama-server" and p.status() != psutil.STATUS_ZOMBIE
        ]
        if not servers:
            return None
        (server,) = servers
        cmdline = server.cmdline()
        url = f"http://127.0.0.1:{cmdline[cmdline.index('--port') + 1]}"
        slots = httpx.get(f"{url}/slots", timeout=2).json()
        busy = isinstance(slots, list) and slots and slots[0].get("is_processing")
        return server if busy else None

    # Just forked, the child may not show its llama-server command line yet (ValueError).
    return wait_until(
        generating,
        "spectui got its server generating",
        give_up_s=GIVE_UP_S,
        interval=0.1,
        ignore=(httpx.HTTPError, ValueError, psutil.Error),
    )


def assert_gone(server: psutil.Process) -> None:
    """The server ends (it was stopped, or its parent-death signal came); `GIVE_UP_S` only
    guards against a test that would hang."""
    _, alive = psutil.wait_procs([server], timeout=GIVE_UP_S)
    for straggler in alive:
        straggler.kill()
    assert not alive, f"llama-server {server.pid} outlived spectui ({GIVE_UP_S:.0f} s guard)"


# A run that crashes inside the app (a bug in a widget, say) after a few batches of tokens.
_CRASHING = """
import sys
from spectui.ui.widgets import run_display
calls = []
original = run_display.RunDisplay.tokens
def tokens(self, *args):
    calls.append(1)
    if len(calls) > 20:
        raise RuntimeError("injected crash")
    original(self, *args)
run_display.RunDisplay.tokens = tokens
from spectui.cli import main
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.parametrize("fault", ["hangup", "sigterm", "sigkill"])
def test_tui_dies_mid_run_and_its_server_goes(fault: str, gemma_model: Path) -> None:
    argv = spectui_argv(gemma_model, "--spec-type", "none", *LONG_RUN, "--run", "--", "--no-warmup")
    with tui(argv) as terminal:
        server = launched_server(terminal.proc.pid)
        if fault == "hangup":
            terminal.hang_up()  # the kernel sends SIGHUP to spectui, the session leader
        elif fault == "sigterm":
            terminal.proc.send_signal(signal.SIGTERM)
        else:
            terminal.proc.kill()  # no handler runs: only the parent-death signal is left
        assert_gone(server)
        code = terminal.proc.wait(timeout=GIVE_UP_S)
    expected = {"hangup": 129, "sigterm": 143, "sigkill": -signal.SIGKILL}[fault]
    assert code == expected
    if fault == "sigterm":
        assert b"Traceback" not in terminal.output


def test_tui_crash_mid_run_stops_its_server(gemma_model: Path) -> None:
    argv = spectui_argv(gemma_model, "--spec-type", "none", *LONG_RUN, "--run", "--", "--no-warmup")
    argv[1:3] = ["-c", _CRASHING]
    with tui(argv) as terminal:
        server = launched_server(terminal.proc.pid)
        code = terminal.proc.wait(timeout=GIVE_UP_S)  # the crash ends the app...
        assert_gone(server)  # ...and the server with it
    assert code != 0
    assert b"injected crash" in terminal.output


# -- the headless stream -----------------------------------------------------------------------


@pytest.mark.parametrize("fault", [signal.SIGHUP, signal.SIGKILL], ids=["sighup", "sigkill"])
def test_stream_dies_mid_run_and_its_server_goes(fault: signal.Signals, gemma_model: Path) -> None:
    argv = [sys.executable, "-m", "spectui.cli", "stream", "--model", str(gemma_model)]
    proc = subprocess.Popen(
        [*argv, "--spec-type", "none", *LONG_RUN, "--format", "jsonl", "--", "--no-warmup"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
    )
    try:
        server = launched_server(proc.pid)
        proc.send_signal(fault)
        assert_gone(server)
        proc.wait(timeout=GIVE_UP_S)
        assert proc.returncode == (129 if fault == signal.SIGHUP else -signal.SIGKILL)
        if fault == signal.SIGHUP:
            assert proc.stderr is not None
            assert "Traceback" not in proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_crash_with_an_api_key_writes_no_key(
    authed_server: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """An unexpected error mid-run: one line, a crash file with the traceback, never the key."""
    from spectui.core.stream import run as stream

    calls: list[int] = []
    original = stream.ChunkProcessor.feed

    def feed(self: stream.ChunkProcessor, data: str, t: float, **kw: float) -> list[object]:
        calls.append(1)
        if len(calls) > 3:
            raise KeyError(f"injected crash after {len(calls)} chunks")
        return original(self, data, t, **kw)  # type: ignore[return-value]  # list[EngineEvent]

    monkeypatch.setattr(stream.ChunkProcessor, "feed", feed)
    args = ["--api-key", KEY, "--prompt", f"say {KEY}", "--n-predict", "32", "--format", "jsonl"]
    code = main(["stream", "--url", authed_server, *args])
    captured = capsys.readouterr()
    assert code == 1
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and "injected crash" in lines[0], captured.err
    assert "Traceback" not in captured.err
    crashes = list((state_dir() / "crashes").glob("crash-*.txt"))
    assert len(crashes) == 1
    text = crashes[0].read_text()
    assert "injected crash" in text
    everything = captured.out + captured.err + text
    for path in state_dir().rglob("*"):
        if path.is_file():
            everything += path.read_text(errors="replace")
    assert KEY not in everything
    assert all(json.loads(line)["type"] for line in captured.out.splitlines())
