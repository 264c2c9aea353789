"""Errors the engine raises: each carries one clear line for the user, never a traceback."""

from __future__ import annotations

from pathlib import Path


class SpectuiError(Exception):
    """Base class: ``str(error)`` is a one-line message fit to show a user."""

    title = "Error"
    """Short heading for a dialog."""
    exit_code = 1
    """Exit status for headless commands."""


class BinaryNotFoundError(SpectuiError):
    """No llama-server could be found."""

    title = "llama-server not found"
    exit_code = 2


class ModelError(SpectuiError):
    """The model file is missing, unreadable or not a GGUF."""

    title = "Model problem"
    exit_code = 2


class SpecConfigError(SpectuiError):
    """A spec configuration this binary cannot run (unknown type, missing draft model, ...)."""

    title = "Unsupported speculative configuration"
    exit_code = 2


class ServerStartError(SpectuiError):
    """The server could not be started or exited while loading."""

    title = "Server failed to start"

    def __init__(self, message: str, log_tail: list[str] | None = None) -> None:
        super().__init__(message)
        self.log_tail = log_tail or []


class ServerConnectionError(SpectuiError):
    """The server cannot be reached, or the URL is not a llama-server."""

    title = "Cannot reach the server"


class AuthError(SpectuiError):
    """The server wants an API key, or rejected the one given."""

    title = "Not authorised"


class StreamError(SpectuiError):
    """The stream broke: stalled, cut, or the server answered with an error."""

    title = "Stream failed"


def read_bytes(path: Path, what: str, error: type[SpectuiError]) -> bytes:
    """The bytes of the ``what`` at ``path`` ('session file', ...), else ``error`` in one line."""
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise error(f"{what} not found: {path}") from None
    except IsADirectoryError:
        raise error(f"{what} is a directory: {path}") from None
    except OSError as problem:
        raise error(f"cannot read {what} {path}: {problem.strerror}") from None
