"""`spectui` with no command: the live TUI on a launched or attached server."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from spectui.commands.command import Invocation
from spectui.commands.common import PromptOptions, add_prompt_flags
from spectui.commands.launch_options import add_launch_options

if TYPE_CHECKING:
    from spectui.config import Settings


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The TUI's flags, the top-level parser's: the server, the prompt, what to do with it."""
    add_launch_options(parser)
    add_prompt_flags(parser)
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


def broadcast_dir(settings: Settings, record: Path | None) -> Path | None:
    """The live folder when broadcasting (made owner-only), else None."""
    if not settings.broadcast:
        return None
    from spectui.commands.follow import FollowArgsError, open_live_dir

    if record is not None:
        raise FollowArgsError("--broadcast records every run to the live folder: drop --record")
    return open_live_dir()


class TuiOptions(PromptOptions):
    """`spectui` with no command: the prompt, and what to do with it."""

    record: Path | None = None
    """--record: record runs to session files (FILE, FILE-2, ...)."""
    run: bool = False
    """--run: start generating once the server is ready."""


Options = TuiOptions


def run(options: TuiOptions, invocation: Invocation) -> int:
    """Build the engine (all checks before any process starts), then run the app."""
    from spectui.app_setup import build_engine, recorder
    from spectui.core.engine.live import DemoModelMissingError
    from spectui.ui.apps.live import run_no_model, run_tui

    settings = invocation.settings
    prompt = options.chosen_prompt()
    path = options.record
    live = broadcast_dir(settings, path)
    try:
        engine = build_engine(settings)
    except DemoModelMissingError as error:
        return run_no_model(settings, str(error))
    # Always wrapped, so the record key works; on from the start with the `record` setting.
    if live is not None:  # --broadcast: every run into the live folder, for followers
        wrapped = recorder(engine, settings, sessions_dir=live)
        return run_tui(wrapped, settings, prompt=prompt, autorun=options.run)
    wrapped = recorder(engine, settings, path=path, recording=settings.record or path is not None)
    return run_tui(wrapped, settings, prompt=prompt, autorun=options.run)
