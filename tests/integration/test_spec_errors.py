"""A spec type the model or the binary cannot run (#28 item 4): one clear line, exit != 0, no
traceback and no server started, in `stream`, the TUI launch, `compare` and `tune`."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from helpers.cli import one_clear_line, spectui
from spectui.core.engine.live import launch_engine
from spectui.core.events import ServerState, ServerStateEvent
from spectui.core.llama.binary import Capabilities
from spectui.core.llama.specconfig import SpecConfig

from .outside import FAST

pytestmark = pytest.mark.server

PROMPT = ("--prompt", "Hello alpha beta")

CASES = {
    "unknown type in a chain": (
        ("--spec-type", "ngram-mod,ngram-magic"),
        "'ngram-magic' in the chain 'ngram-mod,ngram-magic' is not supported",
    ),
    "draft-mtp without MTP layers": (
        ("--spec-type", "draft-mtp"),
        "'draft-mtp' cannot run here: no MTP layers in this GGUF",
    ),
    "draft-eagle3 without a draft model": (
        ("--spec-type", "draft-eagle3"),
        "'draft-eagle3' needs a draft model",
    ),
}


def no_server_started() -> None:
    """Every launch writes a log file first: none there, no server was started."""
    logs = Path(os.environ["XDG_STATE_HOME"])
    assert not list(logs.rglob("llama-server-*.log"))


@pytest.mark.parametrize("case", CASES, ids=list(CASES))
@pytest.mark.parametrize("command", ["stream", "tui"])
def test_stream_and_the_tui_refuse_before_any_start(
    gemma_model: Path, command: str, case: str
) -> None:
    flags, message = CASES[case]
    head = ["stream"] if command == "stream" else []  # the TUI builds its engine before drawing
    line = one_clear_line(spectui(*head, "--model", str(gemma_model), *flags, *PROMPT))
    assert message in line
    no_server_started()


@pytest.mark.parametrize("case", CASES, ids=list(CASES))
def test_compare_refuses_before_any_start(gemma_model: Path, case: str, tmp_path: Path) -> None:
    flags, message = CASES[case]
    config = flags[1]
    result = spectui(
        "compare",
        "--model",
        str(gemma_model),
        "--config",
        config,
        "--prompts",
        "builtin",
        "--json",
        str(tmp_path / "c.json"),
    )
    assert message in one_clear_line(result)
    assert not (tmp_path / "c.json").exists()
    no_server_started()


@pytest.mark.parametrize(
    ("types", "message"),
    [
        ("ngram-magic", "ngram-magic: this llama-server does not list it"),
        ("draft-mtp", "draft-mtp: needs a model with MTP layers"),
        ("draft-eagle3", "draft-eagle3: needs an EAGLE-3 drafter"),
    ],
)
def test_tune_refuses_what_cannot_run(gemma_model: Path, types: str, message: str) -> None:
    line = one_clear_line(
        spectui("tune", "--model", str(gemma_model), "--types", types, "--prompts", "builtin")
    )
    assert "nothing to tune" in line and message in line
    no_server_started()


def test_a_tui_switch_to_a_type_the_model_cannot_run_keeps_the_server(
    llama_binary: Path, gemma_model: Path, caps: Capabilities
) -> None:
    """The spec picker's switch goes through the same check: refused, the old server stays."""
    engine = launch_engine(
        llama_binary,
        caps,
        gemma_model,
        SpecConfig(types=("ngram-simple",)),
        ctx_size=512,
        extra_args=FAST,
    )

    async def switch() -> tuple[int | None, list[ServerStateEvent], int | None]:
        try:
            async for _ in engine.start():
                pass
            before = engine.info.pid
            events = [
                e
                async for e in engine.switch_spec(SpecConfig(types=("ngram-mod", "draft-mtp")))
                if isinstance(e, ServerStateEvent)
            ]
            return before, events, engine.info.pid
        finally:
            await engine.aclose()

    before, events, after = asyncio.run(switch())
    assert before is not None and after == before
    assert [e.state for e in events] == [ServerState.FAILED]
    assert events[0].refused
    assert "'draft-mtp' cannot run here: no MTP layers in this GGUF" in events[0].detail
