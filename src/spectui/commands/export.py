"""`spectui export`: a session's coloured transcript, legend and headline numbers as a file.

The formats (svg, html, ansi, cast) are drawn by `spectui.ui.export`; this module parses the
command line, loads the session and writes the file.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from spectui.commands.options import CommandOptions
from spectui.commands.replay import load_sessions
from spectui.commands.stream import summary_line
from spectui.config import Settings
from spectui.core.errors import SpectuiError
from spectui.core.sessions.file import Session

FORMATS = {"svg": ".svg", "html": ".html", "ansi": ".ans", "cast": ".cast"}
"""Export formats and the suffix of their default output file."""


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


class ExportOptions(CommandOptions):
    """`spectui export`'s options."""

    file: Path
    """The session file."""
    to: str
    """--to: the format (a key of `FORMATS`)."""
    output: Path | None = None
    """--output: the file to write ('-': stdout; None: FILE with the format's suffix)."""


def render(session: Session, fmt: str, settings: Settings) -> str:
    """The export of ``session`` in format ``fmt``; the headline words the numbers as
    `spectui stream` does."""
    if fmt == "svg":
        from spectui.ui.export.svg import to_svg

        return to_svg(session, settings)
    from spectui.ui.export.ansi import to_ansi
    from spectui.ui.export.cast import to_cast
    from spectui.ui.export.html import to_html
    from spectui.ui.export.palette import Palette

    palette = Palette.for_theme(settings.theme)
    renderer = {"html": to_html, "ansi": to_ansi, "cast": to_cast}[fmt]
    return renderer(session, palette, summary_line)


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
