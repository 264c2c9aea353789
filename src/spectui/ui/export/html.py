"""The transcript as one self-contained HTML page (inline styles, no script, nothing fetched)."""

from __future__ import annotations

from html import escape

from rich.terminal_theme import DEFAULT_TERMINAL_THEME, TerminalTheme

from spectui.core.sessions.file import Session
from spectui.ui.export.ansi import WIDTH
from spectui.ui.export.palette import Palette
from spectui.ui.export.transcript import Transcript, Wording, console

_HTML_PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>{title}</title>
<style>
{{stylesheet}}
body {{{{ color: {{foreground}}; background-color: {{background}}; margin: 1.5em; }}}}
pre {{{{ white-space: pre-wrap; font-family: Menlo, 'DejaVu Sans Mono', Consolas, monospace; }}}}
</style>
</head>
<body>
<pre><code>{{code}}</code></pre>
</body>
</html>
"""
"""The page, formatted twice: here with the title, then by rich with its own fields."""


def to_html(session: Session, palette: Palette, wording: Wording, width: int = WIDTH) -> str:
    """A self-contained HTML page of the transcript."""
    out = console(width, record=True)
    out.print(Transcript.of(session, palette, wording).text())
    ansi = DEFAULT_TERMINAL_THEME.ansi_colors
    theme = TerminalTheme(
        _rgb(palette.background),
        _rgb(palette.foreground),
        [tuple(ansi[i]) for i in range(8)],  # type: ignore[misc]
        [tuple(ansi[i]) for i in range(8, 16)],  # type: ignore[misc]
    )
    # Braces in the title would read as fields when rich formats the page a second time.
    title = escape(session.header.title).replace("{", "{{").replace("}", "}}")
    page = _HTML_PAGE.format(title=title)
    return out.export_html(theme=theme, code_format=page, inline_styles=True)


def _rgb(hex_colour: str) -> tuple[int, int, int]:
    value = hex_colour.lstrip("#")[:6]
    return int(value[0:2], 16), int(value[2:4], 16), int(value[4:6], 16)
