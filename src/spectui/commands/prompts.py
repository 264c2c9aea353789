"""`spectui prompts`: the built-in prompts, one a line (key, title, what to expect)."""

from __future__ import annotations

import argparse

from spectui.commands.command import Invocation, Subparsers
from spectui.commands.options import CommandOptions

NAME = "prompts"


def add_parser(commands: Subparsers) -> argparse.ArgumentParser:
    """Register `spectui prompts`."""
    return commands.add_parser(NAME, help="list the built-in prompts")


class PromptsOptions(CommandOptions):
    """`spectui prompts` takes no options of its own."""


Options = PromptsOptions


def run(options: PromptsOptions, invocation: Invocation) -> int:
    """Print the built-in prompts; returns 0."""
    from spectui.core.prompts import BUILTIN_PROMPTS

    for prompt in BUILTIN_PROMPTS:
        print(f"{prompt.key:<14} {prompt.title} — {prompt.expectation}")
    return 0
