"""`spectui replay`: play a recorded session in the full TUI (two side by side), or print its
summary recomputed from the recorded events."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from spectui.commands.command import Invocation, Subparsers
from spectui.commands.options import CommandOptions
from spectui.core.errors import SpectuiError

if TYPE_CHECKING:
    from spectui.core.sessions.file import Session

NAME = "replay"

MAX_SESSIONS = 2
"""One session, or two side by side."""


class ReplayArgsError(SpectuiError):
    """The replay command was given something it cannot play."""

    title = "Replay"
    exit_code = 2


def parse_speed(text: str) -> float | None:
    """'0.5', '1', '2', 'max' (or any positive number); None means as fast as possible."""
    from spectui.core.sessions.replay import SPEEDS

    if text in SPEEDS:
        return SPEEDS[text]
    try:
        speed = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"speed is a number or 'max', not {text!r}") from None
    if not speed > 0:
        raise argparse.ArgumentTypeError(f"speed must be more than 0, not {text}")
    return speed


def add_parser(commands: Subparsers) -> argparse.ArgumentParser:
    """Register `spectui replay`."""
    replay = commands.add_parser(
        NAME,
        help="play a recorded session (two side by side), no server needed",
        description="Play a session file in the TUI with its recorded timing. Keys: space "
        "pause/resume, n step one token, v speed, r play again, q quit.",
    )
    replay.add_argument("files", nargs="+", type=Path, metavar="FILE", help="session file(s)")
    replay.add_argument(
        "--speed",
        type=parse_speed,
        default=1.0,
        metavar="0.5|1|2|max",
        help="playback speed (default 1: real time)",
    )
    replay.add_argument(
        "--summary",
        action="store_true",
        help="print the summary recomputed from the events as JSON (no UI)",
    )
    return replay


def load_sessions(paths: list[Path]) -> list[Session]:
    """Read each file; report on stderr where a damaged one stopped (it still plays)."""
    from spectui.core.sessions.file import read_session

    sessions = [read_session(path) for path in paths]
    for session in sessions:
        if session.problem:
            print(f"spectui: {session.problem}", file=sys.stderr)
        if session.skipped:
            print(
                f"spectui: {session.name}: left out {session.skipped} events of types this "
                "spectui does not know",
                file=sys.stderr,
            )
    return sessions


def summary_json(session: Session) -> dict[str, object]:
    """The recomputed summary in the shape of `spectui stream --format jsonl`'s summary line."""
    from spectui.commands.stream import summary_record
    from spectui.core.sessions.replay import recompute

    return summary_record(recompute(session).summary)


class ReplayOptions(CommandOptions):
    """`spectui replay`'s options."""

    files: list[Path]
    """The session files: one, or two side by side."""
    speed: float | None = 1.0
    """--speed: playback speed (1: real time; None: as fast as possible)."""
    summary: bool = False
    """--summary: print the summary recomputed from the events as JSON (no UI)."""


Options = ReplayOptions


def run(options: ReplayOptions, invocation: Invocation) -> int:
    """Run `spectui replay`; returns the exit status."""
    settings = invocation.settings
    paths = options.files
    if len(paths) > MAX_SESSIONS:
        raise ReplayArgsError(f"replay plays one session, or two side by side; got {len(paths)}")
    sessions = load_sessions(paths)
    if options.summary:
        for session in sessions:
            sys.stdout.write(json.dumps(summary_json(session), ensure_ascii=False) + "\n")
        return 0
    from spectui.ui.apps.replay import run_replay_tui

    return run_replay_tui(sessions, settings, speed=options.speed)
