"""ServerClient against recorded llama-server answers (tests/fixtures) served by respx."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
import respx

from spectui.core.errors import AuthError, ServerConnectionError
from spectui.core.llama.client import HealthState, ServerClient, normalize_url

FIXTURES = Path(__file__).parent.parent / "fixtures"
URL = "http://127.0.0.1:8080"
SECRET = "s3cret-key-value"


def recorded(name: str) -> httpx.Response:
    """A raw HTTP capture (status line, headers, blank line, body) as an httpx.Response."""
    head, _, body = (FIXTURES / name).read_bytes().partition(b"\r\n\r\n")
    if not body:
        head, _, body = (FIXTURES / name).read_bytes().partition(b"\n\n")
    lines = head.decode().splitlines()
    status = int(lines[0].split()[1])
    headers = [line.split(": ", 1) for line in lines[1:] if ": " in line]
    return httpx.Response(status, headers=[(k, v) for k, v in headers], content=body)


def llama_json(name: str) -> httpx.Response:
    return httpx.Response(
        200, headers={"Server": "llama.cpp"}, content=(FIXTURES / name).read_bytes()
    )


OK_HEALTH = httpx.Response(200, json={"status": "ok"})
UNAUTHORIZED = httpx.Response(
    401, json={"error": {"message": "Invalid API Key", "type": "authentication_error", "code": 401}}
)
SLOTS_OFF = httpx.Response(
    501,
    json={
        "error": {
            "message": "This server does not support slots endpoint.",
            "type": "not_supported_error",
            "code": 501,
        }
    },
)


@pytest.fixture
async def client() -> AsyncIterator[ServerClient]:
    async with ServerClient(URL) as client:
        yield client


def test_normalize_url() -> None:
    assert normalize_url("localhost:8080/") == "http://localhost:8080"
    assert normalize_url(" https://h:1 ") == "https://h:1"


@respx.mock
async def test_health_ok(client: ServerClient) -> None:
    respx.get(f"{URL}/health").mock(return_value=OK_HEALTH)
    status = await client.health()
    assert status.state is HealthState.OK
    assert status.ok


@respx.mock
async def test_health_loading(client: ServerClient) -> None:
    respx.get(f"{URL}/health").mock(return_value=recorded("health-loading.http"))
    status = await client.health()
    assert status.state is HealthState.LOADING
    assert status.detail == "Loading model"
    assert status.status_code == 503


@respx.mock
async def test_health_other_error(client: ServerClient) -> None:
    respx.get(f"{URL}/health").mock(return_value=recorded("error-404.http"))
    status = await client.health()
    assert status.state is HealthState.ERROR
    assert status.detail == "File Not Found"


@respx.mock
async def test_health_unreachable(client: ServerClient) -> None:
    respx.get(f"{URL}/health").mock(
        side_effect=httpx.ConnectError("[Errno 111] Connection refused")
    )
    status = await client.health()
    assert status.state is HealthState.UNREACHABLE
    assert "connection refused" in status.detail


@respx.mock
async def test_props_slots_metrics(client: ServerClient) -> None:
    respx.get(f"{URL}/props").mock(return_value=llama_json("props.json"))
    respx.get(f"{URL}/slots").mock(return_value=llama_json("slots.json"))
    metrics_text = (FIXTURES / "metrics-after-ngram-simple-2.prom").read_text()
    respx.get(f"{URL}/metrics").mock(return_value=httpx.Response(200, text=metrics_text))
    props = await client.props()
    assert props is not None
    assert props.total_slots == 1
    slots = await client.slots()
    assert slots is not None
    assert slots[0].speculative
    assert slots[0].spec_types == ["none", "ngram-simple"]
    metrics = await client.metrics()
    assert metrics is not None
    assert metrics.spec_steps == 20
    assert metrics.accepted_per_position == [14, 10, 5, 5, 5, 4, 2, 1]


@respx.mock
async def test_disabled_endpoints_are_none(client: ServerClient) -> None:
    respx.get(f"{URL}/slots").mock(return_value=SLOTS_OFF)
    respx.get(f"{URL}/metrics").mock(return_value=recorded("error-404.http"))
    respx.get(f"{URL}/props").mock(return_value=recorded("error-404.http"))
    assert await client.slots() is None
    assert await client.metrics() is None
    assert await client.props() is None


@respx.mock
async def test_probe_llama_server(client: ServerClient) -> None:
    respx.get(f"{URL}/health").mock(return_value=OK_HEALTH)
    respx.get(f"{URL}/props").mock(return_value=llama_json("props.json"))
    props = await client.probe()
    assert props.model_path == "models/gemma-3-270m-q4_k_m.gguf"


@respx.mock
async def test_probe_not_llama_server(client: ServerClient) -> None:
    respx.get(f"{URL}/health").mock(
        return_value=httpx.Response(404, html="<html><body>Not Found</body></html>")
    )
    with pytest.raises(ServerConnectionError, match="answers but is not a llama-server"):
        await client.probe()


@respx.mock
async def test_probe_json_server_that_is_not_llama(client: ServerClient) -> None:
    respx.get(f"{URL}/health").mock(return_value=OK_HEALTH)
    respx.get(f"{URL}/props").mock(return_value=httpx.Response(200, json={"hello": "world"}))
    with pytest.raises(ServerConnectionError, match="answers but is not a llama-server"):
        await client.probe()


@respx.mock
async def test_probe_connection_refused(client: ServerClient) -> None:
    respx.get(f"{URL}/health").mock(
        side_effect=httpx.ConnectError("[Errno 111] Connection refused")
    )
    with pytest.raises(ServerConnectionError, match="Cannot connect"):
        await client.probe()


@respx.mock
async def test_probe_loading(client: ServerClient) -> None:
    respx.get(f"{URL}/health").mock(return_value=recorded("health-loading.http"))
    with pytest.raises(ServerConnectionError, match="still loading"):
        await client.probe()


@respx.mock
async def test_probe_needs_key() -> None:
    respx.get(f"{URL}/health").mock(return_value=OK_HEALTH)
    respx.get(f"{URL}/props").mock(return_value=UNAUTHORIZED)
    client = ServerClient(URL)
    with pytest.raises(AuthError, match="needs an API key") as info:
        await client.probe()
    assert "--api-key" in str(info.value)
    assert "SPECTUI_API_KEY" in str(info.value)


@respx.mock
async def test_wrong_key_is_never_echoed() -> None:
    respx.get(f"{URL}/health").mock(return_value=OK_HEALTH)
    route = respx.get(f"{URL}/props").mock(return_value=UNAUTHORIZED)
    client = ServerClient(URL, SECRET)
    with pytest.raises(AuthError, match="rejected the API key") as info:
        await client.probe()
    assert route.calls.last.request.headers["Authorization"] == f"Bearer {SECRET}"
    assert SECRET not in str(info.value)
    assert SECRET not in repr(client)


@respx.mock
async def test_endpoints_raise_auth_error(client: ServerClient) -> None:
    respx.get(f"{URL}/slots").mock(return_value=UNAUTHORIZED)
    with pytest.raises(AuthError):
        await client.slots()


async def test_http_is_shared_and_closed() -> None:
    client = ServerClient(URL, SECRET)
    assert client.http.headers["Authorization"] == f"Bearer {SECRET}"
    assert str(client.http.base_url) == URL
    await client.aclose()
    assert client.http.is_closed


async def test_credentials_in_the_url_never_reach_a_message() -> None:
    from spectui.core.llama.client import ServerClient

    client = ServerClient("http://user:hunter2@127.0.0.1:9/?token=abc")
    try:
        await client.probe()
    except Exception as error:
        message = str(error)
    else:  # pragma: no cover - nothing listens on port 9
        raise AssertionError("probe should fail")
    finally:
        await client.aclose()
    assert "127.0.0.1:9" in message
    assert "hunter2" not in message and "abc" not in message and "user" not in message
    assert "hunter2" not in repr(client)
