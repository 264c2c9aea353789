"""Headless output: throttled flushes that still deliver every token promptly, closed pipes."""

from __future__ import annotations

import asyncio
import io
import os

import pytest

from helpers.wait import await_until
from spectui.commands.output import OutputClosed, ThrottledOutput


class CountingOut(io.StringIO):
    def __init__(self) -> None:
        super().__init__()
        self.flushes: list[str] = []

    def flush(self) -> None:
        self.flushes.append(self.getvalue())


async def test_a_burst_is_flushed_once_and_the_tail_by_the_timer() -> None:
    out = CountingOut()
    # (an interval no stall between two lines below could outlast on a loaded machine)
    writer = ThrottledOutput(out, interval=0.5)
    for token in ["a", "b", "c", "d"]:
        writer.write(token)
    assert out.flushes == ["a"]  # the first write flushes at once, the rest wait
    await await_until(lambda: len(out.flushes) > 1, "the timer flushed")
    assert out.flushes == ["a", "abcd"]  # the timer delivered the tail without another write
    loop = asyncio.get_running_loop()
    await await_until(
        lambda: loop.time() >= writer._last_flush + writer.interval, "an interval since the flush"
    )
    writer.write("e")  # an interval after the last flush: at once again
    assert out.flushes[-1] == "abcde"


async def test_flush_at_the_end_cancels_the_timer() -> None:
    out = CountingOut()
    writer = ThrottledOutput(out, interval=10.0)
    writer.write("a")
    writer.write("b")
    writer.flush()
    assert out.flushes == ["a", "ab"]
    assert writer._timer is None


class ClosedPipe(io.StringIO):
    def __init__(self, fd: int) -> None:
        super().__init__()
        self.fd = fd

    def fileno(self) -> int:
        return self.fd

    def flush(self) -> None:
        raise BrokenPipeError


async def test_a_closed_pipe_is_noted_and_the_next_write_raises() -> None:
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader has gone
    try:
        writer = ThrottledOutput(ClosedPipe(write_end))
        writer.write("a")  # the flush finds the reader gone; never raises from a flush
        assert writer.closed
        with pytest.raises(OutputClosed):
            writer.write("b")
        writer.flush()  # still silent
        # The descriptor now points at /dev/null: Python's final flush at exit cannot fail.
        os.write(write_end, b"x")
    finally:
        os.close(write_end)


async def test_text_writer_marks_drafts_and_unknown_origins_apart() -> None:
    import io

    from spectui.commands.output import ThrottledOutput
    from spectui.commands.stream import TextWriter
    from spectui.core.events import TokenEvent, TokenOrigin

    target, draft, unknown = TokenOrigin.TARGET, TokenOrigin.DRAFT, TokenOrigin.UNKNOWN
    tokens = [("a", target), ("b", draft), ("c", draft), ("d", unknown), ("e", target)]
    for colour, expected in [
        (False, "a[bc]{d}e\n"),
        (True, "a\x1b[1;4;32mbc\x1b[0m\x1b[3md\x1b[0me\n"),
    ]:
        buffer = io.StringIO()
        writer = TextWriter(ThrottledOutput(buffer), colour=colour)
        for index, (text, origin) in enumerate(tokens):
            writer.token(TokenEvent(index=index, text=text, origin=origin))
        writer.finish()
        assert buffer.getvalue() == expected
