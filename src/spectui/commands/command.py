"""What a command module exports, and what its `run` is handed.

`spectui.cli` registers the modules of one list and knows nothing else about them. A command
module exports:

* ``NAME``: the command's word on the command line (`spectui NAME ...`);
* ``add_parser(commands)``: adds its subparser, with its flags and help, and returns it;
* ``Options``: its options, a `CommandOptions` model (a docstring under each field), built from
  the parsed command line by ``Options.from_namespace``;
* ``run(options, invocation)``: does the command and returns the exit status.

Adding a command is writing such a module and naming it in `spectui.cli.COMMANDS`. Every
spectui process imports every command module (the command line is built from all of them), so
a module imports at its top only what its parser and options need; what ``run`` needs (the
engine, the app setup, the UI) it imports inside. The command with no word, the live TUI
(`commands.tui`), is the same but for ``add_parser``: its flags are the top-level parser's
(``add_arguments(parser)``).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from functools import cached_property
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias

from spectui.commands.options import CommandOptions

if TYPE_CHECKING:
    from spectui.config import Settings

Subparsers: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"
"""Where a command adds its subparser (`argparse.ArgumentParser.add_subparsers`' result)."""


class Invocation:
    """What a command's `run` is handed besides its options: the settings of this command
    line, loaded when the command first asks. A command whose flags are no settings (`watch`,
    `whatif`, `prompts`) never asks, so a settings file it does not need cannot stop it."""

    def __init__(self, load_settings: Callable[[], Settings]) -> None:
        self._load_settings = load_settings

    @cached_property
    def settings(self) -> Settings:
        """Settings from the file and the environment, with the command line's flags (and the
        llama-server arguments after ``--``) on top; a bad one raises its one-line error."""
        return self._load_settings()


class Runnable(Protocol):
    """What every command module exports: its options model and its `run`."""

    @property
    def Options(self) -> type[CommandOptions]:
        """The command's options model."""
        ...

    # ``options`` is the module's own `Options` (a protocol cannot say so): the command line
    # builds it with that very model.
    def run(self, options: Any, invocation: Invocation) -> int:
        """Do the command; returns the exit status."""
        ...


class Command(Runnable, Protocol):
    """A command module: `spectui NAME ...`."""

    @property
    def NAME(self) -> str:
        """The command's word on the command line."""
        ...

    def add_parser(self, commands: Subparsers) -> argparse.ArgumentParser:
        """Add the command's subparser (flags, help) to ``commands``; returns it."""
        ...


class RootCommand(Runnable, Protocol):
    """The command with no word (the live TUI): its flags are the top-level parser's."""

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        """Add the command's flags to the top-level ``parser``."""
        ...
