"""A scripted stand-in for `CompareRunner`: the same events, no engine, gates to pause it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from spectui.core.compare.models import (
    CompareConfig,
    CompareJob,
    ComparePlan,
    ComparePrompt,
)
from spectui.core.compare.records import RunRecord
from spectui.core.compare.runner import (
    CompareEvent,
    CompareFinished,
    CompareStarted,
    RunFinished,
    RunStarting,
    ServerStatus,
)
from spectui.core.compare.store import BinaryInfo, CompareDocument, ModelInfo, ServerOptions
from spectui.core.events import ServerState
from spectui.core.llama.specconfig import SpecConfig

ANSWER = "| 6 | Farah | engineer | Dublin |"
OTHER = "| 6 | Farah | designer | Dublin |"


def _config(name: str) -> CompareConfig:
    return CompareConfig(name=name, spec=SpecConfig(types=(name,)), args=("--spec-type", name))


class FakeCompareRunner:
    """none vs ngram-simple on prompts a and b, two rounds. ngram-simple is twice as fast; on
    prompt b its answer departs from the baseline's at 'designer'."""

    def __init__(self, *, pause_after: int | None = None, fail_after: int | None = None) -> None:
        plan = ComparePlan(
            configs=(_config("none"), _config("ngram-simple")),
            prompts=(
                ComparePrompt(key="a", text="table", n_predict=8),
                ComparePrompt(key="b", text="table again", n_predict=8),
            ),
            reps=2,
        )
        self.document = CompareDocument.new(
            plan,
            binary=BinaryInfo(path="/opt/llama-server", version="b1"),
            model=ModelInfo(path="/models/m.gguf", size_bytes=1),
            server=ServerOptions(ctx_size=4096),
        ).updated([], [], [])
        self.jobs = plan.jobs()
        self.pause_after = pause_after
        self.fail_after = fail_after
        self.resume = asyncio.Event()
        """Set it to let a paused runner go on."""
        self.paused = False

    def _record(self, job: CompareJob) -> RunRecord:
        fast = job.config == "ngram-simple"
        text = OTHER if fast and job.prompt == "b" else ANSWER
        tokens = text.split(" ")
        return RunRecord(
            seq=job.seq,
            config=job.config,
            prompt=job.prompt,
            round=job.round,
            warmup=job.warmup,
            tokens=len(tokens),
            total_ms=500.0 if fast else 1000.0,
            ttft_ms=80.0,
            tokens_per_second=20.0 if fast else 10.0,
            drafted=6 if fast else 0,
            accepted=5 if fast else 0,
            acceptance=5 / 6 if fast else None,
            peak_rss_bytes=400 * 2**20,
            text=text,
            token_ends=[sum(len(t) + 1 for t in tokens[: i + 1]) for i in range(len(tokens))],
        )

    async def run(self) -> AsyncIterator[CompareEvent]:
        yield CompareStarted(total=len(self.jobs), done=0)
        records: list[RunRecord] = []
        for job in self.jobs:
            if not records or records[-1].config != job.config:
                yield ServerStatus(
                    config=job.config, round=max(job.round, 1), state=ServerState.READY
                )
            yield RunStarting(job=job)
            await asyncio.sleep(0)
            records.append(self._record(job))
            self.document = self.document.updated(records, [], [])
            yield RunFinished(
                record=self.document.runs[-1], done=len(records), total=len(self.jobs)
            )
            if self.fail_after == len(records):
                from spectui.core.compare.store import ResultFileError

                raise ResultFileError("cannot write r.json: No space left on device")
            if self.pause_after == len(records):
                self.paused = True
                await self.resume.wait()
                self.paused = False
        yield CompareFinished(document=self.document)
