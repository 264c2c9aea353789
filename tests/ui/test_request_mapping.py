"""One mapping from settings to a request: the TUI, `stream` and `compare` send the same body for
the same flags and settings, for every sampling and delivery option, and hand the stall timeout
to their engines; and the two TUI bugs it fixed."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from helpers.engines import FakeEngine, FakeSetup, ScriptedEngine
from spectui.app_setup import build_engine, compare_setup
from spectui.cli import build_parser, main, settings_from, split_extra
from spectui.config import Settings
from spectui.core.compare.setup import PEAK_INTERVAL_S, CompareSetup
from spectui.core.compare.store import ServerOptions
from spectui.core.llama.binary import BinaryChoice
from spectui.core.llama.specconfig import SpecConfig
from spectui.core.prompts import builtin_prompt
from spectui.core.request import Delivery, GenerationRequest, Sampling
from spectui.core.stream import DEFAULT_STALL_TIMEOUT_S
from spectui.core.stream.run import MEMORY_INTERVAL_S
from spectui.ui.apps.live import SpectuiApp

from .ui_helpers import settle

# Every generation setting (Sampling, Delivery, the stall timeout) away from its default.
FLAGS = [
    "--n-predict", "33",
    "--temperature", "0.7",
    "--seed", "1234",
    "--top-k", "5",
    "--top-p", "0.9",
    "--chat",
    "--cache-prompt",
    "--stall-timeout", "12.5",
]  # fmt: skip


def test_every_request_field_has_a_flag() -> None:
    from spectui.commands.common import GENERATION_FLAGS, REQUEST_FLAGS

    assert set(REQUEST_FLAGS) == set(Sampling.model_fields) | set(Delivery.model_fields)
    assert set(GENERATION_FLAGS) - set(REQUEST_FLAGS) == {"stall_timeout_s"}
    given = {flag for flag in FLAGS if flag.startswith("--")}
    assert given == set(GENERATION_FLAGS.values())


def settings_for(*argv: str) -> Settings:
    own, extra = split_extra(argv)
    return settings_from(build_parser().parse_args(own), extra)


async def tui_request(settings: Settings, prompt: Any) -> GenerationRequest:
    """The request the TUI sends once it autoruns ``prompt``."""
    engine = FakeEngine()
    app = SpectuiApp(engine, settings, prompt=prompt, autorun=True)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, lambda: engine.runs, "the autorun's request")
        await app.action_quit()
    assert engine.runs, "the TUI never started a run"
    return engine.runs[0]


def stream_request(monkeypatch: pytest.MonkeyPatch, *argv: str) -> GenerationRequest:
    """The request `spectui stream` sends for ``argv``."""
    engine = FakeEngine()
    monkeypatch.setattr("spectui.app_setup.build_engine", lambda settings: engine)
    assert main(["stream", *argv]) == 0
    return engine.runs[0]


class CapturingEngine(ScriptedEngine):
    requests: list[GenerationRequest]

    def run(self, request: GenerationRequest):
        self.requests.append(request)
        return super().run(request)


def compare_requests(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, *argv: str
) -> list[GenerationRequest]:
    """The requests `spectui compare` sends for ``argv`` (one config, the baseline)."""
    requests: list[GenerationRequest] = []

    class Setup(FakeSetup):
        def engine(self, spec: SpecConfig) -> ScriptedEngine:
            engine = CapturingEngine(spec=spec)
            engine.requests = requests
            return engine

    monkeypatch.setattr("spectui.app_setup.compare_setup", lambda settings, **_: Setup())
    out = tmp_path / "r.json"
    code = main(["compare", "--config", "none", "--reps", "1", "--no-chart", "--json", str(out),
                 *argv])  # fmt: skip
    assert code == 0
    return requests


@pytest.mark.parametrize("where", ["flags", "settings file"])
async def test_tui_stream_and_compare_send_the_same_body(
    where: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    if where == "settings file":
        config = tmp_path / "config.toml"
        config.write_text(
            "n_predict = 33\ntemperature = 0.7\nseed = 1234\ntop_k = 5\ntop_p = 0.9\n"
            "chat = true\ncache_prompt = true\nstall_timeout_s = 12.5\n"
        )
        monkeypatch.setenv("SPECTUI_CONFIG", str(config))
        flags: list[str] = []
    else:
        flags = FLAGS
    prompt = builtin_prompt("essay")
    assert settings_for(*flags).stall_timeout_s == 12.5  # (the engines': see below)
    tui = await tui_request(settings_for(*flags), prompt)
    stream = await asyncio.to_thread(stream_request, monkeypatch, "--builtin", "essay", *flags)
    compared = await asyncio.to_thread(
        compare_requests, monkeypatch, tmp_path, "--prompts", "builtin:essay", *flags
    )
    assert compared, "compare sent nothing"
    expected = {
        "n_predict": 33,
        "temperature": 0.7,
        "seed": 1234,
        "top_k": 5,
        "top_p": 0.9,
        "cache_prompt": True,
    }
    for request in (tui, stream, *compared):
        assert request.payload() == tui.payload()
    body = tui.payload()
    assert {key: body[key] for key in expected} == expected
    assert body["messages"] == [{"role": "user", "content": prompt.text}]


async def test_tui_honours_an_explicit_n_predict_over_the_builtin_length() -> None:
    """`spectui --builtin essay --n-predict 3000 --run` used to stop at the prompt's own 256."""
    essay = builtin_prompt("essay")
    assert essay.n_predict != 3000
    request = await tui_request(settings_for("--n-predict", "3000"), essay)
    assert request.n_predict == 3000
    default = await tui_request(settings_for(), essay)
    assert default.n_predict == essay.n_predict  # no flag: the prompt's own length


async def test_tui_honours_cache_prompt() -> None:
    request = await tui_request(settings_for("--cache-prompt"), "Hello")
    assert request.cache_prompt is True
    assert request.payload()["cache_prompt"] is True


def test_the_stall_timeout_reaches_the_engines(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The watchdog is the engine's, not the request's: `build_engine` and `compare_setup` hand
    the setting to every `LiveEngine` they make."""
    attached = build_engine(settings_for("--url", "http://127.0.0.1:9", "--stall-timeout", "7"))
    assert attached.stall_timeout_s == 7.0
    assert build_engine(settings_for("--url", "http://127.0.0.1:9")).stall_timeout_s == (
        DEFAULT_STALL_TIMEOUT_S
    )
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF\x03\x00\x00\x00" + bytes(24))
    made: dict[str, Any] = {}

    def prepare(**given: Any) -> CompareSetup:
        made.update(given)
        return CompareSetup(
            binary=BinaryChoice(path=tmp_path / "llama-server", source="test"),
            caps=FakeSetup().caps,
            model=model,
            server=given["server"],
            stall_timeout_s=given["stall_timeout_s"],
        )

    monkeypatch.setattr("spectui.app_setup.prepare", prepare)
    setup = compare_setup(settings_for("--stall-timeout", "7"))
    assert made["stall_timeout_s"] == 7.0
    assert setup.engine(SpecConfig.parse("ngram-simple")).stall_timeout_s == 7.0


def test_a_comparison_samples_memory_faster_than_a_watched_run(tmp_path: Path) -> None:
    """A watched run samples the server's memory as often as its panes redraw; a comparison's
    run twice as often, for its peaks (a verdict's price)."""
    assert build_engine(settings_for("--url", "http://127.0.0.1:9")).memory_interval_s == (
        MEMORY_INTERVAL_S
    )
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF\x03\x00\x00\x00" + bytes(24))
    setup = CompareSetup(
        binary=BinaryChoice(path=tmp_path / "llama-server", source="test"),
        caps=FakeSetup().caps,
        model=model,
        server=ServerOptions(ctx_size=512),
    )
    assert setup.engine(SpecConfig.parse("ngram-simple")).memory_interval_s == PEAK_INTERVAL_S
    assert PEAK_INTERVAL_S < MEMORY_INTERVAL_S
