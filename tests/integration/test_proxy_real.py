"""`spectui proxy` against the real llama-server (ngram-mod, --parallel 2, --metrics): what a
client gets through the proxy equals what it gets directly, and each request's attribution
equals the server's own counters."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from helpers.wait import await_async, await_until
from spectui.core.proxy.models import RequestStatus

from .outside import outside_server, wait_healthy
from .proxy_helpers import delta, running_proxy, server_metrics

pytestmark = pytest.mark.server

NGRAM = ("--spec-type", "ngram-mod", "--spec-ngram-mod-n-min", "4", "--spec-ngram-mod-n-match", "8")
PROMPT = (
    "def add(a, b):\n    return a + b\n\ndef sub(a, b):\n    return a - b\n\n"
    "def mul(a, b):\n    return a * b\n\n# The three functions again, with type hints:\n\n"
)
N = 32


@pytest.fixture(scope="module")
def upstream(llama_binary: Path, gemma_model: Path) -> Iterator[str]:
    """One server for the module: counters are compared as deltas, and /metrics only moves
    when a request ends, so each test reads its own requests' share."""
    args = (*NGRAM, "--parallel", "2", "--metrics", "--ctx-size", "2048")
    with outside_server(llama_binary, gemma_model, *args) as (url, _pid):
        wait_healthy(url, 120)
        yield url


@pytest.fixture
async def proxy(upstream: str) -> AsyncIterator[tuple[str, object, object]]:
    async with running_proxy(upstream, keep_events=True) as running:
        yield running


def _lines(body: bytes) -> list[dict[str, Any]]:
    out = []
    for line in body.split(b"\n"):
        if line.startswith(b"data: ") and line != b"data: [DONE]":
            out.append(json.loads(line[6:]))
    return out


BODIES = {
    "/completion": {"prompt": PROMPT, "n_predict": N},
    "/v1/completions": {"prompt": PROMPT, "max_tokens": N},
    "/v1/chat/completions": {
        "messages": [{"role": "user", "content": "Repeat exactly: " + PROMPT}],
        "max_tokens": N,
    },
}


def _text(path: str, chunks: list[dict[str, Any]]) -> str:
    parts = []
    for chunk in chunks:
        if path == "/completion":
            parts.append(str(chunk.get("content") or ""))
        elif choices := chunk.get("choices"):
            choice = choices[0]
            parts.append(str(choice.get("text") or choice.get("delta", {}).get("content") or ""))
    return "".join(parts)


VOLATILE = {"timings", "created", "id", "id_slot", "tokens_cached"}
TEXT_FIELDS = {"content", "tokens", "choices"}
"""Where a chunk carries the generated text (its token ids too)."""


@pytest.mark.parametrize("path", list(BODIES))
async def test_client_gets_what_it_would_get_directly(upstream: str, proxy, path: str) -> None:
    url, _proxy, collected = proxy
    body = {**BODIES[path], "stream": True, "temperature": 0, "seed": 1}
    async with httpx.AsyncClient(timeout=120) as http:
        direct = _lines((await http.post(upstream + path, json=body)).content)
        before = await server_metrics(upstream)
        through = _lines((await http.post(url + path, json=body)).content)
    after = await server_metrics(upstream)
    # Chunk by chunk the same fields; `timings` only where the server sends them unasked. The
    # text is compared with what the upstream sent the proxy, not with the direct request's:
    # the second request meets the first's prompt cache and n-gram pool, drafts differently,
    # and at temperature 0 may flip a near-tie (a batch changes logits slightly) with no bug.
    assert [sorted(c) for c in through] == [sorted(c) for c in direct]
    skip = {*VOLATILE, "generation_settings", *TEXT_FIELDS}
    for mine, theirs in zip(through, direct, strict=True):
        assert {k: v for k, v in mine.items() if k not in skip} == {
            k: v for k, v in theirs.items() if k not in skip
        }
    if path == "/completion":
        assert through[-1]["generation_settings"] == direct[-1]["generation_settings"] | {
            "seed": through[-1]["generation_settings"]["seed"]
        }
    (record,) = await collected.wait_for(1)
    assert record.status is RequestStatus.DONE and record.info.per_token
    assert _text(path, through) == record.text  # what the upstream sent, relayed to the letter
    assert path != "/completion" or delta(before, after)[0] > 0, "the code prompt should draft"
    assert record.metrics is not None
    steps, drafted, accepted, histogram = delta(before, after)
    assert (record.metrics.steps, record.metrics.drafted, record.metrics.accepted) == (
        steps, drafted, accepted,
    )  # fmt: skip
    assert record.metrics.accepted_per_position == histogram
    assert record.tokens == record.server_timings["predicted_n"]


async def test_openai_sdk_streams_through_the_proxy(upstream: str, proxy) -> None:
    url, _proxy, collected = proxy
    direct = openai.AsyncOpenAI(base_url=upstream + "/v1", api_key="none", max_retries=0)
    through = openai.AsyncOpenAI(base_url=url + "/v1", api_key="none", max_retries=0)

    async def chat(client: openai.AsyncOpenAI) -> str:
        stream = await client.chat.completions.create(
            model="gemma",
            messages=[{"role": "user", "content": "Repeat exactly: " + PROMPT}],
            max_tokens=N, temperature=0, stream=True,
        )  # fmt: skip
        return "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])

    async def complete(client: openai.AsyncOpenAI) -> str:
        stream = await client.completions.create(
            model="gemma", prompt=PROMPT, max_tokens=N, temperature=0, stream=True
        )
        return "".join([c.choices[0].text async for c in stream if c.choices])

    for index, call in enumerate((chat, complete), 1):
        # Direct first: the SDK's own reading of the server, so a shape the proxy broke would
        # show as a failure here. Its text is not compared with the proxied one: the second
        # request meets the first's prompt cache and n-gram pool, drafts differently, and at
        # temperature 0 may flip a near-tie (a batch changes logits slightly) with no bug.
        assert await call(direct)
        before = await server_metrics(upstream)
        got = await call(through)
        after = await server_metrics(upstream)
        record = (await collected.wait_for(index))[-1]
        assert record.metrics is not None
        steps, drafted, accepted, histogram = delta(before, after)
        assert record.metrics.steps == steps and record.metrics.drafted == drafted
        assert record.metrics.accepted == accepted
        assert record.metrics.accepted_per_position == histogram
        assert record.text == got  # what the upstream sent, relayed to the letter
    await direct.close()
    await through.close()


async def test_two_concurrent_clients_each_attributed(upstream: str, proxy) -> None:
    url, _proxy, collected = proxy
    before = await server_metrics(upstream)
    bodies = [
        {"prompt": PROMPT, "n_predict": 96, "stream": True, "temperature": 0},
        {"prompt": "Count: 1, 2, 3, 4, 5, 6, 7, 8, 1, 2, 3, 4, 5, 6, 7, 8, 1, 2,",
         "n_predict": 96, "stream": True, "temperature": 0},
    ]  # fmt: skip
    async with httpx.AsyncClient(timeout=120) as http:
        await asyncio.gather(*(http.post(url + "/completion", json=b) for b in bodies))
    after = await server_metrics(upstream)
    records = await collected.wait_for(2)
    assert {r.info.prompt for r in records} == {b["prompt"] for b in bodies}
    first, second = sorted(records, key=lambda r: r.info.started)
    # They really ran at once: the second began before the first ended.
    assert (second.info.started - first.info.started).total_seconds() * 1000 < first.duration_ms
    steps, drafted, accepted, histogram = delta(before, after)
    metrics = [r.metrics for r in records]
    assert all(m is not None for m in metrics)
    assert sum(m.steps for m in metrics) == steps
    assert sum(m.drafted for m in metrics) == drafted
    assert sum(m.accepted for m in metrics) == accepted
    summed: list[int] = []
    for m in metrics:
        for i, n in enumerate(m.accepted_per_position):
            summed.extend([0] * (i + 1 - len(summed)))
            summed[i] += n
    assert summed == histogram
    assert all(r.tokens == 96 for r in records)


async def test_client_disconnect_frees_the_slot(upstream: str, proxy) -> None:
    url, _proxy, collected = proxy
    body = {"prompt": "Write a long story about a dragon.", "n_predict": 2000, "stream": True}
    async with httpx.AsyncClient(timeout=120) as http:
        async with http.stream("POST", url + "/completion", json=body) as response:
            seen = 0
            async for line in response.aiter_lines():
                seen += line.startswith("data:")
                if seen >= 3:
                    break

        # Awaited, not "within 1 s" (that would be a speed assumption); 2,000 tokens generated
        # to the end would show as the record's own count below.
        async def slots_idle() -> bool:
            return not any(s["is_processing"] for s in (await http.get(upstream + "/slots")).json())

        await await_async(slots_idle, "the server's slots idle")
    (record,) = await collected.wait_for(1)
    assert record.status is RequestStatus.CANCELLED
    assert record.stop_reason == "cancelled" and (record.tokens or 0) < 2000


async def test_non_streamed_requests_pass_through_unchanged(upstream: str, proxy) -> None:
    url, _proxy, collected = proxy
    async with httpx.AsyncClient(timeout=120) as http:
        for method, path, payload in [
            ("GET", "/health", None),
            ("GET", "/v1/models", None),
            ("POST", "/tokenize", {"content": "hello world"}),
            ("POST", "/detokenize", {"tokens": [1, 2, 3]}),
            ("GET", "/no-such-path", None),
        ]:
            direct = await http.request(method, upstream + path, json=payload)
            through = await http.request(method, url + path, json=payload)
            assert through.status_code == direct.status_code, path
            assert through.content == direct.content, path
            assert through.headers.get("content-type") == direct.headers.get("content-type")
        body = {"prompt": PROMPT, "n_predict": 16, "temperature": 0}
        direct = (await http.post(upstream + "/completion", json=body)).json()
        through = (await http.post(url + "/completion", json=body)).json()
    assert through["content"] == direct["content"]
    assert sorted(through) == sorted(direct)
    (record,) = await collected.wait_for(1)
    assert not record.info.per_token and record.metrics is None
    assert record.tokens == 16 and record.drafted is not None


async def test_anthropic_messages_listed_without_per_token_detail(upstream: str, proxy) -> None:
    url, _proxy, collected = proxy
    body = {
        "model": "gemma", "max_tokens": 16, "stream": True, "temperature": 0,
        "messages": [{"role": "user", "content": "Say hello."}],
    }  # fmt: skip
    async with httpx.AsyncClient(timeout=120) as http:
        direct = (await http.post(upstream + "/v1/messages", json=body)).text
        through = (await http.post(url + "/v1/messages", json=body)).text
    assert through.count("content_block_delta") == direct.count("content_block_delta")
    (record,) = await collected.wait_for(1)
    assert not record.info.per_token and record.metrics is None
    assert record.tokens == 16 and record.text


async def test_proxy_metrics_endpoint(upstream: str, proxy) -> None:
    url, _proxy, collected = proxy
    body = {"prompt": PROMPT, "n_predict": 32, "stream": True, "temperature": 0}
    async with httpx.AsyncClient(timeout=120) as http:
        await http.post(url + "/completion", json=body)
        await collected.wait_for(1)
        text = (await http.get(url + "/spectui/metrics")).text
    record = collected.records[0]
    assert record.metrics is not None
    line = next(s for s in text.splitlines() if s.startswith("spectui_proxy_tokens_total{"))
    assert 'endpoint="/completion"' in line and line.endswith(" 32.0")
    steps = [s for s in text.splitlines() if s.startswith("spectui_proxy_steps_total{")]
    assert (float(steps[0].rsplit(" ", 1)[1]) if steps else 0) == record.metrics.steps
    assert "spectui_proxy_ttft_seconds_bucket" in text


async def test_proxy_tui_over_a_real_server(upstream: str) -> None:
    """The proxy TUI attached to the server: a request through it shows up, quitting leaves
    nothing listening."""
    from spectui.app_setup import proxy_session
    from spectui.config import Settings
    from spectui.core.engine.live import LiveEngine
    from spectui.core.proxy.models import ProxyOptions
    from spectui.core.proxy.serve import bind
    from spectui.ui.apps.proxy import ProxyApp

    engine = LiveEngine.attached(upstream)
    sock = bind("127.0.0.1", 0)
    port = sock.getsockname()[1]
    settings = Settings(url=upstream)
    session = proxy_session(settings, ProxyOptions(keep_events=True), engine, sock)
    app = ProxyApp(session, settings)
    async with app.run_test(size=(80, 24)) as pilot:
        async with httpx.AsyncClient(timeout=120) as http:
            await await_until(
                lambda: (
                    app.hub.listeners
                    and "proxy http" in str(app.screen_proxy.query_one("#proxy-status").render())
                ),
                "the proxy listens (its status line says so)",
                pause=pilot.pause,
            )
            body = {"prompt": PROMPT, "n_predict": 32, "stream": True, "temperature": 0}
            response = await http.post(f"http://127.0.0.1:{port}/completion", json=body)
            assert response.status_code == 200
        table = app.screen_proxy.table
        await await_until(  # (live rows are redrawn once a second)
            lambda: table.row_count == 1 and table.get_row_at(0)[9] == "done",
            "the request's row says done",
            pause=pilot.pause,
        )
        await pilot.press("q")
    async with httpx.AsyncClient() as http:
        with pytest.raises(httpx.ConnectError):
            await http.get(f"http://127.0.0.1:{port}/health")
