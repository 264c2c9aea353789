"""`compare --concurrency` on the real llama-server with Gemma 3 270M (``--parallel 4``, one
thread, a few tokens): the document holds every level and metric, each request's draft counts
are its own response's `timings` while two streams share the server, and their sums equal the
server-wide `/metrics` deltas of each server start. Bad input: one line, nothing written.

No verdict and no timing is asserted: which config wins at which level depends on the machine.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import pytest

from helpers.cli import one_clear_line, spectui
from spectui.app_setup import compare_setup
from spectui.config import Settings
from spectui.core.compare.models import ComparePlan
from spectui.core.compare.prompt_files import load_prompts
from spectui.core.compare.runner import CompareFinished, CompareRunner, RunFinished, ServerStatus
from spectui.core.compare.setup import parse_configs, slot_counter
from spectui.core.compare.store import CompareDocument, ServerOptions, load_document
from spectui.core.engine.base import Engine
from spectui.core.events import ServerState
from spectui.core.llama.client import ServerClient
from spectui.core.llama.protocol import ServerMetrics

from .outside import FAST

pytestmark = pytest.mark.server

PROMPTS = "builtin:table-row,two-lines"
N_PREDICT = 20
"""Tokens per request: ngram-simple drafts on table-row from its first tokens, and the two
streams overlap for most of each run however the machine schedules them."""
LEVEL_FIELDS = (
    "aggregate_tokens_per_second",
    "request_tokens_per_second",
    "ttft_p50_ms",
    "ttft_p95_ms",
    "latency_p50_ms",
    "latency_p95_ms",
    "queue_p95_ms",
    "acceptance",
    "waited",
    "speedup_vs_baseline",
    "noise_floor",
    "verdict",
)


async def _metrics(engine: Engine) -> ServerMetrics:
    async with ServerClient(engine.info.url) as client:
        metrics = await client.metrics()
    assert metrics is not None
    return metrics


async def test_every_level_is_recorded_and_attribution_stays_exact(
    gemma_model: Path, llama_binary: Path, tmp_path: Path
) -> None:
    settings = Settings(model=gemma_model, server_bin=llama_binary)
    server = ServerOptions(ctx_size=512, extra_args=[*FAST, "--parallel", "4"])
    setup = compare_setup(settings, server=server).with_slots((1, 2))
    assert setup.parallel == 4  # the server arguments' slots, more than the levels need
    configs = parse_configs(["none", "ngram-simple"], setup.caps)
    plan = ComparePlan(
        configs=configs,
        prompts=load_prompts(PROMPTS, N_PREDICT),
        reps=1,
        warmup=False,
        concurrency=(1, 2),
    )
    document = CompareDocument.new(
        plan, binary=setup.binary_info, model=setup.model_info, server=setup.server
    )
    out = tmp_path / "r.json"
    engine = setup.engine(configs[0].spec)
    runner = CompareRunner(
        engine, document, outputs=[out], trust_code=True, slot_count=slot_counter(engine)
    )
    # Per server start: the /metrics counters when it became ready, and the runs it served.
    segments: list[tuple[ServerMetrics, ServerMetrics, list[int]]] = []
    before: ServerMetrics | None = None
    seqs: list[int] = []

    async def close_segment() -> None:
        if before is not None:
            segments.append((before, await _metrics(engine), list(seqs)))

    try:
        async with contextlib.aclosing(runner.run()) as stream:
            async for event in stream:
                if isinstance(event, ServerStatus) and event.state is ServerState.RESTARTING:
                    await close_segment()  # (the old server still runs: the switch comes next)
                    before = None
                elif isinstance(event, ServerStatus) and event.state is ServerState.READY:
                    before, seqs = await _metrics(engine), []
                elif isinstance(event, RunFinished):
                    seqs.append(event.record.seq)
                elif isinstance(event, CompareFinished):
                    await close_segment()
    finally:
        await engine.aclose()

    doc = load_document(out)
    assert doc.complete and all(r.ok for r in doc.runs), [r.error for r in doc.runs if not r.ok]
    runs = {r.seq: r for r in doc.runs}
    # Each request's counts are its own response's final timings, streams sharing the server.
    for r in doc.runs:
        assert r.drafted == int(r.server_timings["draft_n"]), r.seq
        assert r.accepted == int(r.server_timings["draft_n_accepted"]), r.seq
        assert r.tokens == N_PREDICT and r.sent_at is not None and r.queue_ms is not None
        assert not r.waited_for_slot  # four slots, at most two streams
    assert sum(r.drafted for r in doc.runs if r.config == "ngram-simple" and r.level == 2) > 0
    # ... and their sums are the server's own counters, per server start.
    assert {seq for _, _, served in segments for seq in served} == set(runs)
    for start, end, served in segments:
        assert end.spec_drafted - start.spec_drafted == sum(runs[s].drafted for s in served)
        assert end.spec_accepted - start.spec_accepted == sum(runs[s].accepted for s in served)

    # The document holds every level × config and every metric.
    raw = json.loads(out.read_text())
    levels = {(row["config"], row["level"]): row for row in raw["levels"]}
    assert set(levels) == {(c, lv) for c in ("none", "ngram-simple") for lv in (1, 2)}
    for (config, level), row in levels.items():
        assert set(LEVEL_FIELDS) <= set(row)
        assert row["requests"] == level * 2
        for name in ("aggregate_tokens_per_second", "ttft_p95_ms", "latency_p95_ms"):
            assert row[name] is not None, (config, level, name)
        if config == "ngram-simple":
            assert row["speedup_vs_baseline"] is not None and row["pairs"] == 1
    assert [v["config"] for v in raw["level_verdicts"]] == ["ngram-simple"]
    assert raw["plan"]["concurrency"] == [1, 2]


def test_the_cli_writes_every_level_and_refuses_too_few_slots(
    gemma_model: Path, llama_binary: Path, tmp_path: Path
) -> None:
    base = ["compare", "--model", str(gemma_model), "--server-bin", str(llama_binary)]
    refused = tmp_path / "refused.json"
    result = spectui(
        *base, "--config", "ngram-mod", "--concurrency", "1,4", "--json", str(refused),
        "--", "--parallel", "2",
    )  # fmt: skip
    line = one_clear_line(result)
    assert "--concurrency 4 needs 4 server slots" in line
    assert not refused.exists()

    out, csv_out, md = tmp_path / "r.json", tmp_path / "r.csv", tmp_path / "r.md"
    result = spectui(
        *base, "--config", "ngram-mod", "--prompts", "builtin:two-lines", "--reps", "1",
        "--n-predict", "8", "--ctx-size", "256", "--concurrency", "1,2", "--no-chart",
        "--json", str(out), "--csv", str(csv_out), "--markdown", str(md), "--", *FAST,
        timeout=600,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    doc = load_document(out)
    assert {(r.config, r.level) for r in doc.levels} == {
        (c, lv) for c in ("none", "ngram-mod") for lv in (1, 2)
    }
    assert "## Concurrency (1, 2 streams at once)" in md.read_text()
    assert (tmp_path / "r-levels.csv").read_text().startswith("config,metric,1 stream,2 streams")
    assert "concurrency" in result.stdout and "ngram-mod" in result.stdout
