"""A compare or tune cut short says, in its last line, what the results file keeps and the
command that continues it (`commands.runs.cut_short`, one line for both)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from helpers.engines import FakeSetup, ScriptedEngine
from helpers.gguf_files import target
from spectui.cli import main
from spectui.commands.runs import cut_short
from spectui.core.events import EventStream
from spectui.core.llama.specconfig import SpecConfig
from spectui.core.request import GenerationRequest


class InterruptedEngine(ScriptedEngine):
    """Ctrl-C during the second run."""

    async def run(self, request: GenerationRequest) -> EventStream:
        if self.runs_done == 1:
            raise KeyboardInterrupt
        async for event in super().run(request):
            yield event


class Setup(FakeSetup):
    """One engine over the whole command (its runs counted across spec switches)."""

    def engine(self, spec: SpecConfig) -> ScriptedEngine:
        if not self.engines:
            self.engines.append(InterruptedEngine(spec=spec))
        return self.engines[0]


def test_the_line_says_what_is_kept_and_how_to_continue() -> None:
    line = cut_short(lambda: True, lambda: "2 of 8 runs kept in r.json", "spectui compare -r")
    assert line() == "spectui: 2 of 8 runs kept in r.json; continue with: spectui compare -r"
    assert cut_short(lambda: False, lambda: "unused", "unused")() is None


def test_an_interrupted_compare_says_how_to_continue(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    model = target(tmp_path / "m.gguf", "gemma3")
    setup = Setup(model=model)
    monkeypatch.setattr("spectui.app_setup.compare_setup", lambda *_, **__: setup)
    out = tmp_path / "r.json"
    assert main(["compare", "--json", str(out), "--no-chart", "--model", str(model)]) == 130
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines[-1] == "spectui: interrupted"
    path = re.escape(str(out))
    kept = rf"spectui: 1 of \d+ runs kept in {path}; continue with: spectui compare --resume {path}"
    assert re.fullmatch(kept, lines[-2]), lines
