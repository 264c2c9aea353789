"""A lane's wrapped answer (`LaneLines`): `tokens.WrappedLines`, with the open line wrapped in one
pass (`wrap_open`) where Rich's `Text.wrap` would split it at its newlines, then divide each part
at its breaks, a `Lines` and a binary search over the spans each time.

A slots-view lane is ~56 columns wide at 120×36 and takes ~10 tokens a batch, so nearly every
batch overflows its open line: that wrap was ~40 % of what appending to a lane cost
(bench/README.md, "slots view"). The breaks are Rich's own (`rich._wrap.divide_line`); the
lines are cut straight from the open line's text and spans, which a lane appends in order.
"""

from __future__ import annotations

from itertools import pairwise

from rich.cells import cell_len
from rich.text import Span, Text

from spectui.ui.widgets.tokens import WrappedLines

try:  # (Rich's own breaks, from a private module: without it, Rich wraps as before)
    from rich._wrap import divide_line
except ImportError:  # pragma: no cover
    divide_line = None  # type: ignore[assignment]


def wrap_open(line: Text, width: int) -> list[Text] | None:
    """``line.wrap(console, width, overflow="fold")``'s lines, as they draw; None where only
    Rich can say (tabs, a justification, ``no_wrap``, spans that overlap or are out of order)."""
    plain = line.plain
    if divide_line is None or "\t" in plain or line.no_wrap:
        return None
    if line.justify not in (None, "default"):
        return None
    spans = line.spans
    at = 0
    for span in spans:
        if span.start < at or span.end < span.start:
            return None
        at = span.end
    style, overflow = line.style, line.overflow
    lines: list[Text] = []
    first = 0  # (the first span that may still reach the next piece)
    count = len(spans)
    part_start = 0
    for part in plain.split("\n"):  # (as `Text.split(allow_blank=True)`: the newlines dropped)
        bounds = [0, *divide_line(part, width, fold=True), len(part)]
        for start, end in pairwise(bounds):
            start += part_start
            end += part_start
            piece = Text(plain[start:end], style=style, overflow=overflow)
            while first < count and spans[first].end <= start:
                first += 1
            index = first
            while index < count and spans[index].start < end:
                span = spans[index]
                clipped_end = min(span.end, end) - start
                clipped_start = max(0, span.start - start)
                if clipped_end > clipped_start:  # (as `Text.divide`: no empty spans)
                    piece.spans.append(Span(clipped_start, clipped_end, span.style))
                index += 1
            piece.rstrip_end(width)
            piece.truncate(width, overflow="fold")
            lines.append(piece)
        part_start += len(part) + 1
    return lines


class LaneLines(WrappedLines):
    """`WrappedLines` whose open line is wrapped by `wrap_open` (the same lines)."""

    def append(self, text: Text) -> None:
        self.open.append_text(text)
        plain = self.open.plain
        if "\n" not in plain and cell_len(plain) <= self.width:
            return
        wrapped = wrap_open(self.open, self.width)
        if wrapped is None:
            wrapped = list(self.open.wrap(self.console, self.width, overflow="fold"))
        self.lines.extend(wrapped[:-1])
        self.open = wrapped[-1] if wrapped else Text()
