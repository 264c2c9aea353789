"""`spectui share` in a real browser: headless Chromium (Debian's ``chromium``), driven over the
DevTools protocol (a websocket, aiohttp's client), against a real `spectui share` process.

The page opens, a follower process starts under the share (and no llama-server), its screenshot
shows the token pane with the accepted-draft colour over several lines of tokens, closing the
tab ends the process; the viewer limit holds; a share beyond loopback refuses requests without
its token. Locally the test skips when Chromium is missing; under CI=true it fails.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import struct
import subprocess
import tomllib
import zlib
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, NoReturn

import psutil
import pytest

from helpers.engines import record_capture
from helpers.wait import await_async, await_until, wait_until
from spectui.testing.browser import DevTools, chromium, free_port, http_get, share

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[2]
GIVE_UP_S = 90.0
"""A hang guard only: every wait ends as soon as its state is reached."""


def _missing(what: str) -> NoReturn:
    if os.environ.get("CI"):
        pytest.fail(f"{what} — CI must install it (.ci/run does)")
    pytest.skip(what)


async def until(check: Callable[[], Any], what: str) -> Any:
    return await await_until(check, what, give_up_s=GIVE_UP_S, interval=0.05)


# -- a PNG reader (Chromium's screenshots: 8-bit RGB/RGBA, not interlaced) ----------------------


def png_pixels(data: bytes) -> tuple[int, int, list[bytes], int]:
    """Width, height, the unfiltered rows, and bytes per pixel."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, width, height, bpp = 8, b"", 0, 0, 0
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]
        pos += 12 + length
        if kind == b"IHDR":
            width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", body)
            assert depth == 8 and interlace == 0 and colour in (2, 6), (depth, colour)
            bpp = 3 if colour == 2 else 4
        elif kind == b"IDAT":
            idat += body
    raw = zlib.decompress(idat)
    stride = width * bpp
    rows: list[bytes] = []
    previous = bytearray(stride)
    for y in range(height):
        method, line = (
            raw[y * (stride + 1)],
            bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)]),
        )
        for x in range(stride):
            left = line[x - bpp] if x >= bpp else 0
            up = previous[x]
            corner = previous[x - bpp] if x >= bpp else 0
            if method == 1:
                line[x] = (line[x] + left) & 0xFF
            elif method == 2:
                line[x] = (line[x] + up) & 0xFF
            elif method == 3:
                line[x] = (line[x] + (left + up) // 2) & 0xFF
            elif method == 4:
                p = left + up - corner
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - corner)
                pred = left if pa <= pb and pa <= pc else up if pb <= pc else corner
                line[x] = (line[x] + pred) & 0xFF
        rows.append(bytes(line))
        previous = line
    return width, height, rows, bpp


def rows_with_colour(png: bytes, colour: str, tolerance: int = 3) -> list[int]:
    """The pixel rows in which at least 8 pixels have ``colour`` ('#rrggbb')."""
    want = bytes.fromhex(colour.lstrip("#"))
    width, _, rows, bpp = png_pixels(png)
    found = []
    for y, row in enumerate(rows):
        hits = 0
        for x in range(0, width * bpp, bpp):
            if all(abs(row[x + i] - want[i]) <= tolerance for i in range(3)):
                hits += 1
                if hits >= 8:
                    found.append(y)
                    break
    return found


# -- the browser (spectui.testing.browser, shared with scripts/follow_shots.py) ------------------


@contextlib.asynccontextmanager
async def browser_in(tmp_path: Path) -> AsyncIterator[DevTools]:
    """Headless Chromium with a profile under ``tmp_path`` (skips, or fails under CI, without
    Chromium)."""
    binary = shutil.which("chromium")
    if binary is None:
        _missing("Debian's chromium is not installed (apt-get install chromium)")
    async with chromium(binary, tmp_path / "chromium-profile", give_up_s=GIVE_UP_S) as browser:
        yield browser


def followers(share_proc: subprocess.Popen[str]) -> list[psutil.Process]:
    """The share's follower processes (alive, not zombies)."""
    found = []
    with contextlib.suppress(psutil.NoSuchProcess):
        for child in psutil.Process(share_proc.pid).children(recursive=True):
            with contextlib.suppress(psutil.Error):
                if child.status() != psutil.STATUS_ZOMBIE and "follow" in child.cmdline():
                    found.append(child)
    return found


def accepted_background() -> str:
    theme = tomllib.loads((ROOT / "themes" / "spectui-dark.toml").read_text())
    return str(theme["variables"]["spec-accepted-background"])


async def test_share_in_a_real_browser(tmp_path: Path) -> None:
    live = tmp_path / "live"
    live.mkdir()
    await record_capture(live / "20260101-100000-custom-ngram-simple.jsonl")
    port = free_port()
    url = f"http://127.0.0.1:{port}/"
    async with browser_in(tmp_path) as browser:
        with share(live, f"127.0.0.1:{port}", "--max-viewers", "1", cwd=ROOT) as proc:
            await until(lambda: http_get(url)[0] == 200, "the share listening")
            assert followers(proc) == [], "no viewer yet, no process"

            tab = await browser.open(url)
            (viewer,) = await until(lambda: followers(proc), "a follower process for the tab")
            assert str(live) in viewer.cmdline()
            assert not any(
                "llama-server" in p.name() for p in psutil.Process(proc.pid).children(True)
            )
            colour = accepted_background()
            shots: list[bytes] = []

            async def tokens_drawn() -> bool:
                shot = await browser.screenshot(tab)
                shots.append(shot)
                # The legend has one line in that colour; tokens fill several more.
                return len(rows_with_colour(shot, colour)) >= 60

            await await_async(
                tokens_drawn,
                "the token pane showed accepted drafts",
                give_up_s=GIVE_UP_S,
                interval=0.5,
            )
            keep = os.environ.get("KEEP_SHARE_SCREENSHOT")  # to look at it: a path for the PNG
            if keep:
                # Only a picture kept to look at (no assertion reads it) waits for the charts'
                # next redraw.
                await asyncio.sleep(1.0)
                shots.append(await browser.screenshot(tab))
            await asyncio.to_thread(Path(keep or tmp_path / "share.png").write_bytes, shots[-1])

            # The limit: a second tab gets the page saying so, and no process.
            status, page = http_get(url)
            assert status == 503 and "viewer places are taken" in page
            second = await browser.open(url)

            async def said_full() -> bool:
                return "viewer places are taken" in await browser.text(second)

            await await_async(
                said_full,
                "the second tab said the share is full",
                give_up_s=GIVE_UP_S,
                interval=0.2,
            )
            assert len(followers(proc)) == 1
            await browser.send("Target.closeTarget", targetId=second.target)

            # Closing the tab ends its follower.
            await browser.send("Target.closeTarget", targetId=tab.target)
            await until(lambda: not viewer.is_running() or viewer.status() == "zombie", "exit")
            await until(lambda: followers(proc) == [], "no follower left")

            # Stopping the share ends the followers of the tabs still open.
            await browser.open(url)
            (viewer,) = await until(lambda: followers(proc), "a follower for a new tab")
            proc.send_signal(signal.SIGINT)
            await until(lambda: proc.poll() is not None, "the share stops")
            await until(lambda: not viewer.is_running() or viewer.status() == "zombie", "exit")
        assert proc.returncode == 0


def test_a_share_beyond_loopback_needs_its_token(tmp_path: Path) -> None:
    live = tmp_path / "live"
    live.mkdir()
    port = free_port()
    with share(live, f"0.0.0.0:{port}", cwd=ROOT) as proc:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        token_url = line.split(" open ", 1)[1].split(" ", 1)[0]
        assert token_url.startswith(f"http://0.0.0.0:{port}/") and len(token_url) > 40
        local = token_url.replace("0.0.0.0", "127.0.0.1")
        wait_until(
            lambda: http_get(local)[0] == 200,
            "the share answered",
            give_up_s=GIVE_UP_S,
            interval=0.1,
        )
        status, page = http_get(f"http://127.0.0.1:{port}/")
        assert status == 403 and "token" in page
        assert http_get(f"http://127.0.0.1:{port}/ws")[0] == 403
        assert http_get(f"http://127.0.0.1:{port}/static/js/textual.js")[0] == 403
        token = local.rstrip("/").rsplit("/", 1)[1]
        assert http_get(f"http://127.0.0.1:{port}/{token[:-1]}x/")[0] == 403  # a near miss
    assert proc.stderr is not None
    err = proc.stderr.read()
    assert "warning: sharing beyond this machine on 0.0.0.0" in err
    assert token not in err, "the token goes to stdout only"
