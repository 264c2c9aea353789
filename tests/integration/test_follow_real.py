"""Five followers and one presenter on the real llama-server, each in its own tmux window (real
terminals, real processes): exactly one llama-server runs, the followers draw the presenter's
run coloured by origin while it streams, and move to its next run when it re-runs.

The followers start before the presenter does (the live folder does not exist yet). Cheap: the
270M model, 48 tokens a run, --no-warmup.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil
import pytest

from helpers.wait import wait_until

pytestmark = pytest.mark.server

MARK = "PYTEST_SPECTUI_RUN"
"""Set by tests/conftest.py for the session: every server the tests start carries it."""
FOLLOWERS = 5
GIVE_UP_S = 180.0
"""A hang guard only: every wait ends as soon as its state is reached."""
ACCEPTED_SGR = "48;2;36;51;31"
"""The accepted-draft background of the default theme (#24331f), as tmux writes it."""


def marked_servers() -> list[psutil.Process]:
    """llama-servers started under this test session (wherever they run: tmux's or ours)."""
    token = os.environ[MARK]
    found = []
    for proc in psutil.process_iter(["name", "status"]):
        if proc.info["name"] != "llama-server" or proc.info["status"] == psutil.STATUS_ZOMBIE:
            continue
        with contextlib.suppress(psutil.Error):
            if proc.environ().get(MARK) == token:
                found.append(proc)
    return found


def until(check: Callable[[], object], what: str, show: Callable[[], str] = str) -> None:
    wait_until(check, what, give_up_s=GIVE_UP_S, interval=0.2, show=show)


def quit_(pid: int) -> bool:
    """Whether the process has ended; a zombie has. Reaping it is its parent's business, and
    with a core kept busy the tmux server was seen to leave the quit presenter a zombie for
    minutes, its window already closed."""
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


class Tmux:
    """A private tmux server (its own socket, no user config)."""

    def __init__(self) -> None:
        self.socket = f"spectui-follow-{uuid.uuid4().hex[:8]}"

    def __call__(self, *args: str) -> str:
        done = subprocess.run(
            ["tmux", "-L", self.socket, "-f", "/dev/null", *args],
            capture_output=True,
            text=True,
            check=True,
        )
        return done.stdout

    def window(self, name: str, argv: list[str], env: dict[str, str]) -> None:
        command = "exec env " + " ".join(
            [*(f"{k}={shlex.quote(v)}" for k, v in env.items()), shlex.join(argv)]
        )
        if not self.has_session():
            self("new-session", "-d", "-s", "t", "-n", name, "-x", "120", "-y", "40", command)
        else:
            self("new-window", "-d", "-t", "t", "-n", name, command)

    def has_session(self) -> bool:
        try:
            self("has-session", "-t", "t")
        except subprocess.CalledProcessError:
            return False
        return True

    def screen(self, name: str, colours: bool = False) -> str:
        return self("capture-pane", "-p", *(["-e"] if colours else []), "-t", f"t:{name}")

    def pid(self, name: str) -> int:
        return int(self("display-message", "-p", "-t", f"t:{name}", "#{pane_pid}").strip())


@contextlib.contextmanager
def tmux_server() -> Iterator[Tmux]:
    tmux = Tmux()
    try:
        yield tmux
    finally:
        with contextlib.suppress(subprocess.CalledProcessError):
            tmux("kill-server")  # SIGHUP: each spectui closes what it started
        # (servers still alive after this fail the session's own check in tests/conftest.py)
        with contextlib.suppress(AssertionError):
            wait_until(lambda: not marked_servers(), "no server left", give_up_s=60, interval=0.2)


def test_five_followers_and_the_presenter_run_one_llama_server(
    tmp_path: Path, gemma_model: Path
) -> None:
    if subprocess.run(["which", "tmux"], capture_output=True).returncode != 0:
        pytest.skip("tmux is not installed")
    env = {
        name: value
        for name, value in os.environ.items()
        if name.startswith(("XDG_", "SPECTUI_", "PYTEST_SPECTUI", "PATH", "HOME", "LLAMA"))
    }
    env |= {"XDG_RUNTIME_DIR": str(tmp_path / "run"), "TERM": "xterm-256color"}
    env |= {"COLORTERM": "truecolor"}
    spectui = [sys.executable, "-m", "spectui.cli"]
    live = tmp_path / "run" / "spectui" / "live"
    with tmux_server() as tmux:
        for index in range(FOLLOWERS):
            tmux.window(f"f{index}", [*spectui, "follow", "--live"], env)
        names = [f"f{index}" for index in range(FOLLOWERS)]
        until(
            lambda: all("waiting for the first run" in tmux.screen(n) for n in names),
            "every follower waiting before the presenter starts",
        )
        assert not live.exists()
        assert marked_servers() == []

        presenter = [
            *spectui, "--broadcast", "--model", str(gemma_model), "--builtin", "table-row",
            "--n-predict", "48", "--ctx-size", "1024", "--run", "--", "--no-warmup",
        ]  # fmt: skip
        tmux.window("presenter", presenter, env)
        until(
            lambda: "broadcasting to" in tmux.screen("presenter"),
            "the presenter's note",
            lambda: repr(
                (
                    psutil.Process(presenter_pid).status(),
                    psutil.Process(presenter_pid).cmdline(),
                    psutil.Process(presenter_pid).ppid(),
                    tmux("list-windows", "-a"),
                )
            ),
        )
        # While the run streams or once it is done, every follower draws it, coloured.
        until(lambda: all("run 1" in tmux.screen(n) for n in names), "every follower on run 1")
        until(
            lambda: all(ACCEPTED_SGR in tmux.screen(n, colours=True) for n in names),
            "accepted drafts coloured in every follower",
        )
        assert len(marked_servers()) == 1, "followers start no server"
        for name in names:
            follower = psutil.Process(tmux.pid(name))
            assert "follow" in follower.cmdline()
            assert follower.children(recursive=True) == []
        until(
            lambda: all("run finished" in tmux.screen(n) for n in names),
            "every follower at the end of run 1",
        )

        tmux("send-keys", "-t", "t:presenter", "r")  # the presenter re-runs: a new file
        until(lambda: all("run 2" in tmux.screen(n) for n in names), "every follower on run 2")
        until(
            lambda: all("run finished" in tmux.screen(n) for n in names),
            "every follower at the end of run 2",
        )
        assert len(marked_servers()) == 1
        assert len(list(live.iterdir())) == 2
        presenter_pid = tmux.pid("presenter")
        tmux("send-keys", "-t", "t:presenter", "q")
        until(
            lambda: quit_(presenter_pid),
            "the presenter quits",
            lambda: tmux("list-windows", "-a"),
        )
        until(lambda: marked_servers() == [], "its server stops with it")
