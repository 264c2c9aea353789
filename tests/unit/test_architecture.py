"""spectui.core never imports textual: the engine must run headless."""

from __future__ import annotations

import pkgutil
import subprocess
import sys

import spectui.core


def test_core_modules_do_not_import_textual() -> None:
    modules = [m.name for m in pkgutil.iter_modules(spectui.core.__path__, "spectui.core.")]
    assert "spectui.core.stream" in modules
    code = (
        "import importlib, sys\n"
        f"for name in {modules!r}:\n"
        "    importlib.import_module(name)\n"
        "    bad = sorted(m for m in sys.modules if m == 'textual' or m.startswith('textual.'))\n"
        "    assert not bad, (name, bad[:3])\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
