"""The server flags every command that starts or attaches to llama-server shares, and which of
the command line's flags are settings.

A flag is a setting when its destination is a `Settings` field (``--spec-draft-n-max`` sets
``draft_n_max``): the settings take them as they are, on top of the file and the environment.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from pathlib import Path
from typing import Any

NOT_FLAG_SETTINGS = frozenset({"record", "api_key", "server_args", "sessions_dir"})
"""Settings no flag sets as it is: ``--record`` names a file (the setting is on/off), the API key
becomes a secret (`flag_settings`), server arguments come after ``--``, and the sessions folder
comes from the file or the environment only."""


def add_launch_options(parser: argparse.ArgumentParser) -> None:
    """The server flags: launch one (--model, --server-bin, --spec-type, ...) or --url."""
    server = parser.add_argument_group("server (launch one, or attach with --url)")
    server.add_argument("--model", type=Path, help="GGUF model to launch llama-server with")
    server.add_argument(
        "--url", help="attach to a running llama-server, e.g. http://127.0.0.1:8080"
    )
    server.add_argument("--api-key", help="API key of the attached server (or SPECTUI_API_KEY)")
    server.add_argument("--server-bin", type=Path, help="llama-server executable to use")
    server.add_argument("--spec-type", help="spec type(s), comma-separated (see `spectui doctor`)")
    server.add_argument("--draft-model", type=Path, help="draft model for draft-* spec types")
    server.add_argument("--spec-draft-n-max", type=int, dest="draft_n_max", metavar="N")
    server.add_argument("--spec-draft-n-min", type=int, dest="draft_n_min", metavar="N")
    server.add_argument("--ctx-size", type=int, metavar="N", help="context size (default 4096)")
    server.add_argument("--host", help="interface a launched server binds to (127.0.0.1)")
    server.add_argument("--port", type=int, help="port of a launched server (default: a free one)")


def flag_settings(flags: Mapping[str, object]) -> dict[str, Any]:
    """The settings a parsed command line (``vars(args)``) gives: every flag whose destination
    is a `Settings` field, when given; the API key as a secret."""
    from pydantic import SecretStr

    from spectui.config import Settings

    update: dict[str, Any] = {
        name: flags[name]
        for name in Settings.model_fields.keys() - NOT_FLAG_SETTINGS
        if flags.get(name) is not None
    }
    if key := flags.get("api_key"):
        update["api_key"] = SecretStr(str(key))
    return update
