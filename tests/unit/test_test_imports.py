"""No test module imports another test module (or a conftest): what tests share lives in
conftest.py fixtures and in helper modules (tests/helpers/, `*_helpers.py`, `outside.py`...).

What more than one test folder shares lives in tests/helpers/: a folder's own helper modules
(`unit/compare_helpers.py`, `integration/outside.py`) serve that folder only, and tests/helpers/
and the top conftest import from no folder. Fake engines come from `helpers.engines`: an engine
class a test module defines is its own one-off, imported by no other module."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent.parent

FOLDERS = ("unit", "ui", "integration")
"""The test folders (pytest imports their modules as `unit.*`, `ui.*`, `integration.*`)."""


def _absolute_imports(path: Path) -> list[str]:
    """The modules ``path`` imports by absolute name."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append(node.module)
        elif isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
    return found


def _other_folders(path: Path, tests: Path = TESTS) -> list[str]:
    """The modules of another test folder that ``path`` imports (for tests/helpers/ and the top
    conftest, every folder is another)."""
    parts = path.relative_to(tests).parts
    own = parts[0] if len(parts) > 1 else None
    return [
        module
        for module in _absolute_imports(path)
        if module.split(".")[0] in FOLDERS and module.split(".")[0] != own
    ]


def _engines_from_elsewhere(path: Path) -> list[str]:
    """Engine classes ``path`` imports from anywhere but `helpers` and `spectui` (tests/helpers/
    itself excepted: `helpers.engines` gathers its modules' engines)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if not isinstance(node, ast.ImportFrom):
            continue
        root = (node.module or "").split(".")[0] if node.level == 0 else ""
        if root in ("helpers", "spectui"):
            continue
        base = "." * node.level + (f"{node.module}." if node.module else "")
        found += [base + alias.name for alias in node.names if alias.name.endswith("Engine")]
    return found


def _shared_from_tests(path: Path) -> list[str]:
    """The modules ``path`` imports that are test modules or conftests, as written."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            names = [base] if base else []
            # `from . import <module>` names the module among the imported names.
            names += [f"{base}.{a.name}" if base else a.name for a in node.names]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            continue
        for name in names:
            last = name.rsplit(".", 1)[-1]
            if last.startswith("test_") or last == "conftest":
                found.append(f"{'.' * getattr(node, 'level', 0)}{name}")
    return found


def test_no_test_module_imports_another() -> None:
    offenders = {
        str(path.relative_to(TESTS)): found
        for path in sorted(TESTS.rglob("*.py"))
        if (found := _shared_from_tests(path))
    }
    assert offenders == {}, "move what they share to a conftest fixture or a helper module"


def test_no_folder_reaches_into_another() -> None:
    offenders = {
        str(path.relative_to(TESTS)): found
        for path in sorted(TESTS.rglob("*.py"))
        if (found := _other_folders(path))
    }
    assert offenders == {}, "what two test folders share belongs in tests/helpers/"


def test_fake_engines_come_from_helpers() -> None:
    offenders = {
        str(path.relative_to(TESTS)): found
        for path in sorted(TESTS.rglob("*.py"))
        if path.relative_to(TESTS).parts[0] != "helpers"
        and (found := _engines_from_elsewhere(path))
    }
    assert offenders == {}, "a shared fake engine belongs in helpers.engines"


def test_the_folder_check_sees_each_form(tmp_path: Path) -> None:
    for folder in ("ui", "helpers"):
        (tmp_path / folder).mkdir()
    sample = tmp_path / "ui" / "test_sample.py"
    sample.write_text(
        "from unit.compare_helpers import plan\nimport integration.outside\n"
        "from ui.ui_helpers import settle\nfrom .ui_helpers import settle\n"
        "from helpers.engines import FakeEngine\nfrom spectui.cli import main\n"
    )
    assert _other_folders(sample, tmp_path) == ["unit.compare_helpers", "integration.outside"]
    helper = tmp_path / "helpers" / "sample.py"
    helper.write_text("from ui.ui_helpers import settle\nfrom helpers.wait import wait_until\n")
    assert _other_folders(helper, tmp_path) == ["ui.ui_helpers"]
    top = tmp_path / "conftest.py"
    top.write_text("from integration.outside import FAST\n")
    assert _other_folders(top, tmp_path) == ["integration.outside"]


def test_the_engine_check_sees_each_form(tmp_path: Path) -> None:
    sample = tmp_path / "test_sample.py"
    sample.write_text(
        "from .fake_engine import FakeEngine\nfrom unit.compare_helpers import ScriptedEngine\n"
        "from . import OtherEngine\nfrom helpers.engines import CaptureEngine\n"
        "from spectui.core.engine.live import LiveEngine\nfrom .compare_helpers import plan\n"
    )
    assert _engines_from_elsewhere(sample) == [
        ".fake_engine.FakeEngine",
        "unit.compare_helpers.ScriptedEngine",
        ".OtherEngine",
    ]


def test_the_check_sees_each_form(tmp_path: Path) -> None:
    sample = tmp_path / "test_sample.py"
    test = "test_"  # (spelled apart: a grep of the tree for such imports finds none here)
    sample.write_text(
        f"from .{test}a import x\nfrom . import {test}b\nimport unit.{test}c\n"
        f"from integration.{test}d import y\nfrom .conftest import z\n"
        "from .compare_helpers import ok\nfrom helpers.wait import wait_until\n"
    )
    assert _shared_from_tests(sample) == [
        ".test_a",
        ".test_b",
        "unit.test_c",
        "integration.test_d",
        ".conftest",
    ]
