"""Building the command line loads no command's run: every spectui process (`--version`,
`--help`, each command) builds the parser from every command module, so what a command needs
to run (the app setup, the engine, the UI, the proxy's server) is imported by its `run` only.

Checked in a fresh interpreter by what is imported, never by how long it takes."""

from __future__ import annotations

import json
import subprocess
import sys

RUN_ONLY = (
    "spectui.app_setup",
    "spectui.lifecycle",
    "spectui.ui.apps",
    "spectui.ui.screens",
    "spectui.core.compare",
    "spectui.core.tune",
    "spectui.core.engine.live",
    # The follower and the session files: `follow`'s and `share`'s flag defaults come from
    # `spectui.core.sessions.silence`, which imports nothing.
    "spectui.core.sessions.tail",
    "spectui.core.sessions.recording",
    "spectui.core.sessions.file",
    "spectui.core.proxy.app",
    "textual",
    "aiohttp",
    "uvicorn",
    "starlette",
)
"""Packages only a command's run needs (a name, or a package and everything below it)."""

PROBE = """
import json, sys
from spectui.cli import build_parser
build_parser().format_help()
print(json.dumps(sorted(sys.modules)))
"""


def test_building_the_command_line_imports_no_run() -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, check=True, timeout=600
    )
    loaded = json.loads(done.stdout)
    heavy = [m for m in loaded if m in RUN_ONLY or m.startswith(tuple(f"{p}." for p in RUN_ONLY))]
    assert heavy == [], "import these inside the command's run"
