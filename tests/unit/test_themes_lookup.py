"""The shipped themes live in the top-level ``themes/``, travel in the wheel, and are found both
in an installed wheel and in this (editable) checkout; user themes come after them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from spectui.ui.themes import SHIPPED_THEMES, discover_themes, shipped_theme_dir

ROOT = Path(__file__).resolve().parents[2]


def test_the_checkout_reads_the_top_level_folder() -> None:
    assert sorted(p.stem for p in (ROOT / "themes").glob("*.toml")) == sorted(SHIPPED_THEMES)
    assert not (ROOT / "src" / "spectui" / "themes").exists()
    assert shipped_theme_dir() == ROOT / "themes"


def test_a_user_theme_replaces_a_shipped_one_of_its_name(tmp_path: Path) -> None:
    (tmp_path / "spectui-dark.toml").write_text("name = 'spectui-dark'\nprimary = '#123456'\n")
    themes, problems = discover_themes(shipped_theme_dir(), tmp_path)
    assert not problems
    by_name = {theme.name: theme for theme in themes}
    assert sorted(by_name) == sorted(SHIPPED_THEMES)
    assert by_name["spectui-dark"].primary == "#123456"


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """spectui's wheel, built offline by the installed hatchling (a dev dependency)."""
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
         "--quiet", "--wheel-dir", str(out), str(ROOT)],
        check=True,
    )  # fmt: skip
    (built,) = out.glob("spectui-*.whl")
    return built


def test_the_wheel_carries_the_themes_in_the_package(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    assert {f"spectui/themes/{name}.toml" for name in SHIPPED_THEMES} <= names


def test_an_installed_wheel_finds_its_themes(wheel: Path, tmp_path: Path) -> None:
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    # The unpacked wheel comes first on the path, before this checkout's editable install.
    env = {**os.environ, "PYTHONPATH": str(site)}
    probe = (
        "import json, spectui\n"
        "from spectui.ui.themes import discover_themes, shipped_theme_dir\n"
        "themes, problems = discover_themes(shipped_theme_dir())\n"
        "print(json.dumps([spectui.__file__, str(shipped_theme_dir()),"
        " sorted(t.name for t in themes), problems]))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], env=env, cwd=tmp_path, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    package, folder, names, problems = json.loads(result.stdout)
    assert Path(package).is_relative_to(site)
    assert Path(folder) == site / "spectui" / "themes"
    assert (names, problems) == (sorted(SHIPPED_THEMES), [])
