"""The follow pictures of `make screenshots`: `spectui follow --live` in a terminal and over SSH
(SVG, drawn headless by Textual), and `spectui share` of the live folder in headless Chromium
(Debian's ``chromium``, driven by `spectui.testing.browser` as the share's browser test drives it;
a PNG).

Each is fed from a recording in docs/recordings, written into the broadcast folder as a presenter
writes it. The page draws the follower on a canvas, so what it shows is read from the websocket
frames the page receives (the follower's terminal output): the picture is taken once the banner
says the run has finished and the follower has been quiet for a while (its charts redraw on a
timer).
"""

from __future__ import annotations

import json
import math
import shutil
import time
from collections.abc import Awaitable, Callable
from datetime import timedelta
from pathlib import Path
from typing import Any, Protocol

from textual.app import App
from textual.pilot import Pilot

from spectui.config import Settings, live_dir
from spectui.core.events import MemoryEvent
from spectui.core.sessions.file import read_session
from spectui.core.sessions.tail import FollowOptions
from spectui.testing.browser import BrowserError, chromium, free_port, http_get, share, until
from spectui.ui.apps.follow import FollowApp, follow_engine
from spectui.ui.screens.follow import FollowScreen
from spectui.ui.widgets.tokens import TokenView

RECORDINGS = Path(__file__).resolve().parent.parent / "docs" / "recordings"
SIZE = (120, 36)
"""The follower in a terminal: the size of the other TUI pictures."""
SSH_SIZE = (100, 30)
"""The follower over SSH: a smaller terminal."""


class Shoot(Protocol):
    """`screenshots._shoot`: run an app headless until ready, settle it, its SVG."""

    def __call__(
        self,
        app: App[Any],
        ready: Callable[[Pilot[object]], Awaitable[bool]],
        title: str,
        size: tuple[int, int],
        settle: Callable[[], None] | None = None,
    ) -> Awaitable[str]: ...


QUIET_S = 3.0
"""Seconds without output from the follower before the picture is taken: longer than the
charts' redraw interval (2 s), so the last redraw is in it."""
PATIENCE = ("--waiting-after", "3600", "--stopped-after", "3600")
"""The share's followers never call the finished run 'waiting' or 'stopped'."""


async def share_picture(folder: Path, scratch: Path, done: bytes) -> bytes:
    """The PNG of a browser tab on `spectui share FOLDER` once the follower's output holds
    ``done`` and it has been quiet for `QUIET_S`."""
    binary = shutil.which("chromium")
    if binary is None:
        raise BrowserError("needs Debian's chromium (apt-get install chromium)")
    port = free_port()
    url = f"http://127.0.0.1:{port}/"
    with share(folder, f"127.0.0.1:{port}", *PATIENCE) as proc:
        await until(lambda: proc.poll() is not None or http_get(url)[0] == 200, "the share")
        if proc.poll() is not None:
            err = proc.stderr.read() if proc.stderr is not None else ""
            raise BrowserError(f"spectui share ended: {err.strip()}")
        profile = scratch / "chromium-profile"
        async with chromium(binary, profile, "--hide-scrollbars") as browser:
            tab = await browser.open(url)
            await until(lambda: done in browser.received, f"{done.decode()!r} on the page")
            await until(lambda: time.monotonic() - browser.last_frame > QUIET_S, "quiet")
            return await browser.screenshot(tab)


FOLLOW_FIRST = RECORDINGS / "table-row-ngram-simple.jsonl"
FOLLOW_SECOND = FOLLOW_FIRST
"""The presenter's two runs: the same one again (a presenter re-runs to show it again)."""
FOLLOW_TOKENS = 150
"""Where the presenter's current run stands in the follow pictures: tokens written so far."""


def _run_file(source: Path, tokens: int | None = None, index: int = 0) -> tuple[str, bytes, float]:
    """The name a presenter's broadcast gives ``source``'s run (as the ``index``-th run, a
    minute apart), its bytes up to and including its ``tokens``-th token line (all of them when
    None), and the time of the last line."""
    header = read_session(source).header
    created = header.created + timedelta(minutes=index)
    name = f"{created:%Y%m%d-%H%M%S}-{header.label}-{header.server.spec_label}.jsonl"
    data, seen, last = b"", 0, math.inf
    for line in source.read_bytes().splitlines(keepends=True):
        data += line
        if tokens is not None and b'"type":"token"' in line:
            seen += 1
            if seen == tokens:
                last = float(json.loads(line)["t"])
                break
    return name, data, last


def _empty_live_dir() -> Path:
    """The broadcast folder, emptied of the runs an earlier picture wrote there."""
    live = live_dir()
    shutil.rmtree(live, ignore_errors=True)
    live.mkdir(parents=True)
    return live


def _follower(settings: Settings) -> FollowApp:
    """`spectui follow --live`, patient enough never to call a paused presenter 'waiting'."""
    options = FollowOptions(
        target=live_dir(), poll_s=0.01, waiting_after_s=3600.0, stopped_after_s=3600.0
    )
    return FollowApp(follow_engine(options), settings)


def _follow_settle(app: FollowApp, source: Path, until: float) -> Callable[[], None]:
    """Charts redrawn now; the server bar's CPU from the last sample up to ``until`` (as the
    replay pictures do: the picture must not depend on how the updates were batched)."""

    def settle() -> None:
        screen = app.main_screen
        assert screen is not None
        screen.charts.replot()
        samples = [
            e for e in read_session(source).events
            if isinstance(e, MemoryEvent) and e.t <= until and e.client_cpu_percent is not None
        ]  # fmt: skip
        if samples:
            screen.server.bar.set_cpu(samples[-1])

    return settle


async def _follow(
    settings: Settings, shoot: Shoot, runs: list[tuple[Path, int | None]], size: tuple[int, int]
) -> str:
    """The follower once the presenter has written ``runs`` (source, tokens; None: the whole
    run) into the live folder, one after the other, each drawn before the next is written."""
    live = _empty_live_dir()
    files = [_run_file(source, upto, index) for index, (source, upto) in enumerate(runs)]
    app = _follower(settings)
    written = 0

    def drawn(screen: FollowScreen) -> bool:
        """Whether the run written last is drawn: its tokens, and its end if it has one."""
        run = screen.follower.current
        _, data, _ = files[written - 1]
        whole = runs[written - 1][1] is None
        return (
            run is not None
            and run.number == written
            and len(screen.query_one(TokenView).model.tokens) == data.count(b'"type":"token"')
            and screen.running != whole
        )

    async def ready(pilot: Pilot[object]) -> bool:
        nonlocal written
        screen = app.main_screen
        if screen is None or (written and not drawn(screen)):
            await pilot.pause(0.01)
            return False
        if written == len(files):
            return True
        name, data, _ = files[written]
        (live / name).write_bytes(data)
        written += 1
        return False

    settle = _follow_settle(app, runs[-1][0], files[-1][2])
    return await shoot(app, ready, "spectui follow", size, settle=settle)


async def follow_terminal(settings: Settings, shoot: Shoot) -> str:
    """A follower in a second terminal, the presenter's run part-way."""
    return await _follow(settings, shoot, [(FOLLOW_FIRST, FOLLOW_TOKENS)], SIZE)


async def follow_ssh(settings: Settings, shoot: Shoot) -> str:
    """A follower over SSH at 100×30: the presenter's second run, the first one beside it."""
    runs = [(FOLLOW_FIRST, None), (FOLLOW_SECOND, FOLLOW_TOKENS)]
    return await _follow(settings, shoot, runs, SSH_SIZE)


async def follow_browser(settings: Settings) -> bytes:
    """`spectui share --live` in headless Chromium, the presenter's run finished (a PNG)."""
    live = _empty_live_dir()
    name, data, _ = _run_file(FOLLOW_SECOND)
    (live / name).write_bytes(data)
    try:
        return await share_picture(live, live.parent, b"run finished")
    except BrowserError as error:
        message = f"screenshots: follow-browser: {error} (or leave it out: --no-browser)"
        raise SystemExit(message) from None
