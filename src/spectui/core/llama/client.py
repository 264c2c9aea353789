"""HTTP client for one llama-server: /health, /props, /slots, /metrics, "is it a llama-server?".

The API key travels only in the ``Authorization`` header of the shared `httpx.AsyncClient`; it is
kept as a `SecretStr`, never formatted into a message, a log line or a repr.
"""

from __future__ import annotations

import json
from enum import StrEnum
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx
from pydantic import BaseModel, ConfigDict, SecretStr, TypeAdapter, ValidationError

from spectui.core.errors import AuthError, ServerConnectionError
from spectui.core.llama.protocol import ErrorBody, Props, ServerMetrics, Slot
from spectui.core.llama.transport import lean_transport

DEFAULT_TIMEOUT = httpx.Timeout(10.0, connect=5.0)
"""Timeout of the small JSON endpoints; streaming passes its own per request."""

# llama-server answers 501 when an endpoint is switched off (--no-slots, no --metrics); a server
# built without the endpoint at all, or a proxy in front of it, answers 404.
_DISABLED = {404, 501}

# Keys of /props that only llama-server sends: one of them is enough to recognise it even when a
# reverse proxy strips the `Server: llama.cpp` header.
_PROPS_KEYS = {"default_generation_settings", "total_slots", "build_info", "model_path"}

_slots_adapter: TypeAdapter[list[Slot]] = TypeAdapter(list[Slot])

KEY_HINT = "pass it with --api-key or set SPECTUI_API_KEY"
"""How a user gives spectui the key; said in every AuthError."""


class HealthState(StrEnum):
    """What `GET /health` said."""

    OK = "ok"
    """200: the model is loaded and the server takes requests."""
    LOADING = "loading"
    """503 "Loading model": the server is up but still loading."""
    ERROR = "error"
    """Any other answer; ``detail`` says what."""
    UNREACHABLE = "unreachable"
    """Nothing answered (connection refused, timeout, DNS)."""


class HealthStatus(BaseModel):
    """One answer of `GET /health`."""

    model_config = ConfigDict(frozen=True)

    state: HealthState
    """The server's state as far as /health tells."""
    detail: str = ""
    """One human line: the server's message, the HTTP status, or the transport error."""
    status_code: int | None = None
    """HTTP status, None when nothing answered."""

    @property
    def ok(self) -> bool:
        """Whether the server is ready for requests."""
        return self.state is HealthState.OK


def safe_url(url: str) -> str:
    """``url`` without user:password and without a query (either may hold a credential)."""
    try:
        parts = urlsplit(url)
        port = parts.port  # (raises for a port out of range)
    except ValueError:
        return "***"
    host = parts.hostname or ""
    if port is not None:
        host = f"{host}:{port}"
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


def normalize_url(url: str) -> str:
    """``host:port`` or ``http://host:port/`` -> ``http://host:port`` (no trailing slash).

    Raises `ValueError` with a one-line reason when it is no usable http(s) URL (a port out of
    range, no host, another scheme), before anything tries to connect to it.
    """
    url = url.strip()
    if "://" not in url:
        url = f"http://{url}"
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 (raises for a port out of range or not a number)
        httpx.URL(url)
    except (ValueError, httpx.InvalidURL) as error:
        raise ValueError(f"not a usable URL ({error})") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"not an http(s)://HOST:PORT URL: {safe_url(url)!r}")
    return url.rstrip("/")


def _error_message(response: httpx.Response) -> str:
    """The server's own error message if the body is llama-server's error JSON, else the status."""
    try:
        return (
            ErrorBody.model_validate_json(response.content).error.message or response.reason_phrase
        )
    except ValidationError:
        return f"HTTP {response.status_code} {response.reason_phrase}".strip()


class ServerClient:
    """Async client for the llama-server at ``base_url``; one connection pool, reused by streams."""

    def __init__(
        self,
        base_url: str,
        api_key: SecretStr | str | None = None,
        *,
        timeout: httpx.Timeout = DEFAULT_TIMEOUT,
    ) -> None:
        self.base_url = normalize_url(base_url)
        self.shown_url = safe_url(self.base_url)
        """The URL as messages and screens show it (credentials in it removed)."""
        if isinstance(api_key, str):
            api_key = SecretStr(api_key)
        self._api_key = api_key if api_key and api_key.get_secret_value() else None
        headers = {"Accept": "application/json"}
        if self._api_key is not None:
            headers["Authorization"] = f"Bearer {self._api_key.get_secret_value()}"
        self.http = httpx.AsyncClient(
            base_url=self.base_url, headers=headers, timeout=timeout, transport=lean_transport()
        )
        """Shared client with the auth header; streams reuse it (with a per-request timeout)."""

    def __repr__(self) -> str:
        key = "set" if self._api_key else "none"
        return f"ServerClient({self.shown_url!r}, api_key={key})"

    async def aclose(self) -> None:
        """Close the connection pool."""
        await self.http.aclose()

    async def __aenter__(self) -> ServerClient:
        return self

    async def __aexit__(self, *_exc: object) -> None:
        await self.aclose()

    async def _get(self, path: str) -> httpx.Response:
        """GET ``path``; transport failures become one clear ServerConnectionError."""
        try:
            return await self.http.get(path)
        except httpx.ConnectError as exc:
            raise ServerConnectionError(
                f"Cannot connect to {self.shown_url}: {_reason(exc)}"
            ) from exc
        except httpx.TimeoutException as exc:
            raise ServerConnectionError(f"{self.shown_url} did not answer in time") from exc
        except httpx.HTTPError as exc:
            raise ServerConnectionError(
                f"Request to {self.shown_url} failed: {_reason(exc)}"
            ) from exc

    def _auth_error(self) -> AuthError:
        if self._api_key is None:
            return AuthError(f"The server at {self.shown_url} needs an API key: {KEY_HINT}")
        return AuthError(f"The server at {self.shown_url} rejected the API key; {KEY_HINT}")

    def _check_auth(self, response: httpx.Response) -> None:
        if response.status_code == 401:
            raise self._auth_error()

    async def health(self) -> HealthStatus:
        """`GET /health`; never raises: an unreachable server is a state, not an error."""
        try:
            response = await self._get("/health")
        except ServerConnectionError as exc:
            return HealthStatus(state=HealthState.UNREACHABLE, detail=str(exc))
        code = response.status_code
        if code == 200:
            return HealthStatus(state=HealthState.OK, detail="ok", status_code=code)
        message = _error_message(response)
        if code == 503 and "loading" in message.lower():
            return HealthStatus(state=HealthState.LOADING, detail=message, status_code=code)
        return HealthStatus(state=HealthState.ERROR, detail=message, status_code=code)

    async def props(self) -> Props | None:
        """`GET /props`; None when the server does not offer it."""
        response = await self._get("/props")
        self._check_auth(response)
        if response.status_code in _DISABLED:
            return None
        self._raise_for_status(response, "/props")
        return Props.model_validate_json(response.content)

    async def slots(self) -> list[Slot] | None:
        """`GET /slots`; None when the endpoint is disabled (``--no-slots``)."""
        response = await self._get("/slots")
        self._check_auth(response)
        if response.status_code in _DISABLED:
            return None
        self._raise_for_status(response, "/slots")
        return _slots_adapter.validate_json(response.content)

    async def metrics(self) -> ServerMetrics | None:
        """`GET /metrics`; None when the endpoint is disabled (server started without --metrics)."""
        response = await self._get("/metrics")
        self._check_auth(response)
        if response.status_code in _DISABLED:
            return None
        self._raise_for_status(response, "/metrics")
        return ServerMetrics.parse(response.text)

    def _raise_for_status(self, response: httpx.Response, path: str) -> None:
        if response.is_success:
            return
        raise ServerConnectionError(f"{self.shown_url}{path} answered: {_error_message(response)}")

    async def probe(self) -> Props:
        """Check the URL is a ready llama-server this client may use; returns its /props.

        Raises ServerConnectionError (nothing answers, not a llama-server, still loading) or
        AuthError (an API key is needed or wrong).
        """
        health = await self._get("/health")
        if health.status_code == 503 and "loading" in _error_message(health).lower():
            raise ServerConnectionError(
                f"{self.shown_url} is still loading its model; try again in a moment"
            )
        if health.status_code == 401:
            # /health is public on llama-server; an auth wall in front of it is something else.
            raise self._auth_error()
        if health.status_code != 200 or not _is_health_body(health):
            raise self._not_llama_server()
        response = await self._get("/props")
        self._check_auth(response)
        if response.status_code != 200:
            raise self._not_llama_server()
        body = _json_object(response)
        if body is None or not _PROPS_KEYS & body.keys():
            raise self._not_llama_server()
        return Props.model_validate(body)

    def _not_llama_server(self) -> ServerConnectionError:
        return ServerConnectionError(f"{self.shown_url} answers but is not a llama-server")


def _reason(exc: httpx.HTTPError) -> str:
    """The innermost cause of a transport error, e.g. 'connection refused'."""
    if isinstance(exc, httpx.LocalProtocolError):  # (h11's text quotes the refused header)
        return "a request header is not valid HTTP (its value is not shown)"
    text = str(exc) or type(exc).__name__
    if "refused" in text.lower():
        return "connection refused"
    return text.splitlines()[0]


def _json_object(response: httpx.Response) -> dict[str, Any] | None:
    try:
        body = json.loads(response.content)
    except ValueError:
        return None
    return body if isinstance(body, dict) else None


def _is_health_body(response: httpx.Response) -> bool:
    """llama-server's /health says ``{"status": "ok"}``."""
    body = _json_object(response)
    return body is not None and body.get("status") == "ok"
