"""Session files: what is written, that secrets are not, and how damaged files are read."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers.engines import REQUEST, CaptureEngine, record_capture
from spectui.app_setup import launch_flags, recorder, recorder_for
from spectui.config import Settings
from spectui.core.events import (
    EventStream,
    SummaryEvent,
    TokenEvent,
    TokenOrigin,
    engine_event_adapter,
)
from spectui.core.request import GenerationRequest
from spectui.core.sessions.file import (
    SCHEMA_VERSION,
    SessionError,
    SessionHeader,
    SessionWriter,
    read_session,
    redact_flags,
)
from spectui.core.sessions.recording import (
    RecordingEngine,
    header_for,
    recorded,
    recording_notes,
)


async def test_recording_passes_every_event_through_and_writes_it(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    seen = await record_capture(path)
    lines = path.read_text().splitlines()
    header = json.loads(lines[0])
    assert header["type"] == "header"
    assert header["schema_version"] == SCHEMA_VERSION
    assert header["request"]["prompt"] == REQUEST.prompt
    assert header["request"]["n_predict"] == REQUEST.n_predict
    assert header["server"]["binary_version"] == "b9999"
    assert header["server"]["spec"]["types"] == ["ngram-simple"]
    written = [engine_event_adapter.validate_json(line) for line in lines[1:]]
    assert written == seen
    kinds = {event.type for event in written}
    assert {"server_state", "token", "step", "memory", "metrics", "summary"} <= kinds
    assert all(isinstance(e.t, float) for e in written)


async def test_session_reads_back_with_header_and_summary(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    seen = await record_capture(path)
    session = read_session(path)
    assert session.problem is None
    assert session.events == seen
    assert session.header.request == REQUEST
    assert isinstance(session.summary, SummaryEvent)
    assert session.summary.metrics.tokens == 120


class LeakyEngine(CaptureEngine):
    """Emits a token holding the key, as a model might echo it back."""

    def __init__(self, key: str) -> None:
        super().__init__()
        self.key = key

    async def run(self, request: GenerationRequest) -> EventStream:
        yield TokenEvent(index=0, text=f"the key is {self.key}", origin=TokenOrigin.TARGET)
        async for event in super().run(request):
            yield event


async def test_api_key_never_reaches_the_file(tmp_path: Path) -> None:
    key = "sk-very-secret-42"
    settings = Settings(api_key=key, url="http://127.0.0.1:9", server_args=["--api-key", key])
    engine = recorder(LeakyEngine(key), settings, path=tmp_path / "k.jsonl")
    async for _ in engine.run(REQUEST):
        pass
    text = (tmp_path / "k.jsonl").read_text()
    assert key not in text
    assert "hunter2" not in text  # the URL's password
    assert "token=abc" not in text
    assert "[redacted]" in text


def test_secret_flags_are_masked_in_every_spelling() -> None:
    flags = ["--api-key", "k1", "--api-key=k2", "--hf-token", "k3", "--ctx-size", "512"]
    masked = redact_flags(flags)
    assert not {"k1", "k3"} & set(masked)
    assert "--api-key=k2" not in masked
    assert masked[-2:] == ["--ctx-size", "512"]


def test_writer_masks_secrets_inside_any_line(tmp_path: Path) -> None:
    header = header_for(CaptureEngine().info, REQUEST)
    writer = SessionWriter.open(tmp_path / "s.jsonl", header, secrets=['p"w'])
    writer.write(TokenEvent(index=0, text='x p"w y', origin="target"))
    writer.close()
    text = (tmp_path / "s.jsonl").read_text()
    assert 'p\\"w' not in text
    first = read_session(tmp_path / "s.jsonl").events[0]
    assert isinstance(first, TokenEvent) and first.text == "x [redacted] y"


async def test_truncated_file_keeps_everything_before_the_damage(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    seen = await record_capture(path)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])  # cut mid-line, as a crash would
    session = read_session(path)
    assert session.problem is not None
    assert "cut off" in session.problem
    line = len(session.events) + 2
    assert f"line {line}" in session.problem
    assert session.events == seen[: len(session.events)]
    assert session.summary is None


async def test_corrupt_line_stops_reading_there(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    await record_capture(path)
    lines = path.read_text().splitlines(keepends=True)
    lines[10] = '{"type": "token", "index": "not a number"}\n'
    path.write_text("".join(lines))
    session = read_session(path)
    assert len(session.events) == 9
    assert session.problem is not None and "line 11" in session.problem


async def test_unknown_event_types_are_skipped(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    seen = await record_capture(path)
    lines = path.read_text().splitlines(keepends=True)
    lines.insert(3, '{"type": "from-the-future", "t": 0.5}\n')
    path.write_text("".join(lines))
    session = read_session(path)
    assert session.problem is None
    assert session.skipped == 1
    assert session.events == seen


def test_unknown_schema_version_is_named(tmp_path: Path) -> None:
    path = tmp_path / "future.jsonl"
    header = SessionHeader(request=REQUEST).model_dump(mode="json")
    header["schema_version"] = 99
    path.write_text(json.dumps(header) + "\n")
    with pytest.raises(SessionError, match="schema version 99") as caught:
        read_session(path)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize("content", ["", "hello\n", '{"type": "token"}\n', "[1, 2]\n"])
def test_not_a_session_file(tmp_path: Path, content: str) -> None:
    path = tmp_path / "x.jsonl"
    path.write_text(content)
    with pytest.raises(SessionError, match="not a spectui session file"):
        read_session(path)


def test_missing_file_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(SessionError, match="not found"):
        read_session(tmp_path / "nope.jsonl")


async def test_recorded_closes_the_source_when_the_consumer_stops(tmp_path: Path) -> None:
    closed: list[bool] = []

    async def source() -> EventStream:
        try:
            for index in range(100):
                yield TokenEvent(index=index, text="x", origin="target", t=index / 10)
        finally:
            closed.append(True)

    header = header_for(CaptureEngine().info, REQUEST)
    writer = SessionWriter.open(tmp_path / "s.jsonl", header)
    stream = recorded(source(), writer)
    async for event in stream:
        if isinstance(event, TokenEvent) and event.index == 4:
            break
    await stream.aclose()
    assert closed == [True]
    assert not writer.active
    assert len(read_session(tmp_path / "s.jsonl").events) == 5


async def test_recording_engine_switch_and_file_names(tmp_path: Path) -> None:
    engine = RecordingEngine(CaptureEngine(), sessions_dir=tmp_path / "sessions", recording=False)
    async for _ in engine.run(REQUEST):
        pass
    assert engine.paths == []
    assert engine.toggle_recording() is True
    for _ in range(2):
        async for _ in engine.run(REQUEST):
            assert engine.writing is not None
    assert engine.writing is None
    assert len(engine.paths) == 2
    assert len(set(engine.paths)) == 2
    assert all(p.parent == tmp_path / "sessions" and p.suffix == ".jsonl" for p in engine.paths)
    assert "custom-ngram-simple" in engine.paths[0].name


async def test_stopping_recording_mid_run_ends_the_file(tmp_path: Path) -> None:
    engine = RecordingEngine(CaptureEngine(), sessions_dir=tmp_path, path=tmp_path / "a.jsonl")
    count = 0
    async for _ in engine.run(REQUEST):
        count += 1
        if count == 20:
            engine.set_recording(False)
    session = read_session(tmp_path / "a.jsonl")
    assert len(session.events) == 20
    assert session.summary is None


async def test_unwritable_folder_does_not_stop_the_run(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    engine = RecordingEngine(CaptureEngine(), sessions_dir=blocker / "sub")
    events = [event async for event in engine.run(REQUEST)]
    assert isinstance(events[-2], SummaryEvent)
    assert engine.problem is not None and "cannot write session file" in engine.problem


def test_launch_flags_carry_ctx_size_and_extras_but_not_for_attach() -> None:
    assert launch_flags(Settings(ctx_size=512, server_args=["-t", "2"])) == [
        "--ctx-size",
        "512",
        "-t",
        "2",
    ]
    assert launch_flags(Settings(url="http://h:1")) == []


async def test_record_setting_writes_to_the_sessions_dir(tmp_path: Path) -> None:
    inner = CaptureEngine()
    assert recorder_for(inner, Settings()) is inner
    settings = Settings(record=True, sessions_dir=tmp_path / "sessions")
    engine = recorder_for(inner, settings)
    async for _ in engine.run(REQUEST):
        pass
    (path,) = (tmp_path / "sessions").iterdir()
    assert recording_notes(engine) == [f"recorded to {path}"]
    assert read_session(path).summary is not None
