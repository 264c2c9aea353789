"""`spectui export`: a session's coloured transcript, legend and headline numbers as a file.

The formats (svg, html, ansi, cast) are drawn by `spectui.ui.export`; this module parses the
command line, loads the session and writes the file.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from spectui.commands.command import Invocation, Subparsers
from spectui.commands.options import CommandOptions
from spectui.core.errors import SpectuiError

NAME = "export"


class ExportError(SpectuiError):
    """An export could not be written."""

    title = "Export failed"


def add_parser(commands: Subparsers) -> argparse.ArgumentParser:
    """Register `spectui export`."""
    from spectui.ui.export import FORMATS

    export = commands.add_parser(
        NAME, help="write a session's coloured transcript as svg, html, ansi or cast"
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
    return export


class ExportOptions(CommandOptions):
    """`spectui export`'s options."""

    file: Path
    """The session file."""
    to: str
    """--to: the format (a key of `FORMATS`)."""
    output: Path | None = None
    """--output: the file to write ('-': stdout; None: FILE with the format's suffix)."""


Options = ExportOptions


def run(options: ExportOptions, invocation: Invocation) -> int:
    """Run `spectui export`; returns the exit status."""
    from spectui.commands.replay import load_sessions
    from spectui.commands.stream import summary_line
    from spectui.ui.export import FORMATS, render

    settings = invocation.settings
    (session,) = load_sessions([options.file])
    content = render(session, options.to, settings, summary_line)
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
