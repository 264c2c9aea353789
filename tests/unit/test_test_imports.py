"""No test module imports another test module (or a conftest): what tests share lives in
conftest.py fixtures and in helper modules (tests/helpers/, `*_helpers.py`, `outside.py`...)."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent.parent


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
