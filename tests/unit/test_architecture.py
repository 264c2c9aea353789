"""The architecture as checked rules: spectui.core never imports textual (the engine must run
headless), and the import-linter contracts in pyproject.toml hold."""

from __future__ import annotations

import pkgutil
import shutil
import subprocess
import sys
from pathlib import Path

import spectui.core

ROOT = Path(__file__).resolve().parents[2]


def test_core_modules_do_not_import_textual() -> None:
    modules = [m.name for m in pkgutil.walk_packages(spectui.core.__path__, "spectui.core.")]
    assert "spectui.core.stream.run" in modules
    code = (
        "import importlib, sys\n"
        f"for name in {modules!r}:\n"
        "    importlib.import_module(name)\n"
        "    bad = sorted(m for m in sys.modules if m == 'textual' or m.startswith('textual.'))\n"
        "    assert not bad, (name, bad[:3])\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_import_contracts_hold() -> None:
    lint = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    assert lint is not None, "import-linter is a dev dependency: pip install -e '.[dev]'"
    result = subprocess.run(
        [lint, "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]


def test_core_never_reads_the_app_settings() -> None:
    core = ROOT / "src" / "spectui" / "core"
    offenders = [
        str(path.relative_to(core))
        for path in core.rglob("*.py")
        if "spectui.config" in path.read_text(encoding="utf-8")
    ]
    assert offenders == []
