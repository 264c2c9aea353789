"""The proxy in front of the real llama-server, as clients people use meet it: one that leaves
while its long prompt is being processed (the slot must be freed, as it would be directly), and
curl sending a body over 1 MiB (`Expect: 100-continue`; the answer must stream).

Every wait polls with a generous deadline: how fast this machine processes a prompt never
decides a verdict. (This llama-server build does not look at the connection while it processes a
prompt, direct or through the proxy: it notices a closed one at its first write, the first token,
and stops there. The proxy closes its upstream connection the moment the client is gone.)
"""

from __future__ import annotations

import asyncio
import json
import shutil
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from helpers.wait import await_async
from spectui.core.proxy.models import RequestStatus

from .outside import outside_server, wait_healthy
from .proxy_helpers import running_proxy

pytestmark = pytest.mark.server

DEADLINE_S = 300.0
N_PREDICT = 2000
LONG_PROMPT = "The quick brown fox jumps over the lazy dog, again and again. " * 30
"""~400 tokens, processed 32 at a time: long enough to leave during, short enough to end."""


@pytest.fixture(scope="module")
def upstream(llama_binary: Path, gemma_model: Path) -> Iterator[str]:
    args = ("--ctx-size", "4096", "--parallel", "1", "--batch-size", "32", "--ubatch-size", "32")
    with outside_server(llama_binary, gemma_model, *args) as (url, _pid):
        wait_healthy(url, 120)
        yield url


@pytest.fixture
async def proxy(upstream: str) -> AsyncIterator[tuple[str, object, object]]:
    async with running_proxy(upstream) as running:
        yield running


async def _slot(http: httpx.AsyncClient, upstream: str) -> dict[str, object]:
    slot: dict[str, object] = (await http.get(upstream + "/slots")).json()[0]
    return slot


def _decoded(slot: dict[str, Any]) -> int:  # a /slots entry (JSON)
    next_token = slot.get("next_token") or [{}]
    return int(next_token[0].get("n_decoded", 0))


async def test_a_client_gone_during_prompt_processing_frees_the_slot(upstream: str, proxy) -> None:
    url, _proxy, collected = proxy
    body = json.dumps(
        {"prompt": LONG_PROMPT, "n_predict": N_PREDICT, "stream": True, "cache_prompt": False}
    ).encode()
    host, port = url.removeprefix("http://").rsplit(":", 1)
    _reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(
        b"POST /completion HTTP/1.1\r\nHost: p\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
    )
    await writer.drain()
    async with httpx.AsyncClient(timeout=60) as http:

        async def slot_if(processing: bool) -> dict[str, object] | None:
            slot = await _slot(http, upstream)
            return slot if slot["is_processing"] is processing else None

        slot = await await_async(
            lambda: slot_if(True),
            "its prompt was being processed",
            give_up_s=DEADLINE_S,
            interval=0.02,
        )
        during_prompt = _decoded(slot) == 0
        writer.close()  # (before the first byte of the answer)
        slot = await await_async(lambda: slot_if(False), "the slot was freed", give_up_s=DEADLINE_S)
    (record,) = await collected.wait_for(1, within=DEADLINE_S)
    assert during_prompt, "the slot was already generating: the prompt was too short to leave in"
    assert record.status is RequestStatus.CANCELLED and record.tokens is None
    assert _decoded(slot) < N_PREDICT  # (freed by the closed connection, not by the end)


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed")
async def test_a_request_over_1_mib_by_curl_streams_its_answer(
    upstream: str, proxy, tmp_path: Path
) -> None:
    # curl asks `Expect: 100-continue` for any body over 1 MiB. The bytes over 1 MiB are a field
    # llama-server ignores: a prompt that long would not fit any context this VM can hold, and
    # to the proxy the bytes are the same.
    url, _proxy, collected = proxy
    body = {
        "prompt": "Count: 1, 2, 3,", "n_predict": 16, "stream": True, "temperature": 0,
        "spectui_test_padding": "x" * (1536 * 1024),
    }  # fmt: skip
    path = tmp_path / "body.json"
    path.write_text(json.dumps(body))
    curl = await asyncio.create_subprocess_exec(
        "curl", "-sS", "-N", "-v", "--max-time", str(int(DEADLINE_S)),
        "-H", "Content-Type: application/json", "--data-binary", f"@{path}",
        f"{url}/completion",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await curl.communicate()
    assert curl.returncode == 0, err.decode(errors="replace")[-2000:]
    assert b"Expect: 100-continue" in err  # (curl did ask)
    data = [line for line in out.split(b"\n") if line.startswith(b"data: ")]
    assert len(data) >= 2 and json.loads(data[-1][6:])["stop"] is True
    (record,) = await collected.wait_for(1, within=DEADLINE_S)
    assert record.status is RequestStatus.DONE and record.http_status == 200
    assert record.tokens == 16
