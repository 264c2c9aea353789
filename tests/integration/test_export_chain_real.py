"""A chain recorded on the real llama-server exports with both drafters drawn (issue #28 item 8).

`spectui stream --record` runs the tiny MTP target with ``ngram-simple,draft-mtp`` (the model
drafter serves the first steps, the n-gram member the rest once the word cycle comes round, as
tests/integration/test_chains_real.py shows), then `spectui export` draws the recording: the
legend names each drafter with its mark, in the order the recording first names them, and every
step's run of accepted drafts opens with its drafter's mark.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from helpers.cli import spectui
from spectui.core.events import TokenEvent, TokenOrigin
from spectui.core.sessions.file import read_session
from spectui.testing.tiny_models import TinyModels
from spectui.ui.widgets.drafters import DRAFTER_MARKS

pytestmark = pytest.mark.server

ESCAPE = re.compile(r"\x1b\[[0-9;]*m")
NGRAM_SIMPLE = ("--spec-ngram-simple-size-n", "3", "--spec-ngram-simple-size-m", "8")
"""Short keys, so the n-gram member drafts within one cycle of 24 words."""


def test_recorded_chain_exports_both_drafters(tiny_models: TinyModels, tmp_path: Path) -> None:
    recording = tmp_path / "chain.jsonl"
    result = spectui(
        "stream", "--model", str(tiny_models.mtp("partial")),
        "--spec-type", "ngram-simple,draft-mtp", "--spec-draft-n-max", "2",
        "--prompt", "Hello alpha beta", "--n-predict", "80", "--temperature", "0",
        "--record", str(recording), "--", *NGRAM_SIMPLE,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr

    runs: list[str] = []  # the drafter of each step's run of accepted drafts
    last: int | None = None
    for event in read_session(recording).events:
        if isinstance(event, TokenEvent) and event.origin is TokenOrigin.DRAFT:
            if event.step != last:
                assert event.drafter is not None
                runs.append(event.drafter)
            last = event.step
        elif isinstance(event, TokenEvent):
            last = None
    order = list(dict.fromkeys(runs))
    assert set(order) == {"ngram-simple", "draft-mtp"}, order
    marks = dict(zip(order, DRAFTER_MARKS, strict=False))

    out = tmp_path / "chain.ans"
    exported = spectui("export", str(recording), "--to", "ansi", "-o", str(out))
    assert exported.returncode == 0, exported.stderr
    lines = ESCAPE.sub("", out.read_text()).splitlines()
    assert lines[1].startswith(" ".join(marks[name] + name for name in order) + "  target")
    answer = "\n".join(lines[3:-2])
    drawn = [mark for mark in answer if mark in marks.values()]
    assert drawn == [marks[name] for name in runs]

    page = tmp_path / "chain.html"
    assert spectui("export", str(recording), "--to", "html", "-o", str(page)).returncode == 0
    html = page.read_text()
    for name, mark in marks.items():
        assert html.count(mark) == runs.count(name) + 1  # each run, and the legend
    header = json.loads(recording.read_text().splitlines()[0])
    assert header["server"]["spec"]["types"] == ["ngram-simple", "draft-mtp"]
