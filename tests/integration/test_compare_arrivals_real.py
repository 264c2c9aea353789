"""`compare --arrivals recorded --speed 4` on the real llama-server with Gemma 3 270M: a workload
recorded through `spectui proxy --record` is replayed, each config's round sending the recorded
requests in recorded order, each no earlier than its recorded offset ÷ 4 after its block began.

Only the order and that lower bound are asserted: no upper timing bound (a slow machine sends
late, never early) and no verdict.
"""

from __future__ import annotations

import contextlib
import json
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from helpers.cli import one_clear_line, spectui
from spectui.app_setup import compare_setup
from spectui.config import Settings
from spectui.core.compare import block as block_module
from spectui.core.compare.models import ComparePlan
from spectui.core.compare.open_loop import recorded_source, replay_block, replay_prompts
from spectui.core.compare.prompt_files import load_prompts
from spectui.core.compare.runner import CompareRunner
from spectui.core.compare.setup import parse_configs, slot_counter
from spectui.core.compare.store import CompareDocument, ServerOptions, load_document
from spectui.core.request import GenerationRequest

from .outside import FAST, outside_server, wait_healthy
from .proxy_helpers import proxy_process

pytestmark = pytest.mark.server

PROMPTS = ["Count: 1, 2, 3, 4,", "The capital of France is", "def add(a, b):"]
SPEED = 4.0


def record_workload(llama_binary: Path, gemma_model: Path, folder: Path) -> list[dict[str, Any]]:
    """Three requests, one after another, through `spectui proxy --record FOLDER`."""
    with outside_server(llama_binary, gemma_model) as (upstream, _pid):
        wait_healthy(upstream, 120)
        with proxy_process("--url", upstream, "--record", str(folder)) as (url, proc):
            with httpx.Client(timeout=120) as http:
                for prompt in PROMPTS:
                    body = {"prompt": prompt, "n_predict": 4, "temperature": 0}
                    assert http.post(url + "/completion", json=body).is_success
            proc.send_signal(signal.SIGTERM)
            proc.communicate(timeout=30)
    lines = (folder / "workload.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


async def test_a_recorded_workload_replays_in_order_and_never_early(
    gemma_model: Path, llama_binary: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "rec"
    workload = record_workload(llama_binary, gemma_model, folder)
    assert [w["text"] for w in workload] == PROMPTS
    arrivals = [w["arrival_s"] for w in workload]
    assert arrivals[0] == 0 and arrivals == sorted(arrivals) and arrivals[-1] > 0

    source = recorded_source(str(folder))
    prompts = replay_prompts(load_prompts(source, 4), source)
    settings = Settings(model=gemma_model, server_bin=llama_binary)
    setup = compare_setup(settings, server=ServerOptions(ctx_size=512, extra_args=[*FAST]))
    setup = setup.with_slots((2,))
    configs = parse_configs(["none", "ngram-simple"], setup.caps)
    plan = ComparePlan(
        configs=configs,
        prompts=prompts,
        reps=1,
        warmup=False,
        concurrency=(2,),
        arrivals="recorded",
        speed=SPEED,
    )
    document = CompareDocument.new(
        plan, binary=setup.binary_info, model=setup.model_info, server=setup.server
    )
    # When each block's replay began (before its own clock reading) and when each request
    # reached the engine: the replay may send late, never early.
    began: list[float] = []
    reached: list[tuple[str, float]] = []

    async def timed_replay(*args: Any, **kwargs: Any) -> None:
        began.append(time.monotonic())
        await replay_block(*args, **kwargs)

    monkeypatch.setattr(block_module, "replay_block", timed_replay)
    out = tmp_path / "r.json"
    engine = setup.engine(configs[0].spec)
    real_run: Callable[[GenerationRequest], Any] = engine.run

    def noted_run(request: GenerationRequest) -> Any:
        reached.append((request.prompt, time.monotonic()))
        return real_run(request)

    engine.run = noted_run  # type: ignore[method-assign]  # a spy on the runs
    runner = CompareRunner(
        engine, document, outputs=[out], trust_code=True, slot_count=slot_counter(engine)
    )
    try:
        async with contextlib.aclosing(runner.run()) as stream:
            async for _ in stream:
                pass
    finally:
        await engine.aclose()

    doc = load_document(out)
    assert doc.complete and all(r.ok for r in doc.runs), [r.error for r in doc.runs if not r.ok]
    assert len(began) == 2 and len(reached) == 2 * len(PROMPTS)  # one block per config
    for block, start in enumerate(began):
        mine = reached[block * len(PROMPTS) : (block + 1) * len(PROMPTS)]
        assert [prompt for prompt, _ in mine] == PROMPTS  # recorded order
        for (_, at), arrival in zip(mine, arrivals, strict=True):
            assert at - start >= arrival / SPEED  # no earlier than recorded ÷ speed
    raw = json.loads(out.read_text())
    assert raw["plan"]["arrivals"] == "recorded" and raw["plan"]["speed"] == SPEED
    (row,) = [r for r in raw["levels"] if r["config"] == "ngram-simple"]
    for name in ("aggregate_tokens_per_second", "latency_p95_ms", "ttft_p95_ms", "waited"):
        assert row[name] is not None, name
    assert [v["config"] for v in raw["level_verdicts"]] == ["ngram-simple"]


def test_the_cli_refuses_a_bad_replay_in_one_line(tmp_path: Path) -> None:
    folder = tmp_path / "rec"
    folder.mkdir()
    lines = [{"text": "a", "arrival_s": 1.0}, {"text": "b", "arrival_s": 0.5}]
    (folder / "workload.jsonl").write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    out = tmp_path / "out"
    out.mkdir()
    base = ["compare", "--config", "ngram-simple", "--json", str(out / "r.json")]
    line = one_clear_line(spectui(*base, "--prompts", str(folder), "--arrivals", "recorded"))
    assert "must be sorted" in line
    bad_speed = spectui(*base, "--arrivals", "recorded", "--speed", "0")  # (argparse: usage too)
    assert bad_speed.returncode == 2 and "Traceback" not in bad_speed.stderr
    assert "--speed: a number above 0" in bad_speed.stderr.strip().splitlines()[-1]
    assert list(out.iterdir()) == []
