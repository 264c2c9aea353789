"""Stopping a share ends its open viewers at once (`ShareServer._stop_viewers`, aiohttp's
`on_shutdown`): left to aiohttp's graceful shutdown, an open viewer's websocket handler held
Ctrl-C for up to a minute. The handler here is textual-serve's stand-in (a fake: a unit test);
the real share, browser and followers are in tests/integration/test_share_browser.py."""

from __future__ import annotations

import asyncio
from typing import Any

from spectui.commands.share import ShareServer, parse_listen


async def test_stopping_the_share_cancels_every_open_viewer_and_waits_for_it() -> None:
    server = ShareServer("true", parse_listen("127.0.0.1:8765"), max_viewers=4, token=None)
    opened: list[asyncio.Event] = [asyncio.Event() for _ in range(2)]
    ended: list[str] = []

    async def viewer_handler(request: Any) -> Any:
        opened[request].set()
        try:
            await asyncio.Event().wait()  # (a viewer that never closes its tab)
        except asyncio.CancelledError:
            # textual-serve stops the follower and closes the socket, and returns normally
            await asyncio.sleep(0)
            ended.append(f"viewer {request} stopped its follower")
        return request

    server.serve.handle_websocket = viewer_handler  # type: ignore[method-assign]
    viewers = [asyncio.create_task(server._websocket(index)) for index in range(2)]  # type: ignore[arg-type]
    for event in opened:
        await event.wait()
    assert server.viewers == 2

    await server._stop_viewers(server.app())

    assert sorted(ended) == ["viewer 0 stopped its follower", "viewer 1 stopped its follower"]
    assert all(task.done() for task in viewers)
    assert [task.result() for task in viewers] == [0, 1]
    assert server.viewers == 0


async def test_stopping_a_share_with_no_viewer_does_nothing() -> None:
    server = ShareServer("true", parse_listen("127.0.0.1:8765"), max_viewers=4, token=None)
    await server._stop_viewers(server.app())
    assert server.viewers == 0
