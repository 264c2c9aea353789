"""A command module as a new command would be written: registered by naming it in a list
(`test_cli_commands`), nothing else. mypy checks that this module is a `Command`."""

from __future__ import annotations

import argparse

from spectui.commands.command import Invocation, Subparsers
from spectui.commands.options import CommandOptions

NAME = "dummy"

RAN: list[DummyOptions] = []
"""The options of every run, for the test to read."""


def add_parser(commands: Subparsers) -> argparse.ArgumentParser:
    """Register `spectui dummy`."""
    parser = commands.add_parser(NAME, help="a command added by naming its module in the list")
    parser.add_argument("--times", type=int, default=1, help="how many times")
    parser.add_argument("--settings", action="store_true", help="ask for the settings")
    return parser


class DummyOptions(CommandOptions):
    """`spectui dummy`'s options."""

    times: int = 1
    """--times: how many times."""
    settings: bool = False
    """--settings: ask for the settings (a bad one then ends the command in one line)."""


Options = DummyOptions


def run(options: DummyOptions, invocation: Invocation) -> int:
    """Record the options; the exit status is ``times``."""
    RAN.append(options)
    if options.settings:
        _ = invocation.settings
    return options.times
