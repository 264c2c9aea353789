"""Secrets on a llama-server command line, and API keys spectui is given.

`mask_argv` hides the value of every flag ``llama-server --help`` lists as taking a secret
(``--api-key``, ``-hft``/``--hf-token``, ``--mcp-servers-json``) in both the ``--flag VALUE``
and the ``--flag=VALUE`` form, the value of any other flag named like one (``*-key``,
``*-token``, ``*-secret``, ``*-password``, but not ``*-key-file``: a path is not a secret), and
the credentials in any ``scheme://user:password@host`` URL (``--model-url``, ``--hf-repo``...).

`api_key_problem` says why a key cannot go into an ``Authorization`` header — a CR or LF (a key
read from a CRLF file), surrounding spaces, or anything but visible ASCII — without repeating it:
the HTTP stack would otherwise put the raw header value into an error message.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from spectui.core.errors import SpectuiError

SECRET_FLAGS = frozenset({"--api-key", "--hf-token", "-hft", "--mcp-servers-json"})
"""llama-server flags whose value is a secret (from its ``--help``; the MCP servers' inline JSON
carries their tokens and headers)."""

MASK = "***"
"""What `redacted` shows instead of a secret."""

_SECRET_WORDS = frozenset({"key", "token", "secret", "password", "passwd", "credential"})
_PATH_WORDS = frozenset({"file", "path", "dir"})
_URL_CREDENTIALS = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/@\s]*@")


def is_secret_flag(flag: str) -> bool:
    """Whether ``flag`` (``--name``, no value) takes a secret value."""
    if flag in SECRET_FLAGS:
        return True
    if not flag.startswith("--"):
        return False
    words = flag[2:].lower().split("-")
    return bool(_SECRET_WORDS & set(words)) and words[-1] not in _PATH_WORDS


def mask_url_credentials(text: str, mask: str = MASK) -> str:
    """``text`` with the user and password of every URL in it replaced by ``mask``."""
    return _URL_CREDENTIALS.sub(lambda m: f"{m.group(1)}{mask}@", text)


def mask_argv(argv: Iterable[str], mask: str = MASK) -> list[str]:
    """``argv`` with each secret value replaced by ``mask`` (both forms, URLs too)."""
    out: list[str] = []
    hide_next = False
    for token in argv:
        if hide_next:
            out.append(mask)
            hide_next = False
            continue
        name, eq, _ = token.partition("=")
        if token.startswith("-") and is_secret_flag(name):
            if eq:
                out.append(f"{name}={mask}")
            else:
                out.append(token)
                hide_next = True
            continue
        out.append(mask_url_credentials(token, mask))
    return out


def secret_values(argv: Iterable[str]) -> list[str]:
    """The secret values on ``argv`` (those `mask_argv` hides), for masking them elsewhere."""
    tokens = list(argv)
    found: list[str] = []
    for token, shown in zip(tokens, mask_argv(tokens, mask="\0"), strict=True):
        if shown == "\0":
            found.append(token)
        elif shown.endswith("=\0") and not token.endswith("=\0"):
            found.append(token.partition("=")[2])
        elif "://\0@" in shown:
            found += [m.group(0)[len(m.group(1)) : -1] for m in _URL_CREDENTIALS.finditer(token)]
    return [value for value in found if value]


class ApiKeyError(SpectuiError):
    """An API key that cannot be sent as a header (the key itself is never in the message)."""

    title = "Unusable API key"
    exit_code = 2


def api_key_problem(key: str) -> str | None:
    """Why ``key`` cannot be used as an API key, in a few words that do not contain it; None
    when it is fine."""
    if not key:
        return "it is empty"
    if "\r" in key or "\n" in key:
        return "it contains a line break (CR or LF; was it read from a file with CRLF endings?)"
    if key != key.strip():
        return "it starts or ends with whitespace"
    for position, char in enumerate(key, 1):
        if not "\x21" <= char <= "\x7e":
            return f"character {position} is not visible ASCII ({_name(char)})"
    return None


def check_api_key(key: str | None, what: str = "the API key") -> None:
    """Raise `ApiKeyError` (one line, key not shown) when ``key`` is set but unusable."""
    if key is None:
        return
    problem = api_key_problem(key)
    if problem is not None:
        raise ApiKeyError(f"{what} cannot be used: {problem}")


def _name(char: str) -> str:
    if char == " ":
        return "a space"
    if char == "\t":
        return "a tab"
    return f"U+{ord(char):04X}"
