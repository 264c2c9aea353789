"""`make screenshots` keeps working: the script draws every docs picture from the checked-in
recordings, headless, into a folder of the test's (the committed pictures are left alone)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "screenshots.py"


def test_every_picture_is_drawn(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=600, check=False, cwd=ROOT,
        env={k: v for k, v in os.environ.items() if k != "NO_COLOR"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    drawn = sorted(p.name for p in tmp_path.glob("*.svg"))
    committed = {p.name for p in (ROOT / "docs" / "images").glob("*.svg")}
    assert {"tui.svg", "tui-midrun.svg", "compare.svg", "tune.svg", "proxy.svg"} <= set(drawn)
    assert set(drawn) <= committed, "a picture the script draws is not committed"
    for name in drawn:
        assert (tmp_path / name).read_text(encoding="utf-8").startswith("<svg"), name
    # The live TUI's picture shows a run with accepted drafts (the legend, and its numbers).
    tui = (tmp_path / "tui.svg").read_text(encoding="utf-8")
    assert "accepted&#160;draft" in tui and "accept&#160;rate" in tui
