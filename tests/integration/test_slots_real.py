"""The slots view on the real llama-server: Gemma with ngram-mod on `--parallel 4`, `spectui
proxy`'s TUI in front, four openai-SDK chat streams at once. The view shows four lanes, one per
request, and each lane's drafted/accepted and tokens are that response's own final `timings`."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from helpers.wait import await_until
from spectui.core.proxy.models import RequestStatus

from .outside import outside_server, wait_healthy

pytestmark = pytest.mark.server

SLOTS = 4
NGRAM = ("--spec-type", "ngram-mod", "--spec-ngram-mod-n-min", "4", "--spec-ngram-mod-n-match", "8")
N = 48


def prompt(index: int) -> str:
    """Four different code prompts, each with repeats for the n-gram drafter to find."""
    name = ("add", "sub", "mul", "div")[index]
    op = "+-*/"[index]
    body = f"def {name}(a, b):\n    return a {op} b\n\n"
    return "Repeat exactly, three times:\n\n" + body * 3


@pytest.fixture(scope="module")
def upstream(llama_binary: Path, gemma_model: Path) -> Iterator[str]:
    args = (*NGRAM, "--parallel", str(SLOTS), "--ctx-size", str(1024 * SLOTS))
    with outside_server(llama_binary, gemma_model, *args) as (url, _pid):
        wait_healthy(url, 120)
        yield url


async def test_four_streams_four_lanes_each_its_own_timings(upstream: str) -> None:
    from spectui.app_setup import proxy_session
    from spectui.config import Settings
    from spectui.core.engine.live import LiveEngine
    from spectui.core.proxy.models import ProxyOptions
    from spectui.core.proxy.serve import bind
    from spectui.ui.apps.proxy import ProxyApp
    from spectui.ui.lanes import WatchLanes
    from spectui.ui.screens.slots import SlotsScreen

    async with httpx.AsyncClient() as http:
        slots = (await http.get(f"{upstream}/slots")).json()
    assert len(slots) == SLOTS

    engine = LiveEngine.attached(upstream)
    sock = bind("127.0.0.1", 0)
    port = sock.getsockname()[1]
    settings = Settings(url=upstream)
    session = proxy_session(settings, ProxyOptions(keep_events=True), engine, sock)
    app = ProxyApp(session, settings)
    async with app.run_test(size=(120, 36)) as pilot:
        status = app.screen_proxy.query_one("#proxy-status")
        await await_until(
            lambda: "proxy http" in str(status.render()),
            "the proxy listens (its status line says so)",
            pause=pilot.pause,
        )
        await pilot.press("s")
        screen = app.screen
        assert isinstance(screen, SlotsScreen)

        client = openai.AsyncOpenAI(
            base_url=f"http://127.0.0.1:{port}/v1", api_key="none", max_retries=0, timeout=600
        )

        async def chat(index: int) -> tuple[str, str, dict[str, Any]]:
            text = prompt(index)
            stream = await client.chat.completions.create(
                model="gemma",
                messages=[{"role": "user", "content": text}],
                max_tokens=N, temperature=0, stream=True,
            )  # fmt: skip
            timings: dict[str, Any] = {}
            parts = []
            async for chunk in stream:
                if chunk.choices:
                    parts.append(chunk.choices[0].delta.content or "")
                extra = chunk.model_extra or {}
                if isinstance(extra.get("timings"), dict):
                    timings = extra["timings"]
            return text, "".join(parts), timings

        answers = await asyncio.gather(*(chat(i) for i in range(SLOTS)))
        await client.close()
        await await_until(  # (the proxy ends each request after its client's last byte)
            lambda: len(app.hub.recent) == SLOTS and not app.hub.live,
            "the hub ended all four requests",
            pause=pilot.pause,
        )
        screen.pull(numbers=True)
        await pilot.pause()

        lanes = screen.lanes
        assert len(lanes) == SLOTS
        lanes_source = app.screen_proxy.lanes
        assert lanes_source is not None
        feeds = list(lanes_source.feeds())
        assert all(feed is not None for feed in feeds)
        # Four lanes, four different requests: a request takes the first lane that is idle or
        # whose request ended, so this holds only if all four were in flight at once.
        assert len({feed.key for feed in feeds if feed is not None}) == SLOTS
        for lane, feed in zip(lanes, feeds, strict=True):
            assert feed is not None
            record = feed.live.record
            assert record is not None and record.status is RequestStatus.DONE
            messages = record.info.messages
            assert messages is not None
            sent = messages[-1]["content"]
            _sent, got, timings = next(a for a in answers if a[0] == sent)
            assert timings, "the final chunk carries the response's timings"
            assert record.text == got
            assert lane.label == f"#{record.info.id} · slot ?"
            assert lane.numbers.state == "done"
            assert lane.numbers.tokens == timings["predicted_n"]
            assert lane.numbers.drafted == timings.get("draft_n", 0)
            assert lane.numbers.accepted == timings.get("draft_n_accepted", 0)
            assert len(lane.view.model.tokens) == timings["predicted_n"]
        # ngram-mod drafted somewhere: the lanes are not all trivially zero.
        assert sum(lane.numbers.drafted or 0 for lane in lanes) > 0

        # The live TUI's lanes (`s` attached to the server): its own four slots from /slots,
        # idle now, each having served one of the four (its own task).
        watch = WatchLanes(upstream)
        watch.view = await watch.watcher.poll()
        await watch.watcher.aclose()
        slot_feeds = [feed for feed in watch.feeds() if feed is not None]
        assert len(slot_feeds) == SLOTS
        assert all(feed.numbers().state == "idle" for feed in slot_feeds)
        assert len({feed.slot.task for feed in slot_feeds}) == SLOTS
        assert [feed.label.split(" · ")[0] for feed in slot_feeds] == [
            f"slot {n}" for n in range(SLOTS)
        ]
        assert watch.aggregate_text().startswith(f"0 of {SLOTS} slots busy")
        await pilot.press("q")
