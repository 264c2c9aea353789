"""The token panes' incremental wrap (`WrappedLines`): a batch's lines that fit are kept as they
are and only the others go through `Text.wrap`; the lines come out as wrapping every batch's
open line with `Text.wrap` made them (a property over batches of styled tokens: newlines,
tabs, wide and zero-width characters, lines longer than the pane)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from rich.cells import cell_len
from rich.console import Console
from rich.style import Style
from rich.text import Text

from spectui.ui.widgets.tokens import WrappedLines

CONSOLE = Console(width=80)
LOOKS = [Style(color="red"), Style(color="green", underline=True), Style.null()]


class RichWrapped:
    """The reference: every batch's open line wrapped whole by `Text.wrap`."""

    def __init__(self, width: int) -> None:
        self.width = width
        self.lines: list[Text] = []
        self.open = Text()

    def append(self, text: Text) -> None:
        self.open.append_text(text)
        plain = self.open.plain
        if "\n" not in plain and cell_len(plain) <= self.width:
            return
        wrapped = self.open.wrap(CONSOLE, self.width, overflow="fold")
        self.lines.extend(wrapped[:-1])
        self.open = wrapped[-1] if len(wrapped) else Text()


def shape(line: Text) -> tuple[str, list[tuple[int, int, str]], str]:
    return line.plain, [(s.start, s.end, str(s.style)) for s in line.spans], str(line.style)


PIECES = st.sampled_from(
    ["w", "word ", " ", "  ", "\n", "\n\n", "\t", "x\ty", "漢字", "e\u0301", "long" * 9, ")"]
)


@given(
    st.integers(1, 30),
    st.lists(st.lists(st.tuples(PIECES, st.sampled_from(LOOKS)), max_size=12), max_size=12),
)
def test_batches_wrap_as_text_wrap_wraps_them(
    width: int, batches: list[list[tuple[str, Style]]]
) -> None:
    lines = WrappedLines(CONSOLE, width)
    reference = RichWrapped(width)
    for batch in batches:
        text = Text()
        for piece, look in batch:
            text.append(piece, look)
        lines.append(text.copy())
        reference.append(text.copy())
        assert [shape(line) for line in lines.lines] == [shape(line) for line in reference.lines]
        assert shape(lines.open) == shape(reference.open)
