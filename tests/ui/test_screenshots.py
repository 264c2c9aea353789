"""`make screenshots` keeps working: the script draws every docs picture from the checked-in
recordings, headless, into a folder of the test's (the committed pictures are left alone), and
every picture under docs/images is one it draws."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "screenshots.py"
IMAGES = ROOT / "docs" / "images"
BROWSER_PICTURES = {"follow-browser.png"}
"""The pictures taken in headless Chromium (`--no-browser` leaves them out)."""
TEST_RUN_TRACES = ("b9999", "gemma.gguf", "pytest", "/tmp/", "KiB")
"""What a capture of a test run shows and a recorded run does not (a fake build, a fake model
file, a temp path, a fake server's RSS)."""


def _draw(out: Path, *args: str) -> None:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--out", str(out), *args],
        capture_output=True, text=True, timeout=600, check=False, cwd=ROOT,
        env={k: v for k, v in os.environ.items() if k != "NO_COLOR"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr


def test_every_picture_is_drawn(tmp_path: Path) -> None:
    _draw(tmp_path, "--no-browser")
    drawn = sorted(p.name for p in tmp_path.iterdir())
    committed = {p.name for p in IMAGES.iterdir()}
    # Every picture in the docs is drawn by the script, and nothing else is committed there.
    assert set(drawn) | BROWSER_PICTURES == committed
    for name in drawn:
        svg = (tmp_path / name).read_text(encoding="utf-8")
        assert svg.startswith("<svg"), name
    # The live TUI's picture shows a run with accepted drafts (the legend, and its numbers).
    tui = (tmp_path / "tui.svg").read_text(encoding="utf-8")
    assert "accepted&#160;draft" in tui and "accept&#160;rate" in tui
    # The followers: a recorded run of the real server, the broadcast folder named from home.
    terminal = (tmp_path / "follow-terminal.svg").read_text(encoding="utf-8")
    ssh = (tmp_path / "follow-ssh.svg").read_text(encoding="utf-8")
    assert "following&#160;~/…/live&#160;·&#160;run&#160;1&#160;·&#160;ngram-simple" in terminal
    assert "run&#160;2&#160;·&#160;ngram-simple&#160;·&#160;●&#160;live" in ssh
    for svg in (terminal, ssh):
        assert "gemma-3-270m-q4_k_m.gguf" in svg
        assert not [trace for trace in TEST_RUN_TRACES if trace in svg]


@pytest.mark.browser
def test_the_browser_picture_is_drawn(tmp_path: Path) -> None:
    if shutil.which("chromium") is None and not os.environ.get("CI"):  # (CI must have it)
        pytest.skip("Debian's chromium is not installed (apt-get install chromium)")
    _draw(tmp_path, *(Path(name).stem for name in sorted(BROWSER_PICTURES)))
    assert {p.name for p in tmp_path.iterdir()} == BROWSER_PICTURES
    png = (tmp_path / "follow-browser.png").read_bytes()
    assert png.startswith(b"\x89PNG\r\n\x1a\n")
    width, height = int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")
    assert (width, height) >= (800, 500)
