"""Attaching to a server that is not on this machine, with endpoints switched off (respx)."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
import respx

from spectui.core.errors import ServerConnectionError
from spectui.core.llama.attach import attach, find_local_pid
from spectui.core.llama.binary import parse_help
from spectui.core.llama.specconfig import SpecConfig

FIXTURES = Path(__file__).parent.parent / "fixtures"
REMOTE = "http://llama.example.invalid:8080"  # .invalid never resolves: surely not this machine


def _off(what: str) -> httpx.Response:
    message = f"This server does not support {what} endpoint."
    return httpx.Response(501, json={"error": {"message": message, "code": 501}})


@respx.mock
async def test_attach_remote_with_endpoints_disabled() -> None:
    respx.get(f"{REMOTE}/health").mock(return_value=httpx.Response(200, json={"status": "ok"}))
    props = (FIXTURES / "props.json").read_bytes()
    respx.get(f"{REMOTE}/props").mock(return_value=httpx.Response(200, content=props))
    respx.get(f"{REMOTE}/slots").mock(return_value=_off("slots"))
    respx.get(f"{REMOTE}/metrics").mock(return_value=_off("metrics"))
    server = await attach(REMOTE)
    try:
        assert server.props.total_slots == 1
        assert server.slots is None
        assert server.metrics is None
        assert not server.local
        assert server.pid is None
        assert server.spec is None
        assert not server.can_adopt
        caps = parse_help((FIXTURES / "help.txt").read_text())
        with pytest.raises(ServerConnectionError, match="cannot be adopted"):
            server.adopt_argv(SpecConfig(), caps)
        with pytest.raises(ServerConnectionError, match="cannot be adopted"):
            await server.adopt(SpecConfig(), caps)
    finally:
        await server.aclose()


@respx.mock
async def test_attach_closes_its_client_when_the_probe_fails() -> None:
    respx.get(f"{REMOTE}/health").mock(return_value=httpx.Response(200, text="hello"))
    with pytest.raises(ServerConnectionError, match="not a llama-server"):
        await attach(REMOTE)


def test_find_local_pid_ignores_remote_hosts() -> None:
    assert find_local_pid(REMOTE) is None
