"""`spectui export`: a session's coloured transcript, legend and headline numbers as a file.

* ``svg``: Textual's screenshot of the full TUI after replaying the session headless.
* ``html``: one self-contained page (inline styles, no script, no external resource).
* ``ansi``: text with truecolor escapes, for ``cat`` in a terminal or a chat paste.
* ``cast``: an asciinema v2 recording that types the answer out with the run's real timing.

Colours come from the configured theme, like the TUI's; drafted tokens are also underlined so
an export reads in monochrome.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import sys
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.style import Style
from rich.terminal_theme import DEFAULT_TERMINAL_THEME, TerminalTheme
from rich.text import Text

from spectui.commands.options import CommandOptions
from spectui.commands.replay import load_sessions
from spectui.commands.stream import summary_line
from spectui.config import Settings
from spectui.core.errors import SpectuiError
from spectui.core.events import SummaryEvent, TokenEvent, TokenOrigin
from spectui.core.sessions.file import Session
from spectui.core.sessions.replay import recompute

FORMATS = {"svg": ".svg", "html": ".html", "ansi": ".ans", "cast": ".cast"}
"""Export formats and the suffix of their default output file."""

WIDTH = 100
"""Columns of the text exports (html, ansi, cast)."""

CAST_HEIGHT = 30
"""Rows of the asciinema terminal."""

REJECT_MARK = "✗"
"""As in the TUI: drawn before a target token that replaced rejected drafts."""

_SUPERSCRIPT = str.maketrans("0123456789", "⁰¹²³⁴⁵⁶⁷⁸⁹")

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


class ExportError(SpectuiError):
    """An export could not be written."""

    title = "Export failed"


def add_export_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register `spectui export`."""
    export = commands.add_parser(
        "export", help="write a session's coloured transcript as svg, html, ansi or cast"
    )
    export.add_argument("file", type=Path, metavar="FILE", help="session file")
    export.add_argument("--to", choices=sorted(FORMATS), required=True, help="output format")
    export.add_argument(
        "-o",
        "--output",
        type=Path,
        metavar="OUT",
        help="output file ('-' for stdout; default: FILE with the format's suffix)",
    )


@dataclass(frozen=True, slots=True)
class Palette:
    """The theme colours an export needs."""

    foreground: str
    background: str
    draft: Style
    target: Style
    rejected: Style

    @classmethod
    def for_theme(cls, name: str) -> Palette:
        """The colours of theme ``name`` (the default theme when it is unknown)."""
        from spectui.ui.themes import (
            DEFAULT_THEME,
            discover_themes,
            shipped_theme_dir,
            spec_variable_defaults,
            user_theme_dir,
        )

        themes = {t.name: t for t in discover_themes(shipped_theme_dir(), user_theme_dir())[0]}
        theme = themes.get(name) or themes[DEFAULT_THEME]
        base = theme.to_color_system().generate()
        colours = {**base, **spec_variable_defaults(theme), **theme.variables}
        return cls(
            foreground=base["foreground"],
            background=base["background"],
            draft=Style(
                color=colours["spec-accepted"],
                bgcolor=colours["spec-accepted-background"],
                underline=True,
            ),
            target=Style(color=colours["spec-target"]),
            rejected=Style(color=colours["spec-rejected"], bold=True),
        )

    def token(self, token: TokenEvent) -> Text:
        """One token as the TUI draws it, with the rejection mark before it."""
        text = Text()
        if token.rejected_before:
            mark = REJECT_MARK + str(token.rejected_before).translate(_SUPERSCRIPT)
            text.append(mark, self.rejected)
        style = self.draft if token.origin is TokenOrigin.DRAFT else self.target
        text.append(token.text, style)
        return text

    def legend(self) -> Text:
        """The legend line, drawn with the styles it explains."""
        text = Text()
        text.append("accepted draft", self.draft)
        text.append("  target", self.target)
        text.append("  " + REJECT_MARK + "ⁿ", self.rejected)
        text.append(" n drafts rejected")
        return text


def title_line(session: Session) -> Text:
    """What ran: prompt label, spec, model and binary."""
    header = session.header
    server = header.server
    parts = [header.title]
    if server.model:
        parts.append(server.model.rsplit("/", 1)[-1])
    if server.binary_version:
        parts.append(f"llama-server {server.binary_version}")
    return Text(" · ".join(parts), style="bold")


def headline(summary: SummaryEvent) -> str:
    """The headline numbers, as `spectui stream` prints them, with how the run ended."""
    reason = f" · ended: {summary.stop_reason}" if summary.stop_reason else ""
    return summary_line(summary.metrics) + reason


def transcript(session: Session, palette: Palette) -> Text:
    """Title, legend, the coloured answer and the headline numbers."""
    result = recompute(session)
    text = Text()
    text.append_text(title_line(session))
    text.append("\n")
    text.append_text(palette.legend())
    text.append("\n\n")
    for event in result.events:
        if isinstance(event, TokenEvent):
            text.append_text(palette.token(event))
    text.append("\n\n")
    text.append(headline(result.summary), style="bold")
    if session.problem:
        text.append("\n" + session.problem, style="italic")
    return text


def _console(width: int, *, record: bool = False) -> Console:
    return Console(
        file=io.StringIO(),
        width=width,
        record=record,
        force_terminal=True,
        color_system="truecolor",
        legacy_windows=False,
        highlight=False,
    )


def to_ansi(session: Session, palette: Palette, width: int = WIDTH) -> str:
    """The transcript with truecolor escapes."""
    console = _console(width)
    console.print(transcript(session, palette), soft_wrap=True)
    output = console.file
    assert isinstance(output, io.StringIO)
    return output.getvalue()


def to_html(session: Session, palette: Palette, width: int = WIDTH) -> str:
    """A self-contained HTML page of the transcript."""
    from html import escape

    console = _console(width, record=True)
    console.print(transcript(session, palette))
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
    return console.export_html(theme=theme, code_format=page, inline_styles=True)


def _rgb(hex_colour: str) -> tuple[int, int, int]:
    value = hex_colour.lstrip("#")[:6]
    return int(value[0:2], 16), int(value[2:4], 16), int(value[4:6], 16)


def _ansi(text: Text) -> str:
    """``text`` as escapes, unwrapped (the player's terminal wraps), lines ended CR LF."""
    console = _console(10_000)
    console.print(text, end="", soft_wrap=True)
    output = console.file
    assert isinstance(output, io.StringIO)
    return output.getvalue().replace("\n", "\r\n")


def to_cast(session: Session, palette: Palette, width: int = WIDTH) -> str:
    """An asciinema v2 recording: header line, then [time, "o", data] events."""
    result = recompute(session)
    header = {
        "version": 2,
        "width": width,
        "height": CAST_HEIGHT,
        "timestamp": int(session.header.created.timestamp()),
        "title": session.header.title,
        "env": {"TERM": "xterm-256color", "SHELL": "/bin/sh"},
    }
    lines = [json.dumps(header, ensure_ascii=False)]

    def emit(t: float, data: str) -> None:
        lines.append(json.dumps([round(t, 6), "o", data], ensure_ascii=False))

    intro = Text()
    intro.append_text(title_line(session))
    intro.append("\n")
    intro.append_text(palette.legend())
    intro.append("\n\n")
    emit(0.0, _ansi(intro))
    clock = 0.0
    for event in result.events:
        clock = max(clock, event.t)  # state events outside the request carry t=0
        if isinstance(event, TokenEvent):
            emit(clock, _ansi(palette.token(event)))
    ending = Text("\n\n")
    ending.append(headline(result.summary), style="bold")
    ending.append("\n")
    emit(max(clock, result.summary.t), _ansi(ending))
    return "\n".join(lines) + "\n"


def to_svg(session: Session, settings: Settings) -> str:
    """Textual's screenshot of the TUI after replaying the session headless."""
    from spectui.ui.apps.replay import replay_screenshot

    return asyncio.run(replay_screenshot(session, settings))


def render(session: Session, fmt: str, settings: Settings) -> str:
    """The export of ``session`` in format ``fmt``."""
    if fmt == "svg":
        return to_svg(session, settings)
    palette = Palette.for_theme(settings.theme)
    if fmt == "html":
        return to_html(session, palette)
    if fmt == "ansi":
        return to_ansi(session, palette)
    return to_cast(session, palette)


class ExportOptions(CommandOptions):
    """`spectui export`'s options."""

    file: Path
    """The session file."""
    to: str
    """--to: the format (a key of `FORMATS`)."""
    output: Path | None = None
    """--output: the file to write ('-': stdout; None: FILE with the format's suffix)."""


def run_export(settings: Settings, args: argparse.Namespace) -> int:
    """Run `spectui export`; returns the exit status."""
    options = ExportOptions.from_namespace(args)
    (session,) = load_sessions([options.file])
    content = render(session, options.to, settings)
    output = options.output
    if output is not None and str(output) == "-":
        sys.stdout.write(content)
        return 0
    target = output or options.file.with_suffix(FORMATS[options.to])
    try:
        target.write_text(content, encoding="utf-8")
    except OSError as error:
        raise ExportError(f"cannot write {target}: {error.strerror}") from None
    print(f"spectui: wrote {target}", file=sys.stderr)
    return 0
