"""`spectui follow [DIR|FILE]`: the live TUI drawn from a presenter's session files, read-only.

The presenter records (``record = true``, ``--record``, or ``--broadcast`` into the live folder);
any number of followers draw the same runs from the files, on this machine or over SSH, and
never start a server. ``--live`` follows the broadcast folder.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import TYPE_CHECKING

from spectui.commands.command import Invocation, Subparsers
from spectui.commands.options import CommandOptions
from spectui.core.errors import SpectuiError
from spectui.core.sessions.silence import STOPPED_AFTER_S, WAITING_AFTER_S

if TYPE_CHECKING:
    from spectui.config import Settings
    from spectui.core.sessions.tail import FollowOptions

NAME = "follow"


class FollowArgsError(SpectuiError):
    """The follow command (or the presenter's broadcast) was given something it cannot use."""

    title = "Follow"
    exit_code = 2


def seconds(text: str) -> float:
    """A positive number of seconds."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"seconds must be more than 0, not {text}")
    return value


def add_follow_arguments(parser: argparse.ArgumentParser) -> None:
    """What to follow and how patiently (shared with `spectui share`)."""
    from spectui.config import live_dir

    parser.add_argument(
        "target",
        nargs="?",
        type=Path,
        metavar="DIR|FILE",
        help="a session folder (its newest file, then each next run's) or one session file "
        "(default: the sessions dir)",
    )
    parser.add_argument(
        "--live",
        action="store_true",
        help=f"follow the broadcast folder of `spectui --broadcast` ({live_dir()})",
    )
    parser.add_argument(
        "--waiting-after",
        type=seconds,
        default=WAITING_AFTER_S,
        metavar="S",
        help=f"a run silent this long shows 'waiting…' (default {WAITING_AFTER_S:g})",
    )
    parser.add_argument(
        "--stopped-after",
        type=seconds,
        default=STOPPED_AFTER_S,
        metavar="S",
        help=f"... and this long 'presenter stopped' (default {STOPPED_AFTER_S:g})",
    )


class FollowCommandOptions(CommandOptions):
    """`spectui follow`'s options (and `share`'s, which serves a follower per viewer)."""

    target: Path | None = None
    """DIR|FILE: a session folder or file (None: the sessions dir, or with --live the live one)."""
    live: bool = False
    """--live: follow the broadcast folder of `spectui --broadcast`."""
    waiting_after: float = WAITING_AFTER_S
    """--waiting-after: seconds of silence before a run shows 'waiting…'."""
    stopped_after: float = STOPPED_AFTER_S
    """--stopped-after: seconds of silence before it shows 'presenter stopped'."""


def add_parser(commands: Subparsers) -> argparse.ArgumentParser:
    """Register `spectui follow`."""
    follow = commands.add_parser(
        NAME,
        help="follow a presenter's runs live from its session files (read-only, no server)",
        description="The full live TUI fed by a session file as it is written: the newest "
        "file in DIR, then each next run's. Nothing can be run, stopped or switched from "
        "here. Keys: l what is followed, ? help, q quit.",
    )
    add_follow_arguments(follow)
    return follow


def follow_options(settings: Settings, options: FollowCommandOptions) -> FollowOptions:
    """What to follow and how patiently; one clear line for a target that cannot be."""
    from spectui.config import live_dir
    from spectui.core.sessions.recording import SUFFIX
    from spectui.core.sessions.tail import FollowOptions, looks_like_session

    target = options.target
    if target is not None and options.live:
        raise FollowArgsError("give a folder or --live, not both")
    if target is None:
        target = live_dir() if options.live else settings.sessions_dir
    target = target.expanduser()
    if target.exists() and not (target.is_dir() or target.is_file()):
        raise FollowArgsError(f"{target} is neither a folder nor a file")
    if not target.exists() and target.suffix == SUFFIX:
        raise FollowArgsError(f"no session file {target}")
    if target.is_file() and not os.access(target, os.R_OK):
        raise FollowArgsError(f"cannot read {target}")
    if target.is_file() and looks_like_session(target) is False:
        raise FollowArgsError(f"{target} is not a spectui session file (no header)")
    if target.is_dir() and not os.access(target, os.R_OK | os.X_OK):
        raise FollowArgsError(f"cannot read the folder {target}")
    return FollowOptions(
        target=target,
        waiting_after_s=options.waiting_after,
        stopped_after_s=max(options.stopped_after, options.waiting_after),
    )


Options = FollowCommandOptions


def run(options: FollowCommandOptions, invocation: Invocation) -> int:
    """Run `spectui follow`; returns the exit status."""
    settings = invocation.settings
    followed = follow_options(settings, options)
    from spectui.ui.apps.follow import run_follow_tui

    return run_follow_tui(followed, settings)


def open_live_dir() -> Path:
    """The broadcast folder, made owner-only (0700, as is the folder above it); one clear line
    when it cannot be."""
    from spectui.config import live_dir

    folder = live_dir()
    try:
        folder.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        folder.mkdir(mode=0o700, exist_ok=True)
        for path in (folder.parent, folder):
            if path.stat().st_mode & 0o077:
                path.chmod(0o700)  # made earlier by something less careful
    except OSError as error:
        raise FollowArgsError(f"cannot broadcast to {folder}: {error.strerror}") from None
    return folder
