"""Command line: parse arguments -> the command's options -> run the TUI or a headless command.

The commands are the modules of `COMMANDS` (`spectui.commands.command` says what each exports);
the command line is built from them and dispatched to the one named, with no branch per command.

Every failure a user can cause ends in one line on stderr and a non-zero exit status; anything
unexpected is logged with its traceback to the state dir and summarised in one line too.
"""

from __future__ import annotations

import argparse
import sys
import traceback
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from spectui import __version__
from spectui.commands import (
    compare,
    doctor,
    export,
    follow,
    prompts,
    proxy,
    replay,
    share,
    stream,
    tui,
    tune,
    watch,
    whatif,
)
from spectui.commands.command import Command, Invocation, RootCommand, Runnable
from spectui.commands.launch_options import flag_settings
from spectui.core.errors import SpectuiError

if TYPE_CHECKING:
    from spectui.config import Settings

COMMANDS: tuple[Command, ...] = (
    stream,
    doctor,
    prompts,
    compare,
    replay,
    export,
    proxy,
    tune,
    watch,
    follow,
    share,
    whatif,
)
"""Every command, in the order `spectui --help` lists them: the one place a command is added."""

ROOT: RootCommand = tui
"""What `spectui` with no command runs: the live TUI, whose flags are the top-level parser's."""


def build_parser(commands: Sequence[Command] = COMMANDS) -> argparse.ArgumentParser:
    """The whole command line: the TUI's flags at the top, then a subparser per command."""
    # No abbreviations: the top-level parser sees every argument, and a prefix such as
    # `export --to` would otherwise be ambiguous with `--top-k` / `--top-p`.
    parser = argparse.ArgumentParser(
        prog="spectui",
        allow_abbrev=False,
        description="See speculative decoding happen in llama.cpp's llama-server.",
        epilog="Extra llama-server arguments go after `--`. Settings also come from "
        "$XDG_CONFIG_HOME/spectui/config.toml and SPECTUI_* environment variables.",
    )
    parser.add_argument("--version", action="version", version=f"spectui {__version__}")
    ROOT.add_arguments(parser)
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for command in commands:
        command.add_parser(subparsers)
    return parser


def split_extra(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    """Split at the first `--`: spectui's own arguments, then extra llama-server arguments."""
    args = list(argv)
    if "--" in args:
        cut = args.index("--")
        return args[:cut], args[cut + 1 :]
    return args, []


def settings_from(args: argparse.Namespace, extra: list[str]) -> Settings:
    """Settings from file and env, with the command-line flags on top."""
    from spectui.config import load_settings

    settings = load_settings()
    update = flag_settings(vars(args))
    if extra:
        update["server_args"] = [*settings.server_args, *extra]
    return load_settings(**update)


def _report_crash(error: BaseException) -> str:
    """Write the traceback to a file; return where (the user sees one line, not a traceback)."""
    from spectui.config import state_dir
    from spectui.core.files import write_new

    folder = state_dir() / "crashes"
    try:
        # Owner-only and never through a symlink: a traceback can hold prompts and paths.
        path = write_new(
            folder / f"crash-{datetime.now():%Y%m%d-%H%M%S}.txt",
            "".join(traceback.format_exception(error)),
        )
    except OSError:
        return "(could not write the traceback)"
    return f"details in {path}"


def chosen(args: argparse.Namespace, commands: Sequence[Command] = COMMANDS) -> Runnable:
    """The command the parsed command line names (`ROOT` when it names none)."""
    if args.command is None:
        return ROOT
    return {command.NAME: command for command in commands}[args.command]


def main(argv: Sequence[str] | None = None, commands: Sequence[Command] = COMMANDS) -> int:
    """Entry point of the `spectui` console script (``commands``: the registered ones)."""
    own, extra = split_extra(sys.argv[1:] if argv is None else argv)
    args = build_parser(commands).parse_args(own)
    command = chosen(args, commands)
    invocation = Invocation(lambda: settings_from(args, extra))
    try:
        return command.run(command.Options.from_namespace(args), invocation)
    except SpectuiError as error:
        print(f"spectui: {error}", file=sys.stderr)
        return error.exit_code
    except KeyboardInterrupt:
        print("spectui: interrupted", file=sys.stderr)
        return 130
    except Exception as error:  # last line of defence: one line, never a traceback
        print(f"spectui: unexpected error: {error!r} — {_report_crash(error)}", file=sys.stderr)
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
