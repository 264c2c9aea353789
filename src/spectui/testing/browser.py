"""Headless Chromium (Debian's ``chromium``) driven over the DevTools protocol, and a real
`spectui share` process to point it at: what the share's browser test
(tests/integration/test_share_browser.py) and the follow-browser picture of `make screenshots`
(scripts/follow_shots.py) both drive.

One websocket to the browser (aiohttp's client) carries commands by id, to the browser or to an
attached tab; the websocket frames each tab receives (the page's terminal output) are kept.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import itertools
import json
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import psutil

GIVE_UP_S = 120.0
"""The default hang guard: every wait ends as soon as what it waits for has happened."""
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--remote-debugging-port=0",
    "--window-size=1280,900",
)
"""A quiet headless browser whose DevTools port it picks itself (written to the profile)."""


class BrowserError(Exception):
    """The browser or the share did not do what was asked (no answer, an error reply, ...)."""


def free_port() -> int:
    """A loopback port nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def http_get(url: str) -> tuple[int, str]:
    """Status and body of a GET (0 and "" when nothing listens yet); never through a proxy."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(url, timeout=30) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()
    except urllib.error.URLError:
        return 0, ""


async def until(check: Callable[[], object], what: str, give_up_s: float = GIVE_UP_S) -> Any:
    """``check()``'s first truthy value; past ``give_up_s`` (a hang guard) `BrowserError`."""
    deadline = time.monotonic() + give_up_s
    while not (value := check()):
        if time.monotonic() > deadline:
            raise BrowserError(f"never happened within {give_up_s:.0f} s: {what}")
        await asyncio.sleep(0.05)  # (a poll's interval: the condition decides, not this)
    return value


@dataclass(frozen=True)
class Tab:
    """A browser tab: its target (to close it) and the session its commands go to."""

    target: str
    """The tab's target id (`Target.closeTarget`)."""
    session: str
    """The attached session's id (`DevTools.send`'s ``session``)."""


class DevTools:
    """One websocket to the browser: commands by id; the tabs' websocket frames collected."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse, give_up_s: float = GIVE_UP_S) -> None:
        self.ws = ws
        self.give_up_s = give_up_s
        self._ids = itertools.count(1)
        self._waiting: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self.received = b""
        """Every websocket frame the tabs received, in order (the followers' output)."""
        self.last_frame = time.monotonic()
        """When the latest of them arrived (`time.monotonic`)."""
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
        """The result of one command (to the browser, or to the tab of ``session``)."""
        ident = next(self._ids)
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._waiting[ident] = future
        message: dict[str, Any] = {"id": ident, "method": method, "params": params}
        if session is not None:
            message["sessionId"] = session
        await self.ws.send_str(json.dumps(message))
        reply = await asyncio.wait_for(future, self.give_up_s)
        if "error" in reply:
            raise BrowserError(f"{method}: {reply['error']}")
        return reply.get("result", {})

    async def open(self, url: str) -> Tab:
        """A new tab at ``url``, its websocket frames collected from the first."""
        target = (await self.send("Target.createTarget", url="about:blank"))["targetId"]
        attached = await self.send("Target.attachToTarget", targetId=target, flatten=True)
        tab = Tab(target=target, session=attached["sessionId"])
        await self.send("Network.enable", tab.session)
        await self.send("Page.enable", tab.session)
        await self.send("Page.navigate", tab.session, url=url)
        return tab

    async def text(self, tab: Tab) -> str:
        """The text of the tab's page."""
        result = await self.send(
            "Runtime.evaluate",
            tab.session,
            expression="document.body ? document.body.innerText : ''",
        )
        return str(result["result"].get("value", ""))

    async def screenshot(self, tab: Tab) -> bytes:
        """The tab as a PNG."""
        return base64.b64decode((await self.send("Page.captureScreenshot", tab.session))["data"])

    async def aclose(self) -> None:
        self._reader.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._reader
        await self.ws.close()


@contextlib.asynccontextmanager
async def chromium(
    binary: str, profile: Path, *extra_flags: str, give_up_s: float = GIVE_UP_S
) -> AsyncIterator[DevTools]:
    """Headless Chromium (``binary``) with a fresh ``profile`` and its DevTools socket; stopped
    (and waited for) on the way out."""
    flags = [*CHROMIUM_FLAGS, *extra_flags, f"--user-data-dir={profile}", "about:blank"]
    proc = await asyncio.create_subprocess_exec(
        binary, *flags, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    active = profile / "DevToolsActivePort"

    def ready() -> bool:
        return active.exists() and len(active.read_text().split()) == 2

    try:
        await until(ready, "Chromium's DevTools port", give_up_s)
        port, path = active.read_text().split()
        async with aiohttp.ClientSession() as http:
            ws = await http.ws_connect(f"ws://127.0.0.1:{port}{path}", max_msg_size=0)
            tools = DevTools(ws, give_up_s)
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
def share(
    folder: Path, listen: str, *extra: str, cwd: Path | None = None
) -> Iterator[subprocess.Popen[str]]:
    """`spectui share FOLDER --listen LISTEN EXTRA...` (stdout and stderr piped, as text);
    stopped with Ctrl-C (which ends its followers) on the way out, killed with them if it
    does not stop."""
    command = [sys.executable, "-m", "spectui.cli", "share", str(folder), "--listen", listen]
    proc = subprocess.Popen(
        [*command, *extra], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=cwd
    )
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(psutil.Error):
                    for child in psutil.Process(proc.pid).children(recursive=True):
                        with contextlib.suppress(psutil.Error):
                            child.kill()
                proc.kill()
                proc.wait()
