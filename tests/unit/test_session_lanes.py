"""A follower's slots view reads several session files at once (`RecentSessions`): the newest
ones at the start, each one's lines as they are written (a partial line waits), files that are
no session passed over, a new run taking an idle lane, else the one that ended longest ago."""

from __future__ import annotations

from pathlib import Path

from helpers.engines import record_capture
from spectui.core.events import SummaryEvent, TokenEvent
from spectui.core.sessions.lanes import RecentSessions


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        self.t += 2.0  # (past the folder's rescan interval at every poll)
        return self.t


async def recorded(folder: Path, name: str, capture: str = "completion-ngram-simple.sse") -> Path:
    path = folder / f"{name}.jsonl"
    await record_capture(path, capture=capture)
    return path


async def test_the_newest_runs_take_the_lanes_and_others_are_passed_over(tmp_path: Path) -> None:
    source = tmp_path / "src"
    source.mkdir()
    folder = tmp_path / "live"
    folder.mkdir()
    (folder / "workload.jsonl").write_text('{"key": "r1", "text": "hi"}\n')  # no session
    for n in range(3):
        (folder / f"run{n}.jsonl").write_bytes((await recorded(source, f"run{n}")).read_bytes())
    lanes = RecentSessions(folder, 2, clock=Clock())
    runs = lanes.poll()
    assert [run.path.name if run else None for run in runs] == ["run1.jsonl", "run2.jsonl"]
    for run in runs:
        assert run is not None and run.ended and run.metrics is not None
        summary = next(e for e in run.events if isinstance(e, SummaryEvent))
        assert run.metrics == summary.metrics
    lanes.close()


async def test_a_growing_run_grows_in_its_lane_and_a_new_one_takes_an_ended_lane(
    tmp_path: Path,
) -> None:
    whole = (await recorded(tmp_path, "whole")).read_bytes()
    folder = tmp_path / "live"
    folder.mkdir()
    lanes = RecentSessions(folder, 2, clock=Clock())
    assert lanes.poll() == [None, None]
    growing = folder / "a.jsonl"
    cut = whole.index(b'"type":"token"') + 10  # the header and part of the first token's line
    growing.write_bytes(whole[:cut])
    first = lanes.poll()[0]

    def tokens() -> int:
        assert first is not None
        return sum(isinstance(e, TokenEvent) for e in first.events)

    assert first is not None and first.header is not None and tokens() == 0
    with growing.open("ab") as file:
        file.write(whole[cut : whole.index(b"\n", cut) + 1])  # that line completes
    lanes.poll()
    assert tokens() == 1 and not first.ended
    (folder / "b.jsonl").write_bytes(whole)
    assert [run.path.name if run else None for run in lanes.poll()] == ["a.jsonl", "b.jsonl"]
    (folder / "c.jsonl").write_bytes(whole)  # all lanes held: the ended one (b) gives way
    assert [run.path.name if run else None for run in lanes.poll()] == ["a.jsonl", "c.jsonl"]
    with growing.open("ab") as file:
        file.write(whole[whole.index(b"\n", cut) + 1 :])
    lanes.poll()
    assert first.ended
    lanes.close()
