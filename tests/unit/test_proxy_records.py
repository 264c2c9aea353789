"""What the proxy reports about a request: the JSON line, the recorded workload and sessions,
and memory that stays bounded however many requests pass."""

from __future__ import annotations

import json
from pathlib import Path

from spectui.commands.proxy import request_record
from spectui.commands.stream import summary_record
from spectui.core.compare.prompt_files import load_prompt_file
from spectui.core.engine.base import ServerInfo
from spectui.core.events import SummaryEvent
from spectui.core.proxy.chunks import PreparedBody
from spectui.core.proxy.hub import RECENT_REQUESTS, ProxyHub, numbers_only
from spectui.core.proxy.models import NO_DETAIL, EndpointKind, RequestStatus
from spectui.core.proxy.record import WORKLOAD, WorkloadRecorder
from spectui.core.sessions.file import read_session
from spectui.core.sessions.replay import recompute

NATIVE = EndpointKind.NATIVE
FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


def feed(hub: ProxyHub, capture: str, body: PreparedBody, kind: EndpointKind, path: str):
    live = hub.start(path, kind, "127.0.0.1:5000", body)
    assert live.attribution is not None
    for n, line in enumerate((FIXTURES / capture).read_bytes().splitlines(keepends=True)):
        live.attribution.line(line, 0.01 * n)
    return live, hub.finish(live, status=RequestStatus.DONE, http_status=200)


def streamed(
    prompt: str | None = None, messages: list[dict[str, object]] | None = None
) -> PreparedBody:
    return PreparedBody(
        upstream=b"", streamed=True, strip=True, prompt=prompt, messages=messages,
        sampling={"temperature": 0, "seed": 3}, n_predict=120,
    )  # fmt: skip


def test_request_record_has_the_stream_summary_fields() -> None:
    hub = ProxyHub()
    _live, record = feed(
        hub, "completion-ngram-simple-2.sse", streamed("def"), EndpointKind.NATIVE, "/completion"
    )
    line = request_record(record)
    assert record.metrics is not None
    expected = summary_record(SummaryEvent(metrics=record.metrics))
    assert set(expected) - {"type"} <= set(line)
    assert line["type"] == "request" and line["id"] == 1 and line["endpoint"] == "/completion"
    assert line["client"] == "127.0.0.1:5000" and line["detail"] is None
    assert line["steps"] == 20 and line["mean_acceptance_length"] == 1 + 46 / 20
    json.dumps(line)


def test_request_without_detail_says_so_and_guesses_nothing() -> None:
    hub = ProxyHub()
    body = PreparedBody(upstream=b"", streamed=False, strip=False, prompt="x")
    live = hub.start("/completion", EndpointKind.NATIVE, "c", body)
    record = hub.finish(live, status=RequestStatus.DONE, http_status=200)
    line = request_record(record)
    assert line["detail"] == NO_DETAIL and not line["per_token"]
    assert line["steps"] is None and line["accepted_per_position"] is None
    assert line["ttft_ms"] is None and line["mean_acceptance_length"] is None


def test_memory_is_bounded_over_10000_requests() -> None:
    hub = ProxyHub(keep_events=True)
    for _ in range(10_000):
        live = hub.start("/completion", EndpointKind.NATIVE, "c", streamed("p"))
        assert live.attribution is not None
        live.attribution.line(b'data: {"content":"a","tokens_predicted":1,"timings":{}}\n', 0.1)
        hub.finish(live, status=RequestStatus.DONE, http_status=200)
    assert len(hub.recent) == RECENT_REQUESTS and not hub.live


def test_record_writes_sessions_and_a_workload_compare_reads(tmp_path: Path) -> None:
    hub = ProxyHub(keep_events=True)
    info = ServerInfo(mode="attached", url="http://127.0.0.1:8080")
    recorder = WorkloadRecorder(tmp_path / "rec", info, secrets=["sk-secret"])
    hub.listeners.append(recorder)
    _live, record = feed(
        hub, "completion-ngram-simple-2.sse", streamed("def add(): # sk-secret"),
        EndpointKind.NATIVE, "/completion",
    )  # fmt: skip
    messages: list[dict[str, object]] = [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "Repeat: a b c"},
    ]
    feed(hub, "chat-ngram-simple.sse", streamed(messages=messages), EndpointKind.OAI_CHAT,
         "/v1/chat/completions")  # fmt: skip
    workload = tmp_path / "rec" / WORKLOAD
    lines = [json.loads(line) for line in workload.read_text().splitlines()]
    assert [line["text"] for line in lines] == ["def add(): # [redacted]", "Repeat: a b c"]
    assert lines[1]["messages"] == messages and lines[0]["sampling"] == {
        "temperature": 0,
        "seed": 3,
    }
    prompts = load_prompt_file(workload, None)
    assert [p.text for p in prompts] == [lines[0]["text"], "Repeat: a b c"]
    assert prompts[0].n_predict == 120
    assert len(recorder.paths) == 2
    session = read_session(recorder.paths[0])
    assert session.problem is None
    replayed = recompute(session).summary
    assert record.metrics is not None
    assert replayed.metrics.steps == record.metrics.steps == 20
    assert replayed.metrics.accepted_per_position == record.metrics.accepted_per_position
    assert "sk-secret" not in recorder.paths[0].read_text()
    assert oct(workload.stat().st_mode & 0o777) == "0o600"
    assert session.header.request.chat is False
    assert read_session(recorder.paths[1]).header.request.chat is True


def test_workload_keeps_arrival_order_and_times_when_requests_end_out_of_order(
    tmp_path: Path,
) -> None:
    arrivals = [10.0, 10.5, 12.25]
    hub = ProxyHub(clock=lambda: arrivals.pop(0) if arrivals else 20.0)
    recorder = WorkloadRecorder(tmp_path / "rec", ServerInfo(mode="attached", url="http://x"))
    hub.listeners.append(recorder)
    first = hub.start("/completion", EndpointKind.NATIVE, "c", streamed("first"))
    second = hub.start("/v1/completions", EndpointKind.OAI_COMPLETION, "c", streamed("second"))
    body = PreparedBody(upstream=b"", streamed=False, strip=False, prompt="third")
    third = hub.start("/completion", EndpointKind.NATIVE, "c", body)
    workload = tmp_path / "rec" / WORKLOAD
    hub.finish(third, status=RequestStatus.DONE, http_status=200)
    hub.finish(second, status=RequestStatus.DONE, http_status=200)
    assert not workload.exists()  # both wait for the first, which arrived before them
    hub.finish(first, status=RequestStatus.CANCELLED, http_status=200)
    lines = [json.loads(line) for line in workload.read_text().splitlines()]
    assert [line["text"] for line in lines] == ["first", "second", "third"]
    assert [line["arrival_s"] for line in lines] == [0.0, 0.5, 2.25]
    assert [line["stream"] for line in lines] == [True, True, False]
    assert lines[1]["endpoint"] == "/v1/completions"
    assert [p.text for p in load_prompt_file(workload, None)] == ["first", "second", "third"]


def test_request_record_names_its_content_class_and_prompt_length() -> None:
    hub = ProxyHub()
    prompt = "def add(a, b):\n    return a + b\n"
    path = "/completion"
    _live, record = feed(hub, "completion-ngram-simple-2.sse", streamed(prompt), NATIVE, path)
    line = request_record(record)
    assert line["content"] == "code"
    assert line["prompt_length"] == "<128"
    stripped = numbers_only(record)
    assert stripped.content is record.content  # kept when the texts are dropped
