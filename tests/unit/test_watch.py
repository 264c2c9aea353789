"""`spectui watch` without a server: the captures served by a mock transport."""

from __future__ import annotations

import json
from pathlib import Path

import httpx

from spectui.commands.watch import view_lines, view_record
from spectui.core.llama.protocol import ServerMetrics
from spectui.core.proxy.watch import METRICS_OFF, SLOTS_OFF, ServerWatcher, SpecCounters

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


class FakeServer:
    def __init__(self, slots: list[dict[str, object]] | int, metrics: str | int) -> None:
        self.slots = slots
        self.metrics = metrics

    def __call__(self, request: httpx.Request) -> httpx.Response:
        answer = self.slots if request.url.path == "/slots" else self.metrics
        if isinstance(answer, int):
            return httpx.Response(answer, json={"error": {"code": answer, "message": "off"}})
        if isinstance(answer, str):
            return httpx.Response(200, text=answer)
        return httpx.Response(200, json=answer)


def watcher(server: FakeServer, clock: list[float]) -> ServerWatcher:
    watch = ServerWatcher("http://127.0.0.1:8080", clock=lambda: clock[0])
    watch.client.http = httpx.AsyncClient(
        base_url="http://127.0.0.1:8080", transport=httpx.MockTransport(server)
    )
    watch._pid_checked = True  # no process lookup in unit tests
    return watch


async def test_slots_rates_and_window_deltas() -> None:
    slots = json.loads((FIXTURES / "slots-busy-parallel2.json").read_text())
    after = (FIXTURES / "metrics-after-3-requests.prom").read_text()
    before = "llamacpp:spec_decode_num_drafts_total 1\nllamacpp:prompt_tokens_total 2\n"
    server = FakeServer(slots, before)
    clock = [10.0]
    watch = watcher(server, clock)
    first = await watch.poll()
    assert first.interval_s is None and first.spec_window is None
    assert first.slots is not None and [s.busy for s in first.slots] == [False, True]
    assert first.slots[1].decoded == 98 and first.slots[1].task == 69
    slots[1]["next_token"][0]["n_decoded"] = 148
    server.metrics = after
    clock[0] = 10.5
    view = await watch.poll()
    assert view.interval_s == 0.5
    assert view.slots is not None and view.slots[1].tokens_per_second == 100.0
    assert view.slots[0].tokens_per_second is None  # idle
    assert view.generation_tokens_per_second == 100.0
    total = SpecCounters.of(ServerMetrics.parse(after))
    assert view.spec_total == total
    assert view.spec_window is not None and view.spec_window.steps == total.steps - 1
    assert view.spec_window.accepted_per_position == total.accepted_per_position
    assert view.prompt_tokens_per_second == (82 - 2) / 0.5
    assert view.spec_window.mean_acceptance_length == 1 + 164 / 2
    record = view_record(view)
    assert record["spec_total"]["acceptance_rate"] == 1.0  # type: ignore[index]  # a JSON object
    text = "\n".join(view_lines(view))
    assert "slot 1: busy task 69 · 148 tokens 100.0 tok/s" in text
    # A new task in the slot: no rate from the old task's count.
    slots[1]["id_task"] = 70
    clock[0] = 11.0
    polled = await watch.poll()
    assert polled.slots is not None and polled.slots[1].tokens_per_second is None
    await watch.aclose()


async def test_disabled_endpoints_are_clear_lines() -> None:
    watch = watcher(FakeServer(501, 501), [0.0])
    view = await watch.poll()
    assert view.slots is None and view.slots_note == SLOTS_OFF
    assert view.metrics_note == METRICS_OFF and "--metrics" in METRICS_OFF
    lines = view_lines(view)
    assert SLOTS_OFF in "\n".join(lines) and METRICS_OFF in "\n".join(lines)


async def test_unreachable_and_key() -> None:
    watch = watcher(FakeServer(401, 401), [0.0])
    view = await watch.poll()
    assert view.problem and "API key" in view.problem

    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=request)

    watch.client.http = httpx.AsyncClient(
        base_url="http://127.0.0.1:8080", transport=httpx.MockTransport(refuse)
    )
    view = await watch.poll()
    assert not view.reachable and view_lines(view) == [f"{view.url}: {view.problem}"]
