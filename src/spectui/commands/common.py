"""Pieces the commands share: the prompt from the command line, the request from settings."""

from __future__ import annotations

import argparse
from pathlib import Path

from spectui.config import Settings
from spectui.core.errors import SpectuiError
from spectui.core.prompts import builtin_prompt
from spectui.core.request import GenerationRequest


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


def prompt_from_args(args: argparse.Namespace) -> tuple[str | None, int | None]:
    """(prompt text, the built-in prompt's own n_predict) from --prompt/--prompt-file/--builtin."""
    if getattr(args, "prompt", None) is not None:
        if not args.prompt.strip():
            raise PromptError("the prompt is empty")
        return str(args.prompt), None
    if getattr(args, "prompt_file", None) is not None:
        return read_prompt_file(args.prompt_file), None
    if getattr(args, "builtin", None) is not None:
        try:
            prompt = builtin_prompt(args.builtin)
        except KeyError as error:
            raise PromptError(str(error.args[0])) from None
        return prompt.text, prompt.n_predict
    return None, None


def request_from(
    settings: Settings, prompt: str, n_predict: int | None = None, *, explicit_n: bool = False
) -> GenerationRequest:
    """A request with the settings' sampling parameters (a built-in prompt's length unless the
    user set --n-predict)."""
    return GenerationRequest(
        prompt=prompt,
        chat=settings.chat,
        n_predict=settings.n_predict if explicit_n or n_predict is None else n_predict,
        temperature=settings.temperature,
        seed=settings.seed,
        cache_prompt=settings.cache_prompt,
        stall_timeout_s=settings.stall_timeout_s,
    )
