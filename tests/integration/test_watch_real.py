"""`spectui watch` against real llama-servers: the busy slot of a client outside spectui, window
deltas equal to /metrics, and clear lines when /metrics or /slots are off."""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from helpers.cli import spectui
from helpers.wait import wait_until
from spectui.core.proxy.watch import ServerWatcher, SpecCounters

from .outside import outside_server, wait_healthy
from .proxy_helpers import delta, server_metrics

pytestmark = pytest.mark.server

PROMPT = "Count: 1, 2, 3, 4, 5, 6, 7, 8, 1, 2, 3, 4, 5, 6, 7, 8, 1, 2, 3, 4, 5, 6, 7, 8, 1,"


@pytest.fixture(scope="module")
def upstream(llama_binary: Path, gemma_model: Path) -> Iterator[str]:
    # (--context-shift: a generation without n_predict goes on past the context until cancelled.)
    args = ("--spec-type", "ngram-mod", "--spec-ngram-mod-n-min", "4",
            "--spec-ngram-mod-n-match", "8", "--parallel", "2", "--metrics",
            "--context-shift")  # fmt: skip
    with outside_server(llama_binary, gemma_model, *args) as (url, _pid):
        wait_healthy(url, 120)
        yield url


@contextlib.contextmanager
def generating(url: str) -> Iterator[None]:
    """A streamed request from outside spectui, in a thread, decoding from the moment the block
    starts until it ends, however fast or slow this machine is: the generation has no end of its
    own (no n_predict, EOS ignored, the context shifted), so it is busy until it is cancelled."""
    stop = threading.Event()

    def client() -> None:
        body = {"prompt": PROMPT, "n_predict": -1, "ignore_eos": True, "stream": True,
                "temperature": 0}  # fmt: skip
        with httpx.stream("POST", url + "/completion", json=body, timeout=600) as response:
            for _ in response.iter_lines():
                if stop.is_set():
                    return  # (closing the response cancels the generation)

    thread = threading.Thread(target=client, daemon=True)
    thread.start()
    try:
        wait_until(
            lambda: any(
                s["is_processing"] and s.get("next_token") and s["next_token"][0]["n_decoded"] > 0
                for s in httpx.get(url + "/slots", timeout=60).json()
            ),
            "the generation started",
            give_up_s=600,
        )
        yield
    finally:
        stop.set()
        thread.join(60)


async def test_window_deltas_equal_metrics(upstream: str) -> None:
    watcher = ServerWatcher(upstream)
    try:
        before = await server_metrics(upstream)
        await watcher.poll()
        async with httpx.AsyncClient(timeout=120) as http:
            body = {"prompt": PROMPT, "n_predict": 64, "temperature": 0}
            assert (await http.post(upstream + "/completion", json=body)).is_success
        view = await watcher.poll()
        after = await server_metrics(upstream)
    finally:
        await watcher.aclose()
    steps, drafted, accepted, histogram = delta(before, after)
    assert view.spec_window == SpecCounters(
        steps=steps, drafted=drafted, accepted=accepted, accepted_per_position=histogram
    )
    assert view.spec_total == SpecCounters.of(after)
    assert steps > 0, "the counting prompt should draft"


def test_once_json_shows_the_busy_slot(upstream: str) -> None:
    with generating(upstream):
        before = SpecCounters.of(_metrics(upstream))
        result = spectui("watch", "--url", upstream, "--once", "--json", "--interval", "2")
        after = SpecCounters.of(_metrics(upstream))
    assert result.returncode == 0, result.stderr
    view = json.loads(result.stdout)
    busy = [s for s in view["slots"] if s["busy"]]
    assert len(busy) == 1 and busy[0]["decoded"] > 0
    # Measured over the interval, the same task in both polls. (Not asserted > 0: a busy machine
    # may take longer than the interval to verify one batch of 64 drafted tokens.)
    assert busy[0]["tokens_per_second"] is not None and busy[0]["tokens_per_second"] >= 0
    assert len(view["slots"]) == 2
    # The totals as /metrics had them while watch read them (between the readings either side).
    total = SpecCounters.model_validate(view["spec_total"])
    for name in ("steps", "drafted", "accepted"):
        assert getattr(before, name) <= getattr(total, name) <= getattr(after, name), name
    positions = zip(before.accepted_per_position, total.accepted_per_position,
                    after.accepted_per_position, strict=True)  # fmt: skip
    assert all(low <= seen <= high for low, seen, high in positions)
    assert view["rss_bytes"] and view["rss_bytes"] > 50 * 2**20  # the server runs here


def _metrics(url: str):
    from spectui.core.llama.protocol import ServerMetrics

    return ServerMetrics.parse(httpx.get(url + "/metrics").text)


def test_metrics_and_slots_off_are_clear_lines(llama_binary: Path, gemma_model: Path) -> None:
    with outside_server(llama_binary, gemma_model, "--no-slots") as (url, _pid):
        wait_healthy(url, 120)
        result = spectui("watch", "--url", url, "--once", "--interval", "0.2")
    assert result.returncode == 0, result.stderr
    assert "--metrics" in result.stdout and "--no-slots" in result.stdout
    assert "Traceback" not in result.stderr


def test_bad_input_is_one_clear_line() -> None:
    # (HOST:PORT alone is fine: http:// is assumed, as everywhere --url is taken.)
    for url in ("ftp://localhost:8080", "http://127.0.0.1:99999"):
        result = spectui("watch", "--url", url, "--once")
        assert result.returncode == 2 and "URL" in result.stderr, result.stderr
        assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr
    result = spectui("watch", "--url", "http://127.0.0.1:9", "--once", "--interval", "0.1")
    assert result.returncode == 1 and "cannot reach" in result.stdout


def test_several_servers(upstream: str) -> None:
    result = spectui(
        "watch", "--url", upstream, "--url", "http://127.0.0.1:9", "--once", "--json",
        "--interval", "0.2",
    )  # fmt: skip
    views = json.loads(result.stdout)
    assert [v["reachable"] for v in views] == [True, False]
    assert result.returncode == 1  # one of them could not be reached
    text = spectui("watch", "--url", upstream, "--url", upstream, "--once", "--interval", "0.2")
    assert text.returncode == 0 and text.stdout.count(upstream) == 2
