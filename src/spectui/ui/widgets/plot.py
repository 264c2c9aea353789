"""A plotext plot that turns plotext's output into text cheaply.

`textual_plotext.PlotextPlot` builds the figure as a string of ANSI escape codes and decodes it
with `rich.text.Text.from_ansi`, which parses every escape sequence anew: ~40 % of a redraw of the
tokens/s chart (~3 ms of ~7), the largest single cost of watching a run once the tokens are
batched. A plotext canvas repeats a handful of colour sequences, each run of cells reset at its
end, so `ansi_text` decodes each distinct sequence once (with rich's own decoder, so the styles
are the very same) and splits the rest with one regular expression. The result equals
`Text.from_ansi`'s, span for span (tests/ui/test_ui_parts.py checks it on a real figure).

`LeanPlotextPlot.render` re-does `PlotextPlot.render`, which calls a private method of
textual-plotext and one of plotext, so it draws its way only behind its gate (`LEAN_PLOT`: the
tested versions of both, the names there, `SPECTUI_STOCK` not set); otherwise it is
textual-plotext's own render. bench/overrides.py: a redraw of the tokens/s plot in place costs
textual-plotext's way 1.20x this one's (4.78 against 3.98 ms; bench/results/overrides.json).
"""

from __future__ import annotations

import inspect
import re
from functools import lru_cache

from rich.ansi import AnsiDecoder
from rich.style import Style
from rich.text import Text
from textual.app import RenderResult
from textual_plotext import Plot, PlotextPlot

from spectui.core.overrides import Override, enabled

LEAN_PLOT = Override(
    name="lean-plot",
    library="textual-plotext",
    tested_version="1.0.1",
    requires={"plotext": "5.3.2"},
)
"""`LeanPlotextPlot.render`: textual-plotext's `_get_plotext_theme_name`, plotext's `_set_size`."""

_SGR = re.compile(r"\x1b\[([0-9;]*)m")
"""Select Graphic Rendition: the only escape sequences plotext writes."""


@lru_cache(maxsize=256)
def _style_after(sequences: tuple[str, ...]) -> Style | None:
    """The style a run of SGR sequences sets, from no style (as rich decodes it)."""
    decoder = AnsiDecoder()
    decoded = decoder.decode_line("".join(f"\x1b[{codes}m" for codes in sequences) + "x")
    return decoded.spans[0].style if decoded.spans else None  # type: ignore[return-value]


def ansi_text(canvas: str) -> Text:
    """``Text.from_ansi(canvas)`` for text whose only escape sequences are SGR ones."""
    if "\x1b" in _SGR.sub("", canvas) or "\r" in canvas:
        return Text.from_ansi(canvas)  # (anything else: rich's own decoder)
    lines: list[Text] = []
    sequences: tuple[str, ...] = ()  # since the last reset: the decoder's state carries over
    for line in canvas.split("\n"):
        text = Text()
        parts = _SGR.split(line)  # plain, codes, plain, codes, …, plain
        for index, part in enumerate(parts):
            if index % 2:
                # The sequences since the last plain reset, decoded from no style, give the
                # decoder's running style (a reset inside a sequence is decoded as such).
                sequences = () if part in ("", "0") else (*sequences, part)
            elif part:
                text.append(part, _style_after(sequences) if sequences else None)
        lines.append(text)
    joiner = Text("\n", tab_size=8)  # (what `Text.from_ansi` joins its lines with)
    return joiner.join(lines)


def _internals_present() -> bool:
    """Whether textual-plotext and plotext have the private methods `render` calls."""
    theme_name = inspect.signature(PlotextPlot._get_plotext_theme_name).parameters
    set_size = inspect.signature(Plot._set_size).parameters
    expected_size = ["self", "width", "height"]
    return list(theme_name) == ["self", "app_theme_name"] and list(set_size) == expected_size


def lean_plot_enabled() -> bool:
    """Whether plots decode their figure through `ansi_text` in this process (decided once)."""
    return enabled(LEAN_PLOT, _internals_present)


class LeanPlotextPlot(PlotextPlot):
    """`PlotextPlot`, drawn through `ansi_text` instead of `Text.from_ansi`."""

    def render(self) -> RenderResult:
        # As `PlotextPlot.render` (textual-plotext 1.0.1), but for the decoding.
        if not lean_plot_enabled():
            return super().render()
        plot = self.plt
        width, height = self.size
        plot.plotsize(width, height)
        plot._set_size(width, height)  # (as the original: plotsize alone misses resizes)
        plot.theme(self._get_plotext_theme_name(self.app.theme))
        return ansi_text(plot.build())
