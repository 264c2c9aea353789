"""What a comparison is made of: configs, prompts and the run schedule (what each run records is
`records`).

The schedule is the fairness contract in code: rounds alternate the configs (A B C, A B C, ...),
never all-A-then-all-B, so drift (thermal throttling, a neighbour's load) hits every config alike;
within a round each config runs all prompts on one server start, so a round costs one restart
per config. Each config's first start also gets one uncounted warm-up run (round 0).

With concurrency levels (``--concurrency 1,2,4``) each config's block of a round runs once per
level, on the same server start (launched with one slot per stream of the largest level): at
level 1 the prompts one after another, at level N N clients at once, each sending every prompt
in turn (client c starting at prompt c), closed loop: a client sends its next prompt when its
previous answer ends.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, computed_field, field_validator, model_validator

from spectui.core.compare.budget import MemoryBudget
from spectui.core.compare.checkers import Checker
from spectui.core.llama.specconfig import SpecConfig
from spectui.core.request import Delivery, GenerationRequest, Sampling

BASELINE = "none"
"""Name of the baseline config: no speculation."""


class CompareConfig(BaseModel):
    """One speculative configuration under test."""

    model_config = ConfigDict(frozen=True)

    name: str
    """The config as the user wrote it (whitespace normalised); unique within a comparison."""
    spec: SpecConfig
    """What it changes in the launch (``--spec-*`` flags only)."""
    args: tuple[str, ...] = ()
    """The llama-server arguments it adds, under their canonical names."""

    @property
    def is_baseline(self) -> bool:
        """Whether this is the no-speculation baseline."""
        return self.spec.types == (BASELINE,) and not self.spec.extra_args

    @computed_field  # type: ignore[prop-decorator]
    @property
    def label(self) -> str:
        """Short name for tables: the spec label, plus the draft model's file name."""
        label = self.spec.label
        if self.spec.needs_draft_model and self.spec.draft_model is not None:
            label += f" [{self.spec.draft_model.name}]"
        return label


class ComparePrompt(BaseModel):
    """One prompt every config runs."""

    model_config = ConfigDict(frozen=True)

    key: str
    """Short unique identifier, e.g. 'table-row'."""
    text: str
    """The prompt itself."""
    n_predict: int = Field(ge=1)
    """Tokens to generate (the same for every config)."""
    check: Checker | None = None
    """What a correct response satisfies, if anything."""
    arrival_s: float | None = Field(default=None, ge=0)
    """When the recorded request arrived, seconds after the first (`proxy --record`)."""


class CompareJob(BaseModel):
    """One planned run."""

    model_config = ConfigDict(frozen=True)

    seq: int
    """Position in the schedule (0-based); the key for resuming."""
    round: int
    """1..reps for counted runs; 0 for warm-ups."""
    config: str
    """Config name."""
    prompt: str
    """Prompt key."""
    warmup: bool = False
    """An uncounted warm-up run."""
    segment: int
    """Index of the server start this run belongs to (one per config per round)."""
    level: int = 1
    """Concurrent client streams of the block this run belongs to (1: one at a time)."""
    client: int = 0
    """Which of the level's clients sends it (0..level-1): its runs go one after another."""

    @property
    def block(self) -> tuple[int, str, int]:
        """(round, config, level): the runs that run together, ``level`` at a time."""
        return (self.round, self.config, self.level)


def delivery_out_of_sampling(data: Any) -> Any:
    """``data`` (a plan, or a document's copies of it) with the options a file written before
    `Delivery` kept in ``sampling`` moved to ``delivery`` (chat, cache_prompt), and the stall
    watchdog (``stall_timeout_s``, now the engine's and not the plan's) dropped."""
    if not isinstance(data, dict) or not isinstance(old := data.get("sampling"), dict):
        return data
    moved = {key: old[key] for key in Delivery.model_fields if key in old}
    if not moved and "stall_timeout_s" not in old:
        return data
    kept = {k: v for k, v in old.items() if k not in moved and k != "stall_timeout_s"}
    delivery = data.get("delivery")
    return {**data, "sampling": kept, "delivery": {**moved, **(delivery or {})}}


class ComparePlan(BaseModel):
    """Configs × prompts × repetitions, and the sampling and delivery shared by all runs."""

    model_config = ConfigDict(frozen=True)

    configs: tuple[CompareConfig, ...]
    """Configs in run order; the baseline first."""
    prompts: tuple[ComparePrompt, ...]
    """Prompts in run order."""
    reps: int = Field(default=3, ge=1)
    """Counted repetitions (rounds)."""
    warmup: bool = True
    """One uncounted warm-up run (first prompt) at each config's first start."""
    sampling: Sampling = Sampling()
    """Sampling parameters of every run."""
    delivery: Delivery = Delivery()
    """How every run's request is sent (endpoint, prompt cache)."""
    memory_budget: MemoryBudget = MemoryBudget()
    """Extra peak memory over the baseline a config may cost before it is dropped for it."""
    identical_answers: bool = False
    """The strict rule: any answer that differs from the baseline's at temperature 0 drops the
    config (default: a change at a near-tie is a caveat, judged by the prompt's checkers)."""
    concurrency: tuple[int, ...] = (1,)
    """Concurrency levels, ascending: each config runs its prompts at every level (N client
    streams at once, closed loop). A file written before levels existed ran level 1 only."""
    active: tuple[tuple[str, ...], ...] | None = None
    """Per round (1..reps), the config names that run in it (None: every config, every round).
    `tune` races candidates: losers leave the schedule, the baseline stays in every round."""
    arrivals: Literal["recorded"] | None = None
    """'recorded': each round's block sends the prompts open loop at their ``arrival_s`` ÷
    ``speed`` (`compare --arrivals`), on one level's slots; None: closed loop."""
    speed: float = Field(default=1.0, gt=0)
    """How much faster than recorded the arrivals are replayed."""

    @model_validator(mode="before")
    @classmethod
    def _older_sampling(cls, data: Any) -> Any:
        # Results files written before `Delivery` still resume and load.
        return delivery_out_of_sampling(data)

    @field_validator("concurrency")
    @classmethod
    def _levels(cls, levels: tuple[int, ...]) -> tuple[int, ...]:
        if not levels or min(levels) < 1:
            raise ValueError("concurrency levels are whole numbers of streams, 1 or more")
        return tuple(sorted(set(levels)))

    @model_validator(mode="after")
    def _replayable(self) -> ComparePlan:
        if self.arrivals is not None and len(self.concurrency) != 1:
            raise ValueError("an arrivals replay runs on one level (its server slots)")
        if self.arrivals is not None and any(p.arrival_s is None for p in self.prompts):
            raise ValueError("an arrivals replay needs every prompt's arrival_s")
        return self

    def runs_per_prompt(self, level: int) -> int:
        """Runs of each prompt in one config's block at ``level`` (once, replaying arrivals)."""
        return 1 if self.arrivals is not None else level

    @property
    def slots(self) -> int:
        """Server slots the comparison needs: one per stream of the largest level."""
        return max(self.concurrency)

    @property
    def concurrent(self) -> bool:
        """Whether any level runs more than one stream at a time."""
        return self.slots > 1

    def config(self, name: str) -> CompareConfig:
        """The config called ``name``."""
        return next(c for c in self.configs if c.name == name)

    def label(self, name: str) -> str:
        """The short label of the config called ``name`` (the name itself if unknown)."""
        return next((c.label for c in self.configs if c.name == name), name)

    def prompt(self, key: str) -> ComparePrompt:
        """The prompt called ``key``."""
        return next(p for p in self.prompts if p.key == key)

    @property
    def baseline(self) -> CompareConfig:
        """The baseline config."""
        return next(c for c in self.configs if c.is_baseline)

    def runs_in(self, name: str, round_: int) -> bool:
        """Whether config ``name`` runs in round ``round_`` (the baseline always does)."""
        if self.active is None or round_ > len(self.active) or name == self.baseline.name:
            return True
        return name in self.active[round_ - 1]

    def planned_rounds(self, name: str) -> int:
        """How many counted rounds config ``name`` runs in."""
        return sum(1 for round_ in range(1, self.reps + 1) if self.runs_in(name, round_))

    def jobs(self) -> list[CompareJob]:
        """The whole schedule in run order: round by round, each config's prompts together."""
        jobs: list[CompareJob] = []
        segment = 0
        for round_ in range(1, self.reps + 1):
            for config in self.configs:
                if not self.runs_in(config.name, round_):
                    continue
                if round_ == 1 and self.warmup:
                    jobs.append(
                        CompareJob(
                            seq=len(jobs),
                            round=0,
                            config=config.name,
                            prompt=self.prompts[0].key,
                            warmup=True,
                            segment=segment,
                        )
                    )
                for level in self.concurrency:
                    for client, prompt in self._level_order(level):
                        jobs.append(
                            CompareJob(
                                seq=len(jobs),
                                round=round_,
                                config=config.name,
                                prompt=prompt.key,
                                segment=segment,
                                level=level,
                                client=client,
                            )
                        )
                segment += 1
        return jobs

    def _level_order(self, level: int) -> list[tuple[int, ComparePrompt]]:
        """(client, prompt) of one level's block: each client sends every prompt, client c
        starting at prompt c, so the streams in flight at once ask different prompts; replaying
        arrivals, each prompt is a client of its own, in recorded order."""
        if self.arrivals is not None:
            return list(enumerate(self.prompts))
        n = len(self.prompts)
        return [
            (client, self.prompts[(client + i) % n]) for client in range(level) for i in range(n)
        ]

    def request(self, prompt: ComparePrompt) -> GenerationRequest:
        """The request of every run of ``prompt``."""
        return GenerationRequest.build(prompt.text, self.sampling, self.delivery, prompt.n_predict)
