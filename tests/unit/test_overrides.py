"""The gates of the private-API overrides: each is held to the version pyproject.toml pins (and
the lock installs), each works on the tested set, and each falls back, once and logged, when the
version, the private names or SPECTUI_STOCK say so."""

from __future__ import annotations

import importlib
import logging
import os
import pkgutil
import subprocess
import sys
import tomllib
from collections.abc import Callable, Iterator
from importlib import metadata
from pathlib import Path
from types import ModuleType

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

import spectui
from spectui.core import overrides
from spectui.core.overrides import STOCK_ENV, Override, enabled, stock_forced

ROOT = Path(__file__).resolve().parents[2]
KNOWN = {"lean-compositor", "asyncio-transport", "lean-uvicorn", "serve-handlers"}
"""Overrides that must be found (others may be added: each is checked the same way)."""


def _modules() -> list[ModuleType]:
    return [
        importlib.import_module(info.name)
        for info in pkgutil.walk_packages(spectui.__path__, "spectui.")
    ]


def _declared() -> list[Override]:
    """Every `Override` a spectui module holds at module level (each module imported)."""
    found: dict[str, Override] = {}
    for module in _modules():
        for value in vars(module).values():
            if isinstance(value, Override):
                found[value.name] = value
    return list(found.values())


def _requirements() -> dict[str, Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    lines = list(project["dependencies"])
    for name in ("server", "demo", "dev"):
        lines += project["optional-dependencies"][name]
    requirements = (Requirement(line) for line in lines)
    return {canonicalize_name(r.name): r for r in requirements if r.name != "spectui"}


def _locked() -> dict[str, str]:
    pins: dict[str, str] = {}
    for line in (ROOT / "requirements" / "lock.txt").read_text().splitlines():
        if line and not line.startswith((" ", "#")):
            name, _, version = line.partition("==")
            pins[canonicalize_name(name)] = version.split(";")[0].strip()
    return pins


def test_every_override_is_found_and_registered() -> None:
    declared = {o.name for o in _declared()}
    assert declared >= KNOWN
    assert declared <= {o.name for o in overrides.defined()}


def test_each_override_is_tested_on_the_exact_version_pyproject_pins_and_the_lock_installs() -> (
    None
):
    requirements, locked = _requirements(), _locked()
    for override in _declared():
        for library, tested in override.libraries().items():
            pin = requirements.get(canonicalize_name(library))
            assert pin is not None, f"{override.name}: pyproject.toml does not declare {library}"
            assert str(pin.specifier) == f"=={tested}", (override.name, library, str(pin))
            assert locked.get(canonicalize_name(library)) == tested, (override.name, library)


def test_the_lock_covers_every_declared_dependency() -> None:
    # (A dependency added to pyproject.toml needs `make lock`.)
    locked = _locked()
    for name, requirement in _requirements().items():
        assert name in locked, f"{name} is not in requirements/lock.txt: run `make lock`"
        assert requirement.specifier.contains(locked[name], prereleases=True), (name, locked[name])


@pytest.mark.skipif(stock_forced(), reason=f"{STOCK_ENV} is set: every override is off")
def test_on_the_tested_set_every_override_is_used() -> None:
    # Each check must pass where it was written: a wrong check would fall back silently. (The
    # transport's and the proxy's gates are asserted by their own tests.)
    overrides.reset()
    from spectui.commands import share
    from spectui.ui import compositor

    assert share.serve_handlers_enabled()
    assert compositor.lean_compositor_enabled()
    for override in _declared():
        for library, tested in override.libraries().items():
            assert metadata.version(library) == tested, (override.name, library)


@pytest.fixture
def gate(monkeypatch: pytest.MonkeyPatch) -> Iterator[Override]:
    """An override of the installed textual, forgotten afterwards (decisions and registry)."""
    monkeypatch.delenv(STOCK_ENV, raising=False)
    monkeypatch.setattr(overrides, "_defined", dict(overrides._defined))
    overrides.reset()
    yield Override(name="probe", library="textual", tested_version=metadata.version("textual"))
    overrides.reset()


def test_a_passing_check_on_the_tested_version_enables_it_decided_once(gate: Override) -> None:
    calls: list[int] = []

    def check() -> bool:
        calls.append(1)
        return True

    assert enabled(gate, check) and enabled(gate, check)
    assert calls == [1]


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"tested_version": "0.0.1"}, "is not the tested 0.0.1"),
        ({"library": "no-such-distribution-here"}, "no-such-distribution-here is not installed"),
        ({"requires": {"rich": "0.0.1"}}, "rich"),
    ],
)
def test_another_version_falls_back_with_one_line(
    gate: Override, change: dict[str, object], reason: str, caplog: pytest.LogCaptureFixture
) -> None:
    other = gate.model_copy(update=change)
    with caplog.at_level(logging.INFO, logger="spectui.overrides"):
        assert not enabled(other, lambda: True)
        assert not enabled(other, lambda: True)
    assert len(caplog.records) == 1
    assert reason in caplog.records[0].getMessage()
    assert caplog.records[0].levelno == logging.WARNING  # (not the tested set: said so)


@pytest.mark.parametrize("check", [lambda: False, lambda: {"name": True}["renamed"]])
def test_missing_private_names_fall_back(
    gate: Override, check: Callable[[], bool], caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="spectui.overrides"):
        assert not enabled(gate, check)
    assert len(caplog.records) == 1
    assert "probe: using textual's public path" in caplog.records[0].getMessage()
    reason = overrides.why_off(gate)
    assert reason is not None and reason in caplog.records[0].getMessage()


def test_spectui_stock_forces_the_public_path_without_looking(
    gate: Override, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv(STOCK_ENV, "1")

    def check() -> bool:
        raise AssertionError("not asked under SPECTUI_STOCK")

    with caplog.at_level(logging.INFO, logger="spectui.overrides"):
        assert not enabled(gate, check)
    assert f"{STOCK_ENV} is set" in caplog.text
    assert [r.levelno for r in caplog.records] == [logging.INFO]  # (asked for: quietly)


def test_spectui_stock_may_name_single_overrides(
    gate: Override, monkeypatch: pytest.MonkeyPatch
) -> None:
    other = Override(name="other", library="textual", tested_version=gate.tested_version)
    monkeypatch.setenv(STOCK_ENV, "lean-plot, probe")
    assert not stock_forced()
    assert not enabled(gate, lambda: True)
    assert enabled(other, lambda: True)


def test_a_share_beyond_loopback_without_its_gate_is_refused_in_one_line(tmp_path: Path) -> None:
    # Its stock path (textual-serve's own server) has no token guard: only loopback may use it.
    env = {**os.environ, STOCK_ENV: "serve-handlers"}
    argv = [sys.executable, "-m", "spectui.cli", "share", "--listen", "0.0.0.0:8765"]
    done = subprocess.run(
        [*argv, str(tmp_path)], env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode != 0
    assert done.stderr.strip().count("\n") == 0, done.stderr
    assert "token guard" in done.stderr and f"{STOCK_ENV} names it" in done.stderr
