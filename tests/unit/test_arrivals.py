"""Recorded arrival times: checked on load, and replayed open loop on a fake clock."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import given
from hypothesis import strategies as st

from spectui.core.compare.arrivals import ArrivalsError, check_arrivals, replay_open_loop


class FakeClock:
    """A clock only `sleep` moves: the schedule, not the machine, decides every time."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(0)  # what is ready runs at the start of the wait, as it would
        self.now += seconds


def test_older_recordings_have_no_arrivals() -> None:
    assert check_arrivals([None, None], "w.jsonl") is None


@pytest.mark.parametrize(
    ("offsets", "message"),
    [
        ([0.0, -1.0], "w.jsonl: entry 2 arrives at -1 s, before 0"),
        ([0.0, 2.0, 1.0], "entry 3 arrives at 1 s, before entry 2 (2 s): arrival times must be"),
        ([0.0, None], "w.jsonl: entry 2 has no arrival_s (others have)"),
    ],
)
def test_bad_arrivals_are_one_line(offsets: list[float | None], message: str) -> None:
    with pytest.raises(ArrivalsError, match=message.replace("(", r"\(").replace(")", r"\)")):
        check_arrivals(offsets, "w.jsonl")


async def test_requests_go_at_their_offsets_scaled_and_do_not_wait_for_each_other() -> None:
    clock = FakeClock()
    started: list[tuple[str, float]] = []
    release = asyncio.Event()

    async def send(key: str) -> str:
        started.append((key, clock() - 100.0))
        if key == "c":
            release.set()
        elif key == "a":
            await release.wait()  # the first request is still running when the others go
        return key.upper()

    sent = await replay_open_loop(
        ["a", "b", "c"], [0.0, 1.0, 3.0], send, speed=2.0, clock=clock, sleep=clock.sleep
    )
    assert [(s.index, s.due_s, s.sent_s, s.result) for s in sent] == [
        (0, 0.0, 0.0, "A"),
        (1, 0.5, 0.5, "B"),
        (2, 1.5, 1.5, "C"),
    ]
    assert started == [("a", 0.0), ("b", 0.5), ("c", 1.5)]


@given(st.lists(st.floats(min_value=0, max_value=1e4, allow_nan=False), max_size=20))
def test_sorted_non_negative_offsets_are_accepted_as_they_are(offsets: list[float]) -> None:
    offsets.sort()
    assert check_arrivals(offsets, "w") == (tuple(offsets) if offsets else None)


async def test_speed_must_be_positive() -> None:
    async def send(key: str) -> str:
        return key

    with pytest.raises(ArrivalsError, match="--speed must be above 0"):
        await replay_open_loop(["a"], [0.0], send, speed=0)
