"""Bringing up the llama-server behind the proxy: launched, or attached to.

Attached, a server that refuses spectui's own checks because it wants a key spectui was not
given still serves the proxy's clients, who bring their own keys: that is a note, not a failure.
"""

from __future__ import annotations

from collections.abc import Callable

import httpx

from spectui.core.engine.live import LiveEngine
from spectui.core.events import ServerState, ServerStateEvent


async def start_upstream(
    engine: LiveEngine,
    attach_url: str | None,
    *,
    on_state: Callable[[ServerStateEvent], None] | None = None,
    on_note: Callable[[str], None] | None = None,
) -> str | None:
    """Start (or attach to) the server; None when it can take requests, else the line why not."""
    problem = None
    async for event in engine.start():
        if not isinstance(event, ServerStateEvent):
            continue
        if on_state is not None:
            on_state(event)
        if event.state is ServerState.FAILED:
            problem = event.detail
    if problem is None or not attach_url:
        return problem
    try:
        async with httpx.AsyncClient(timeout=10) as http:
            await http.get(attach_url.rstrip("/") + "/health")
    except httpx.HTTPError:
        return problem
    if on_note is not None:
        on_note(f"{problem}; requests pass with the clients' own keys")
    return None


def upstream_url(engine: LiveEngine, attach_url: str | None) -> str:
    """Where requests go: the URL as given when attached, else the launched server's."""
    return attach_url.rstrip("/") if attach_url else engine.info.url
