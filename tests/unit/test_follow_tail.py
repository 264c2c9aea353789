"""The follower's file tail: only new bytes, whole lines, a partial last line kept until its
newline, however the writer's bytes are cut; and which files of a folder it takes for sessions."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers.engines import record_capture
from spectui.core.sessions.tail import (
    FollowState,
    LineTail,
    SessionFollower,
    looks_like_session,
)


@settings(max_examples=60, deadline=None)
@given(
    lines=st.lists(st.binary(min_size=0, max_size=40).map(lambda b: b.replace(b"\n", b"")),
                   max_size=12),
    cuts=st.lists(st.integers(min_value=0, max_value=600), max_size=10),
)  # fmt: skip
def test_lines_come_whole_however_the_bytes_are_cut(
    tmp_path_factory: pytest.TempPathFactory, lines: list[bytes], cuts: list[int]
) -> None:
    folder = tmp_path_factory.mktemp("tail")
    path = folder / "f.jsonl"
    data = b"".join(line + b"\n" for line in lines)
    path.write_bytes(b"")
    tail = LineTail(path)
    got: list[bytes] = []
    written = 0
    for cut in sorted({min(c, len(data)) for c in cuts} | {len(data)}):
        with path.open("ab") as file:
            file.write(data[written:cut])
        written = cut
        got += tail.read()
        assert tail.partial == data[:cut].rsplit(b"\n", 1)[-1]
    assert got == lines
    assert tail.read() == []
    tail.close()


def test_only_new_bytes_are_read_and_a_truncated_file_starts_again(tmp_path: Path) -> None:
    path = tmp_path / "f.jsonl"
    path.write_bytes(b"one\ntw")
    tail = LineTail(path)
    assert tail.read() == [b"one"]
    assert tail.partial == b"tw"
    with path.open("ab") as file:
        file.write(b"o\nthree\n")
    assert tail.read() == [b"two", b"three"]
    assert tail.lines == 3
    path.write_bytes(b"new\n")  # rewritten shorter: from its first byte again
    assert tail.read() == [b"new"]
    tail.close()


async def test_what_counts_as_a_session_file(tmp_path: Path) -> None:
    session = tmp_path / "a.jsonl"
    await record_capture(session)
    assert looks_like_session(session) is True
    (tmp_path / "workload.jsonl").write_text('{"key": "r1", "text": "x"}\n')
    assert looks_like_session(tmp_path / "workload.jsonl") is False
    (tmp_path / "empty.jsonl").write_bytes(b"")
    assert looks_like_session(tmp_path / "empty.jsonl") is None  # still being written
    (tmp_path / "begun.jsonl").write_bytes(b'{"type":"he')
    assert looks_like_session(tmp_path / "begun.jsonl") is None


async def test_a_follower_of_one_file_reads_it_to_its_summary(tmp_path: Path) -> None:
    session = tmp_path / "a.jsonl"
    events = await record_capture(session)
    states: list[FollowState] = []
    follower = SessionFollower(session, on_state=states.append, poll_s=0.001)
    runs = [run async for run in follower.runs()]
    assert len(runs) == 1
    got = [event async for event in runs[0].events()]
    # What was written before the summary, in order (the engine's closing state event after it
    # is not part of the run).
    assert got == events[: len(got)]
    assert got[-1].type == "summary"
    assert states == [FollowState.LIVE, FollowState.FINISHED]
