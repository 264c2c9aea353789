"""`spectui` run as a user runs it: a subprocess, its output captured, and what a bad input
must look like (one clear line, exit != 0, no traceback)."""

from __future__ import annotations

import os
import subprocess
import sys


def spectui(
    *args: str, env: dict[str, str] | None = None, timeout: float = 900
) -> subprocess.CompletedProcess[str]:
    """``python -m spectui.cli *args`` to its end (``timeout``: a hang guard, minutes on a
    loaded machine)."""
    return subprocess.run(
        [sys.executable, "-m", "spectui.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
        stdin=subprocess.DEVNULL,
    )


def one_clear_line(result: subprocess.CompletedProcess[str]) -> str:
    """The one ``spectui: …`` line a failed command printed (asserting there is only that)."""
    assert result.returncode != 0, result
    assert "Traceback" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("spectui: ")
    return lines[0]
