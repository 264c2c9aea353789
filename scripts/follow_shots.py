"""The follow pictures of `make screenshots`: `spectui follow --live` in a terminal and over SSH
(SVG, drawn headless by Textual), and `spectui share` of the live folder in headless Chromium
(Debian's ``chromium``, as ``tests/integration/test_share_browser.py`` drives it; a PNG).

Each is fed from a recording in docs/recordings, written into the broadcast folder as a presenter
writes it. Chromium is driven over the DevTools protocol (one websocket, aiohttp's client). The
page draws the follower on a canvas, so what it shows is read from the websocket frames the page
receives (the follower's terminal output): the picture is taken once the banner says the run has
finished and the follower has been quiet for a while (its charts redraw on a timer).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import itertools
import json
import math
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any, Protocol

import aiohttp
import psutil
from textual.app import App
from textual.pilot import Pilot

from spectui.config import Settings, live_dir
from spectui.core.events import MemoryEvent
from spectui.core.sessions.file import read_session
from spectui.core.sessions.tail import FollowOptions
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


GIVE_UP_S = 120.0
"""A hang guard only: every wait ends as soon as what it waits for has happened."""
QUIET_S = 3.0
"""Seconds without output from the follower before the picture is taken: longer than the
charts' redraw interval (2 s), so the last redraw is in it."""
WINDOW = "1280,900"
CHROMIUM_FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--hide-scrollbars", "--remote-debugging-port=0", f"--window-size={WINDOW}",
]  # fmt: skip


class BrowserShotError(Exception):
    """The picture could not be taken (no Chromium, the share never answered, ...)."""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _status(url: str) -> int:
    """The status of a GET (0 when nothing listens yet); never through a proxy."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(url, timeout=30) as response:
            status: int = response.status
            return status
    except urllib.error.HTTPError as error:
        return error.code
    except urllib.error.URLError:
        return 0


class DevTools:
    """One websocket to the browser: commands by id; the page's websocket frames collected."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        self.ws = ws
        self._ids = itertools.count(1)
        self._waiting: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self.received = b""
        """Every websocket frame the page received, in order (the follower's output)."""
        self.last_frame = time.monotonic()
        self._reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        async for message in self.ws:
            payload = json.loads(message.data)
            if payload.get("method") == "Network.webSocketFrameReceived":
                frame = payload["params"]["response"]
                data = frame["payloadData"]
                self.received += base64.b64decode(data) if frame["opcode"] == 2 else data.encode()
                self.last_frame = time.monotonic()
            future = self._waiting.pop(payload.get("id", -1), None)
            if future is not None and not future.done():
                future.set_result(payload)

    async def send(self, method: str, session: str | None = None, **params: Any) -> Any:
        ident = next(self._ids)
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._waiting[ident] = future
        message: dict[str, Any] = {"id": ident, "method": method, "params": params}
        if session is not None:
            message["sessionId"] = session
        await self.ws.send_str(json.dumps(message))
        reply = await asyncio.wait_for(future, GIVE_UP_S)
        if "error" in reply:
            raise BrowserShotError(f"{method}: {reply['error']}")
        return reply.get("result", {})

    async def open(self, url: str) -> str:
        """A new tab at ``url`` whose websocket frames are collected: its session id."""
        target = (await self.send("Target.createTarget", url="about:blank"))["targetId"]
        session: str = (await self.send("Target.attachToTarget", targetId=target, flatten=True))[
            "sessionId"
        ]
        await self.send("Network.enable", session)
        await self.send("Page.enable", session)
        await self.send("Page.navigate", session, url=url)
        return session

    async def screenshot(self, session: str) -> bytes:
        return base64.b64decode((await self.send("Page.captureScreenshot", session))["data"])

    async def aclose(self) -> None:
        self._reader.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._reader
        await self.ws.close()


async def _until(check: Any, what: str) -> None:
    deadline = time.monotonic() + GIVE_UP_S
    while not check():
        if time.monotonic() > deadline:
            raise BrowserShotError(f"never happened: {what}")
        await asyncio.sleep(0.1)


@contextlib.asynccontextmanager
async def chromium(profile: Path) -> AsyncIterator[DevTools]:
    """Headless Chromium with its DevTools socket; stopped (and waited for) on the way out."""
    binary = shutil.which("chromium")
    if binary is None:
        raise BrowserShotError("needs Debian's chromium (apt-get install chromium)")
    proc = await asyncio.create_subprocess_exec(
        binary, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", "about:blank",
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        active = profile / "DevToolsActivePort"
        await _until(lambda: active.exists() and len(active.read_text().split()) == 2, "DevTools")
        port, path = active.read_text().split()
        async with aiohttp.ClientSession() as http:
            ws = await http.ws_connect(f"ws://127.0.0.1:{port}{path}", max_msg_size=0)
            tools = DevTools(ws)
            try:
                yield tools
            finally:
                await tools.aclose()
    finally:
        if proc.returncode is None:
            proc.terminate()
        try:
            await asyncio.wait_for(proc.wait(), 30)
        except TimeoutError:
            proc.kill()
            await proc.wait()


@contextlib.contextmanager
def share(folder: Path, port: int) -> Iterator[subprocess.Popen[bytes]]:
    """`spectui share FOLDER` on loopback, patient enough never to call the run 'waiting';
    stopped with Ctrl-C (which ends its followers) on the way out."""
    patience = ["--waiting-after", "3600", "--stopped-after", "3600"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "spectui.cli", "share", str(folder), *patience,
         "--listen", f"127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=os.environ.copy(),
    )  # fmt: skip
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                for child in psutil.Process(proc.pid).children(recursive=True):
                    with contextlib.suppress(psutil.Error):
                        child.kill()
                proc.kill()
                proc.wait()


async def share_picture(folder: Path, scratch: Path, done: bytes) -> bytes:
    """The PNG of a browser tab on `spectui share FOLDER` once the follower's output holds
    ``done`` and it has been quiet for `QUIET_S`."""
    port = _free_port()
    url = f"http://127.0.0.1:{port}/"
    with share(folder, port) as proc:
        await _until(lambda: proc.poll() is not None or _status(url) == 200, "the share")
        if proc.poll() is not None:
            err = proc.stderr.read().decode() if proc.stderr is not None else ""
            raise BrowserShotError(f"spectui share ended: {err.strip()}")
        async with chromium(scratch / "chromium-profile") as browser:
            session = await browser.open(url)
            await _until(lambda: done in browser.received, f"{done.decode()!r} on the page")
            await _until(lambda: time.monotonic() - browser.last_frame > QUIET_S, "quiet")
            return await browser.screenshot(session)


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
    except BrowserShotError as error:
        message = f"screenshots: follow-browser: {error} (or leave it out: --no-browser)"
        raise SystemExit(message) from None
