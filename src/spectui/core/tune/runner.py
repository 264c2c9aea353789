"""Run a tune: rounds of one growing compare plan on one engine, within a wall-clock budget.

Each round is run by `CompareRunner` (the same runs, checks, records and server handling as
`compare`); between rounds the race (`search.next_round`) picks who goes on. The engine's server
is handed from round to round, so a config that ends a round and starts the next is not
restarted, and only one server is ever up (`switch_spec` stops the old one first).

The budget is checked before each server start and each run: when the time left is less than
that step is expected to take (the median of those measured so far), the tune stops there,
with nothing half-run. The document is rewritten atomically after every run; ``--resume``
continues it.
"""

from __future__ import annotations

import contextlib
import statistics
import time
from collections.abc import AsyncGenerator, Awaitable, Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from spectui.core.compare.divergence import ProbeError, Prober
from spectui.core.compare.runner import (
    CompareEvent,
    CompareFinished,
    CompareRunner,
    RunStarting,
    ServerStatus,
)
from spectui.core.compare.store import (
    CompareDocument,
    ResultLock,
    finished_seqs,
    write_atomic,
)
from spectui.core.engine.base import Engine
from spectui.core.events import ServerState
from spectui.core.tune.chains import with_chains
from spectui.core.tune.models import Prediction, TuneDocument
from spectui.core.tune.predict import usable
from spectui.core.tune.report import refreshed
from spectui.core.tune.search import extended, next_round


@runtime_checkable
class PromptTokenizer(Protocol):
    """A prober that can also say how the server tokenizes a prompt (`HttpProber`)."""

    async def prompt_tokens(self, prompt: str, chat: bool = False) -> list[int]:
        """The prompt's token ids; raises `ProbeError` on failure."""
        ...


RUN_OVERHEAD_S = 0.3
"""Per run, on top of its generation time: the request, the check, the save."""


class RoundPlanned(BaseModel):
    """The race picked the candidates of a new round."""

    model_config = ConfigDict(frozen=True)

    type: Literal["round"] = "round"
    """The event's kind (the union's discriminator)."""
    round: int
    """The round (1-based)."""
    candidates: int
    """How many candidates run in it (the baseline besides)."""


class TuneFinished(BaseModel):
    """The tune stopped: finished, out of budget, or interrupted."""

    model_config = ConfigDict(frozen=True)

    type: Literal["tune_finished"] = "tune_finished"
    """The event's kind (the union's discriminator)."""
    document: TuneDocument
    """The final document."""


TuneEvent = Annotated[RoundPlanned | TuneFinished, Field(discriminator="type")]
"""What the tune reports besides the compare runner's events."""


class TuneRunner:
    """Races a tune document's candidates on ``engine`` within its budget."""

    def __init__(
        self,
        engine: Engine,
        document: TuneDocument,
        *,
        outputs: Sequence[Path] = (),
        on_save: Callable[[TuneDocument], None] | None = None,
        trust_code: bool = False,
        probe: Prober | None = None,
        clock: Callable[[], float] = time.monotonic,
        slot_count: Callable[[], Awaitable[int | None]] | None = None,
    ) -> None:
        """``slot_count``: reads the server's slots after each start (`CompareRunner`)."""
        self.engine = engine
        self._slot_count = slot_count
        self.probe = probe
        """Explains changed answers (`compare.divergence`); without it they count as divergent."""
        self.document = document
        self.outputs = list(outputs)
        """Files the document is written to after every run."""
        self._on_save = on_save
        self.trust_code = trust_code
        self._clock = clock
        self._began = clock()
        self._elapsed_before = document.elapsed_s

    @property
    def elapsed_s(self) -> float:
        """Wall-clock time spent, this session and earlier ones."""
        return self._elapsed_before + (self._clock() - self._began)

    @property
    def budget_left_s(self) -> float:
        """Seconds left of the budget."""
        return self.document.budget_s - self.elapsed_s

    def save(self, compare: CompareDocument | None = None, **update: object) -> TuneDocument:
        """Rewrite the document (atomically) with ``compare`` and the findings recomputed."""
        changes: dict[str, object] = {
            "updated_at": datetime.now(UTC),
            "elapsed_s": round(self.elapsed_s, 3),
            **update,
        }
        if compare is not None:
            changes["compare"] = compare
        self.document = refreshed(self.document.model_copy(update=changes))
        text = self.document.model_dump_json(indent=1)
        for path in self.outputs:
            write_atomic(path, text)
        if self._on_save is not None:
            self._on_save(self.document)
        return self.document

    async def run(self) -> AsyncGenerator[CompareEvent | TuneEvent, None]:
        """Race until the race is over or the budget is spent; events as it goes.

        Closing the iterator (Ctrl-C) stops after the run in flight; the document then says
        'interrupted' and ``--resume`` continues it.
        """
        with contextlib.ExitStack() as locks:
            for path in self.outputs:
                locks.enter_context(ResultLock(path))
            self.save(stopped="")
            stopped = "interrupted"
            race = self._race()
            try:
                async for event in race:
                    if isinstance(event, str):
                        stopped = event
                        break
                    yield event
            finally:
                await race.aclose()  # stops the round's runner: nothing is left half-started
                # Whatever ended it (the race, the budget, a closed iterator), the file says so.
                complete = stopped == "finished"
                self.save(stopped=stopped, complete=complete)
            yield TuneFinished(document=self.document)

    async def _race(self) -> AsyncGenerator[CompareEvent | TuneEvent | str, None]:
        """Rounds until done; a str ('finished', 'budget' or 'interrupted') ends it."""
        running = None
        first = True
        while True:
            compare = self.document.compare
            pending = [j for j in compare.plan.jobs() if j.seq not in finished_seqs(compare)]
            if not pending:
                if compare.plan.reps == 1 and not self.document.prompt_tokens:
                    await self._tokenize()
                if compare.plan.reps == 1:
                    # Chains of round one's best n-gram candidates join from round two.
                    chained = with_chains(self.document)
                    if chained is not self.document:
                        self.save(chained.compare, space=chained.space)
                        compare = self.document.compare
                ranked = usable(self.document.cost_model) and compare.plan.reps == 1
                predicted = {c.config: c.predicted for c in self.document.candidates}
                overall = {c.config: c.overall for c in self.document.candidates}
                by_prediction = self.document.ranked_by == "prediction" or ranked
                active = next_round(
                    compare.plan,
                    compare.summary,
                    predicted if ranked else None,
                    overall if by_prediction and compare.plan.reps > 1 else None,
                )
                if compare.plan.reps == 1:
                    # The predictions the race is picked from stay in the file as they were.
                    frozen = {
                        c.config: Prediction(
                            overall=c.overall.predicted,
                            prompts={k: r.predicted for k, r in c.results.items() if r.predicted},
                        )
                        for c in self.document.candidates
                    }
                    self.save(ranked_by="prediction" if ranked else "timings", predictions=frozen)
                if active is None:
                    yield "finished"
                    return
                plan = extended(compare.plan, active)
                compare = compare.model_copy(update={"plan": plan, "complete": False})
                self.save(compare)
                yield RoundPlanned(round=plan.reps, candidates=len(active))
            runner = CompareRunner(
                self.engine,
                self.document.compare,
                on_save=self._saved,
                trust_code=self.trust_code,
                running=running,
                new_session=first,
                probe=self.probe,
                slot_count=self._slot_count,
            )
            first = False
            events = runner.run()
            try:
                async for event in events:
                    if self._over_budget(event):
                        yield "budget"
                        return
                    if not isinstance(event, CompareFinished):
                        yield event
            finally:
                await events.aclose()
            running = runner.current
            if not runner.document.complete:
                yield "interrupted"  # the engine closed under a run
                return

    async def _tokenize(self) -> None:
        """Ask the running server for the prompts' token ids, once, when a candidate is to be
        replayed (`core.drafters`); without them those candidates are measured instead."""
        if not any(c.replayed for c in self.document.space) or not isinstance(
            self.probe, PromptTokenizer
        ):
            return
        plan = self.document.compare.plan
        tokens: dict[str, list[int]] = {}
        for prompt in plan.prompts:
            with contextlib.suppress(ProbeError):
                tokens[prompt.key] = await self.probe.prompt_tokens(prompt.text, plan.delivery.chat)
        self.save(prompt_tokens=tokens)

    def _saved(self, compare: CompareDocument) -> None:
        self.save(compare)

    def _over_budget(self, event: CompareEvent) -> bool:
        """Whether the next step (a start, or a run) would not fit in what is left."""
        if isinstance(event, ServerStatus) and event.state is ServerState.RESTARTING:
            need = self._typical_start() + self._typical_run()
        elif isinstance(event, RunStarting):
            need = self._typical_run()
        else:
            return False
        return need > self.budget_left_s

    def _typical_run(self) -> float:
        times = [
            r.total_ms / 1000 for r in self.document.compare.runs if r.ok and r.total_ms is not None
        ]
        return (statistics.median(times) if times else 0.0) + RUN_OVERHEAD_S

    def _typical_start(self) -> float:
        times = [s.seconds for s in self.document.compare.server_starts if s.seconds is not None]
        return statistics.median(times) if times else 0.0


def new_document(
    compare: CompareDocument,
    *,
    budget_s: float,
    launch: Sequence[str],
    skipped: Sequence[object],
    space: Sequence[object],
) -> TuneDocument:
    """An empty tune document for the first round of ``compare``'s plan."""
    now = datetime.now(UTC)
    return TuneDocument.model_validate(
        {
            "created_at": now,
            "updated_at": now,
            "budget_s": budget_s,
            "launch": list(launch),
            "skipped": list(skipped),
            "space": list(space),
            "compare": compare,
        }
    )
