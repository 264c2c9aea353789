"""Command line: parse arguments -> settings -> run the TUI or a headless command.

Every failure a user can cause ends in one line on stderr and a non-zero exit status; anything
unexpected is logged with its traceback to the state dir and summarised in one line too.
"""

from __future__ import annotations

import argparse
import sys
import traceback
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

from spectui import __version__
from spectui.commands.common import add_generation_flags
from spectui.commands.launch_options import add_launch_options, flag_settings
from spectui.config import Settings, load_settings, state_dir
from spectui.core.errors import SpectuiError
from spectui.core.files import write_new


def _sampling_options(parser: argparse.ArgumentParser) -> None:
    run = parser.add_argument_group("generation")
    source = run.add_mutually_exclusive_group()
    source.add_argument("--prompt", help="prompt text")
    source.add_argument("--prompt-file", type=Path, help="read the prompt from a file")
    source.add_argument(
        "--builtin", metavar="KEY", help="a built-in prompt (see `spectui prompts`)"
    )
    add_generation_flags(run)


def build_parser() -> argparse.ArgumentParser:
    """The whole command line."""
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
    add_launch_options(parser)
    _sampling_options(parser)
    parser.add_argument("--run", action="store_true", help="start generating once ready")
    parser.add_argument("--theme", help="TUI theme (spectui-dark, spectui-light, ...)")
    parser.add_argument(
        "--record", type=Path, metavar="FILE", help="record runs to session files (FILE, FILE-2…)"
    )
    parser.add_argument(
        "--broadcast",
        action="store_true",
        default=None,
        help="record every run into the live folder for `spectui follow --live` / `share`",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    # SUPPRESS: options given before the command (`spectui --model X stream`) must survive the
    # subparser, which would otherwise reset them to its own None defaults.
    stream = commands.add_parser(
        "stream", help="stream one generation headless", argument_default=argparse.SUPPRESS
    )
    add_launch_options(stream)
    _sampling_options(stream)
    stream.add_argument("--format", choices=["text", "jsonl"], default="text")
    stream.add_argument(
        "--record", type=Path, metavar="FILE", help="also record the run to a session file"
    )

    from spectui.commands.doctor import add_doctor_parser

    add_doctor_parser(commands)

    commands.add_parser("prompts", help="list the built-in prompts")
    from spectui.commands.compare import add_compare_options

    compare = commands.add_parser(
        "compare",
        help="fair A/B of spec configs on the same prompts, answers checked",
        argument_default=argparse.SUPPRESS,
    )
    add_launch_options(compare)
    add_compare_options(compare)
    compare.add_argument(
        "--record", type=Path, metavar="DIR", help="also record every run to a session file in DIR"
    )
    from spectui.commands.export import add_export_parser
    from spectui.commands.replay import add_replay_parser

    add_replay_parser(commands)
    add_export_parser(commands)
    from spectui.commands.proxy import add_proxy_parser
    from spectui.commands.watch import add_watch_parser

    add_proxy_parser(commands)
    from spectui.commands.tune import add_tune_parser

    add_tune_parser(commands)
    # The decision rule's one option, the same flag for both (ResultsOptions.identical_answers).
    from spectui.commands.compare import add_identical_answers_flag

    add_identical_answers_flag(commands.choices["tune"])
    add_watch_parser(commands)
    from spectui.commands.follow import add_follow_parser
    from spectui.commands.share import add_share_parser

    add_follow_parser(commands)
    add_share_parser(commands)
    from spectui.commands.whatif import add_whatif_parser

    add_whatif_parser(commands)
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
    settings = load_settings()
    update = flag_settings(vars(args))
    if extra:
        update["server_args"] = [*settings.server_args, *extra]
    return load_settings(**update)


def _report_crash(error: BaseException) -> str:
    """Write the traceback to a file; return where (the user sees one line, not a traceback)."""
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


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `spectui` console script."""
    own, extra = split_extra(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    args = parser.parse_args(own)
    try:
        return _dispatch(args, extra)
    except SpectuiError as error:
        print(f"spectui: {error}", file=sys.stderr)
        return error.exit_code
    except KeyboardInterrupt:
        print("spectui: interrupted", file=sys.stderr)
        return 130
    except Exception as error:  # last line of defence: one line, never a traceback
        print(f"spectui: unexpected error: {error!r} — {_report_crash(error)}", file=sys.stderr)
        return 1


def _dispatch(args: argparse.Namespace, extra: list[str]) -> int:
    if args.command == "doctor":
        from spectui.commands.doctor import run_doctor

        return run_doctor(settings_from(args, extra), args)
    if args.command == "prompts":
        from spectui.core.prompts import BUILTIN_PROMPTS

        for prompt in BUILTIN_PROMPTS:
            print(f"{prompt.key:<14} {prompt.title} — {prompt.expectation}")
        return 0
    if args.command == "watch":
        from spectui.commands.watch import run_watch

        return run_watch(args)
    if args.command == "whatif":
        from spectui.commands.whatif import run_whatif

        return run_whatif(args)
    settings = settings_from(args, extra)
    if args.command == "proxy":
        from spectui.commands.proxy import run_proxy

        return run_proxy(settings, args)
    if args.command == "tune":
        from spectui.commands.tune import run_tune

        return run_tune(settings, args)
    if args.command == "compare":
        from spectui.commands.compare import run_compare

        return run_compare(settings, args)
    if args.command == "follow":
        from spectui.commands.follow import run_follow

        return run_follow(settings, args)
    if args.command == "share":
        from spectui.commands.share import run_share

        return run_share(settings, args)
    if args.command == "replay":
        from spectui.commands.replay import run_replay

        return run_replay(settings, args)
    if args.command == "export":
        from spectui.commands.export import run_export

        return run_export(settings, args)
    if args.command == "stream":
        from spectui.commands.stream import run_stream

        return run_stream(settings, args)
    from spectui.commands.tui import run_tui_command

    return run_tui_command(settings, args)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
