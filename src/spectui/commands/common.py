"""Pieces the commands share: the prompt and the generation flags of the command line."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from spectui.commands.options import CommandOptions
from spectui.core.errors import SpectuiError

if TYPE_CHECKING:
    from spectui.core.prompts import BuiltinPrompt


class PromptError(SpectuiError):
    """The prompt could not be read."""

    title = "Prompt problem"
    exit_code = 2


def read_prompt_file(path: Path) -> str:
    """A prompt file's text; one clear line when it cannot be read."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise PromptError(f"prompt file not found: {path}") from None
    except IsADirectoryError:
        raise PromptError(f"prompt file is a directory: {path}") from None
    except (OSError, UnicodeDecodeError) as error:
        raise PromptError(f"cannot read prompt file {path}: {error}") from None
    if not text.strip():
        raise PromptError(f"prompt file is empty: {path}")
    return text


class InlinePromptOptions(CommandOptions):
    """A prompt given on the command line itself: text or a built-in key (doctor's --try takes
    only these; at most one, argparse makes sure)."""

    prompt: str | None = None
    """--prompt: the prompt text."""
    builtin: str | None = None
    """--builtin: the key of a built-in prompt."""

    def chosen_prompt(self) -> str | BuiltinPrompt | None:
        """The prompt given, if any (a built-in prompt brings its own length)."""
        from spectui.core.prompts import builtin_prompt

        if self.prompt is not None:
            if not self.prompt.strip():
                raise PromptError("the prompt is empty")
            return self.prompt
        if self.builtin is not None:
            try:
                return builtin_prompt(self.builtin)
            except KeyError as error:
                raise PromptError(str(error.args[0])) from None
        return None


class PromptOptions(InlinePromptOptions):
    """The prompt flags of the TUI and `stream`: text, a file or a built-in key (at most one)."""

    prompt_file: Path | None = None
    """--prompt-file: read the prompt from this file."""

    def chosen_prompt(self) -> str | BuiltinPrompt | None:
        """The prompt given, if any: the file's text, else the inline one."""
        if self.prompt_file is not None:
            return read_prompt_file(self.prompt_file)
        return super().chosen_prompt()


def positive(text: str) -> int:
    """An argparse type: a whole number, 1 or more."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be 1 or more, not {value}")
    return value


REQUEST_FLAGS: dict[str, str] = {
    "n_predict": "--n-predict",
    "temperature": "--temperature",
    "seed": "--seed",
    "top_k": "--top-k",
    "top_p": "--top-p",
    "chat": "--chat",
    "cache_prompt": "--cache-prompt",
}
"""Every `Sampling` and `Delivery` field and its flag: what a request carries besides its prompt,
and so what a compare or tune plan fixes. The flags' destinations are the field names, so the
settings take them as they are."""

GENERATION_FLAGS: dict[str, str] = {**REQUEST_FLAGS, "stall_timeout_s": "--stall-timeout"}
"""Every flag `add_generation_flags` adds: the request's, and the client's stall watchdog (a
setting the engine takes; a plan does not fix it)."""


def add_generation_flags(group: argparse._ArgumentGroup) -> None:
    """The generation flags, the same for the TUI, `stream`, `compare` and `tune`."""
    flag = GENERATION_FLAGS
    group.add_argument(
        flag["n_predict"],
        type=positive,
        metavar="N",
        help="maximum tokens to generate (default: the prompt's own, else 256)",
    )
    group.add_argument(flag["temperature"], type=float, metavar="T", help="temperature (0)")
    group.add_argument(flag["seed"], type=int, metavar="S", help="sampling seed (42)")
    group.add_argument(flag["top_k"], type=int, metavar="K", help="top-k (server default)")
    group.add_argument(flag["top_p"], type=float, metavar="P", help="top-p (server default)")
    group.add_argument(flag["chat"], action="store_const", const=True, help="use the chat endpoint")
    group.add_argument(
        flag["cache_prompt"],
        action="store_const",
        const=True,
        help="reuse the server's prompt cache",
    )
    group.add_argument(
        flag["stall_timeout_s"],
        type=float,
        metavar="S",
        dest="stall_timeout_s",
        help="seconds without a byte before a run counts as stalled (60)",
    )


def add_prompt_flags(parser: argparse.ArgumentParser) -> None:
    """The "generation" group of the TUI and `stream`: one prompt (text, file or built-in),
    then the generation flags."""
    run = parser.add_argument_group("generation")
    source = run.add_mutually_exclusive_group()
    source.add_argument("--prompt", help="prompt text")
    source.add_argument("--prompt-file", type=Path, help="read the prompt from a file")
    source.add_argument(
        "--builtin", metavar="KEY", help="a built-in prompt (see `spectui prompts`)"
    )
    add_generation_flags(run)
